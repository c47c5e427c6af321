package engine_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestEtcdLimits: a batch beyond the servers' limits is refused with an
// error naming the limit, and nothing of it is applied; a batch at the
// limit goes through.
func TestEtcdLimits(t *testing.T) {
	e := openEtcdLimited(t, 8, 4096)
	var b engine.Batch
	for i := 0; i < 9; i++ {
		b.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"))
	}
	if err := e.Apply(&b, true); err == nil || !strings.Contains(err.Error(), "--max-txn-ops 8") {
		t.Fatalf("9 writes against a limit of 8: %v", err)
	}
	if _, err := e.Get([]byte("k0")); err != engine.ErrNotFound {
		t.Fatalf("a refused batch was applied in part: %v", err)
	}
	b.Ops = b.Ops[:8]
	if err := e.Apply(&b, true); err != nil {
		t.Fatalf("8 writes against a limit of 8: %v", err)
	}
	var big engine.Batch
	big.Set([]byte("big"), make([]byte, 5000))
	if err := e.Apply(&big, true); err == nil || !strings.Contains(err.Error(), "--max-request-bytes 4096") {
		t.Fatalf("5000 bytes against a limit of 4096: %v", err)
	}
	// two writes of one key in a batch: the last wins, as in the others
	var dup engine.Batch
	dup.Set([]byte("k0"), []byte("first"))
	dup.Set([]byte("k0"), []byte("second"))
	if err := e.Apply(&dup, true); err != nil {
		t.Fatal(err)
	}
	if v, err := e.Get([]byte("k0")); err != nil || string(v) != "second" {
		t.Fatalf("k0 = %q, %v", v, err)
	}
}

// TestEtcdScanPages: a scan over more keys than a page reads them all, in
// order, from start.
func TestEtcdScanPages(t *testing.T) {
	spec, dir := enginetest.Spec(t, "etcd")
	e, err := engine.Open(spec+"&mirror=false", dir) // etcd's own pages, not the mirror's
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	scanPages(t, e)
	// a mirror loaded from them holds the same
	m, err := engine.Open(spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var a, b []string
	e.Scan(nil, nil, func(k, _ []byte) bool { a = append(a, string(k)); return true })
	m.Scan(nil, nil, func(k, _ []byte) bool { b = append(b, string(k)); return true })
	if strings.Join(a, " ") != strings.Join(b, " ") || len(a) != 1302 {
		t.Fatalf("etcd holds %d keys, the mirror loaded %d", len(a), len(b))
	}
}

// scanPages writes 1,302 keys and scans 1,050 of them from a start.
func scanPages(t *testing.T, e engine.Engine) {
	const n = 1300
	for i := 0; i < n; i += 100 {
		var b engine.Batch
		for j := i; j < i+100; j++ {
			b.Set([]byte(fmt.Sprintf("p/%05d", j)), []byte{byte(j)})
		}
		if err := e.Apply(&b, false); err != nil {
			t.Fatal(err)
		}
	}
	var b engine.Batch
	b.Set([]byte("q/after"), []byte("x"))
	b.Set([]byte("o/before"), []byte("x"))
	if err := e.Apply(&b, false); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := e.Scan([]byte("p/"), []byte("p/00250"), func(k, v []byte) bool {
		got = append(got, string(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != n-250 || got[0] != "p/00250" || got[len(got)-1] != fmt.Sprintf("p/%05d", n-1) {
		t.Fatalf("scan from p/00250: %d keys, %q … %q", len(got), got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatalf("out of order: %q then %q", got[i-1], got[i])
		}
	}
}

// TestParseEtcd: the URI's parts, and what it refuses.
func TestParseEtcd(t *testing.T) {
	c, err := engine.ParseEtcd("10.0.0.1:2379,http://10.0.0.2:2379/clusterA?max-txn-ops=1024&timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Endpoints) != "[http://10.0.0.1:2379 http://10.0.0.2:2379]" || c.Prefix != "clusterA" || c.MaxTxnOps != 1024 || c.Timeout.String() != "3s" {
		t.Fatalf("%+v", c)
	}
	if c, err := engine.ParseEtcd("h:1"); err != nil || c.Prefix != "sluice" {
		t.Fatalf("default prefix: %+v %v", c, err)
	}
	if c, err := engine.ParseEtcd("h:1?mirror=false"); err != nil || !c.NoMirror {
		t.Fatalf("mirror=false: %+v %v", c, err)
	}
	if c, err := engine.ParseEtcd("h:1?keepalive=2s&lease=7s"); err != nil || c.KeepAlive != 2*time.Second || c.Lease != 7*time.Second {
		t.Fatalf("keepalive=2s&lease=7s: %+v %v", c, err)
	}
	for _, bad := range []string{"", "/p", "h:1?max-txn-ops=0", "h:1?colour=blue", "h:1?timeout=soon", "h:1?mirror=maybe", "h:1?keepalive=100ms"} {
		if _, err := engine.ParseEtcd(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := engine.Open("etcd", ""); err == nil || !strings.Contains(err.Error(), "etcd://") {
		t.Errorf("etcd without an address: %v", err)
	}
	if _, err := engine.Open("pebble://h:1", t.TempDir()); err == nil {
		t.Error("pebble with an address accepted")
	}
}

// FuzzParseEtcd: no address crashes the parser.
func FuzzParseEtcd(f *testing.F) {
	f.Add("10.0.0.1:2379,10.0.0.2:2379/p?max-txn-ops=1024")
	f.Add("h:1/?timeout=1s&max-request-bytes=9")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := engine.ParseEtcd(s)
		if err == nil && len(c.Endpoints) == 0 {
			t.Fatalf("%q: no endpoint and no error", s)
		}
	})
}

// TestParts: a batch split for a limited engine keeps its order and every
// write, each part within the limits; an unlimited engine gets it whole.
func TestParts(t *testing.T) {
	e := openEtcdLimited(t, 7, 8<<20)
	var b engine.Batch
	for i := 0; i < 30; i++ {
		b.Set([]byte(fmt.Sprintf("s/%02d", i)), []byte("v"))
	}
	parts := engine.Parts(e, &b)
	var keys []string
	for _, p := range parts {
		if len(p.Ops) > 7 {
			t.Fatalf("a part of %d writes", len(p.Ops))
		}
		if err := e.Apply(p, false); err != nil {
			t.Fatal(err)
		}
		for _, op := range p.Ops {
			keys = append(keys, string(op.Key))
		}
	}
	if len(parts) != 5 || len(keys) != 30 || keys[0] != "s/00" || keys[29] != "s/29" {
		t.Fatalf("%d parts, keys %v", len(parts), keys)
	}
	if got := engine.Parts(engine.NewMem(), &b); len(got) != 1 || got[0] != &b {
		t.Fatalf("an unlimited engine's batch split: %d parts", len(got))
	}
}

// openEtcdLimited opens a fresh etcd engine that holds its batches to
// ops writes and bytes bytes (below the test server's own limits).
func openEtcdLimited(t *testing.T, ops, bytes int) engine.Engine {
	t.Helper()
	spec, dir := enginetest.Spec(t, "etcd")
	spec = regexp.MustCompile(`max-txn-ops=\d+`).ReplaceAllString(spec, fmt.Sprintf("max-txn-ops=%d", ops))
	spec = regexp.MustCompile(`max-request-bytes=\d+`).ReplaceAllString(spec, fmt.Sprintf("max-request-bytes=%d", bytes))
	e, err := engine.Open(spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestEtcdTerms: two servers share a prefix; the second waits while the
// first is active. When the first's lease ends behind its back (revoked
// here, as etcd does when a stalled server stops renewing it), the second
// takes over, and the first, which has not noticed, commits nothing: its
// batch is refused as fenced and the second does not see it. A server
// that notices (the usual case) ends its term by itself, and one that
// closes hands over at once.
func TestEtcdTerms(t *testing.T) {
	spec, dir := enginetest.Spec(t, "etcd")
	spec += "&lease=1s"
	open := func() *engine.Etcd {
		e, err := engine.Open(spec, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e.(*engine.Etcd)
	}
	set := func(e engine.Engine, k, v string) error {
		var b engine.Batch
		b.Set([]byte(k), []byte(v))
		return e.Apply(&b, true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := open(), open()
	aEnded, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := set(a, "k", "from a"); err != nil {
		t.Fatal(err)
	}
	type won struct {
		ended <-chan struct{}
		err   error
	}
	bWon := make(chan won, 1)
	go func() {
		ended, err := b.Campaign(ctx, "b")
		bWon <- won{ended, err}
	}()
	select {
	case w := <-bWon:
		t.Fatalf("b became active while a was (%v)", w.err)
	case <-time.After(2500 * time.Millisecond): // past a's lease: a renews it
	}
	if id, err := a.Active(ctx); err != nil || id != "a" {
		t.Fatalf("active %q, %v; want a", id, err)
	}
	if !a.Holds() || b.Holds() {
		t.Fatalf("a holds %v, b %v: want a only", a.Holds(), b.Holds())
	}
	// a stalls: its lease ends and it does not notice
	a.DeafForTest()
	raw, err := clientv3.New(clientv3.Config{Endpoints: etcdEndpoints(t, spec), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(a.LeaseForTest())); err != nil {
		t.Fatal(err)
	}
	var w won
	select {
	case w = <-bWon:
		if w.err != nil {
			t.Fatal(w.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b did not take over within 10 s of a's lease ending")
	}
	if v, err := b.Get([]byte("k")); err != nil || string(v) != "from a" {
		t.Fatalf("b reads k = %q, %v: want what a committed", v, err)
	}
	// a, which has not noticed, knows by its own clock that its term may
	// be over within two thirds of its lease of its last renewal (a lease
	// runs out a whole lease after it: here it was revoked earlier)
	for deadline := time.Now().Add(time.Second); a.Holds(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a still holds its term by its clock a lease after its last renewal")
		}
	}
	if !b.Holds() {
		t.Fatal("b, active, does not hold its term")
	}
	if err := set(a, "k", "from a, stalled"); !errors.Is(err, engine.ErrFenced) {
		t.Fatalf("a's batch after its term: %v, want fenced", err)
	}
	select {
	case <-aEnded:
	default:
		t.Fatal("a's term did not end when a batch of it was refused")
	}
	if err := set(b, "k2", "from b"); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get([]byte("k")); err != nil || string(v) != "from a" {
		t.Fatalf("k = %q after a's fenced batch, %v", v, err)
	}
	r, err := raw.Get(ctx, etcdPrefix(t, spec)+"/k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "from a" {
		t.Fatalf("etcd holds k = %v, %v: a's fenced batch reached it", r.Kvs, err)
	}
	// a server that notices: its term ends by itself
	c := open()
	cWon := make(chan error, 1)
	go func() {
		_, err := c.Campaign(ctx, "c")
		cWon <- err
	}()
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(b.LeaseForTest())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("b did not notice its lease ending")
	}
	if err := set(b, "k3", "x"); !errors.Is(err, engine.ErrFenced) {
		t.Fatalf("b's batch after its term ended: %v", err)
	}
	if err := <-cWon; err != nil {
		t.Fatal(err)
	}
	// one that closes hands over at once, without waiting for its lease
	d := open()
	dWon := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := d.Campaign(ctx, "d")
		dWon <- err
	}()
	time.Sleep(200 * time.Millisecond)
	c.Close()
	if err := <-dWon; err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Fatalf("d took over %v after c closed: it waited for the lease", el)
	}
	if id, err := d.Active(ctx); err != nil || id != "d" {
		t.Fatalf("active %q, %v; want d", id, err)
	}
}

// etcdEndpoints and etcdPrefix read an etcd engine's spec.
func etcdEndpoints(t *testing.T, spec string) []string {
	c, err := engine.ParseEtcd(strings.TrimPrefix(spec, "etcd://"))
	if err != nil {
		t.Fatal(err)
	}
	return c.Endpoints
}

func etcdPrefix(t *testing.T, spec string) string {
	c, err := engine.ParseEtcd(strings.TrimPrefix(spec, "etcd://"))
	if err != nil {
		t.Fatal(err)
	}
	return c.Prefix
}

// TestEtcdMaintain: after many keys are written and removed and the
// revisions compacted, Maintain defragments the member, whose backend
// shrinks; with nothing to give back it leaves the member alone.
func TestEtcdMaintain(t *testing.T) {
	spec, dir := enginetest.Spec(t, "etcd")
	e, err := engine.Open(spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	val := make([]byte, 8<<10)
	for round := 0; round < 2; round++ {
		for i := 0; i < 1500; i += 50 {
			var b engine.Batch
			for j := i; j < i+50; j++ {
				b.Set([]byte(fmt.Sprintf("big/%05d", j)), val)
			}
			if err := e.Apply(&b, true); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 1500; i += 50 {
			var b engine.Batch
			for j := i; j < i+50; j++ {
				b.Del([]byte(fmt.Sprintf("big/%05d", j)))
			}
			if err := e.Apply(&b, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	raw, err := clientv3.New(clientv3.Config{Endpoints: etcdEndpoints(t, spec), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	r, err := raw.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	m, err := e.(engine.Maintainer).Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("defragmented %v, freed %d bytes", m.Defragmented, m.Freed)
	if len(m.Defragmented) != 1 || m.Freed < 10<<20 {
		t.Fatalf("after 24 MiB written and removed and compacted: %+v, want the member defragmented and 10 MiB or more freed", m)
	}
	if m, err = e.(engine.Maintainer).Maintain(ctx); err != nil || len(m.Defragmented) != 0 {
		t.Fatalf("right after a defragmentation: %+v %v, want nothing done", m, err)
	}
}

// TestEtcdRoles: a role opened beside the metadata service's keys
// (OpenRole: a manager in a process of its own) keeps its keys apart —
// neither side's scan sees the other's — and has an election of its own,
// whose holder the service's engine names (ActiveOf); an engine that is
// not shared is refused, naming etcd.
func TestEtcdRoles(t *testing.T) {
	spec, dir := enginetest.Spec(t, "etcd")
	e, err := engine.Open(spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := engine.OpenRole(spec, "forwarding")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for k, eng := range map[string]engine.Engine{"meta-key": e, "role-key": r} {
		var b engine.Batch
		b.Set([]byte(k), []byte("v"))
		if err := eng.Apply(&b, true); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(eng engine.Engine) (ks []string) {
		if err := eng.Scan(nil, nil, func(k, _ []byte) bool { ks = append(ks, string(k)); return true }); err != nil {
			t.Fatal(err)
		}
		return ks
	}
	// a role opened again reads etcd, not what its first opening wrote
	r2, err := engine.OpenRole(spec, "forwarding")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if got := keys(e); len(got) != 1 || got[0] != "meta-key" {
		t.Fatalf("the service's keys: %q", got)
	}
	if got := keys(r2); len(got) != 1 || got[0] != "role-key" {
		t.Fatalf("the role's keys: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sh := e.(engine.Shared)
	if id, err := sh.ActiveOf(ctx, "forwarding"); err != nil || id != "" {
		t.Fatalf("before any campaign, the role's holder is %q, %v", id, err)
	}
	if _, err := r.(engine.Elector).Campaign(ctx, "10.0.0.2:7500"); err != nil {
		t.Fatal(err)
	}
	if id, err := sh.ActiveOf(ctx, "forwarding"); err != nil || id != "10.0.0.2:7500" {
		t.Fatalf("the role's holder is %q, %v", id, err)
	}
	if id, err := e.(engine.Elector).Active(ctx); err != nil || id != "" {
		t.Fatalf("the role's campaign made %q (%v) the metadata service's active server", id, err)
	}
	if _, err := engine.OpenRole("pebble", "forwarding"); err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("a role on pebble: %v", err)
	}
}
