package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
)

// Readahead: data fetched ahead of a sequential reader into buffers
// (memory, or a pipe the reply splices from), taken by the reads they
// cover.

// DropReadahead drops every readahead buffer of ino (a truncate, or
// another node changed the file).
func (s *Streams) DropReadahead(ino uint64) {
	s.mu.Lock()
	s.dropReadaheadLocked(ino, 0)
	s.mu.Unlock()
}

// DropAllReadahead drops every readahead buffer (changes made by other
// nodes may have been missed).
func (s *Streams) DropAllReadahead() {
	s.mu.Lock()
	for ino := range s.io {
		s.dropReadaheadLocked(ino, 0)
	}
	s.mu.Unlock()
}

// readahead is one handle's sequential-read state. Guarded by Streams.mu.
type readahead struct {
	next uint64   // offset right after the last read
	seq  int      // consecutive sequential reads
	eof  uint64   // a fetch came back short here (0: not seen)
	bufs []*raBuf // fetched or in-flight windows, by offset
}

// raBuf is one readahead fetch. off and size are fixed at creation; the
// other fields are guarded by Streams.mu, done is closed when the fetch ends.
type raBuf struct {
	off  uint64
	size int
	// whole: made for reads of its size, so a read takes it whole and the
	// fetch may keep it in a pipe (StreamConfig.SpliceReads)
	whole bool
	done  chan struct{}
	data  []byte // pooled, len = bytes fetched; nil if the fetch failed (or pipe holds them)
	// pipe holds the bytes fetched instead of data, until a read takes
	// it whole (Hit.Pipe) or reads it into data
	pipe    *zerocopy.Pipe
	err     error
	refs    int  // replies still sending from data
	dropped bool // no longer in its handle's list
	landed  bool // fetch finished
}

func (b *raBuf) end() uint64 { return b.off + uint64(b.size) }

// freeLocked gives data back to the pool once nothing uses it.
func (b *raBuf) freeLocked() {
	if b.dropped && b.landed && b.refs == 0 {
		if b.data != nil {
			bufpool.Put(b.data)
			b.data = nil
		}
		if b.pipe != nil {
			b.pipe.Release()
			b.pipe = nil
		}
	}
}

// dropReadaheadLocked drops every readahead buffer of ino (of one handle
// if fh != 0).
func (s *Streams) dropReadaheadLocked(ino, fh uint64) {
	st := s.io[ino]
	if st == nil {
		return
	}
	for h, ra := range st.ra {
		if fh != 0 && h != fh {
			continue
		}
		for _, b := range ra.bufs {
			s.dropBufLocked(b)
		}
		delete(st.ra, h)
	}
	s.tidyLocked(ino)
}

func (s *Streams) dropBufLocked(b *raBuf) {
	b.dropped = true
	s.raBytes -= int64(b.size)
	b.freeLocked()
}

// Hit is a read served from a readahead buffer: Data stays valid, and the
// buffer held, until Release. A read that takes a buffer kept in a pipe
// whole gets the pipe instead (Pipe, N bytes; Data nil): the reply is
// spliced from it (zerocopy.Pipe.SpliceReply), or read from it.
type Hit struct {
	s    *Streams
	b    *raBuf
	Data []byte
	Pipe *zerocopy.Pipe
	N    int
}

// Release gives the buffer back once the reply is sent.
func (h *Hit) Release() {
	if h.Pipe != nil {
		h.Pipe.Release()
	}
	h.s.mu.Lock()
	h.b.refs--
	h.b.freeLocked()
	h.s.mu.Unlock()
}

// Spliced returns how many reads took a readahead buffer whole from its
// pipe (StreamConfig.SpliceReads).
func (s *Streams) Spliced() uint64 { return s.spliced.Load() }

// readahead serves a read from a fetched buffer if it can, and starts
// fetches ahead of a sequential reader. It returns nil when the caller
// must read directly.
func (s *Streams) Readahead(id ident.ID, ino, fh, off uint64, size int) *Hit {
	s.mu.Lock()
	hit, fetch := s.planLocked(ino, fh, off, size)
	if hit != nil {
		hit.refs++
	}
	s.mu.Unlock()

	for _, b := range fetch {
		go s.fetch(id, ino, fh, b)
	}
	if hit == nil {
		return nil
	}
	<-hit.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(hit, off, size)
}

// planLocked finds the buffer of handle fh of ino that holds a read of
// size bytes at off (nil: none), drops the ones behind it, and adds the
// buffers to fetch ahead of it: while reads follow each other, a window
// growing with the run (2, 4, 8 ... reads) up to Readahead. Caller holds
// mu.
func (s *Streams) planLocked(ino, fh, off uint64, size int) (hit *raBuf, fetch []*raBuf) {
	end := off + uint64(size)
	st := s.ioLocked(ino)
	ra := st.ra[fh]
	if ra == nil {
		ra = &readahead{next: ^uint64(0)}
		st.ra[fh] = ra
	}
	keep := ra.bufs[:0]
	for _, b := range ra.bufs {
		switch {
		case b.end() <= off:
			s.dropBufLocked(b)
		default:
			if b.off <= off && end <= b.end() {
				hit = b
			}
			keep = append(keep, b)
		}
	}
	clear(ra.bufs[len(keep):])
	ra.bufs = keep
	if off == ra.next || hit != nil {
		ra.seq++
	} else {
		ra.seq = 0
		for _, b := range ra.bufs {
			s.dropBufLocked(b)
		}
		ra.bufs = nil
		ra.eof = 0
	}
	ra.next = end
	if ra.seq < 1 || len(st.writes) != 0 {
		return hit, nil
	}
	unit := max(size, 128<<10)
	window := uint64(s.cfg.Readahead)
	if ra.seq < 16 && uint64(unit)<<ra.seq < window {
		window = uint64(unit) << ra.seq
	}
	from := end
	if n := len(ra.bufs); n > 0 && ra.bufs[n-1].end() > from {
		from = ra.bufs[n-1].end()
	}
	for from < end+window && s.raBytes+int64(unit) <= s.raMax {
		if ra.eof != 0 && from >= ra.eof {
			break
		}
		b := &raBuf{off: from, size: unit, whole: unit == size, done: make(chan struct{})}
		ra.bufs = append(ra.bufs, b)
		s.raBytes += int64(unit)
		fetch = append(fetch, b)
		from += uint64(unit)
	}
	return hit, fetch
}

// takeLocked answers a read of size bytes at off from buffer hit, fetched:
// its pipe whole if the read takes all of it alone, else from memory; nil
// if the fetch failed. Caller holds mu and a reference to hit.
func (s *Streams) takeLocked(hit *raBuf, off uint64, size int) *Hit {
	if p := hit.pipe; p != nil {
		if off == hit.off && size >= p.Len() && hit.refs == 1 {
			// taken whole by this read: the buffer is spent
			hit.pipe = nil
			s.spliced.Add(1)
			return &Hit{s: s, b: hit, Pipe: p, N: p.Len()}
		}
		// a read of part of it, or two at once: into memory
		hit.data = bufpool.Get(max(p.Len(), 1))[:p.Len()]
		if err := p.ReadAt(hit.data, 0); err != nil {
			bufpool.Put(hit.data)
			hit.data, hit.err = nil, err
		}
		p.Release()
		hit.pipe = nil
	}
	if hit.err != nil || hit.data == nil {
		hit.refs--
		hit.freeLocked()
		return nil
	}
	lo := int(off - hit.off)
	hi := min(lo+size, len(hit.data))
	lo = min(lo, hi)
	return &Hit{s: s, b: hit, Data: hit.data[lo:hi]}
}

// readPast tells the readahead state that a direct read found data up to
// end, so an end of file seen earlier has moved.
func (s *Streams) ReadPast(ino, fh, end uint64) {
	s.mu.Lock()
	if st := s.io[ino]; st != nil {
		if ra := st.ra[fh]; ra != nil && ra.eof != 0 && end > ra.eof {
			ra.eof = 0
		}
	}
	s.mu.Unlock()
}

// fetch runs one readahead request.
func (s *Streams) fetch(id ident.ID, ino, fh uint64, b *raBuf) {
	m := &ns.IOReq{Head: ns.Head{Who: id}, Ino: ino, Off: b.off, Len: uint64(b.size)}
	c := s.cfg.Route(id, ino)
	if sc, ok := c.(SinkCaller); ok && s.cfg.SpliceReads && b.whole {
		s.fetchPipe(sc, m, ino, fh, b)
		return
	}
	buf := bufpool.Get(b.size)
	p, err := c.Invoke(context.Background(), ns.OpRead, m, &ns.IORep{}, nil, buf)
	s.mu.Lock()
	b.landed = true
	if err != nil {
		b.err = err
		bufpool.Put(buf)
		if len(p) > 0 && &p[0] != &buf[0] {
			bufpool.Put(p)
		}
	} else {
		if len(p) > 0 && &p[0] != &buf[0] {
			// the reply did not fit (cannot happen: size is ours)
			bufpool.Put(buf)
			buf = p
		}
		b.data = buf[:len(p)]
		if len(p) < b.size {
			if st := s.io[ino]; st != nil {
				if ra := st.ra[fh]; ra != nil && (ra.eof == 0 || b.off+uint64(len(p)) < ra.eof) {
					ra.eof = b.off + uint64(len(p))
				}
			}
		}
	}
	close(b.done)
	b.freeLocked()
	s.mu.Unlock()
}

// fetchPipe runs one readahead request whose answer goes into a pipe,
// straight off the connection (into memory if no pipe can hold it).
func (s *Streams) fetchPipe(sc SinkCaller, m *ns.IOReq, ino, fh uint64, b *raBuf) {
	var pipe *zerocopy.Pipe
	var data []byte
	err := sc.InvokeSink(context.Background(), ns.OpRead, m, &ns.IORep{}, nil, func(n int, prefix []byte, conn net.Conn) error {
		if n > b.size {
			return fmt.Errorf("a read of %d bytes answered with %d", b.size, n)
		}
		if p := zerocopy.NewPipe(n); p != nil {
			err := p.Fill(prefix, conn, n)
			if err == nil && p.Single() {
				pipe = p
				return nil
			}
			if err != nil && !errors.Is(err, zerocopy.ErrPipeFull) {
				p.Release()
				return err
			}
			// it took several pipes (small pieces): the bytes into memory
			data = bufpool.Get(n)[:n]
			got := p.Len()
			rerr := p.ReadAt(data[:got], 0)
			p.Release()
			if rerr != nil {
				return rerr
			}
			_, err = io.ReadFull(conn, data[got:])
			return err
		}
		data = bufpool.Get(n)[:n]
		k := copy(data, prefix)
		_, err := io.ReadFull(conn, data[k:])
		return err
	})
	s.mu.Lock()
	b.landed = true
	n := 0
	switch {
	case err != nil:
		b.err = err
		if pipe != nil {
			pipe.Release()
		}
		if data != nil {
			bufpool.Put(data)
		}
	case pipe != nil:
		b.pipe, n = pipe, pipe.Len()
	default:
		if data == nil { // nothing past the end
			data = bufpool.Get(1)[:0]
		}
		b.data, n = data, len(data)
	}
	if err == nil && n < b.size {
		if st := s.io[ino]; st != nil {
			if ra := st.ra[fh]; ra != nil && (ra.eof == 0 || b.off+uint64(n) < ra.eof) {
				ra.eof = b.off + uint64(n)
			}
		}
	}
	close(b.done)
	b.freeLocked()
	s.mu.Unlock()
}
