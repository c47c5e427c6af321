package vfs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
)

// Streaming I/O: write-behind and readahead.
//
// Write-behind: a write is copied into a pooled buffer and sent to the
// forwarding node in the background; the caller gets its byte count at
// once, as from a page cache. At most Config.WriteBehind bytes are in
// flight per mount (the caller blocks beyond that), and while several
// jobs write through the mount none holds more than an equal part of them
// when another waits: the forwarding daemons and data servers schedule
// jobs by their QoS shares, which they can only do with every job's
// requests in front of them (one job's slow-draining writes would
// otherwise fill the mount's window and starve the others). Writes to overlapping
// ranges of one inode are never in flight together, so they land in the
// order they were made. A background write that fails leaves its error on
// the inode; the next write, flush (close) or fsync of the inode returns
// it. Flush, fsync, release, getattr, setattr and lookup wait for the
// inode's writes first, and a read for those that end past its start (they
// decide what it returns, bytes or a shorter size), so this node always
// sees its own writes and sizes, and close and fsync keep their meaning
// (close-to-open consistency; fsync = durable on the tier's medium).
//
// Readahead: a handle that reads sequentially gets the next
// Config.Readahead bytes fetched ahead of it, in read-sized requests that
// travel through the forwarding node concurrently; a later read is served
// from a fetched buffer without a round trip. Buffers belong to one open
// handle (dropped at release), are dropped by any write or truncation of
// the inode through this node, and are never fetched while the inode has
// writes in flight.

// StreamConfig configures Streams.
type StreamConfig struct {
	// WriteBehind bounds the bytes of writes in flight in the background
	// (<= 0: every write waits for its forwarding node).
	WriteBehind int64
	// Readahead is how far ahead of a sequential reader data is fetched,
	// per open handle (<= 0: no readahead).
	Readahead int64
	Route     Route // where a request goes
	Log       *slog.Logger
	// SpliceReads keeps a readahead fetch that a read will take whole in
	// a pipe (zerocopy.Pipe, through a route that is a SinkCaller): the
	// bytes go from the forwarding node's socket to the FUSE device
	// without passing through the mount (Hit.Pipe).
	SpliceReads bool
}

// Streams is the mount's streaming I/O state.
type Streams struct {
	cfg StreamConfig

	mu   sync.Mutex // guards io, wbBytes, raBytes, the jobs' and the state under io
	cond *sync.Cond // on mu: a background write or fetch ended
	io   map[uint64]*inodeIO
	// wbBytes is the write-behind data in flight; raBytes the readahead
	// buffers held (at most raMax).
	wbBytes, raBytes, raMax int64
	// wbJob is the write-behind data in flight per job, wbWait how many
	// writes of each job wait for room.
	wbJob  map[string]int64
	wbWait map[string]int

	kept    atomic.Uint64 // background writes sent from the caller's buffer (WriteKept)
	spliced atomic.Uint64 // readahead buffers taken whole from their pipe (Hit.Pipe)

	emu sync.Mutex // guards written and the extents in it
	// written maps each open file handle that wrote since its last flush
	// to how far its acknowledged writes reached.
	written map[uint64]*extent
}

// NewStreams returns the streaming state of a mount.
func NewStreams(cfg StreamConfig) *Streams {
	s := &Streams{cfg: cfg, io: map[uint64]*inodeIO{}, raMax: max(8*cfg.Readahead, 64<<20), written: map[uint64]*extent{},
		wbJob: map[string]int64{}, wbWait: map[string]int{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// InFlight returns the bytes of writes in flight in the background and of
// readahead buffers held.
func (s *Streams) InFlight() (writeBehind, readahead int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wbBytes, s.raBytes
}

// Write writes data at off of ino for handle fh of caller id: in the
// background (write-behind) unless that is off. An error is an earlier
// background write's, or this write's when it is not in the background.
// Either way the write drops the inode's readahead and counts as in flight
// until acknowledged, so no fetch runs beside it and no read is served
// bytes older than it.
func (s *Streams) Write(id ident.ID, ino, fh, off uint64, data []byte) error {
	return s.WriteKept(id, ino, fh, off, data, nil)
}

// WriteKept is Write with data the caller hands over (go-fuse's request
// buffer, fuse.WriteOwner): a write in the background keeps and sends
// data itself instead of a copy, and release (if not nil) is called once
// when nothing reads data any more: at once if the write is not in the
// background or data is not whole pages (the copy then goes), else once
// the write is answered. data is not to be changed until then.
func (s *Streams) WriteKept(id ident.ID, ino, fh, off uint64, data []byte, release func()) error {
	return s.WriteAfter(id, ino, fh, off, data, release, nil)
}

// WriteAfter is WriteKept, with before (if not nil) called just before
// the write is sent: in the background for a write in the background
// (the creates the write depends on are sent there, Creates.Settle, so
// the caller does not wait for them).
func (s *Streams) WriteAfter(id ident.ID, ino, fh, off uint64, data []byte, release, before func()) error {
	handed := release != nil
	if !handed {
		release = func() {}
	}
	s.writing(fh, ino)
	background := s.cfg.WriteBehind > 0
	w, err := s.begin(id.Job, ino, off, uint64(len(data)), background)
	if err != nil {
		release()
		return err
	}
	if !background {
		if before != nil {
			before()
		}
		err := s.send(id, ino, fh, w, data, false)
		release()
		return err
	}
	// a buffer sent by reference must be whole pages (zerocopy.Detach),
	// and a small write is copied (KeepMin)
	buf, done := zerocopy.WholePages(data), release
	if !handed || buf == nil || len(data) < KeepMin {
		buf = bufpool.Get(len(data))
		copy(buf, data)
		done = func() { bufpool.Put(buf) }
		release()
	} else {
		s.kept.Add(1)
	}
	go func() {
		if before != nil {
			before()
		}
		if err := s.send(id, ino, fh, w, buf, true); err != nil {
			s.cfg.Log.Error("background write failed", "ino", ino, "off", off, "len", len(buf), "err", err)
		}
		done()
	}()
	return nil
}

// KeepMin is the smallest write sent from the buffer it came in
// (WriteKept) rather than copied: a kept write holds that whole buffer
// (go-fuse's request buffer, MaxWrite and a page) until it is answered,
// and small files' writes in the background (write-back closes) held
// hundreds of them: the mount's memory grew from 135-174 to 414-521 MiB
// over 80,000 files of 4 KiB, 315 MB of it request buffers.
const KeepMin = 64 << 10

// Kept is how many background writes went out from the buffer they came
// in (WriteKept), without a copy.
func (s *Streams) Kept() uint64 { return s.kept.Load() }

// Extent is how far a handle's acknowledged writes reached, in the
// truncation generation they landed in (wire.Attr.Trunc): writes of an
// older generation than a truncate's do not count after it. Flush and
// fsync send it along, so the file's size survives a restart of the
// forwarding node in between.
type Extent struct{ Ino, Gen, End uint64 }

type extent = Extent

// writing notes that handle fh writes ino (before the write is sent, so
// its flush waits for it).
func (s *Streams) writing(fh, ino uint64) {
	s.emu.Lock()
	if s.written[fh] == nil {
		s.written[fh] = &extent{Ino: ino}
	}
	s.emu.Unlock()
}

// wrote records an acknowledged write of handle fh that reached end in
// truncation generation gen.
func (s *Streams) wrote(fh, gen, end uint64) {
	s.emu.Lock()
	if e := s.written[fh]; e != nil {
		switch {
		case gen > e.Gen:
			e.Gen, e.End = gen, end
		case gen == e.Gen && end > e.End:
			e.End = end
		}
	}
	s.emu.Unlock()
}

// Truncated voids the extents of ino's handles older than a truncate to
// generation gen made through this mount.
func (s *Streams) Truncated(ino, gen uint64) {
	s.emu.Lock()
	for _, e := range s.written {
		if e.Ino == ino && gen > e.Gen {
			e.Gen, e.End = gen, 0
		}
	}
	s.emu.Unlock()
}

// ExtentOf returns handle fh's extent (ok false if it wrote nothing since
// its last flush).
func (s *Streams) ExtentOf(fh uint64) (Extent, bool) {
	s.emu.Lock()
	defer s.emu.Unlock()
	if e := s.written[fh]; e != nil {
		return *e, true
	}
	return Extent{}, false
}

// WrittenHandles lists the handles of ino with writes not yet reported.
func (s *Streams) WrittenHandles(ino uint64) []uint64 {
	s.emu.Lock()
	defer s.emu.Unlock()
	var out []uint64
	for fh, e := range s.written {
		if e.Ino == ino {
			out = append(out, fh)
		}
	}
	return out
}

// Flushed forgets handle fh's extent if it is still e (reported).
func (s *Streams) Flushed(fh uint64, e Extent) {
	s.emu.Lock()
	if cur := s.written[fh]; cur != nil && *cur == e {
		delete(s.written, fh)
	}
	s.emu.Unlock()
}

// Released forgets handle fh: its writes and its readahead.
func (s *Streams) Released(ino, fh uint64) {
	s.WaitWrites(ino, 0, 0)
	s.mu.Lock()
	s.dropReadaheadLocked(ino, fh)
	s.mu.Unlock()
	s.emu.Lock()
	delete(s.written, fh)
	s.emu.Unlock()
}

// pendingWrite is one write in flight.
type pendingWrite struct {
	off, end   uint64
	background bool   // write-behind: counted in wbBytes, its error kept
	job        string // whose (wbJob)
}

// inodeIO is the streaming state of one inode. Guarded by Streams.mu.
type inodeIO struct {
	writes map[*pendingWrite]struct{}
	err    error                 // first failed background write not yet reported
	ra     map[uint64]*readahead // by file handle
}

// ioLocked returns the streaming state of ino, creating it.
func (s *Streams) ioLocked(ino uint64) *inodeIO {
	st := s.io[ino]
	if st == nil {
		st = &inodeIO{writes: map[*pendingWrite]struct{}{}, ra: map[uint64]*readahead{}}
		s.io[ino] = st
	}
	return st
}

// tidyLocked forgets ino's state when nothing is left in it.
func (s *Streams) tidyLocked(ino uint64) {
	if st := s.io[ino]; st != nil && len(st.writes) == 0 && st.err == nil && len(st.ra) == 0 {
		delete(s.io, ino)
	}
}

func overlapsLocked(st *inodeIO, off, end uint64) bool {
	for w := range st.writes {
		if w.off < end && off < w.end {
			return true
		}
	}
	return false
}

// waitWrites blocks until no write of ino overlapping [off, end) is in
// flight (end 0: the whole file).
func (s *Streams) WaitWrites(ino, off, end uint64) {
	if end == 0 {
		end = ^uint64(0)
	}
	s.mu.Lock()
	for {
		st := s.io[ino]
		if st == nil || !overlapsLocked(st, off, end) {
			break
		}
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// drain waits for every write of ino and returns (and clears) the error a
// background write met.
func (s *Streams) Drain(ino uint64) error {
	s.WaitWrites(ino, 0, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.io[ino]
	if st == nil || st.err == nil {
		return nil
	}
	err := st.err
	st.err = nil
	s.tidyLocked(ino)
	return err
}

// Failed reports whether a background write of ino failed and its error
// was not yet returned.
func (s *Streams) Failed(ino uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.io[ino]
	return st != nil && st.err != nil
}

// KeepErr leaves err on ino for its next write, flush or fsync to return
// (a close that returned before its writes failed: Drain took err), unless
// another error waits there already.
func (s *Streams) KeepErr(ino uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.ioLocked(ino); st.err == nil {
		st.err = err
	}
}

// HasWrites reports whether ino has writes in flight.
func (s *Streams) HasWrites(ino uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.io[ino]
	return st != nil && len(st.writes) > 0
}

// begin registers a write of n bytes at off of ino as in flight, once no
// overlapping write is (and, for a background one, once it fits the
// write-behind bound). It returns instead the error a background write of
// the inode met and nobody was told yet.
func (s *Streams) begin(job string, ino, off, n uint64, background bool) (*pendingWrite, error) {
	end := off + n
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.ioLocked(ino)
	if err := st.err; err != nil {
		st.err = nil
		s.tidyLocked(ino)
		return nil, err
	}
	s.dropReadaheadLocked(ino, 0)
	for waiting := false; ; { // waiting: counted in wbWait, for room
		st = s.ioLocked(ino)
		fits := !background || s.fitsLocked(job, int64(n))
		if waiting != !fits {
			if waiting = !fits; waiting {
				s.wbWait[job]++
			} else if s.wbWait[job]--; s.wbWait[job] == 0 {
				delete(s.wbWait, job)
			}
		}
		if fits && !overlapsLocked(st, off, end) {
			break
		}
		s.cond.Wait()
	}
	w := &pendingWrite{off: off, end: end, background: background, job: job}
	st.writes[w] = struct{}{}
	if background {
		s.wbBytes += int64(n)
		s.wbJob[job] += int64(n)
	}
	return w, nil
}

// fitsLocked says whether n more bytes of job's write-behind go in flight
// now: the mount's window has room, and the job holds no more than its
// equal part of the window while another job waits. A job with nothing in
// flight always fits a window that has room (or is empty). Caller holds mu.
func (s *Streams) fitsLocked(job string, n int64) bool {
	if s.wbBytes == 0 {
		return true
	}
	if s.wbBytes+n > s.cfg.WriteBehind {
		return false
	}
	held := s.wbJob[job]
	if held == 0 {
		return true
	}
	others := false
	jobs := map[string]bool{job: true}
	for j, w := range s.wbWait {
		if j != job && w > 0 {
			others, jobs[j] = true, true
		}
	}
	if !others {
		return true
	}
	for j := range s.wbJob {
		jobs[j] = true
	}
	return held+n <= s.cfg.WriteBehind/int64(len(jobs))
}

// send sends write w and ends it. A background write's error stays on the
// inode for its next write, flush or fsync; a foreground one's is returned.
// pooled says data is a bufpool buffer of the caller's, which may then go
// by reference (PageCaller) and is not to be read afterwards.
func (s *Streams) send(id ident.ID, ino, fh uint64, w *pendingWrite, data []byte, pooled bool) error {
	m := &ns.IOReq{Head: ns.Head{Who: id}, Ino: ino, Off: w.off, Len: uint64(len(data))}
	resp := &ns.IORep{}
	var err error
	c := s.cfg.Route(id, ino)
	if pc, ok := c.(PageCaller); ok && pooled {
		_, err = pc.InvokePages(context.Background(), ns.OpWrite, m, resp, data, nil)
	} else {
		_, err = c.Invoke(context.Background(), ns.OpWrite, m, resp, data, nil)
	}
	if err == nil {
		s.wrote(fh, resp.Trunc, w.end)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.io[ino]
	delete(st.writes, w)
	if w.background {
		if err != nil && st.err == nil {
			st.err = err
		}
		s.wbBytes -= int64(w.end - w.off)
		if s.wbJob[w.job] -= int64(w.end - w.off); s.wbJob[w.job] == 0 {
			delete(s.wbJob, w.job)
		}
	}
	s.tidyLocked(ino)
	s.cond.Broadcast()
	return err
}
