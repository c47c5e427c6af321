package client

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Streaming I/O: write-behind and readahead.
//
// Write-behind: a write is copied into a pooled buffer and sent to the
// forwarding node in the background; the caller gets its byte count at
// once, as from a page cache. At most Config.WriteBehind bytes are in
// flight per mount (the caller blocks beyond that). Writes to overlapping
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

// pendingWrite is one background write in flight.
type pendingWrite struct{ off, end uint64 }

// inodeIO is the streaming state of one inode. Guarded by FS.iomu.
type inodeIO struct {
	writes map[*pendingWrite]struct{}
	err    error                 // first failed background write not yet reported
	ra     map[uint64]*readahead // by file handle
}

// readahead is one handle's sequential-read state. Guarded by FS.iomu.
type readahead struct {
	next uint64   // offset right after the last read
	seq  int      // consecutive sequential reads
	eof  uint64   // a fetch came back short here (0: not seen)
	bufs []*raBuf // fetched or in-flight windows, by offset
}

// raBuf is one readahead fetch. off and size are fixed at creation; the
// other fields are guarded by FS.iomu, done is closed when the fetch ends.
type raBuf struct {
	off     uint64
	size    int
	done    chan struct{}
	data    []byte // pooled, len = bytes fetched; nil if the fetch failed
	err     error
	refs    int  // replies still sending from data
	dropped bool // no longer in its handle's list
	landed  bool // fetch finished
}

func (b *raBuf) end() uint64 { return b.off + uint64(b.size) }

// freeLocked gives data back to the pool once nothing uses it.
func (b *raBuf) freeLocked() {
	if b.dropped && b.landed && b.refs == 0 && b.data != nil {
		bufpool.Put(b.data)
		b.data = nil
	}
}

// ioLocked returns the streaming state of ino, creating it.
func (fs *FS) ioLocked(ino uint64) *inodeIO {
	st := fs.io[ino]
	if st == nil {
		st = &inodeIO{writes: map[*pendingWrite]struct{}{}, ra: map[uint64]*readahead{}}
		fs.io[ino] = st
	}
	return st
}

// tidyLocked forgets ino's state when nothing is left in it.
func (fs *FS) tidyLocked(ino uint64) {
	if st := fs.io[ino]; st != nil && len(st.writes) == 0 && st.err == nil && len(st.ra) == 0 {
		delete(fs.io, ino)
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
func (fs *FS) waitWrites(ino, off, end uint64) {
	if end == 0 {
		end = ^uint64(0)
	}
	fs.iomu.Lock()
	for {
		st := fs.io[ino]
		if st == nil || !overlapsLocked(st, off, end) {
			break
		}
		fs.iocond.Wait()
	}
	fs.iomu.Unlock()
}

// drain waits for every write of ino and returns (and clears) the error a
// background write met.
func (fs *FS) drain(ino uint64) fuse.Status {
	fs.waitWrites(ino, 0, 0)
	fs.iomu.Lock()
	defer fs.iomu.Unlock()
	st := fs.io[ino]
	if st == nil || st.err == nil {
		return fuse.OK
	}
	err := st.err
	st.err = nil
	fs.tidyLocked(ino)
	return fuse.Status(rpc.Errno(err))
}

// hasWrites reports whether ino has writes in flight.
func (fs *FS) hasWrites(ino uint64) bool {
	fs.iomu.Lock()
	defer fs.iomu.Unlock()
	st := fs.io[ino]
	return st != nil && len(st.writes) > 0
}

// dropReadaheadLocked drops every readahead buffer of ino (of one handle
// if fh != 0).
func (fs *FS) dropReadaheadLocked(ino, fh uint64) {
	st := fs.io[ino]
	if st == nil {
		return
	}
	for h, ra := range st.ra {
		if fh != 0 && h != fh {
			continue
		}
		for _, b := range ra.bufs {
			fs.dropBufLocked(b)
		}
		delete(st.ra, h)
	}
	fs.tidyLocked(ino)
}

func (fs *FS) dropBufLocked(b *raBuf) {
	b.dropped = true
	fs.raBytes -= int64(b.size)
	b.freeLocked()
}

// writeBehind queues one write of handle fh. It returns once the data is
// copied.
func (fs *FS) writeBehind(id ident.ID, ino, fh uint64, off uint64, data []byte) fuse.Status {
	end := off + uint64(len(data))
	n := int64(len(data))
	fs.iomu.Lock()
	st := fs.ioLocked(ino)
	if err := st.err; err != nil {
		st.err = nil
		fs.tidyLocked(ino)
		fs.iomu.Unlock()
		return fuse.Status(rpc.Errno(err))
	}
	fs.dropReadaheadLocked(ino, 0)
	for {
		st = fs.ioLocked(ino)
		if !overlapsLocked(st, off, end) && (fs.wbBytes == 0 || fs.wbBytes+n <= fs.cfg.WriteBehind) {
			break
		}
		fs.iocond.Wait()
	}
	w := &pendingWrite{off: off, end: end}
	st.writes[w] = struct{}{}
	fs.wbBytes += n
	fs.iomu.Unlock()

	buf := bufpool.Get(len(data))
	copy(buf, data)
	go func() {
		m := &wire.Msg{Op: wire.OpWrite, Ino: ino, Offset: off, Size: uint64(len(buf)), Job: id.Job, Rank: id.Rank, Node: fs.node(id)}
		resp, _, err := fs.pick(id, ino).Call(context.Background(), m, buf, nil)
		bufpool.Put(buf)
		if err != nil {
			fs.log.Error("background write failed", "ino", ino, "off", off, "len", n, "err", err)
		} else {
			fs.wrote(fh, resp.Trunc, end)
		}
		fs.iomu.Lock()
		st := fs.io[ino]
		delete(st.writes, w)
		if err != nil && st.err == nil {
			st.err = err
		}
		fs.wbBytes -= n
		fs.tidyLocked(ino)
		fs.iocond.Broadcast()
		fs.iomu.Unlock()
	}()
	return fuse.OK
}

// raResult is a read served from a readahead buffer; the buffer is held
// until go-fuse has sent the reply.
type raResult struct {
	fs   *FS
	b    *raBuf
	data []byte
}

func (r *raResult) Bytes(buf []byte) ([]byte, fuse.Status) { return r.data, fuse.OK }

// Slices makes go-fuse write the reply straight from the buffer and call
// Done only after the write (for other results it calls Done first).
func (r *raResult) Slices() ([][]byte, fuse.Status) { return [][]byte{r.data}, fuse.OK }
func (r *raResult) Size() int                       { return len(r.data) }
func (r *raResult) Done() {
	r.fs.iomu.Lock()
	r.b.refs--
	r.b.freeLocked()
	r.fs.iomu.Unlock()
}

// readahead serves a read from a fetched buffer if it can, and starts
// fetches ahead of a sequential reader. It returns nil when the caller
// must read directly.
func (fs *FS) readahead(id ident.ID, ino, fh, off uint64, size int) fuse.ReadResult {
	end := off + uint64(size)
	fs.iomu.Lock()
	st := fs.ioLocked(ino)
	ra := st.ra[fh]
	if ra == nil {
		ra = &readahead{next: ^uint64(0)}
		st.ra[fh] = ra
	}
	// the buffer holding [off, end), if any; drop the ones behind
	var hit *raBuf
	keep := ra.bufs[:0]
	for _, b := range ra.bufs {
		switch {
		case b.end() <= off:
			fs.dropBufLocked(b)
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
			fs.dropBufLocked(b)
		}
		ra.bufs = nil
		ra.eof = 0
	}
	ra.next = end
	var fetch []*raBuf
	if ra.seq >= 1 && len(st.writes) == 0 {
		unit := size
		if unit < 128<<10 {
			unit = 128 << 10
		}
		// the window grows with the run: 2, 4, 8 ... reads ahead
		window := uint64(fs.cfg.Readahead)
		if ra.seq < 16 && uint64(unit)<<ra.seq < window {
			window = uint64(unit) << ra.seq
		}
		from := end
		if n := len(ra.bufs); n > 0 && ra.bufs[n-1].end() > from {
			from = ra.bufs[n-1].end()
		}
		for from < end+window && fs.raBytes+int64(unit) <= fs.raMax {
			if ra.eof != 0 && from >= ra.eof {
				break
			}
			b := &raBuf{off: from, size: unit, done: make(chan struct{})}
			ra.bufs = append(ra.bufs, b)
			fs.raBytes += int64(unit)
			fetch = append(fetch, b)
			from += uint64(unit)
		}
	}
	if hit != nil {
		hit.refs++
	}
	fs.iomu.Unlock()

	for _, b := range fetch {
		go fs.fetch(id, ino, fh, b)
	}
	if hit == nil {
		return nil
	}
	<-hit.done
	fs.iomu.Lock()
	defer fs.iomu.Unlock()
	if hit.err != nil || hit.data == nil {
		hit.refs--
		hit.freeLocked()
		return nil
	}
	lo := int(off - hit.off)
	hi := lo + size
	if hi > len(hit.data) {
		hi = len(hit.data)
	}
	if lo > hi {
		lo = hi
	}
	return &raResult{fs: fs, b: hit, data: hit.data[lo:hi]}
}

// readPast tells the readahead state that a direct read found data up to
// end, so an end of file seen earlier has moved.
func (fs *FS) readPast(ino, fh, end uint64) {
	fs.iomu.Lock()
	if st := fs.io[ino]; st != nil {
		if ra := st.ra[fh]; ra != nil && ra.eof != 0 && end > ra.eof {
			ra.eof = 0
		}
	}
	fs.iomu.Unlock()
}

// fetch runs one readahead request.
func (fs *FS) fetch(id ident.ID, ino, fh uint64, b *raBuf) {
	buf := bufpool.Get(b.size)
	m := &wire.Msg{Op: wire.OpRead, Ino: ino, Offset: b.off, Size: uint64(b.size), Job: id.Job, Rank: id.Rank, Node: fs.node(id)}
	_, p, err := fs.pick(id, ino).Call(context.Background(), m, nil, buf)
	fs.iomu.Lock()
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
			if st := fs.io[ino]; st != nil {
				if ra := st.ra[fh]; ra != nil && (ra.eof == 0 || b.off+uint64(len(p)) < ra.eof) {
					ra.eof = b.off + uint64(len(p))
				}
			}
		}
	}
	close(b.done)
	b.freeLocked()
	fs.iomu.Unlock()
}
