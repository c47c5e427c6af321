package vfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire"
)

const ino = 42

var caller = ident.ID{Job: "7001", Rank: 3, Node: "cn1", App: "ior"}

func newStreams(f *fakeFwd, writeBehind, readahead int64) *Streams {
	return NewStreams(StreamConfig{WriteBehind: writeBehind, Readahead: readahead,
		Route: func(ident.ID, uint64) Caller { return f },
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// done runs f in the background and returns a channel closed when it ends.
func done(f func()) chan struct{} {
	ch := make(chan struct{})
	go func() { f(); close(ch) }()
	return ch
}

func blocked(t *testing.T, ch chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s, but it returned", why)
	case <-time.After(100 * time.Millisecond):
	}
}

func returns(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// Overlapping writes are never in flight together: the second waits for
// the first and lands after it; a write elsewhere in the file goes at once.
func TestWriteBehindOverlapOrder(t *testing.T) {
	f := newFakeFwd("fwd")
	s := newStreams(f, 1<<20, 0)
	release := f.hold(0)
	if err := s.Write(caller, ino, 1, 0, []byte("aaaa")); err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	second := done(func() {
		if err := s.Write(caller, ino, 1, 2, []byte("bb")); err != nil {
			t.Error(err)
		}
	})
	blocked(t, second, "a write overlapping one in flight must wait")
	if err := s.Write(caller, ino, 1, 100, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if m := f.wait(t); m.Offset != 100 {
		t.Fatalf("a disjoint write should go at once, got offset %d", m.Offset)
	}
	release()
	returns(t, second, "the overlapping write")
	if m := f.wait(t); m.Offset != 2 {
		t.Fatalf("want the overlapping write next, got offset %d", m.Offset)
	}
	if err := s.Drain(ino); err != nil {
		t.Fatal(err)
	}
	if got := f.bytes(ino)[:4]; string(got) != "aabb" {
		t.Fatalf("bytes %q, want %q (the later write must win)", got, "aabb")
	}
	if wb, _ := s.InFlight(); wb != 0 {
		t.Fatalf("%d write-behind bytes still counted after drain", wb)
	}
}

// The bytes in flight are bounded: past the bound a write waits for
// earlier ones even when they do not overlap.
func TestWriteBehindBound(t *testing.T) {
	f := newFakeFwd("fwd")
	s := newStreams(f, 8, 0)
	release := f.hold(0)
	if err := s.Write(caller, ino, 1, 0, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	second := done(func() { _ = s.Write(caller, ino, 1, 100, make([]byte, 8)) })
	blocked(t, second, "a write past the write-behind bound must wait")
	if wb, _ := s.InFlight(); wb != 8 {
		t.Fatalf("in flight %d, want 8", wb)
	}
	release()
	returns(t, second, "the second write")
	if err := s.Drain(ino); err != nil {
		t.Fatal(err)
	}
}

// Fsync and close drain: they wait for every write in flight and get the
// error a background write met, once; the inode is clean after that.
func TestDrainWaitsAndReportsOnce(t *testing.T) {
	f := newFakeFwd("fwd")
	s := newStreams(f, 1<<20, 0)
	f.fail[4096] = syscall.EIO
	release := f.hold(0)
	for _, off := range []uint64{0, 4096} {
		if err := s.Write(caller, ino, 1, off, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	d := done(func() { err = s.Drain(ino) })
	blocked(t, d, "drain must wait for the write still on the wire")
	if !s.HasWrites(ino) {
		t.Fatal("HasWrites false with a write on the wire")
	}
	release()
	returns(t, d, "drain")
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("drain: %v, want the background write's EIO", err)
	}
	if err := s.Drain(ino); err != nil {
		t.Fatalf("second drain: %v, want nil (the error is reported once)", err)
	}
}

// A background write's error comes back on the inode's next write when no
// flush came between.
func TestWriteBehindErrorOnNextWrite(t *testing.T) {
	f := newFakeFwd("fwd")
	s := newStreams(f, 1<<20, 0)
	f.fail[0] = syscall.ENOSPC
	if err := s.Write(caller, ino, 1, 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	s.WaitWrites(ino, 0, 0)
	if err := s.Write(caller, ino, 1, 1, []byte("y")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("next write: %v, want ENOSPC", err)
	}
	if err := s.Drain(ino); err != nil {
		t.Fatalf("drain after the error was returned: %v", err)
	}
}

// Truncate waits for the writes in flight (the adapter calls WaitWrites
// before its setattr), and extents follow the truncation generation: a
// write acknowledged in an older generation than a truncate does not
// bring the old size back at close (issue 12's first bug, at the core).
func TestExtentsAcrossTruncate(t *testing.T) {
	for _, wb := range []int64{0, 1 << 20} {
		f := newFakeFwd("fwd")
		s := newStreams(f, wb, 0)
		const fh = 1
		if err := s.Write(caller, ino, fh, 8<<20, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		s.WaitWrites(ino, 0, 0)
		if e, ok := s.ExtentOf(fh); !ok || e != (Extent{Ino: ino, Gen: 0, End: 9 << 20}) {
			t.Fatalf("wb=%d: extent %+v %v after the first write", wb, e, ok)
		}
		// a write that lands before the truncate but is acknowledged after it
		if wb > 0 {
			release := f.hold(5 << 20)
			if err := s.Write(caller, ino, fh, 5<<20, make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
			f.wait(t)
			trunc := done(func() { s.WaitWrites(ino, 0, 0) })
			blocked(t, trunc, "a truncate must wait for the writes in flight")
			gen := f.truncate(ino, 100)
			s.Truncated(ino, gen) // (out of order on purpose: the late ack below must not undo it)
			release()
			returns(t, trunc, "the truncate's wait")
		} else {
			s.Truncated(ino, f.truncate(ino, 100))
		}
		if e, _ := s.ExtentOf(fh); e.Gen != 1 || e.End != 0 {
			t.Fatalf("wb=%d: extent %+v after truncate, want gen 1 end 0 (the 9 MiB must not come back)", wb, e)
		}
		if err := s.Write(caller, ino, fh, 200, []byte("z")); err != nil {
			t.Fatal(err)
		}
		s.WaitWrites(ino, 0, 0)
		e, _ := s.ExtentOf(fh)
		if e != (Extent{Ino: ino, Gen: 1, End: 201}) {
			t.Fatalf("wb=%d: extent %+v, want gen 1 end 201", wb, e)
		}
		// a flush reports e; a write after it keeps its own extent
		if err := s.Write(caller, ino, fh, 300, []byte("w")); err != nil {
			t.Fatal(err)
		}
		s.WaitWrites(ino, 0, 0)
		s.Flushed(fh, e)
		if e2, ok := s.ExtentOf(fh); !ok || e2.End != 301 {
			t.Fatalf("wb=%d: a flush of an older extent forgot a newer one: %+v %v", wb, e2, ok)
		}
		e2, _ := s.ExtentOf(fh)
		s.Flushed(fh, e2)
		if _, ok := s.ExtentOf(fh); ok {
			t.Fatalf("wb=%d: extent kept after its flush", wb)
		}
	}
}

// Truncated only voids extents of older generations and of its inode.
func TestTruncatedScope(t *testing.T) {
	f := newFakeFwd("fwd")
	s := newStreams(f, 0, 0)
	f.truncate(ino, 0)
	f.truncate(ino, 0) // gen 2
	if err := s.Write(caller, ino, 1, 0, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(caller, ino+1, 2, 0, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	s.Truncated(ino, 1) // an older truncate's reply, arriving late
	if e, _ := s.ExtentOf(1); e.End != 3 || e.Gen != 2 {
		t.Fatalf("an older generation voided a newer extent: %+v", e)
	}
	s.Truncated(ino, 3)
	if e, _ := s.ExtentOf(2); e.End != 3 {
		t.Fatalf("a truncate of another inode voided this one's extent: %+v", e)
	}
	s.Released(ino, 1)
	if _, ok := s.ExtentOf(1); ok {
		t.Fatal("extent kept after release")
	}
}

func fill(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// A sequential reader gets data fetched ahead of it and served without a
// round trip; the data is the file's; a random read drops the run.
func TestReadaheadSequential(t *testing.T) {
	f := newFakeFwd("fwd")
	data := fill(4 << 20)
	f.files[ino] = data
	s := newStreams(f, 0, 1<<20)
	const fh, unit = 7, 128 << 10
	if h := s.Readahead(caller, ino, fh, 0, unit); h != nil {
		t.Fatal("first read served from readahead")
	}
	if n := f.ops(ns.OpRead); n != 0 {
		t.Fatalf("first read fetched ahead (%d fetches)", n)
	}
	if h := s.Readahead(caller, ino, fh, unit, unit); h != nil {
		t.Fatal("second read served before any fetch")
	}
	hits := 0
	for off := 2 * unit; off < 4<<20; off += unit {
		h := s.Readahead(caller, ino, fh, uint64(off), unit)
		if h == nil {
			continue
		}
		hits++
		if !bytes.Equal(h.Data, data[off:off+unit]) {
			t.Fatalf("readahead at %d returned wrong bytes", off)
		}
		h.Release()
	}
	if want := (4<<20)/unit - 2; hits != want {
		t.Fatalf("%d of %d sequential reads served from readahead", hits, want)
	}
	if _, ra := s.InFlight(); ra > 8<<20 {
		t.Fatalf("readahead holds %d bytes", ra)
	}
	// a jump elsewhere starts over: no hit, buffers dropped
	if h := s.Readahead(caller, ino, fh, 100, 10); h != nil {
		t.Fatal("a random read was served from readahead")
	}
	s.Released(ino, fh)
	if _, ra := s.InFlight(); ra != 0 {
		t.Fatalf("%d readahead bytes held after release", ra)
	}
}

// A write through this node drops the inode's readahead, in either write
// mode, so a reader never gets bytes older than a write this node
// acknowledged.
func TestReadaheadDroppedByWrite(t *testing.T) {
	for _, wb := range []int64{0, 1 << 20} {
		f := newFakeFwd("fwd")
		f.files[ino] = fill(2 << 20)
		s := newStreams(f, wb, 1<<20)
		const fh, unit = 7, 128 << 10
		for off := 0; off < 3*unit; off += unit {
			if h := s.Readahead(caller, ino, fh, uint64(off), unit); h != nil {
				h.Release()
			}
		}
		s.WaitWrites(ino, 0, 0)
		// let the fetches land, then overwrite what they fetched
		time.Sleep(50 * time.Millisecond)
		if err := s.Write(caller, ino, 99, 3*unit, bytes.Repeat([]byte{0xEE}, unit)); err != nil {
			t.Fatal(err)
		}
		s.WaitWrites(ino, 0, 0)
		if h := s.Readahead(caller, ino, fh, 3*unit, unit); h != nil {
			stale := !bytes.Equal(h.Data, bytes.Repeat([]byte{0xEE}, unit))
			h.Release()
			if stale {
				t.Fatalf("wb=%d: read after a write served the old bytes from readahead", wb)
			}
		}
	}
}

// No fetch goes out while the inode has writes in flight, nor past an end
// of file seen; ReadPast forgets that end when the file grew.
func TestReadaheadWritesAndEOF(t *testing.T) {
	f := newFakeFwd("fwd")
	f.files[ino] = fill(300 << 10)
	s := newStreams(f, 1<<20, 8<<20)
	const fh, unit = 7, 128 << 10
	release := f.hold(2 << 20)
	if err := s.Write(caller, ino, 9, 2<<20, []byte("x")); err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	s.Readahead(caller, ino, fh, 0, unit)
	s.Readahead(caller, ino, fh, unit, unit)
	f.quiet(t, 100*time.Millisecond, "no readahead while writes are in flight")
	release()
	s.WaitWrites(ino, 0, 0)
	f.truncate(ino, 300<<10)

	// the first window goes out before the end of file is known
	if h := s.Readahead(caller, ino, fh, 2*unit, unit); h != nil {
		h.Release()
	}
	time.Sleep(50 * time.Millisecond)
	f.mu.Lock()
	sent := len(f.calls)
	f.mu.Unlock()
	// once a fetch came back short, none goes past where it ended
	for off := 3 * unit; off < 6*unit; off += unit {
		if h := s.Readahead(caller, ino, fh, uint64(off), unit); h != nil {
			h.Release()
		}
	}
	time.Sleep(50 * time.Millisecond)
	f.mu.Lock()
	late := f.calls[sent:]
	f.mu.Unlock()
	for _, m := range late {
		if m.Op == ns.OpRead && m.Offset >= 300<<10 {
			t.Fatalf("fetch at %d after the end of file was seen at 300 KiB", m.Offset)
		}
	}
	// the file grew and a direct read saw it: fetching resumes
	f.mu.Lock()
	f.files[ino] = append(f.files[ino], fill(2<<20)...)
	f.mu.Unlock()
	f.drain()
	s.ReadPast(ino, fh, 7*unit)
	if h := s.Readahead(caller, ino, fh, 6*unit, unit); h != nil {
		h.Release()
	}
	if m := f.wait(t); m.Op != ns.OpRead || m.Offset < 7*unit {
		t.Fatalf("after ReadPast: %v at %d, want a fetch ahead", m.Op, m.Offset)
	}
}

// jobCaller holds every write until released and counts what each job has
// in flight.
type jobCaller struct {
	mu       sync.Mutex
	inflight map[string]int
	release  chan struct{}
}

func (c *jobCaller) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	job := req.(ns.Request).Header().Who.Job
	c.mu.Lock()
	c.inflight[job]++
	c.mu.Unlock()
	<-c.release
	c.mu.Lock()
	c.inflight[job]--
	c.mu.Unlock()
	return nil, nil
}

func (c *jobCaller) count(job string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight[job]
}

// TestWriteBehindFairAcrossJobs: a job that filled the mount's window
// gives a job that comes to write an equal part of it as its writes end,
// rather than taking the room back for its own waiting writes (which
// would keep the other job's requests from the servers that schedule
// jobs by their shares).
func TestWriteBehindFairAcrossJobs(t *testing.T) {
	c := &jobCaller{inflight: map[string]int{}, release: make(chan struct{})}
	const unit = 1 << 10
	s := NewStreams(StreamConfig{WriteBehind: 8 * unit, Route: func(ident.ID, uint64) Caller { return c },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	writer := func(job string, ino uint64) {
		defer wg.Done()
		id := ident.ID{Job: job}
		for off := uint64(0); ; off += unit {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Write(id, ino, ino, off, make([]byte, unit)); err != nil {
				t.Error(err)
				return
			}
		}
	}
	eventually := func(what string, f func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !f(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: A has %d in flight, B %d", what, c.count("A"), c.count("B"))
			}
		}
	}
	wg.Add(6)
	for r := uint64(0); r < 3; r++ {
		go writer("B", 100+r)
	}
	eventually("B fills the window", func() bool { return c.count("B") == 8 })
	for r := uint64(0); r < 3; r++ {
		go writer("A", 200+r)
	}
	time.Sleep(50 * time.Millisecond) // A's writers wait for room
	for i := 0; i < 4; i++ {
		c.release <- struct{}{} // one of B's ends
		eventually("the room goes to A", func() bool { return c.count("A") == i+1 })
	}
	time.Sleep(20 * time.Millisecond)
	if a, b := c.count("A"), c.count("B"); a != 4 || b != 4 {
		t.Fatalf("after four of B's writes ended: A has %d in flight, B %d (want 4 and 4)", a, b)
	}
	close(stop)
	go func() {
		for {
			select {
			case c.release <- struct{}{}:
			case <-time.After(time.Second):
				return
			}
		}
	}()
	wg.Wait()
}

// ptrCaller records where each write's payload lay in memory.
type ptrCaller struct {
	*fakeFwd
	mu  sync.Mutex
	ptr []*byte
}

func (c *ptrCaller) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	c.mu.Lock()
	c.ptr = append(c.ptr, unsafe.SliceData(payload))
	c.mu.Unlock()
	return c.fakeFwd.Invoke(ctx, op, req, rep, payload, into)
}

// A write handed over (WriteKept: go-fuse's request buffer) goes out from
// the caller's memory itself, and release comes once, after the answer;
// one not on whole pages, or not in the background, is released at once
// (copied first for the background).
func TestWriteKept(t *testing.T) {
	f := newFakeFwd("fwd")
	c := &ptrCaller{fakeFwd: f}
	route := func(ident.ID, uint64) Caller { return c }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := make([]byte, KeepMin+4*4096)
	al := mem[4096-int(uintptr(unsafe.Pointer(&mem[0]))%4096):] // on a page
	for i := range al {
		al[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name        string
		writeBehind int64
		data        []byte
		kept        bool // sent from data itself, released after the answer
	}{
		{"background, whole pages", 1 << 20, al[:KeepMin+100], true},
		{"background, small", 1 << 20, al[:6000], false},
		{"background, not on a page", 1 << 20, al[1 : KeepMin+101], false},
		{"foreground", 0, al[:KeepMin+100], false},
	} {
		s := NewStreams(StreamConfig{WriteBehind: tc.writeBehind, Route: route, Log: log})
		var released atomic.Int32
		hold := f.hold(0)
		res := done(func() {
			if err := s.WriteKept(caller, ino, 1, 0, tc.data, func() { released.Add(1) }); err != nil {
				t.Error(err)
			}
		})
		if tc.writeBehind > 0 {
			returns(t, res, tc.name+": WriteKept")
			if got, want := released.Load() == 0, tc.kept; got != want {
				t.Errorf("%s: still held while the write waits: %v, want %v", tc.name, got, want)
			}
		}
		hold()
		returns(t, res, tc.name+": WriteKept")
		s.WaitWrites(ino, 0, ^uint64(0))
		time.Sleep(10 * time.Millisecond) // the release follows the answer
		if n := released.Load(); n != 1 {
			t.Errorf("%s: released %d times", tc.name, n)
		}
		c.mu.Lock()
		sent := c.ptr[len(c.ptr)-1] == unsafe.SliceData(tc.data)
		c.mu.Unlock()
		if sent != (tc.kept || tc.writeBehind == 0) {
			t.Errorf("%s: sent from the caller's memory: %v", tc.name, sent)
		}
		if got := s.Kept(); got != map[bool]uint64{true: 1, false: 0}[tc.kept] {
			t.Errorf("%s: %d writes kept", tc.name, got)
		}
		if !bytes.Equal(f.bytes(ino)[:len(tc.data)], tc.data) {
			t.Errorf("%s: the bytes written differ", tc.name)
		}
	}
}

// sinkFwd is fakeFwd answering InvokeSink: a read's payload goes through a
// real unix socket into the sink, as on the mount's connection.
type sinkFwd struct {
	*fakeFwd
	t *testing.T
}

func (f sinkFwd) InvokeSink(ctx context.Context, op wire.Op, req, rep wire.Message, payload []byte, sink rpc.Sink) error {
	buf := make([]byte, req.(*ns.IOReq).Len)
	p, err := f.Invoke(ctx, op, req, rep, payload, buf)
	if err != nil || len(p) == 0 {
		return err
	}
	dir := f.t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(p[100:]) // the first 100 bytes came with the frame's head
	}()
	conn, err := ln.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := sink(len(p), p[:100], conn); err != nil {
		return &rpc.SinkError{Err: err}
	}
	return nil
}

// TestReadaheadPipes: with SpliceReads, fetches made for reads of their
// size land in pipes; a read that takes one whole gets the pipe (its
// bytes right, the buffer spent: a second read of it goes direct), and a
// read of part of one gets its bytes from memory.
func TestReadaheadPipes(t *testing.T) {
	if !zerocopy.BigPipes() {
		t.Skip("pipes hold at most 1 MiB here (pipe-max-size, no CAP_SYS_RESOURCE)")
	}
	f := newFakeFwd("fwd")
	data := fill(6 << 20)
	f.files[ino] = data
	s := NewStreams(StreamConfig{Readahead: 4 << 20, SpliceReads: true,
		Route: func(ident.ID, uint64) Caller { return sinkFwd{f, t} }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const fh, unit = 7, 1 << 20
	piped := 0
	for off := 0; off < 4<<20; off += unit {
		h := s.Readahead(caller, ino, fh, uint64(off), unit)
		if h == nil {
			continue
		}
		got := h.Data
		if h.Pipe != nil {
			piped++
			got = make([]byte, h.N)
			if err := h.Pipe.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, data[off:off+unit]) {
			t.Fatalf("read at %d: wrong bytes (pipe %v)", off, h.Pipe != nil)
		}
		h.Release()
	}
	if piped == 0 || s.Spliced() != uint64(piped) {
		t.Fatalf("%d reads took a pipe whole, Spliced says %d", piped, s.Spliced())
	}
	// a read of the first half of a fetched buffer: from memory
	time.Sleep(50 * time.Millisecond) // the fetches ahead land
	h := s.Readahead(caller, ino, fh, 4<<20, unit/2)
	if h == nil || h.Pipe != nil || !bytes.Equal(h.Data, data[4<<20:4<<20+unit/2]) {
		t.Fatalf("a part of a piped buffer: %+v", h)
	}
	h.Release()
	// and its second half from the same buffer, now in memory
	h = s.Readahead(caller, ino, fh, 4<<20+unit/2, unit/2)
	if h == nil || !bytes.Equal(h.Data, data[4<<20+unit/2:5<<20]) {
		t.Fatalf("the rest of a buffer read into memory: %+v", h)
	}
	h.Release()
	s.Released(ino, fh)
	if _, ra := s.InFlight(); ra != 0 {
		t.Fatalf("%d readahead bytes held after release", ra)
	}
}
