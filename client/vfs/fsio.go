package vfs

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// The operations on open files: creates and opens, reads, writes, closes
// (flush, release) and syncs. File data bypasses the kernel's page cache
// (direct I/O) unless CacheData; Streams writes behind and reads ahead.

// Create makes and opens name in parent with permission bits mode (the
// caller's umask, c.Umask, not applied yet); excl: O_EXCL. Answered here in a directory this mount
// holds the delegation of (write-back, Creates).
func (v *FS) Create(c Cred, parent uint64, name string, mode uint32, excl bool) (Entry, uint64, error) {
	start := v.cfg.Now()
	who := func() ident.ID { return v.ident(c, ns.OpMknod) }
	// (a delegated directory has no default ACL: the umask applies)
	if a, ok := v.wb.Create(who, parent, name, mode&^c.Umask&0o7777, c.Uid, c.Gid); ok {
		v.Counts.WritebackCreates.Add(1)
		v.answered(c, ns.OpMknod, parent, start, false)
		e := v.entry(parent, name, a, v.dc.Sent())
		fh := v.nextFh.Add(1)
		v.own.Track(a.Ino, fh, true)
		return e, fh, nil
	}
	e, err := create(v, c, ns.Mknod, &ns.MknodReq{Parent: parent, Name: name,
		Mode: mode &^ c.Umask & 0o7777, Unmasked: mode & 0o7777, Open: true, Excl: excl, Uid: c.Uid, Gid: c.Gid}, parent, name)
	if err != nil {
		return Entry{}, 0, err
	}
	return e, v.nextFh.Add(1), nil
}

// ownedOpen is a read-only open of an owned file answered here, as
// needed to open it at the service if the file is disowned meanwhile.
type ownedOpen struct {
	id ident.ID
}

// promote opens at the service a read-only open answered here
// (OwnedConfig.Promote).
func (v *FS) promote(ino uint64, tag any) bool {
	t := tag.(ownedOpen)
	// not through callAs: the application's open was recorded when it
	// was answered here
	m := &ns.OpenReq{Head: ns.Head{Who: t.id, Client: v.dc.ID()}, Ino: ino, Flags: syscall.O_RDONLY}
	v.wb.SettleFor(ns.OpOpen, m)
	ctx, cancel := context.WithTimeout(context.Background(), v.cfg.Timeout)
	defer cancel()
	v.handles.begin()
	defer v.handles.end()
	if _, err := rpc.Do(ctx, v.rt.Pick(t.id, ino), ns.Open, m); err != nil {
		v.log.Warn("opening at the service a read-only open answered here failed", "ino", ino, "err", err)
		return false
	}
	v.handles.opened(ino)
	return true
}

// Open opens ino with flags (open(2)'s) and returns the handle: answered
// here for a read-only open of a file this mount owns (Owned).
func (v *FS) Open(c Cred, ino uint64, flags uint32) (uint64, error) {
	start := v.cfg.Now()
	writer := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	if flags&syscall.O_TRUNC != 0 {
		v.dc.ForgetFile(ino)
		v.own.Disown(ino)
		v.bc.Drop(ino)
	}
	fh := v.nextFh.Add(1)
	if !writer && v.own.Owns(ino) {
		tag := ownedOpen{id: v.ident(c, ns.OpOpen)}
		if v.own.OpenLocal(ino, fh, tag) {
			v.Counts.OwnedAnswers.Add(1)
			v.record(c, tag.id, ns.OpOpen, ino, 0, 0, start, false)
			return fh, nil
		}
	}
	resp, err := call(v, c, ns.Open, &ns.OpenReq{Ino: ino, Flags: flags})
	if err != nil {
		return 0, err
	}
	if flags&syscall.O_TRUNC != 0 {
		// again: a fetch between the drop above and the truncation is
		// not kept
		v.bc.Drop(ino)
	}
	if resp.Attr != nil {
		v.at.seen(resp.Attr)
		// blocks kept from before changes this mount has not yet heard
		// of go (close-to-open)
		v.bc.Opened(ino, resp.Feed, resp.Attr.Size)
	} else {
		v.bc.Drop(ino)
	}
	if v.dc.Opened(ino, resp.Feed) {
		// the kernel may hold attributes from before another node's
		// close that this mount has not yet applied from the feed: an
		// fstat or a seek to the end after this open must ask
		// (close-to-open), and the attributes kept here are gone. Safe
		// from here: without a range the kernel only marks them stale.
		if n := v.notify.Load(); n != nil {
			n.AttrNotify(ino)
		}
	}
	if flags&syscall.O_APPEND != 0 && writer && resp.Attr != nil {
		// the kernel may not yet know the size another node's close left
		v.app.Opened(ino, fh, resp.Attr.Size)
	}
	v.own.Track(ino, fh, writer)
	return fh, nil
}

// Read is a read's answer: Data, or a readahead buffer (Hit) the adapter
// replies from and then releases.
type Read struct {
	Data []byte
	Hit  *Hit
}

// Read reads size bytes of ino at off through handle fh: from the bytes
// kept of an owned file, the block cache, a readahead buffer, or directly
// into buf (which holds size bytes).
func (v *FS) Read(c Cred, ino, fh, off uint64, buf []byte) (Read, error) {
	start := v.cfg.Now()
	id := v.ident(c, ns.OpRead)
	size := len(buf)
	v.at.read(ino, false)
	done := func(n int, failed bool) { v.record(c, id, ns.OpRead, ino, off, uint64(n), start, failed) }
	if n, ok := v.own.Read(ino, off, buf); ok {
		v.Counts.OwnedAnswers.Add(1)
		done(n, false)
		return Read{Data: buf[:n]}, nil
	}
	small := size <= smallRead
	if small {
		if n, ok := v.bc.Read(ino, off, buf); ok {
			v.Counts.BlockCacheHits.Add(1)
			done(n, false)
			return Read{Data: buf[:n]}, nil
		}
	}
	v.wb.Settle(ino)
	v.own.WaitClosed(ino)
	// writes in flight that end past the read's start change what it
	// returns: their bytes, or the size it is clamped to
	v.st.WaitWrites(ino, off, ^uint64(0))
	if v.cfg.Readahead > 0 {
		if hit := v.st.Readahead(id, ino, fh, off, size); hit != nil {
			if hit.Pipe != nil {
				done(hit.N, false)
			} else {
				done(len(hit.Data), false)
			}
			return Read{Hit: hit}, nil
		}
	}
	if small {
		if p, ok := v.readBlock(c, id, ino, off, size); ok {
			done(len(p), false)
			return Read{Data: p}, nil
		}
	}
	_, p, err := callAs(v, c, id, ns.Read, &ns.IOReq{Ino: ino, Off: off, Len: uint64(size)}, buf)
	done(len(p), err != nil)
	if err != nil {
		return Read{}, err
	}
	if v.cfg.Readahead > 0 {
		v.st.ReadPast(ino, fh, off+uint64(len(p)))
	}
	return Read{Data: p}, nil
}

// readBlock answers a small read by fetching its whole block into the
// block cache (BlockCache), if the cache takes the file; ok false sends
// the read on as it is (not cached, or the fetch failed: the read then
// reports its own error).
func (v *FS) readBlock(c Cred, id ident.ID, ino, off uint64, size int) ([]byte, bool) {
	boff, gen, ok := v.bc.Want(ino, off, size)
	if !ok {
		return nil, false
	}
	// the block must hold every write of this mount before it: those in
	// flight in it land first (a later one drops it, and its generation
	// keeps this fetch out)
	v.st.WaitWrites(ino, boff, ^uint64(0))
	blk := bufpool.Get(int(v.bc.Block()))
	defer bufpool.Put(blk)
	_, p, err := callAs(v, c, id, ns.Read, &ns.IOReq{Ino: ino, Off: boff, Len: uint64(len(blk))}, blk)
	if err != nil {
		return nil, false
	}
	v.bc.Fill(ino, gen, boff, p)
	out := make([]byte, 0, size)
	if rel := off - boff; rel < uint64(len(p)) {
		out = append(out, p[rel:min(uint64(len(p)), rel+uint64(size))]...)
	}
	return out, true
}

// Write writes data at off of ino through handle fh: in the background
// (write-behind) unless that is off. killPriv: the caller is unprivileged
// and the file's setuid and setgid bits go (HANDLE_KILLPRIV_V2). release,
// if not nil, says data is the kernel request's buffer, which a write in
// the background sends as it is and gives back with release (called once
// whatever happens; Streams.WriteKept).
func (v *FS) Write(c Cred, ino, fh, off uint64, data []byte, killPriv bool, release func()) (uint32, error) {
	start := v.cfg.Now()
	id := v.ident(c, ns.OpWrite)
	v.dc.ForgetFile(ino)
	v.bc.Drop(ino)
	var before func() // the file's create, sent before the write goes
	if v.closesBehind() {
		before = func() {
			v.wb.Settle(ino)
			if d := v.cfg.WritebackDelay; d > 0 {
				time.Sleep(d) // fault injection
			}
		}
	} else {
		v.wb.Settle(ino)
	}
	if killPriv {
		if err := v.killPriv(c, ino, ns.SetKillPriv); err != nil {
			if release != nil {
				release()
			}
			return 0, err
		}
	}
	placed := v.app.Place(ino, fh, off)
	if placed != off && v.cfg.CacheData {
		// the kernel's pages hold the bytes where it put them
		defer v.dropPages(ino)
	}
	off = placed
	v.own.BeginWrite(ino)
	err := v.st.WriteAfter(id, ino, fh, off, data, release, before)
	// again, the write now in flight (a block fetch waits for it): a
	// fetch that began before it was is not kept
	v.bc.Drop(ino)
	v.own.EndWrite(ino, off, data, err == nil)
	if err == nil {
		v.app.Wrote(ino, off+uint64(len(data)))
		v.at.wrote(ino)
	} else if rpc.Errno(err) == syscall.EIO {
		v.log.Error("write failed", "ino", ino, "off", off, "err", err)
	}
	v.record(c, id, ns.OpWrite, ino, off, uint64(len(data)), start, err != nil)
	if err != nil {
		return 0, err
	}
	return uint32(len(data)), nil
}

// KeptWrite is Write with data in a buffer the kernel lends (go-fuse's
// WriteOwner): release gives it back once neither this call nor the
// write in the background reads it.
func (v *FS) KeptWrite(c Cred, ino, fh, off uint64, data []byte, killPriv bool, release func()) (uint32, error) {
	var readers atomic.Int32
	readers.Store(2) // this call (the owned file's copy) and the write
	done := func() {
		if readers.Add(-1) == 0 {
			release()
		}
	}
	defer done()
	return v.Write(c, ino, fh, off, data, killPriv, done)
}

// dropPages drops ino's pages from the kernel's cache, in the background:
// the kernel holds them locked while the write that asks is answered.
func (v *FS) dropPages(ino uint64) {
	if n := v.notify.Load(); n != nil {
		go n.DataNotify(ino)
	}
}

// killPriv clears the setuid and setgid bits of a file an unprivileged
// caller writes, if it was seen with them (mask: SetKillPriv, with
// SetKillSgid for an fallocate's rule).
func (v *FS) killPriv(c Cred, ino uint64, mask uint32) error {
	v.pmu.Lock()
	had := v.priv[ino]
	delete(v.priv, ino)
	v.pmu.Unlock()
	if !had {
		return nil
	}
	resp, err := call(v, c, ns.Setattr, &ns.SetattrReq{Ino: ino, Mask: mask})
	if err != nil {
		return err
	}
	v.noteAttr(resp.Attr) // set-group-ID without group execution stays
	// the kernel keeps the file's mode: a stat asking for the mode alone
	// would answer it from before (xfstests generic/355). Safe from
	// here: without a range the kernel only marks them stale.
	v.dc.ForgetFile(ino)
	if n := v.notify.Load(); n != nil {
		n.AttrNotify(ino)
	}
	return nil
}

// Flush is a close of handle fh of ino: the size its writes reached is
// reported so another node that opens the file next sees it
// (close-to-open). The attributes the report leaves the file with answer
// this node's next stat (DirCache.NoteFileAttr), unless it changed
// meanwhile.
//
// A close of an owned file returns at once (write-back closes,
// Owned.DeferClose): its writes and its report go in the background, and
// the file stays owned (out of every other client's reach, and this
// mount's own requests naming it wait) until they went. If they fail, the
// error is logged and left on the file for its next write, close or
// fsync.
func (v *FS) Flush(c Cred, ino, fh uint64) error {
	if _, w := v.st.ExtentOf(fh); !w {
		return nil
	}
	epoch := v.dc.FileEpoch()
	id := v.ident(c, ns.OpFlush)
	if v.closesBehind() && !v.st.Failed(ino) {
		if done, ok := v.own.DeferClose(ino); ok {
			v.Counts.WritebackCloses.Add(1)
			go func() {
				err := v.flush(c, id, ino, fh, epoch)
				done()
				if err != nil {
					v.log.Error("a close that returned before its writes reached the forwarding node failed: the file's data may be lost",
						"ino", ino, "err", err)
					v.st.KeepErr(ino, err)
					v.own.Disown(ino)
				}
			}()
			return nil
		}
	}
	if err := v.flush(c, id, ino, fh, epoch); err != nil {
		v.own.Disown(ino) // the bytes kept here may not be the file's
		return err
	}
	return nil
}

// closesBehind says whether closes of owned files may return before their
// report (and writes before their file's create is sent).
func (v *FS) closesBehind() bool {
	return v.own != nil && v.cfg.WritebackCloses >= 0 && v.cfg.WriteBehind > 0
}

// flush waits for ino's writes and reports the size handle fh's writes
// reached to the service (close-to-open); the attributes the report
// leaves the file with answer this node's next stat unless changes
// after file epoch epoch came first.
func (v *FS) flush(c Cred, id ident.ID, ino, fh, epoch uint64) error {
	if err := v.st.Drain(ino); err != nil {
		return err
	}
	e, _ := v.st.ExtentOf(fh)
	resp, _, err := send(v, c, id, ns.Flush, &ns.SizeReq{Ino: ino, Size: e.End, Trunc: e.Gen}, nil)
	if err != nil {
		return err
	}
	v.st.Flushed(fh, e)
	v.dc.NoteFileAttr(resp.Attr, resp.Feed, epoch)
	return nil
}

// Fsync makes ino's writes through handle fh durable on the tier's
// medium.
func (v *FS) Fsync(c Cred, ino, fh uint64) error {
	if err := v.st.Drain(ino); err != nil {
		v.own.Disown(ino)
		return err
	}
	e, _ := v.st.ExtentOf(fh)
	_, err := call(v, c, ns.Fsync, &ns.SizeReq{Ino: ino, Size: e.End, Trunc: e.Gen})
	if err != nil {
		v.own.Disown(ino)
	}
	return err
}

// Release closes handle fh of ino for good.
func (v *FS) Release(c Cred, ino, fh uint64) {
	v.own.WaitClosed(ino) // its close's report reads its extent
	v.app.Released(fh)
	remote := v.own.Release(fh)
	v.st.Released(ino, fh)
	if !remote {
		return // opened here, not at the service
	}
	if v.wb.Release(ino) {
		return
	}
	call(v, c, ns.Release, &ns.InoReq{Ino: ino})
}
