package vfs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// fakeFwd is a forwarding node in memory: one byte slice per inode, a
// truncation generation per inode, and gates that hold chosen requests
// on the wire until the test lets them go.
type fakeFwd struct {
	name string

	mu    sync.Mutex
	files map[uint64][]byte
	gen   map[uint64]uint64
	calls []fwdCall // every request, in the order it arrived
	gate  map[uint64]chan struct{}
	fail  map[uint64]error // next write at this offset fails
	// arrived is signalled for every request (buffered generously)
	arrived chan fwdCall
}

// fwdCall is a read or write as the fake forwarding node saw it.
type fwdCall struct {
	Op                wire.Op
	Ino, Offset, Size uint64
}

func newFakeFwd(name string) *fakeFwd {
	return &fakeFwd{name: name, files: map[uint64][]byte{}, gen: map[uint64]uint64{}, gate: map[uint64]chan struct{}{},
		fail: map[uint64]error{}, arrived: make(chan fwdCall, 1<<12)}
}

// hold makes requests at offset off wait until the returned func is called.
func (f *fakeFwd) hold(off uint64) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.gate[off] = ch
	f.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (f *fakeFwd) truncate(ino, size uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.files[ino]
	if uint64(len(b)) > size {
		b = b[:size]
	} else {
		b = append(b, make([]byte, size-uint64(len(b)))...)
	}
	f.files[ino] = b
	f.gen[ino]++
	return f.gen[ino]
}

func (f *fakeFwd) bytes(ino uint64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.files[ino]...)
}

func (f *fakeFwd) ops(op wire.Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.calls {
		if m.Op == op {
			n++
		}
	}
	return n
}

// Invoke implements rpc.Invoker: reads and writes.
func (f *fakeFwd) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	io, ok := req.(*ns.IOReq)
	if !ok || op != ns.OpRead && op != ns.OpWrite {
		return nil, errors.New("fakeFwd: unexpected op " + op.String())
	}
	c := fwdCall{Op: op, Ino: io.Ino, Offset: io.Off, Size: io.Len}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	g := f.gate[io.Off]
	// a write lands when it arrives, in the generation of that moment;
	// a held one only has its reply delayed
	var err error
	if op == ns.OpWrite {
		err = f.writeLocked(io, payload, rep.(*ns.IORep))
	}
	f.mu.Unlock()
	f.arrived <- c
	if g != nil {
		<-g
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if op == ns.OpWrite {
		return nil, err
	}
	b := f.files[io.Ino]
	if io.Off >= uint64(len(b)) {
		return nil, nil
	}
	end := min(io.Off+io.Len, uint64(len(b)))
	n := copy(into, b[io.Off:end])
	return into[:n], nil
}

func (f *fakeFwd) writeLocked(req *ns.IOReq, payload []byte, rep *ns.IORep) error {
	if err := f.fail[req.Off]; err != nil {
		delete(f.fail, req.Off)
		return err
	}
	b := f.files[req.Ino]
	if end := req.Off + uint64(len(payload)); uint64(len(b)) < end {
		b = append(b, make([]byte, end-uint64(len(b)))...)
	}
	copy(b[req.Off:], payload)
	f.files[req.Ino] = b
	rep.Len, rep.Trunc = uint64(len(payload)), f.gen[req.Ino]
	return nil
}

// wait returns the next request that arrives, or fails the test.
func (f *fakeFwd) wait(t *testing.T) fwdCall {
	t.Helper()
	select {
	case m := <-f.arrived:
		return m
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no request arrived", f.name)
		return fwdCall{}
	}
}

// drain forgets the requests that arrived so far.
func (f *fakeFwd) drain() {
	for {
		select {
		case <-f.arrived:
		default:
			return
		}
	}
}

// quiet fails the test if a request arrives within d.
func (f *fakeFwd) quiet(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case m := <-f.arrived:
		t.Fatalf("%s: %s, but %v at %d arrived", f.name, why, m.Op, m.Offset)
	case <-time.After(d):
	}
}

// fakeManager answers forwarding-map requests with a placement the test sets.
type fakeManager struct {
	mu    sync.Mutex
	pl    fwdmap.Placement
	err   error
	asked int
}

func (m *fakeManager) set(version uint64, addrs ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pl = fwdmap.Placement{Version: version, Policy: "test"}
	for _, a := range addrs {
		m.pl.Fwds = append(m.pl.Fwds, fwdmap.Target{ID: a, Addr: a})
	}
}

func (m *fakeManager) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked++
	pl, ok := rep.(*fwdmap.Placement)
	if op != fwdmap.OpMap || !ok {
		return nil, errors.New("fakeManager: unexpected request")
	}
	if m.err != nil {
		return nil, m.err
	}
	*pl = m.pl
	return nil, nil
}

func (m *fakeManager) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
