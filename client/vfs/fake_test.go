package vfs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// fakeFwd is a forwarding node in memory: one byte slice per inode, a
// truncation generation per inode, and gates that hold chosen requests
// on the wire until the test lets them go.
type fakeFwd struct {
	name string

	mu    sync.Mutex
	files map[uint64][]byte
	gen   map[uint64]uint64
	calls []wire.Msg // every request, in the order it arrived
	gate  map[uint64]chan struct{}
	fail  map[uint64]error // next write at this offset fails
	// arrived is signalled for every request (buffered generously)
	arrived chan wire.Msg
}

func newFakeFwd(name string) *fakeFwd {
	return &fakeFwd{name: name, files: map[uint64][]byte{}, gen: map[uint64]uint64{}, gate: map[uint64]chan struct{}{},
		fail: map[uint64]error{}, arrived: make(chan wire.Msg, 1<<12)}
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

func (f *fakeFwd) Call(ctx context.Context, req *wire.Msg, payload, into []byte) (*wire.Msg, []byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, *req)
	g := f.gate[req.Offset]
	// a write lands when it arrives, in the generation of that moment;
	// a held one only has its reply delayed
	var reply *wire.Msg
	var err error
	if req.Op == wire.OpWrite {
		reply, err = f.writeLocked(req, payload)
	}
	f.mu.Unlock()
	f.arrived <- *req
	if g != nil {
		<-g
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch req.Op {
	case wire.OpWrite:
		return reply, nil, err
	case wire.OpRead:
		b := f.files[req.Ino]
		if req.Offset >= uint64(len(b)) {
			return &wire.Msg{}, nil, nil
		}
		end := min(req.Offset+req.Size, uint64(len(b)))
		n := copy(into, b[req.Offset:end])
		return &wire.Msg{}, into[:n], nil
	}
	return nil, nil, errors.New("fakeFwd: unexpected op " + req.Op.String())
}

func (f *fakeFwd) writeLocked(req *wire.Msg, payload []byte) (*wire.Msg, error) {
	if err := f.fail[req.Offset]; err != nil {
		delete(f.fail, req.Offset)
		return nil, err
	}
	b := f.files[req.Ino]
	if end := req.Offset + uint64(len(payload)); uint64(len(b)) < end {
		b = append(b, make([]byte, end-uint64(len(b)))...)
	}
	copy(b[req.Offset:], payload)
	f.files[req.Ino] = b
	return &wire.Msg{Trunc: f.gen[req.Ino]}, nil
}

// wait returns the next request that arrives, or fails the test.
func (f *fakeFwd) wait(t *testing.T) wire.Msg {
	t.Helper()
	select {
	case m := <-f.arrived:
		return m
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no request arrived", f.name)
		return wire.Msg{}
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
