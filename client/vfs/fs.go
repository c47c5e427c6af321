package vfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
)

// FS is the client core of one mount: one method per file system
// operation (fsnames.go: lookups, attributes, names, directories; fsio.go:
// opens, reads, writes, closes, syncs), each given the caller (Cred) and the
// operation's arguments and answering what the kernel's reply needs. It
// holds the components (Streams, Router, DirCache, Creates, Owned,
// BlockCache, Appends), tags every request with the caller's identity
// (job, rank, node, application: wire.Who), follows the metadata
// service's change feed (feed.go) and reaches the kernel only through the
// Notifier it is given. The go-fuse adapter (package client) translates
// kernel requests into these calls and their answers into replies.
type FS struct {
	cfg Config
	log *slog.Logger
	ids ident.Resolver

	// home is the home forwarding node; mc reaches the metadata daemon
	// (nil with a fixed Fwd)
	home *rpc.Client
	mc   *rpc.Client
	// reqs numbers the requests sent (ns.Head.Req)
	reqs atomic.Uint64

	rt  *Router
	st  *Streams
	dc  *DirCache
	wb  *Creates
	own *Owned      // nil: off
	bc  *BlockCache // nil: off
	app *Appends
	// handles are the file handles the metadata service knows open,
	// reclaimed after it restarts (handles.go)
	handles *Handles
	// locks are the file locks granted to this mount's processes (locks.go)
	locks locks
	// at applies the atime rule and keeps access times to send (atime.go;
	// nil: noatime)
	at *atimes
	// long is what the kernel may cache for the long timeout (feed.go)
	long longCached
	// notify drops the kernel's caches (SetNotifier; nil before)
	notify atomic.Pointer[notifier]
	// joined is the feed position Join took (0: none), where Follow
	// begins; set before Follow starts.
	joined uint64

	pmu sync.Mutex // guards priv
	// priv holds the inodes last seen with S_ISUID or S_ISGID set: a
	// write by an unprivileged caller clears them (HANDLE_KILLPRIV_V2),
	// which costs a round trip only for these.
	priv map[uint64]bool

	nextFh atomic.Uint64
	dmu    sync.Mutex // guards dirs, listed and goneDirs
	// dirs are the listings open directory handles serve (OpenDir,
	// Listing; "." and ".." alone until taken), listed says which were
	// taken
	dirs   map[uint64][]wire.DirEntry
	listed map[uint64]bool
	// goneDirs are the attributes (link count 0) of directories removed
	// or replaced through this mount while it had them open: an fstat
	// of such a handle answers them, as Linux does, until the last one
	// is released (the metadata service has no inode left to ask)
	goneDirs map[uint64]wire.Attr

	// Counts are the operations answered here, for the adapter's metrics.
	Counts Counts
}

// Config configures a mount's core.
type Config struct {
	// Fwd is the home forwarding node's address, or a comma-separated
	// list (the others taken in turn when one cannot be reached); empty:
	// ask the metadata service (Meta) for the fixed mapping of the node,
	// with the other live forwarding nodes behind it.
	Fwd    string
	Meta   string
	Secret []byte
	Node   string
	JobVar string // environment variable holding the job id
	Log    *slog.Logger
	// Timeout bounds each request (an unreachable forwarding node gives
	// EIO after it). Default 30 s.
	Timeout time.Duration
	// AttrTimeout and EntryTimeout bound the kernel's caches when the
	// metadata change feed is not followed (default 1 s; negative: no
	// caching, every stat and lookup reaches the service).
	AttrTimeout, EntryTimeout time.Duration
	// MetaCache bounds them while the feed is followed (feed.go; default
	// 60 s; negative: do not follow the feed).
	MetaCache time.Duration
	// FeedDelay is a fault: each batch of the change feed reaches this
	// mount's caches and kernel this much later (a slow metadata service or
	// network), so tests can widen the window in which another node's
	// change is known to the service but not yet here. 0: none.
	FeedDelay time.Duration
	// WritebackDelay is a fault: with WritebackCloses, a write in the
	// background goes this much later (a slow forwarding node seen by
	// those writes alone, and so by the closes' reports that wait for
	// them; tests).
	WritebackDelay time.Duration
	// CacheData: the kernel caches file data (no direct I/O); the block
	// cache and owned files are off.
	CacheData bool
	// WriteBehind bounds the bytes of writes in flight in the background
	// (default 32 MiB; negative: every write waits for the forwarding node).
	WriteBehind int64
	// WritebackCreates answers creates in directories this mount holds
	// the delegation of by itself and sends them in batches (Creates);
	// needs the change feed.
	WritebackCreates bool
	// WritebackUnlinks also answers, in such directories, removals of
	// files the service knows and sends them with the creates, in order.
	WritebackUnlinks bool
	// OwnedCache bounds the bytes kept of files this mount created under
	// a delegation, which answer read-only opens and reads here (Owned;
	// default 64 MiB; negative: off). Needs WritebackCreates; off with
	// CacheData.
	OwnedCache int64
	// WritebackCloses bounds the closes of owned files that return before
	// their writes and size reach the service, which they then do in the
	// background (Owned.DeferClose; default 256; negative: every close
	// waits). With it a write of a file not yet sent does not wait for the
	// batch that creates it either.
	WritebackCloses int
	// CreateFlush bounds how long such a create waits before it is sent
	// (default 10 ms).
	CreateFlush time.Duration
	// Readahead is how far ahead of a sequential reader data is fetched,
	// per open file (default 8 MiB; negative: no readahead).
	Readahead int64
	// SpliceReads: a readahead fetch a read takes whole goes from the
	// forwarding node's socket into a pipe (StreamConfig.SpliceReads), where
	// pipes can hold a 1 MiB reply (zerocopy.BigPipes).
	SpliceReads bool
	// ReadCache bounds the blocks of files kept for small reads
	// (BlockCache; 0 or negative: off). Needs the change feed; off with
	// CacheData.
	ReadCache int64
	// Record, if set, is told every operation as the application saw it
	// (metrics, Beacon): who asked (c, resolved to id), the operation,
	// the inode, a read's or write's offset and bytes, when it began and
	// whether it failed.
	Record func(c Cred, id ident.ID, op wire.Op, ino, off, size uint64, start time.Time, failed bool)
	// Atime is when reads update access times (atime.go; "": relatime),
	// NoDiratime keeps directories' as they are, and ReadOnly, if set,
	// says whether the mount is read-only now (no access time changes
	// then).
	Atime      AtimeRule
	NoDiratime bool
	ReadOnly   func() bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Cred is who makes a request, as the kernel passes it: the process and
// its credentials.
type Cred struct {
	Pid      uint32
	Uid, Gid uint32
	// Umask is a create's umask: the permission bits it removes, unless
	// the directory has a default ACL (the metadata service decides)
	Umask uint32
}

// Notifier drops entries of the kernel's caches.
type Notifier interface {
	// EntryNotify drops name in directory parent.
	EntryNotify(parent uint64, name string)
	// AttrNotify drops ino's attributes.
	AttrNotify(ino uint64)
	// DataNotify drops ino's attributes and cached pages.
	DataNotify(ino uint64)
}

type notifier struct{ Notifier }

// Counts are the operations the mount answered without a round trip.
type Counts struct {
	DirCacheHits     atomic.Int64 // directory getattrs and lookups of absent names
	WritebackCreates atomic.Int64 // creates answered here, sent in batches
	WritebackCloses  atomic.Int64 // closes of owned files that returned before their report
	WritebackUnlinks atomic.Int64 // removals answered here, sent in batches
	OwnedAnswers     atomic.Int64 // opens and reads of owned files
	BlockCacheHits   atomic.Int64 // small reads answered from the block cache
	ByRef            atomic.Int64 // background writes sent by reference (rpc.ClientOptions.ByRef)
}

// blockCacheBlock is the block cache's block: what a small read that
// misses fetches. smallRead is the largest read the cache answers.
const (
	blockCacheBlock = 1 << 20
	smallRead       = 128 << 10
)

// The write-behind's buffers go to the forwarding node by reference.
var _ PageCaller = (*rpc.Client)(nil)

// New connects to the mount's home forwarding node.
func New(ctx context.Context, cfg Config) (*FS, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.AttrTimeout == 0 {
		cfg.AttrTimeout = time.Second
	}
	if cfg.CreateFlush <= 0 {
		cfg.CreateFlush = 10 * time.Millisecond
	}
	if cfg.EntryTimeout == 0 {
		cfg.EntryTimeout = time.Second
	}
	cfg.AttrTimeout, cfg.EntryTimeout = max(cfg.AttrTimeout, 0), max(cfg.EntryTimeout, 0)
	if cfg.MetaCache == 0 {
		cfg.MetaCache = 60 * time.Second
	}
	if cfg.WriteBehind == 0 {
		cfg.WriteBehind = 32 << 20
	}
	if cfg.Readahead == 0 {
		cfg.Readahead = 8 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	v := &FS{cfg: cfg, log: cfg.Log, ids: ident.Resolver{JobVar: cfg.JobVar, Node: cfg.Node, Now: cfg.Now},
		dirs: map[uint64][]wire.DirEntry{}, listed: map[uint64]bool{}, goneDirs: map[uint64]wire.Attr{}, dc: NewDirCache(cfg.MetaCache > 0), app: NewAppends(), priv: map[uint64]bool{}, handles: NewHandles()}
	rule, err := ParseAtimeRule(string(cfg.Atime))
	if err != nil {
		return nil, err
	}
	if rule != Noatime {
		v.at = newAtimes(rule, cfg.NoDiratime, cfg.ReadOnly, cfg.Now)
	}
	addr := cfg.Fwd
	if addr == "" {
		v.mc = rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "metadata service " + cfg.Meta})
		// the home node: the manager's fixed mapping of this node
		pl, err := rpc.Do(ctx, v.mc, fwdmap.Map, &fwdmap.MapReq{Node: cfg.Node})
		if err == nil && len(pl.Fwds) == 0 {
			err = errors.New("the fixed mapping names none")
		}
		if err != nil {
			v.mc.Close()
			return nil, fmt.Errorf("no forwarding node for %s: %v", cfg.Node, err)
		}
		// the home node's client goes on to its stand-ins, in turn, when
		// home cannot be reached or stalls (rpc.Client's address list),
		// and sends the calls in flight again there
		addrs := []string{pl.Fwds[0].Addr}
		for _, f := range pl.Fallbacks {
			addrs = append(addrs, f.Addr)
		}
		addr = strings.Join(addrs, ",")
		cfg.Log.Info("home forwarding node chosen by fixed mapping", "fwd", pl.Fwds[0].ID, "addrs", addr)
	}
	dial := func(addr string) Caller { // a PageCaller too
		return rpc.NewClient(addr, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "forwarding node " + addr, ByRef: &v.Counts.ByRef})
	}
	v.home = dial(addr).(*rpc.Client)
	rc := RouterConfig{Home: v.home, HomeAddr: addr, Dial: dial, Now: cfg.Now, Log: v.log}
	cc := CreatesConfig{Creates: cfg.WritebackCreates, Unlinks: cfg.WritebackUnlinks, Flush: cfg.CreateFlush,
		Timeout: cfg.Timeout, Dir: v.dc, Handles: v.handles, Now: cfg.Now, Log: v.log}
	if v.mc != nil {
		rc.Manager, cc.Meta = v.mc, v.mc
	}
	v.rt = NewRouter(rc)
	cc.Route = v.rt.Pick
	if cfg.OwnedCache >= 0 && !cfg.CacheData && cfg.WritebackCreates {
		v.own = NewOwned(OwnedConfig{Budget: cfg.OwnedCache, Promote: v.promote,
			MaxClosing: cfg.WritebackCloses, Log: v.log})
		cc.Owned = v.own
	}
	v.wb = NewCreates(cc)
	if cfg.ReadCache > 0 && !cfg.CacheData && cfg.MetaCache > 0 {
		v.bc = NewBlockCache(blockCacheBlock, cfg.ReadCache)
	}
	v.st = NewStreams(StreamConfig{WriteBehind: cfg.WriteBehind, Readahead: cfg.Readahead,
		Route: v.rt.Pick, Log: v.log, SpliceReads: cfg.SpliceReads && zerocopy.BigPipes()})
	if _, err := rpc.Do(ctx, v.home, ns.Ping, &ns.PingReq{}); err != nil {
		return nil, err
	}
	return v, nil
}

// SetNotifier gives the core the kernel's caches to drop (the adapter,
// once mounted).
func (v *FS) SetNotifier(n Notifier) { v.notify.Store(&notifier{n}) }

// Home is the home forwarding node (Beacon's records go through it).
func (v *FS) Home() *rpc.Client { return v.home }

// Close sends the creates not yet sent and the closes' reports on their
// way, drops the connections and gives back the block cache's memory.
func (v *FS) Close() {
	v.wb.DropAll()
	v.own.WaitAllClosed() // write-back closes: what DropAll's recalls did not wait for
	if v.at.pending() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v.sendAtimes(ctx)
		cancel()
	}
	v.bc.DropAll()
	v.rt.Close()
	if v.mc != nil {
		v.mc.Close()
	}
}

// Gauges is the state of the mount's components, for the adapter's
// metrics.
type Gauges struct {
	Closing                  int    // closes of owned files whose writes and size are on their way
	BlockCacheBytes          int64  // bytes the block cache holds
	BlockCacheMapped         int64  // memory its blocks take outside the Go heap
	OwnedFiles               int    // files this mount owns
	OwnedBytes               int64  // bytes it keeps of them
	WriteBehind, Readahead   int64  // bytes of writes in flight, held in readahead buffers
	KeptWrites, SplicedReads uint64 // writes sent from the kernel's buffer, reads spliced from a pipe
}

// Gauges returns the components' state now.
func (v *FS) Gauges() Gauges {
	g := Gauges{Closing: v.own.Closing(), BlockCacheMapped: v.bc.Mapped(), OwnedFiles: v.own.Len(), OwnedBytes: v.own.Bytes(),
		KeptWrites: v.st.Kept(), SplicedReads: v.st.Spliced()}
	g.BlockCacheBytes, _, _ = v.bc.Stats()
	g.WriteBehind, g.Readahead = v.st.InFlight()
	return g
}

// ident returns the identity of caller c for a request of op.
func (v *FS) ident(c Cred, op wire.Op) ident.ID {
	var id ident.ID
	switch op {
	case ns.OpFlush, ns.OpRelease:
		// sent from close(), possibly inside the caller's execve
		id = v.ids.Cached(c.Pid)
	default:
		id = v.ids.Lookup(c.Pid)
	}
	id.User, id.Group = c.Uid, c.Gid
	return id
}

// record tells Config.Record of an operation.
func (v *FS) record(c Cred, id ident.ID, op wire.Op, ino, off, size uint64, start time.Time, failed bool) {
	if v.cfg.Record != nil {
		v.cfg.Record(c, id, op, ino, off, size, start, failed)
	}
}

// answered records an operation the mount answered itself (directory
// cache): the application asked for it, so Beacon counts it.
func (v *FS) answered(c Cred, op wire.Op, ino uint64, start time.Time, failed bool) {
	v.Counts.DirCacheHits.Add(1)
	v.record(c, v.ident(c, op), op, ino, 0, 0, start, failed)
}

// nsRequest is a pointer to a namespace request type Q.
type nsRequest[Q any] interface {
	wire.Ptr[Q]
	ns.Request
}

// call sends namespace request q (of operation d) tagged with the
// caller's identity.
func call[Q, R any, PQ nsRequest[Q], PR wire.Ptr[R]](v *FS, c Cred, d wire.Def[Q, R], q PQ) (PR, error) {
	rep, _, err := callAs[Q, R, PQ, PR](v, c, v.ident(c, d.Op), d, q, nil)
	return rep, err
}

// callAs sends one request for a caller already identified (into: a
// read's buffer). Reads and writes are recorded by Read and Write (with
// the latency the application saw), everything else here.
func callAs[Q, R any, PQ nsRequest[Q], PR wire.Ptr[R]](v *FS, c Cred, id ident.ID, d wire.Def[Q, R], q PQ, into []byte) (PR, []byte, error) {
	// a close of the file on its way goes first (write-back closes)
	ino, _, _ := q.Inodes()
	v.own.WaitClosed(ino)
	return send[Q, R, PQ, PR](v, c, id, d, q, into)
}

// send is callAs without waiting for the closes of q's file on their way
// (which is one of them).
func send[Q, R any, PQ nsRequest[Q], PR wire.Ptr[R]](v *FS, c Cred, id ident.ID, d wire.Def[Q, R], q PQ, into []byte) (PR, []byte, error) {
	rep := PR(new(R))
	p, err := v.invoke(c, id, d.Op, q, rep, into)
	return rep, p, err
}

// invoke sends request q of operation op for caller id, its answer into
// rep.
func (v *FS) invoke(c Cred, id ident.ID, op wire.Op, q ns.Request, rep wire.Message, into []byte) ([]byte, error) {
	head := q.Header()
	head.Who, head.Client = id, v.dc.ID()
	if head.Req == 0 { // (sent again, it keeps its number: meta/replies.go)
		head.Req = v.reqs.Add(1)
	}
	v.wb.SettleFor(op, q)
	// The kernel interrupts a request when the caller gets any signal (Go
	// programs get SIGURG all the time); the request is still bounded by
	// the timeout, so it is not abandoned half-way.
	ctx := context.Background()
	start := v.cfg.Now()
	ino, parent, _ := q.Inodes()
	// an open or release is counted in the handles the mount reclaims
	mk, _ := q.(*ns.MknodReq)
	counted := op == ns.OpOpen || op == ns.OpRelease || mk != nil && mk.Open
	if counted {
		v.handles.begin()
	}
	p, err := v.rt.Pick(id, ino|parent).Invoke(ctx, op, q, rep, nil, into)
	if counted {
		switch {
		case op == ns.OpRelease:
			v.handles.released(ino)
		case err != nil:
		case op == ns.OpOpen:
			v.handles.opened(ino)
		case rep.(*ns.EntryRep).Attr != nil:
			v.handles.opened(rep.(*ns.EntryRep).Attr.Ino)
		}
		v.handles.end()
	}
	if op != ns.OpRead && op != ns.OpWrite {
		v.record(c, id, op, ino, 0, 0, start, err != nil)
	}
	if err != nil && rpc.Errno(err) == syscall.EIO {
		v.log.Error("request failed", "op", op, "ino", ino, "err", err)
	}
	return p, err
}
