package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The etcd engine keeps the store in an etcd cluster: key K lives at
// PREFIX/K, a batch is one etcd transaction (atomic and durable on a
// quorum of members, so Apply's sync asks nothing more), a scan reads
// pages of keys at the revision of its first page. Opened by URI:
//
//	etcd://HOST:PORT,HOST:PORT/PREFIX?max-txn-ops=N&max-request-bytes=N&timeout=D
//
// The engine keeps a mirror of every key under its prefix in memory
// (loaded at open, updated after each committed transaction), and reads
// only from it: a read is then a map lookup, not a round trip to etcd.
// That is right for one writer per prefix, which the metadata service is
// (one active server; `mirror=false` in the URI reads from etcd every
// time). A transaction that fails, or whose outcome is unknown (a
// timeout), has its keys read back from etcd into the mirror.
//
// Several metadata servers may share one prefix, one active at a time
// (Elector): each campaigns for PREFIX.active/ with a lease of
// `lease=D` (5 s by default), kept alive while it runs; the winner's
// transactions commit only while its election key is the one it created
// (an etcd compare on its create revision), so an active server that was
// stalled or cut off past its lease commits nothing once another has
// taken over. Its mirror is loaded when it wins.
//
// The limits are the etcd servers' (--max-txn-ops, 128 by default;
// --max-request-bytes, 1.5 MiB): a batch beyond them is refused with an
// error naming the limit, never applied in parts. Compaction is the
// servers' (--auto-compaction-mode and --auto-compaction-retention;
// `sluice cluster up --engine etcd` sets them on the members it starts);
// defragmentation, which etcd does not do by itself, is Maintain's, which
// the active metadata server calls.

func init() {
	RegisterRemote("etcd", func(t Target) (Engine, error) {
		c, err := ParseEtcd(t.Addr)
		if err != nil {
			return nil, err
		}
		return OpenEtcd(c)
	})
}

// EtcdConfig is where an etcd engine keeps its keys and what it may ask.
type EtcdConfig struct {
	Endpoints []string
	// Prefix is put before every key ("sluice" by default), so that
	// several clusters, or tests, share one etcd.
	Prefix string
	// MaxTxnOps and MaxRequestBytes are the servers' limits (etcd's
	// defaults if 0).
	MaxTxnOps       int
	MaxRequestBytes int
	// Timeout bounds each request (10 s if 0).
	Timeout time.Duration
	// NoMirror reads from etcd every time instead of from the mirror.
	NoMirror bool
	// Lease is how long an active metadata server's term outlives its
	// last contact with etcd (5 s if 0; whole seconds).
	Lease time.Duration
	// KeepAlive is how often the client pings each member's connection
	// (5 s if 0, the least etcd accepts by default); a connection whose
	// ping gets no answer within a second more is failed and its
	// streams (the lease's renewals, the election's watch) go on
	// through another member. Shorter than the lease, it keeps the
	// active server's term when the member it talks to is lost: the
	// members must then accept it (--grpc-keepalive-min-time).
	KeepAlive time.Duration
}

// etcd's own defaults for the servers' limits.
const (
	etcdMaxTxnOps       = 128
	etcdMaxRequestBytes = 1536 * 1024
	// etcdPage is how many keys a scan reads at a time.
	etcdPage = 512
)

// ParseEtcd reads an etcd engine's address (the part of its URI after
// "etcd://").
func ParseEtcd(addr string) (EtcdConfig, error) {
	c := EtcdConfig{Prefix: "sluice"}
	rest, query, _ := strings.Cut(addr, "?")
	// the prefix follows the first "/" that is not part of a host's
	// scheme ("http://h:p,http://h:p/prefix")
	const sep = "\x00"
	hosts, prefix, _ := strings.Cut(strings.ReplaceAll(rest, "://", sep), "/")
	hosts = strings.ReplaceAll(hosts, sep, "://")
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if !strings.Contains(h, "://") {
				h = "http://" + h
			}
			c.Endpoints = append(c.Endpoints, h)
		}
	}
	if len(c.Endpoints) == 0 {
		return c, fmt.Errorf("etcd engine %q: no endpoint", addr)
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		c.Prefix = prefix
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return c, fmt.Errorf("etcd engine %q: %v", addr, err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "max-txn-ops", "max-request-bytes":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return c, fmt.Errorf("etcd engine: %s=%q: want a positive number", k, v)
			}
			if k == "max-txn-ops" {
				c.MaxTxnOps = n
			} else {
				c.MaxRequestBytes = n
			}
		case "mirror":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return c, fmt.Errorf("etcd engine: mirror=%q: want true or false", v)
			}
			c.NoMirror = !on
		case "timeout", "lease", "keepalive":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || k != "timeout" && d < time.Second {
				return c, fmt.Errorf("etcd engine: %s=%q: want a duration (a lease or keepalive: 1s or more)", k, v)
			}
			switch k {
			case "timeout":
				c.Timeout = d
			case "lease":
				c.Lease = d
			default:
				c.KeepAlive = d
			}
		default:
			return c, fmt.Errorf("etcd engine: unknown setting %q (have max-txn-ops, max-request-bytes, timeout, mirror, lease, keepalive)", k)
		}
	}
	return c, nil
}

// Etcd is the etcd engine.
type Etcd struct {
	c       *clientv3.Client
	cfg     EtcdConfig
	prefix  []byte // cfg.Prefix + "/"
	timeout time.Duration
	// mirror holds every key under the prefix (nil with NoMirror); it
	// has its own lock
	mirror *Mem
	// applyMu serialises transactions, so that the mirror takes them in
	// etcd's order and a transaction retried after a lost connection is
	// not overtaken by a later one; it guards fence
	applyMu sync.Mutex
	// fence is the condition every transaction commits under while this
	// server is active (Campaign): its election key is still its own.
	// Guarded by applyMu.
	fence []clientv3.Cmp
	// sess is the active server's lease (nil until Campaign wins); ended
	// is closed, once (endOnce), when its term ends
	sess     *concurrency.Session
	ended    chan struct{}
	endOnce  sync.Once
	campaign *concurrency.Election
	// deaf is a fault for tests: the server does not notice its lease
	// ending (as one stalled past it, before it runs again)
	deaf atomic.Bool
	// heldMu guards heldUntil: until when the term is surely on, by this
	// process's clock (each renewal of the lease pushes it on)
	heldMu    sync.Mutex
	heldUntil time.Time
}

var (
	_ Engine     = (*Etcd)(nil)
	_ Limited    = (*Etcd)(nil)
	_ Elector    = (*Etcd)(nil)
	_ Maintainer = (*Etcd)(nil)
	_ Shared     = (*Etcd)(nil)
)

// BatchLimits are the servers' limits on a transaction.
func (e *Etcd) BatchLimits() (ops, bytes int) { return e.cfg.MaxTxnOps, e.cfg.MaxRequestBytes }

// OpenEtcd connects to the etcd cluster c names and checks that it
// answers.
func OpenEtcd(c EtcdConfig) (*Etcd, error) {
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = etcdMaxTxnOps
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = etcdMaxRequestBytes
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Lease == 0 {
		c.Lease = 5 * time.Second
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 5 * time.Second
	}
	// gRPC keepalives find a member whose host was cut off (its
	// connection stays open, silent: EtcdConfig.KeepAlive)
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.Timeout, Logger: zap.NewNop(),
		MaxCallSendMsgSize: c.MaxRequestBytes + 64*1024,
		DialKeepAliveTime:  c.KeepAlive, DialKeepAliveTimeout: time.Second, PermitWithoutStream: true})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %v", c.Endpoints, err)
	}
	e := &Etcd{c: cl, cfg: c, prefix: []byte(c.Prefix + "/"), timeout: c.Timeout, ended: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	if _, err := cl.Get(ctx, string(e.prefix), clientv3.WithCountOnly()); err != nil {
		cl.Close()
		return nil, fmt.Errorf("etcd %v: %v", c.Endpoints, err)
	}
	if !c.NoMirror {
		if err := e.load(); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return e, nil
}

// load fills the mirror with every key under the prefix.
func (e *Etcd) load() error {
	m := NewMem()
	var b Batch
	err := e.scanEtcd(nil, nil, func(k, v []byte) bool {
		b.Set(append([]byte(nil), k...), append([]byte(nil), v...))
		if len(b.Ops) == 4096 {
			m.Apply(&b, false)
			b.Ops = b.Ops[:0]
		}
		return true
	})
	if err != nil {
		return err
	}
	m.Apply(&b, false)
	e.mirror = m
	return nil
}

func (e *Etcd) key(k []byte) string {
	return string(append(append(make([]byte, 0, len(e.prefix)+len(k)), e.prefix...), k...))
}

func (e *Etcd) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.timeout)
}

// Get returns a copy of the value at key.
func (e *Etcd) Get(key []byte) ([]byte, error) {
	if e.mirror != nil {
		return e.mirror.Get(key)
	}
	return e.getEtcd(key)
}

func (e *Etcd) getEtcd(key []byte) ([]byte, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	r, err := e.c.Get(ctx, e.key(key))
	if err != nil {
		return nil, fmt.Errorf("etcd get: %v", err)
	}
	if len(r.Kvs) == 0 {
		return nil, ErrNotFound
	}
	return r.Kvs[0].Value, nil
}

// Scan calls fn for the keys with prefix at or after start, in order,
// reading them a page at a time at the revision of the first page. No
// request is outstanding while fn runs.
func (e *Etcd) Scan(prefix, start []byte, fn func(k, v []byte) bool) error {
	if e.mirror != nil {
		return e.mirror.Scan(prefix, start, fn)
	}
	return e.scanEtcd(prefix, start, fn)
}

func (e *Etcd) scanEtcd(prefix, start []byte, fn func(k, v []byte) bool) error {
	from := prefix
	if bytes.Compare(start, prefix) > 0 {
		from = start
	}
	end := clientv3.GetPrefixRangeEnd(e.key(prefix))
	var rev int64
	cur := e.key(from)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(etcdPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		ctx, cancel := e.ctx()
		r, err := e.c.Get(ctx, cur, opts...)
		cancel()
		if err != nil {
			return fmt.Errorf("etcd scan: %v", err)
		}
		if rev == 0 {
			rev = r.Header.Revision
		}
		for _, kv := range r.Kvs {
			if !fn(kv.Key[len(e.prefix):], kv.Value) {
				return nil
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			return nil
		}
		cur = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}

// Apply commits b as one transaction. A batch beyond the servers' limits
// is refused, naming the limit.
func (e *Etcd) Apply(b *Batch, sync bool) error {
	if len(b.Ops) == 0 {
		return nil
	}
	// etcd refuses two writes of one key in a transaction: the last wins,
	// as in the other engines
	last := make(map[string]int, len(b.Ops))
	for i, op := range b.Ops {
		last[string(op.Key)] = i
	}
	ops := make([]clientv3.Op, 0, len(last))
	size := 0
	for i, op := range b.Ops {
		if last[string(op.Key)] != i {
			continue
		}
		k := e.key(op.Key)
		size += len(k) + len(op.Value) + 16
		if op.Delete {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(op.Value)))
		}
	}
	if len(ops) > e.cfg.MaxTxnOps {
		return fmt.Errorf("etcd engine: a batch of %d writes is more than the servers' --max-txn-ops %d", len(ops), e.cfg.MaxTxnOps)
	}
	if size > e.cfg.MaxRequestBytes {
		return fmt.Errorf("etcd engine: a batch of %d bytes is more than the servers' --max-request-bytes %d", size, e.cfg.MaxRequestBytes)
	}
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	if e.termEnded() {
		if e.fence == nil {
			return errors.New("etcd engine: closed")
		}
		return ErrFenced
	}
	// a member lost with the transaction in flight (its connection
	// reset, no leader for a moment) is retried on the others: the
	// writes are puts and deletes of whole keys, so applying them again
	// is harmless, and nothing else writes meanwhile (applyMu; one
	// writer per prefix)
	deadline := time.Now().Add(e.timeout)
	for {
		ctx, cancel := e.ctx()
		r, err := e.c.Txn(ctx).If(e.fence...).Then(ops...).Commit()
		cancel()
		if err == nil && !r.Succeeded {
			// another server's term began: nothing of b was applied
			e.endTerm()
			return ErrFenced
		}
		if err == nil {
			break
		}
		if !retryable(err) || time.Now().After(deadline) {
			if e.mirror != nil {
				e.resync(b)
			}
			return fmt.Errorf("etcd apply: %v", err)
		}
		if errCode(err) == codes.ResourceExhausted {
			time.Sleep(200 * time.Millisecond) // let the member's applying catch up
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if e.mirror != nil {
		e.mirror.Apply(b, false) // in order: the last write of a key wins, as in etcd
	}
	return nil
}

// retryable says whether a failed request may succeed on another member
// or a moment later: etcd unreachable or without a leader, a timeout, or
// a member whose applying lags its log ("too many requests": refused
// before it was proposed).
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch errCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// errCode is err's gRPC code, etcd's own errors included
// (rpctypes.EtcdError: "request timed out", "no leader", "too many
// requests").
func errCode(err error) codes.Code {
	code := status.Code(err)
	var ce interface{ Code() codes.Code }
	if errors.As(err, &ce) {
		code = ce.Code()
	}
	return code
}

// resync reads b's keys back from etcd into the mirror after a
// transaction that failed or whose outcome is unknown; a key it cannot
// read leaves the mirror as it was (the next failure reads it again).
func (e *Etcd) resync(b *Batch) {
	var fix Batch
	for _, op := range b.Ops {
		v, err := e.getEtcd(op.Key)
		switch err {
		case nil:
			fix.Set(op.Key, v)
		case ErrNotFound:
			fix.Del(op.Key)
		}
	}
	e.mirror.Apply(&fix, false)
}

// Sync returns at once: every applied batch is on a quorum's disks.
func (e *Etcd) Sync() error { return nil }

// Campaign waits until no other server is active, then makes this one
// the active server for as long as its lease lasts (Elector).
func (e *Etcd) Campaign(ctx context.Context, id string) (<-chan struct{}, error) {
	sess, err := concurrency.NewSession(e.c, concurrency.WithTTL(int((e.cfg.Lease+time.Second-1)/time.Second)))
	if err != nil {
		return nil, fmt.Errorf("etcd: a lease for the election: %v", err)
	}
	el := concurrency.NewElection(sess, e.cfg.Prefix+".active/")
	// a member cut off from the others has no leader: the campaign's
	// watch then fails instead of waiting for a deletion it would never
	// see, and the caller campaigns again
	if err := el.Campaign(clientv3.WithRequireLeader(ctx), id); err != nil {
		sess.Close()
		return nil, fmt.Errorf("etcd: election: %v", err)
	}
	// the lease may have run out while the campaign waited: the key is
	// then gone, and so is the term
	qctx, cancel := e.ctx()
	r, err := e.c.Get(qctx, el.Key())
	cancel()
	if err != nil || len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != el.Rev() {
		sess.Close()
		return nil, fmt.Errorf("etcd: election won with a lease that ran out meanwhile (%v)", err)
	}
	e.applyMu.Lock()
	e.fence = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev())}
	e.sess, e.campaign = sess, el
	e.applyMu.Unlock()
	// another server wrote until its term ended: read what is there now
	if !e.cfg.NoMirror {
		if err := e.load(); err != nil {
			e.endTerm()
			return nil, err
		}
	}
	go func() {
		<-sess.Done()
		if !e.deaf.Load() {
			e.endTerm()
		}
	}()
	e.renewed()
	if ka, err := e.c.KeepAlive(sess.Ctx(), sess.Lease()); err == nil { // the session's own renewals, seen here too
		go func() {
			for range ka {
				e.renewed()
			}
		}()
	}
	return e.ended, nil
}

// renewed notes a renewal of the lease: the term is on for two thirds of
// the lease from now, at least (etcd counts the lease from when the
// renewal reached it, which was before now).
func (e *Etcd) renewed() {
	e.heldMu.Lock()
	e.heldUntil = time.Now().Add(e.cfg.Lease * 2 / 3)
	e.heldMu.Unlock()
}

// Holds says whether the term is surely on by this process's clock
// (Elector).
func (e *Etcd) Holds() bool {
	select {
	case <-e.ended:
		return false
	default:
	}
	e.heldMu.Lock()
	defer e.heldMu.Unlock()
	return !e.heldUntil.IsZero() && time.Now().Before(e.heldUntil)
}

// Active is the id of the server whose term is on (Elector).
func (e *Etcd) Active(ctx context.Context) (string, error) {
	return e.activeAt(ctx, e.cfg.Prefix)
}

// ActiveOf is the id of role's active holder (Shared; OpenRole).
func (e *Etcd) ActiveOf(ctx context.Context, role string) (string, error) {
	return e.activeAt(ctx, e.cfg.Prefix+"."+role)
}

func (e *Etcd) activeAt(ctx context.Context, prefix string) (string, error) {
	r, err := e.c.Get(ctx, prefix+".active/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("etcd: %v", err)
	}
	if len(r.Kvs) == 0 {
		return "", nil
	}
	return string(r.Kvs[0].Value), nil
}

// endTerm marks the term ended: Apply refuses every batch from now on.
func (e *Etcd) endTerm() {
	e.endOnce.Do(func() { close(e.ended) })
}

// termEnded says whether the term ended (or the engine was closed).
// Caller holds applyMu.
func (e *Etcd) termEnded() bool {
	select {
	case <-e.ended:
		return true
	default:
		return false
	}
}

// defragWaste is the share of a member's backend that compaction has
// freed (its size less the size in use) past which Maintain
// defragments it.
const defragWaste = 0.5

// Maintain defragments, one at a time, the members whose backends hold
// more freed space than defragWaste of their size (Maintainer). A member
// defragmenting does not serve (a fraction of a second for a small
// backend); the others keep the quorum meanwhile.
func (e *Etcd) Maintain(ctx context.Context) (Maintenance, error) {
	var m Maintenance
	for _, ep := range e.cfg.Endpoints {
		st, err := e.c.Status(ctx, ep)
		if err != nil {
			return m, fmt.Errorf("etcd %s: status: %v", ep, err)
		}
		if st.DbSize == 0 || float64(st.DbSize-st.DbSizeInUse) < defragWaste*float64(st.DbSize) {
			continue
		}
		if _, err := e.c.Defragment(ctx, ep); err != nil {
			return m, fmt.Errorf("etcd %s: defragment: %v", ep, err)
		}
		after, err := e.c.Status(ctx, ep)
		if err != nil {
			return m, fmt.Errorf("etcd %s: status: %v", ep, err)
		}
		m.Defragmented = append(m.Defragmented, ep)
		m.Freed += st.DbSize - after.DbSize
	}
	return m, nil
}

// Close ends the term, if any (its lease revoked: a standby takes over at
// once), and closes the connection.
func (e *Etcd) Close() error {
	e.applyMu.Lock()
	sess := e.sess
	e.applyMu.Unlock()
	if sess != nil {
		sess.Close()
	}
	e.endTerm()
	return e.c.Close()
}
