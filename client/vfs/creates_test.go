package vfs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// fakeMeta grants and takes back delegations and receives batches.
type fakeMeta struct {
	mu        sync.Mutex
	refuse    error
	next      uint64
	delegs    int
	undelegs  []uint64
	batches   []ns.BatchReq
	refuseIno map[uint64]syscall.Errno // creates the service refuses
	gen       uint64                   // feed position a grant carries
	arrived   chan wire.Op
	gate      chan struct{} // if set, a batch waits until it is closed
}

func newFakeMeta() *fakeMeta {
	return &fakeMeta{next: 1000, refuseIno: map[uint64]syscall.Errno{}, arrived: make(chan wire.Op, 1024)}
}

// Invoke answers the typed operations: delegations given and taken back,
// batches.
func (m *fakeMeta) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	m.mu.Lock()
	if gate := m.gate; gate != nil && op == ns.OpCreateBatch {
		m.mu.Unlock()
		<-gate
		m.mu.Lock()
	}
	defer func() { m.mu.Unlock(); m.arrived <- op }()
	switch op {
	case ns.OpCreateBatch:
		q := req.(*ns.BatchReq)
		c := *q
		c.Entries = append([]ns.BatchEntry(nil), q.Entries...)
		m.batches = append(m.batches, c)
		r := rep.(*ns.BatchRep)
		for _, e := range q.Entries {
			if en := m.refuseIno[e.Ino]; en != 0 {
				e.Errno = uint32(en)
				r.Failed = append(r.Failed, e)
			}
		}
		return nil, nil
	case ns.OpDelegate:
		m.delegs++
		if m.refuse != nil {
			return nil, m.refuse
		}
		id := m.next
		m.next += 4
		*rep.(*ns.DelegateRep) = ns.DelegateRep{First: id, Count: 4, Feed: m.gen}
		return nil, nil
	case ns.OpUndelegate:
		m.undelegs = append(m.undelegs, req.(*ns.DelegateReq).Dir)
		return nil, nil
	}
	return nil, errors.New("fakeMeta: unexpected op")
}

func (m *fakeMeta) waitOp(t *testing.T, op wire.Op) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case got := <-m.arrived:
			if got == op {
				return
			}
		case <-deadline:
			t.Fatalf("no %v reached the metadata service", op)
		}
	}
}

func (m *fakeMeta) sent() []ns.BatchReq {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ns.BatchReq(nil), m.batches...)
}

type createBed struct {
	meta  *fakeMeta
	dc    *DirCache
	clock *fakeClock
	w     *Creates
}

// newCreateBed has directory 10 made by this mount (so its listing is
// known complete) and the feed followed. The batches go to the same fake
// as the delegation requests (in a cluster, through a forwarding node to
// the same metadata service).
func newCreateBed(flush time.Duration) *createBed {
	b := &createBed{meta: newFakeMeta(), dc: NewDirCache(true), clock: &fakeClock{t: time.Unix(1e9, 0)}}
	b.dc.Advance(1, false, nil)
	b.dc.Changed(1, "d", 10, true, dirAttr(1), 1, dirAttr(10))
	b.w = NewCreates(CreatesConfig{Creates: true, Unlinks: true, Flush: flush, Timeout: time.Second,
		Meta: b.meta, Route: func(ident.ID, uint64) Caller { return b.meta },
		Dir: b.dc, Now: b.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return b
}

func who() ident.ID { return caller }

func (b *createBed) create(t *testing.T, name string, uid uint32) (uint64, bool) {
	t.Helper()
	a, ok := b.w.Create(who, 10, name, 0o644, uid, 100)
	if !ok {
		return 0, false
	}
	if a.Mode != syscall.S_IFREG|0o644 || a.Uid != uid {
		t.Fatalf("create answered with %+v", a)
	}
	return a.Ino, true
}

// Creates are answered here and go in one batch, in order, with the
// inode numbers granted; a file closed before its batch left is created
// closed; the directory cache sees them at once.
func TestCreatesBatched(t *testing.T) {
	b := newCreateBed(30 * time.Millisecond)
	a, ok := b.create(t, "a", 500)
	if !ok {
		t.Fatal("create in a delegable directory went to the service")
	}
	c, _ := b.create(t, "c", 500)
	if a != 1000 || c != 1001 {
		t.Fatalf("inodes %d %d, want the granted 1000 1001", a, c)
	}
	if got, ok := b.dc.Present(10, "c"); !ok || got != c {
		t.Fatal("the directory cache does not show the new file")
	}
	if !b.w.Release(a) {
		t.Fatal("release of a file not yet sent went to the service")
	}
	if b.w.Release(999) {
		t.Fatal("release of a file the service knows was answered here")
	}
	b.meta.waitOp(t, ns.OpCreateBatch)
	bs := b.meta.sent()
	if len(bs) != 1 || len(bs[0].Entries) != 2 {
		t.Fatalf("batches %+v, want one of two", bs)
	}
	e := bs[0].Entries
	if e[0].Name != "a" || e[1].Name != "c" || e[0].Open || !e[1].Open {
		t.Fatalf("entries %+v: want a (closed), c (open), in order", e)
	}
	if bs[0].Uid != 500 || bs[0].Parent != 10 || bs[0].Who.Job != caller.Job {
		t.Fatalf("batch header %+v", bs[0])
	}
	// the fifth create needs more inode numbers: asked again, not refused
	for _, n := range []string{"e", "f", "g"} {
		if _, ok := b.create(t, n, 500); !ok {
			t.Fatalf("create %s went to the service", n)
		}
	}
	if b.meta.delegs != 2 {
		t.Fatalf("%d delegation requests, want 2 (the grant of 4 inodes ran out)", b.meta.delegs)
	}
}

// Any request that names a file not yet sent, or its directory, sends the
// directory's batch first.
func TestCreatesSettle(t *testing.T) {
	b := newCreateBed(time.Hour)
	ino, _ := b.create(t, "a", 500)
	b.w.Settle(ino)
	if len(b.meta.sent()) != 1 {
		t.Fatal("Settle of a pending file did not send its batch")
	}
	b.create(t, "b", 500)
	b.w.SettleFor(ns.OpRename, &ns.RenameReq{Parent: 1, Name: "x", NewParent: 1, NewName: "d"})
	if len(b.meta.sent()) != 2 {
		t.Fatal("a rename onto the delegated directory did not send its batch")
	}
	b.create(t, "c", 500)
	b.w.SettleFor(ns.OpGetattr, &ns.InoReq{Ino: 77})
	if len(b.meta.sent()) != 2 {
		t.Fatal("a request on an unrelated inode sent a batch")
	}
}

// Creates by different owners go in different messages, in order, and a
// removal here of a known name joins them.
func TestCreatesOwnersAndUnlinks(t *testing.T) {
	b := newCreateBed(time.Hour)
	b.dc.Changed(10, "old", 55, true, dirAttr(10), 1, nil)
	b.create(t, "a", 500)
	b.create(t, "b", 501)
	if !b.w.Unlink(who, 10, "old") {
		t.Fatal("removal of a known name in a delegated directory went to the service")
	}
	if !b.dc.Absent(10, "old") {
		t.Fatal("the cache still shows the removed name")
	}
	b.w.Settle(10)
	bs := b.meta.sent()
	if len(bs) != 2 || bs[0].Uid != 500 || bs[1].Uid != 501 {
		t.Fatalf("batches %+v: want one per owner", bs)
	}
	last := bs[1].Entries
	if len(last) != 2 || last[1].Name != "old" || !last[1].Remove || last[1].Mode != 0 {
		t.Fatalf("second batch %+v: want b then the removal of old", last)
	}
}

// A full batch (wbBatchMax) is sent in the background: the removal that
// filled it does not wait for the service (which removes one name at a
// time); only two batches' worth queued behind one still on its way make
// the request that queued the last wait. Every removal arrives, in order.
func TestCreatesFullBatchInBackground(t *testing.T) {
	b := newCreateBed(time.Hour)
	b.create(t, "a", 500) // the delegation
	b.w.Settle(10)
	const n = 3 * wbBatchMax
	for i := range n {
		b.dc.Changed(10, "f"+strconv.Itoa(i), uint64(5000+i), true, dirAttr(10), 1, nil)
	}
	gate := make(chan struct{})
	b.meta.mu.Lock()
	b.meta.gate = gate
	b.meta.mu.Unlock()
	unlinks := func(from, to int) bool { // [from, to) returned within 5 s
		done := make(chan struct{})
		go func() {
			for i := from; i < to; i++ {
				if !b.w.Unlink(who, 10, "f"+strconv.Itoa(i)) {
					t.Errorf("removal %d went to the service", i)
				}
			}
			close(done)
		}()
		select {
		case <-done:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	if !unlinks(0, wbBatchMax) {
		close(gate)
		t.Fatal("the removal that filled a batch waited for the service")
	}
	// the batch is on its way (held at the gate)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b.w.mu.Lock()
		left := len(b.w.held[10].entries)
		b.w.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			close(gate)
			t.Fatal("a full batch was not sent")
		}
	}
	if !unlinks(wbBatchMax, n-1) {
		close(gate)
		t.Fatal("removals waited while less than two batches' worth queued behind the one on its way")
	}
	last := make(chan struct{})
	go func() {
		b.w.Unlink(who, 10, "f"+strconv.Itoa(n-1))
		close(last)
	}()
	select {
	case <-last:
		close(gate)
		t.Fatal("the removal that queued two batches' worth behind one on its way did not wait")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	<-last
	b.w.Settle(10)
	var names []string
	for _, m := range b.meta.sent()[1:] {
		for _, e := range m.Entries {
			if !e.Remove || e.Mode != 0 {
				t.Fatalf("entry %+v, want a removal", e)
			}
			names = append(names, e.Name)
		}
	}
	if len(names) != n {
		t.Fatalf("%d removals reached the service, want %d", len(names), n)
	}
	for i, name := range names {
		if name != "f"+strconv.Itoa(i) {
			t.Fatalf("removal %d is of %s: out of order", i, name)
		}
	}
}

// A recall sends the directory's creates, then gives the delegation back;
// creates there go to the service until the cool-down has passed.
func TestCreatesRecall(t *testing.T) {
	b := newCreateBed(time.Hour)
	b.create(t, "a", 500)
	if b.w.Held() != 1 {
		t.Fatal("no delegation held")
	}
	// a recall addressed to another mount is not ours
	b.w.Recall([]ns.Change{{Kind: ns.ChangeRecall, Holder: 12345, Ino: 10}})
	b.w.Recall([]ns.Change{{Kind: ns.ChangeRecall, Holder: b.dc.ID(), Ino: 10}})
	b.meta.waitOp(t, ns.OpUndelegate)
	bs := b.meta.sent()
	if len(bs) != 1 || bs[0].Entries[0].Name != "a" {
		t.Fatalf("batches at recall %+v: the create must be sent before the delegation goes back", bs)
	}
	if b.w.Held() != 0 || len(b.meta.undelegs) != 1 || b.meta.undelegs[0] != 10 {
		t.Fatalf("held %d, given back %v", b.w.Held(), b.meta.undelegs)
	}
	if _, ok := b.create(t, "b", 500); ok {
		t.Fatal("create answered here right after a recall")
	}
	if b.meta.delegs != 1 {
		t.Fatal("delegation asked again within the cool-down")
	}
	b.clock.Advance(wire.DelegCooldown + time.Millisecond)
	if _, ok := b.create(t, "b", 500); !ok {
		t.Fatal("create not answered here after the cool-down")
	}
}

// A refused delegation is not asked again within the cool-down; a create
// the service refuses (it was acknowledged) makes the directory uncertain.
func TestCreatesRefusals(t *testing.T) {
	b := newCreateBed(time.Hour)
	b.meta.refuse = syscall.EBUSY
	if _, ok := b.create(t, "a", 500); ok {
		t.Fatal("create answered here without a delegation")
	}
	b.create(t, "a", 500)
	if b.meta.delegs != 1 {
		t.Fatalf("%d delegation requests within the cool-down", b.meta.delegs)
	}
	b.clock.Advance(wire.DelegCooldown + time.Millisecond)
	b.meta.refuse = nil
	ino, ok := b.create(t, "a", 500)
	if !ok {
		t.Fatal("no delegation after the cool-down")
	}
	b.meta.refuseIno[ino] = syscall.EEXIST
	b.w.Settle(ino)
	if _, ok := b.dc.DirAttr(10); ok {
		t.Fatal("directory still cached after a create in it was refused")
	}
}

// Losing the feed gives up every delegation after sending what is held.
func TestCreatesDropAll(t *testing.T) {
	b := newCreateBed(time.Hour)
	b.dc.Changed(1, "e", 11, true, dirAttr(1), 1, dirAttr(11))
	b.create(t, "a", 500)
	if _, ok := b.w.Create(who, 11, "z", 0o600, 500, 100); !ok {
		t.Fatal("second directory not delegated")
	}
	b.w.DropAll()
	if b.w.Held() != 0 || len(b.meta.undelegs) != 2 || len(b.meta.sent()) != 2 {
		t.Fatalf("held %d, given back %v, batches %d", b.w.Held(), b.meta.undelegs, len(b.meta.sent()))
	}
}

// A grant the change feed has not caught up with within a second (by the
// mount's clock) is not used for creates: the listing may be incomplete.
func TestCreatesFeedBehindGrant(t *testing.T) {
	b := newCreateBed(time.Hour)
	b.meta.gen = b.dc.Sent() + 10 // the grant's feed position, never reached
	ticking := &tickClock{t: time.Unix(1e9, 0), step: 100 * time.Millisecond}
	b.w.cfg.Now = ticking.Now
	if _, ok := b.create(t, "a", 500); ok {
		t.Fatal("create answered here while the feed lags the grant")
	}
	if b.meta.delegs != 1 {
		t.Fatalf("%d delegation requests", b.meta.delegs)
	}
	// the feed catches up: the delegation held is used
	b.dc.Advance(b.meta.gen, false, nil)
	if _, ok := b.create(t, "b", 500); !ok {
		t.Fatal("create not answered here once the feed caught up")
	}
}

// tickClock moves forward by step at every reading.
type tickClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// Directories are made here too, delegated from birth: files in a new
// directory are answered here without asking for it, and its batch goes
// after the parent's that makes it. An empty directory this mount holds is
// removed here; one with entries goes to the service; one emptied by removals not yet sent is removed here after
// them. A recall of a directory whose removal is queued sends the removal
// before the delegation goes back.
func TestCreatesDirectories(t *testing.T) {
	b := newCreateBed(time.Hour)
	a, ok := b.w.Mkdir(who, 10, "sub", 0o755, 500, 100)
	if !ok {
		t.Fatal("mkdir in a delegable directory went to the service")
	}
	sub := a.Ino
	if a.Mode != syscall.S_IFDIR|0o755 || a.Nlink != 2 || a.Uid != 500 {
		t.Fatalf("mkdir answered with %+v", a)
	}
	if pa, _ := b.dc.DirAttr(10); pa.Nlink != 3 {
		t.Fatalf("parent's link count %d, want 3", pa.Nlink)
	}
	if !b.dc.Empty(sub) || b.w.Held() != 2 {
		t.Fatalf("new directory: empty %v, delegations held %d (want true, 2)", b.dc.Empty(sub), b.w.Held())
	}
	f, ok := b.w.Create(who, sub, "f", 0o644, 500, 100)
	if !ok || b.meta.delegs != 1 {
		t.Fatalf("create in the new directory: answered here %v, delegation requests %d (want true, 1)", ok, b.meta.delegs)
	}
	b.w.Settle(f.Ino)
	bs := b.meta.sent()
	if len(bs) != 2 || bs[0].Parent != 10 || bs[1].Parent != sub {
		t.Fatalf("batches %+v: want the parent's (making sub) and then sub's", bs)
	}
	if e := bs[0].Entries[0]; e.Name != "sub" || e.Mode != syscall.S_IFDIR|0o755 || e.Ino != sub {
		t.Fatalf("entry making sub: %+v", e)
	}
	if b.w.Rmdir(who, 10, "sub") {
		t.Fatal("a directory with a file in it was removed here")
	}
	if !b.w.Unlink(who, sub, "f") {
		t.Fatal("removal of a sent file in a held directory went to the service")
	}
	// emptied by a removal not yet sent: removed here, that removal goes first
	n := len(b.meta.sent())
	if !b.w.Rmdir(who, 10, "sub") {
		t.Fatal("removal of an emptied held directory went to the service")
	}
	if _, ok := b.dc.Present(10, "sub"); ok || b.w.Held() != 1 {
		t.Fatalf("after rmdir: still listed %v, delegations held %d", ok, b.w.Held())
	}
	if pa, _ := b.dc.DirAttr(10); pa.Nlink != 2 {
		t.Fatalf("parent's link count %d after rmdir, want 2", pa.Nlink)
	}
	b.w.Settle(10)
	bs = b.meta.sent()[n:]
	if len(bs) != 2 || bs[0].Parent != sub || bs[0].Entries[0].Name != "f" || bs[1].Parent != 10 ||
		bs[1].Entries[0].Name != "sub" || !bs[1].Entries[0].Remove || bs[1].Entries[0].Mode != syscall.S_IFDIR {
		t.Fatalf("batches %+v: want sub's removal of f, then the removal of directory sub", bs)
	}

	// a recall of a directory whose removal waits in its parent's batch
	s2, ok := b.w.Mkdir(who, 10, "s2", 0o700, 500, 100)
	if !ok {
		t.Fatal("second mkdir went to the service")
	}
	b.w.Settle(10)
	if !b.w.Rmdir(who, 10, "s2") {
		t.Fatal("removal of s2 went to the service")
	}
	n = len(b.meta.sent())
	b.w.Recall([]ns.Change{{Kind: ns.ChangeRecall, Holder: b.dc.ID(), Ino: s2.Ino}})
	b.meta.waitOp(t, ns.OpUndelegate)
	bs = b.meta.sent()
	if len(bs) != n+1 || bs[n].Entries[0].Name != "s2" || !bs[n].Entries[0].Remove {
		t.Fatalf("batches at the recall of s2 %+v: its removal must be sent before the delegation goes back", bs[n:])
	}
}
