package client

import (
	"context"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/client/vfs"
	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

func (fs *FS) openFlags() uint32 {
	if fs.cfg.CacheData {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
}

// Create implements fuse.RawFileSystem.
func (fs *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	start := fs.cfg.Now()
	who := func() ident.ID { return fs.ident(&in.InHeader, ns.OpMknod) }
	if a, ok := fs.wb.Create(who, in.NodeId, name, in.Mode&^in.Umask, in.Uid, in.Gid); ok {
		fs.met.wbLocal.Inc()
		fs.answered(&in.InHeader, ns.OpMknod, in.NodeId, start, false)
		fs.entry(in.NodeId, name, a, fs.dc.Sent(), &out.EntryOut)
		out.Fh = fs.nextFh.Add(1)
		out.OpenFlags = fs.openFlags()
		fs.own.Track(a.Ino, out.Fh, true)
		return fuse.OK
	}
	st := create(fs, &in.InHeader, ns.Mknod, &ns.MknodReq{Parent: in.NodeId, Name: name,
		Mode: in.Mode &^ in.Umask & 0o7777, Open: true, Excl: in.Flags&syscall.O_EXCL != 0, Uid: in.Uid, Gid: in.Gid},
		in.NodeId, name, &out.EntryOut)
	if st != fuse.OK {
		return st
	}
	out.Fh = fs.nextFh.Add(1)
	out.OpenFlags = fs.openFlags()
	return fuse.OK
}

// ownedOpen is a read-only open of an owned file answered here, as
// needed to open it at the service if the file is disowned meanwhile.
type ownedOpen struct {
	id ident.ID
}

// promote opens at the service a read-only open answered here
// (vfs.OwnedConfig.Promote).
func (fs *FS) promote(ino uint64, tag any) bool {
	t := tag.(ownedOpen)
	// not through callAs: the application's open was recorded for
	// Beacon when it was answered here
	m := &ns.OpenReq{Head: ns.Head{Who: t.id, Client: fs.dc.ID()}, Ino: ino, Flags: syscall.O_RDONLY}
	fs.wb.SettleFor(ns.OpOpen, m)
	ctx, cancel := context.WithTimeout(context.Background(), fs.cfg.Timeout)
	defer cancel()
	if _, err := rpc.Do(ctx, fs.rt.Pick(t.id, ino), ns.Open, m); err != nil {
		fs.log.Warn("opening at the service a read-only open answered here failed", "ino", ino, "err", err)
		return false
	}
	return true
}

// Open implements fuse.RawFileSystem: answered here for a read-only open
// of a file this mount owns (vfs.Owned).
func (fs *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	start := fs.cfg.Now()
	writer := in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY || in.Flags&syscall.O_TRUNC != 0
	if in.Flags&syscall.O_TRUNC != 0 {
		fs.dc.ForgetFile(in.NodeId)
		fs.own.Disown(in.NodeId)
		fs.bc.Drop(in.NodeId)
	}
	fh := fs.nextFh.Add(1)
	if !writer && fs.own.Owns(in.NodeId) {
		tag := ownedOpen{id: fs.ident(&in.InHeader, ns.OpOpen)}
		if fs.own.OpenLocal(in.NodeId, fh, tag) {
			fs.met.owned.Inc()
			fs.record(&in.InHeader, tag.id, beaconrpc.OpName(ns.OpOpen), in.NodeId, 0, 0, start, false)
			out.Fh = fh
			out.OpenFlags = fs.openFlags()
			return fuse.OK
		}
	}
	resp, st := call(fs, &in.InHeader, ns.Open, &ns.OpenReq{Ino: in.NodeId, Flags: in.Flags})
	if st != fuse.OK {
		return st
	}
	if in.Flags&syscall.O_TRUNC != 0 {
		// again: a fetch between the drop above and the truncation is
		// not kept
		fs.bc.Drop(in.NodeId)
	}
	if resp.Attr != nil {
		// blocks kept from before changes this mount has not yet heard
		// of go (close-to-open)
		fs.bc.Opened(in.NodeId, resp.Feed, resp.Attr.Size)
	} else {
		fs.bc.Drop(in.NodeId)
	}
	if fs.dc.Opened(in.NodeId, resp.Feed) {
		// the kernel may hold attributes from before another node's
		// close that this mount has not yet applied from the feed: an
		// fstat or a seek to the end after this open must ask
		// (close-to-open), and the attributes kept here are gone. Safe
		// from here: without a range the kernel only marks them stale.
		if srv := fs.srv.Load(); srv != nil {
			srv.InodeNotify(in.NodeId, -1, 0)
		}
	}
	if in.Flags&syscall.O_APPEND != 0 && writer && resp.Attr != nil {
		// the kernel may not yet know the size another node's close left
		fs.app.Opened(in.NodeId, fh, resp.Attr.Size)
	}
	fs.own.Track(in.NodeId, fh, writer)
	out.Fh = fh
	out.OpenFlags = fs.openFlags()
	return fuse.OK
}

// Read implements fuse.RawFileSystem: from a readahead buffer, or
// directly into buf.
func (fs *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	start := fs.cfg.Now()
	id := fs.ident(&in.InHeader, ns.OpRead)
	if n, ok := fs.own.Read(in.NodeId, in.Offset, buf[:in.Size]); ok {
		fs.met.owned.Inc()
		fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(n), start, false)
		return fuse.ReadResultData(buf[:n]), fuse.OK
	}
	small := in.Size <= smallRead
	if small {
		if n, ok := fs.bc.Read(in.NodeId, in.Offset, buf[:in.Size]); ok {
			fs.met.cached.Inc()
			fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(n), start, false)
			return fuse.ReadResultData(buf[:n]), fuse.OK
		}
	}
	fs.wb.Settle(in.NodeId)
	fs.own.WaitClosed(in.NodeId)
	// writes in flight that end past the read's start change what it
	// returns: their bytes, or the size it is clamped to
	fs.st.WaitWrites(in.NodeId, in.Offset, ^uint64(0))
	if fs.cfg.Readahead > 0 {
		if hit := fs.st.Readahead(id, in.NodeId, in.Fh, in.Offset, int(in.Size)); hit != nil {
			if hit.Pipe != nil {
				fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(hit.N), start, false)
				return &pipeResult{h: hit, log: fs.log}, fuse.OK
			}
			fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(len(hit.Data)), start, false)
			return raResult{hit}, fuse.OK
		}
	}
	if small {
		if p, ok := fs.readBlock(id, in); ok {
			fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(len(p)), start, false)
			return fuse.ReadResultData(p), fuse.OK
		}
	}
	_, p, st := callAs(fs, &in.InHeader, id, ns.Read, &ns.IOReq{Ino: in.NodeId, Off: in.Offset, Len: uint64(in.Size)}, buf[:in.Size])
	fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(len(p)), start, st != fuse.OK)
	if st != fuse.OK {
		return nil, st
	}
	if fs.cfg.Readahead > 0 {
		fs.st.ReadPast(in.NodeId, in.Fh, in.Offset+uint64(len(p)))
	}
	return fuse.ReadResultData(p), fuse.OK
}

// readBlock answers a small read by fetching its whole block into the
// block cache (vfs.BlockCache), if the cache takes the file; ok false
// sends the read on as it is (not cached, or the fetch failed: the read
// then reports its own error).
func (fs *FS) readBlock(id ident.ID, in *fuse.ReadIn) ([]byte, bool) {
	boff, gen, ok := fs.bc.Want(in.NodeId, in.Offset, int(in.Size))
	if !ok {
		return nil, false
	}
	// the block must hold every write of this mount before it: those in
	// flight in it land first (a later one drops it, and its generation
	// keeps this fetch out)
	fs.st.WaitWrites(in.NodeId, boff, ^uint64(0))
	blk := bufpool.Get(int(fs.bc.Block()))
	defer bufpool.Put(blk)
	_, p, st := callAs(fs, &in.InHeader, id, ns.Read, &ns.IOReq{Ino: in.NodeId, Off: boff, Len: uint64(len(blk))}, blk)
	if st != fuse.OK {
		return nil, false
	}
	fs.bc.Fill(in.NodeId, gen, boff, p)
	out := make([]byte, 0, in.Size)
	if rel := in.Offset - boff; rel < uint64(len(p)) {
		out = append(out, p[rel:min(uint64(len(p)), rel+uint64(in.Size))]...)
	}
	return out, true
}

// Write implements fuse.RawFileSystem: in the background (write-behind)
// unless that is off.
func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return fs.write(in, data, nil)
}

var _ fuse.WriteOwner = (*FS)(nil)

// WriteOwned implements fuse.WriteOwner: Write, with data left in
// go-fuse's request buffer, which a write in the background then sends
// as it is instead of a copy (vfs.Streams.WriteKept); release gives the
// buffer back once neither this call nor the write reads it.
func (fs *FS) WriteOwned(cancel <-chan struct{}, in *fuse.WriteIn, data []byte, release func()) (uint32, fuse.Status) {
	var readers atomic.Int32
	readers.Store(2) // this call (the owned file's copy below) and the write
	done := func() {
		if readers.Add(-1) == 0 {
			release()
		}
	}
	defer done()
	return fs.write(in, data, done)
}

// write is Write; release, if not nil, is handed to the write as
// vfs.Streams.WriteKept's (called once whatever happens).
func (fs *FS) write(in *fuse.WriteIn, data []byte, release func()) (uint32, fuse.Status) {
	var st fuse.Status
	start := fs.cfg.Now()
	id := fs.ident(&in.InHeader, ns.OpWrite)
	fs.dc.ForgetFile(in.NodeId)
	fs.bc.Drop(in.NodeId)
	var before func() // the file's create, sent before the write goes
	if fs.closesBehind() {
		ino := in.NodeId // in is go-fuse's, reused once this returns
		before = func() {
			fs.wb.Settle(ino)
			if d := fs.cfg.WritebackDelay; d > 0 {
				time.Sleep(d) // fault injection
			}
		}
	} else {
		fs.wb.Settle(in.NodeId)
	}
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		if st := fs.killPriv(&in.InHeader, in.NodeId); st != fuse.OK {
			if release != nil {
				release()
			}
			return 0, st
		}
	}
	off := fs.app.Place(in.NodeId, in.Fh, in.Offset)
	if off != in.Offset && fs.cfg.CacheData {
		// the kernel's pages hold the bytes where it put them
		defer fs.dropPages(in.NodeId)
	}
	fs.own.BeginWrite(in.NodeId)
	err := fs.st.WriteAfter(id, in.NodeId, in.Fh, off, data, release, before)
	// again, the write now in flight (a block fetch waits for it): a
	// fetch that began before it was is not kept
	fs.bc.Drop(in.NodeId)
	fs.own.EndWrite(in.NodeId, off, data, err == nil)
	if err == nil {
		fs.app.Wrote(in.NodeId, off+uint64(len(data)))
	}
	if err != nil {
		st = fuse.Status(rpc.Errno(err))
		if st == fuse.EIO {
			fs.log.Error("write failed", "ino", in.NodeId, "off", off, "err", err)
		}
	}
	fs.record(&in.InHeader, id, beacon.OpWrite, in.NodeId, off, uint64(len(data)), start, st != fuse.OK)
	if st != fuse.OK {
		return 0, st
	}
	return uint32(len(data)), fuse.OK
}

// dropPages drops ino's pages from the kernel's cache, in the background:
// the kernel holds them locked while the write that asks is answered.
func (fs *FS) dropPages(ino uint64) {
	if srv := fs.srv.Load(); srv != nil {
		go srv.InodeNotify(ino, 0, 0)
	}
}

// killPriv clears the setuid and setgid bits of a file an unprivileged
// caller writes, if it was seen with them.
func (fs *FS) killPriv(h *fuse.InHeader, ino uint64) fuse.Status {
	fs.pmu.Lock()
	had := fs.priv[ino]
	delete(fs.priv, ino)
	fs.pmu.Unlock()
	if !had {
		return fuse.OK
	}
	_, st := call(fs, h, ns.Setattr, &ns.SetattrReq{Ino: ino, Mask: ns.SetKillPriv})
	return st
}

// Flush implements fuse.RawFileSystem: sizes are reported at close so
// another node that opens the file next sees them (close-to-open).
// The attributes the report leaves the file with answer this node's next
// stat (vfs.DirCache.NoteFileAttr), unless it changed meanwhile.
//
// A close of an owned file returns at once (write-back closes,
// vfs.Owned.DeferClose): its writes and its report go in the background,
// and the file stays owned (out of every other client's reach, and this
// mount's own requests naming it wait) until they went. If they fail, the
// error is logged and left on the file for its next write, close or
// fsync.
func (fs *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if _, w := fs.st.ExtentOf(in.Fh); !w {
		return fuse.OK
	}
	epoch := fs.dc.FileEpoch()
	id := fs.ident(&in.InHeader, ns.OpFlush)
	if fs.closesBehind() && !fs.st.Failed(in.NodeId) {
		if done, ok := fs.own.DeferClose(in.NodeId); ok {
			fs.met.wbCloses.Inc()
			// in is go-fuse's, reused once this returns
			h, ino, fh := in.InHeader, in.NodeId, in.Fh
			go func() {
				err := fs.flush(&h, id, ino, fh, epoch)
				done()
				if err != nil {
					fs.log.Error("a close that returned before its writes reached the forwarding node failed: the file's data may be lost",
						"ino", ino, "err", err)
					fs.st.KeepErr(ino, err)
					fs.own.Disown(ino)
				}
			}()
			return fuse.OK
		}
	}
	if err := fs.flush(&in.InHeader, id, in.NodeId, in.Fh, epoch); err != nil {
		fs.own.Disown(in.NodeId) // the bytes kept here may not be the file's
		return fuse.Status(rpc.Errno(err))
	}
	return fuse.OK
}

// closesBehind says whether closes of owned files may return before their
// report (and writes before their file's create is sent).
func (fs *FS) closesBehind() bool {
	return fs.own != nil && fs.cfg.WritebackCloses >= 0 && fs.cfg.WriteBehind > 0
}

// flush waits for ino's writes and reports the size handle fh's writes
// reached to the service (close-to-open); the attributes the report
// leaves the file with answer this node's next stat unless changes
// after file epoch epoch came first.
func (fs *FS) flush(h *fuse.InHeader, id ident.ID, ino, fh, epoch uint64) error {
	if err := fs.st.Drain(ino); err != nil {
		return err
	}
	e, _ := fs.st.ExtentOf(fh)
	resp, _, st := send(fs, h, id, ns.Flush, &ns.SizeReq{Ino: ino, Size: e.End, Trunc: e.Gen}, nil)
	if st != fuse.OK {
		return syscall.Errno(st)
	}
	fs.st.Flushed(fh, e)
	fs.dc.NoteFileAttr(resp.Attr, resp.Feed, epoch)
	return nil
}

// Fsync implements fuse.RawFileSystem: durable on the tier's medium.
func (fs *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if err := fs.st.Drain(in.NodeId); err != nil {
		fs.own.Disown(in.NodeId)
		return fuse.Status(rpc.Errno(err))
	}
	e, _ := fs.st.ExtentOf(in.Fh)
	_, st := call(fs, &in.InHeader, ns.Fsync, &ns.SizeReq{Ino: in.NodeId, Size: e.End, Trunc: e.Gen})
	if st != fuse.OK {
		fs.own.Disown(in.NodeId)
	}
	return st
}

// Release implements fuse.RawFileSystem.
func (fs *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	fs.own.WaitClosed(in.NodeId) // its close's report reads its extent
	fs.app.Released(in.Fh)
	remote := fs.own.Release(in.Fh)
	fs.st.Released(in.NodeId, in.Fh)
	if !remote {
		return // opened here, not at the service
	}
	if fs.wb.Release(in.NodeId) {
		return
	}
	call(fs, &in.InHeader, ns.Release, &ns.InoReq{Ino: in.NodeId})
}

// raResult is a read served from a readahead buffer; go-fuse writes the
// reply straight from it (Slices) and calls Done after, which gives the
// buffer back.
type raResult struct{ h *vfs.Hit }

func (r raResult) Bytes(buf []byte) ([]byte, fuse.Status) { return r.h.Data, fuse.OK }

func (r raResult) Slices() ([][]byte, fuse.Status) { return [][]byte{r.h.Data}, fuse.OK }

func (r raResult) Size() int { return len(r.h.Data) }

func (r raResult) Done() { r.h.Release() }

// pipeResult is a read that took a readahead buffer kept in a pipe whole:
// go-fuse has it splice the reply into the device (fuse.ReplySplicer,
// zerocopy.Pipe.SpliceReply), or, where it cannot, sends what Bytes reads
// from the pipe; Done gives the buffer back.
type pipeResult struct {
	h   *vfs.Hit
	log *slog.Logger
}

var _ fuse.ReplySplicer = (*pipeResult)(nil)

func (r *pipeResult) SpliceReply(fd int, header []byte) (bool, error) {
	ok, err := r.h.Pipe.SpliceReply(fd, header)
	if ok && err != nil {
		r.log.Warn("splicing a read's reply into the FUSE device failed", "err", err)
	}
	return ok, err
}

func (r *pipeResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	if cap(buf) < r.h.N {
		buf = make([]byte, r.h.N)
	}
	buf = buf[:r.h.N]
	if err := r.h.Pipe.ReadAt(buf, 0); err != nil {
		r.log.Error("reading a readahead pipe failed", "err", err)
		return nil, fuse.EIO
	}
	return buf, fuse.OK
}

func (r *pipeResult) Size() int { return r.h.N }

func (r *pipeResult) Done() { r.h.Release() }
