package client

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// toAttr fills attributes for the kernel (every attribute the kernel
// sees passes here).
func (fs *FS) toAttr(a *wire.Attr, out *fuse.Attr) {
	if a.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 && a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		fs.pmu.Lock()
		fs.priv[a.Ino] = true
		fs.pmu.Unlock()
	}
	out.Ino = a.Ino
	out.Size = a.Size
	out.Blocks = (a.Size + 511) / 512
	out.Atime, out.Atimensec = uint64(a.Atime/1e9), uint32(a.Atime%1e9)
	out.Mtime, out.Mtimensec = uint64(a.Mtime/1e9), uint32(a.Mtime%1e9)
	out.Ctime, out.Ctimensec = uint64(a.Ctime/1e9), uint32(a.Ctime%1e9)
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Blksize = 1 << 20
}

// entry fills the entry reply for name in parent from its attributes a,
// as of change feed position gen.
func (fs *FS) entry(parent uint64, name string, a *wire.Attr, gen uint64, out *fuse.EntryOut) {
	out.NodeId = a.Ino
	out.Generation = 1
	fs.entryTimeouts(gen, parent, name, out)
	fs.toAttr(a, &out.Attr)
}

// Lookup implements fuse.RawFileSystem.
func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if len(name) > wire.NameMax {
		return fuse.Status(syscall.ENAMETOOLONG) // the kernel leaves NAME_MAX to the file system
	}
	if fs.dc.Absent(h.NodeId, name) {
		fs.answered(h, ns.OpLookup, h.NodeId, fs.cfg.Now(), true)
		return fuse.ENOENT
	}
	resp, st := lookup(fs, h, name)
	if st == fuse.OK && fs.st.HasWrites(resp.Attr.Ino) {
		// this node's writes change the size: look again once they landed
		fs.st.WaitWrites(resp.Attr.Ino, 0, 0)
		resp, st = lookup(fs, h, name)
	}
	if st != fuse.OK {
		return st
	}
	fs.entry(h.NodeId, name, resp.Attr, resp.Feed, out)
	fs.dc.NoteAttr(resp.Attr, resp.Feed)
	return fuse.OK
}

// lookup asks for name in directory h.NodeId.
func lookup(fs *FS, h *fuse.InHeader, name string) (*ns.EntryRep, fuse.Status) {
	resp, st := call(fs, h, ns.Lookup, &ns.NameReq{Parent: h.NodeId, Name: name})
	if st == fuse.OK && resp.Attr == nil {
		return nil, fuse.EIO // a redirect the forwarding daemon did not follow
	}
	return resp, st
}

// Forget implements fuse.RawFileSystem: node ids are inode numbers, so
// there is nothing to forget.
func (fs *FS) Forget(nodeid, nlookup uint64) { fs.bc.Forget(nodeid) }

// GetAttr implements fuse.RawFileSystem.
func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if a, ok := fs.dc.DirAttr(in.NodeId); ok {
		fs.toAttr(&a, &out.Attr)
		fs.attrTimeout(fs.dc.Sent(), in.NodeId, out)
		fs.answered(&in.InHeader, ns.OpGetattr, in.NodeId, fs.cfg.Now(), false)
		return fuse.OK
	}
	if a, ok := fs.dc.FileAttr(in.NodeId); ok {
		fs.toAttr(&a, &out.Attr)
		fs.attrTimeout(fs.dc.Sent(), in.NodeId, out)
		fs.answered(&in.InHeader, ns.OpGetattr, in.NodeId, fs.cfg.Now(), false)
		return fuse.OK
	}
	fs.st.WaitWrites(in.NodeId, 0, 0)
	resp, st := call(fs, &in.InHeader, ns.Getattr, &ns.InoReq{Ino: in.NodeId})
	if st != fuse.OK {
		return st
	}
	fs.toAttr(resp.Attr, &out.Attr)
	fs.attrTimeout(resp.Feed, in.NodeId, out)
	fs.dc.NoteAttr(resp.Attr, resp.Feed)
	return fuse.OK
}

// SetAttr implements fuse.RawFileSystem.
func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.dc.ForgetFile(in.NodeId)
	m := &ns.SetattrReq{Ino: in.NodeId}
	fs.st.WaitWrites(in.NodeId, 0, 0)
	if in.Valid&fuse.FATTR_SIZE != 0 {
		fs.st.DropReadahead(in.NodeId)
		fs.own.Disown(in.NodeId)
		fs.bc.Drop(in.NodeId)
	}
	now := fs.cfg.Now().UnixNano()
	if in.Valid&fuse.FATTR_MODE != 0 {
		m.Mask |= ns.SetMode
		m.Mode = in.Mode
	}
	if in.Valid&fuse.FATTR_UID != 0 {
		m.Mask |= ns.SetUid
		m.Uid = in.Owner.Uid
	}
	if in.Valid&fuse.FATTR_GID != 0 {
		m.Mask |= ns.SetGid
		m.Gid = in.Owner.Gid
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		m.Mask |= ns.SetSize
		m.Size = in.Size
	}
	if in.Valid&fuse.FATTR_ATIME != 0 {
		m.Mask |= ns.SetAtime
		m.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
		if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
			m.Atime = now
		}
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		m.Mask |= ns.SetKillPriv
	}
	if in.Valid&fuse.FATTR_MTIME != 0 {
		m.Mask |= ns.SetMtime
		m.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
		if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
			m.Mtime = now
		}
	}
	resp, st := call(fs, &in.InHeader, ns.Setattr, m)
	if st != fuse.OK {
		fs.dc.ForgetDir(in.NodeId)
		return st
	}
	if m.Mask&ns.SetSize != 0 {
		fs.st.Truncated(in.NodeId, resp.Attr.Trunc)
		fs.app.Truncated(in.NodeId, in.Size)
		fs.bc.Drop(in.NodeId) // again: a fetch made meanwhile is not kept
	}
	fs.toAttr(resp.Attr, &out.Attr)
	fs.attrTimeout(resp.Feed, in.NodeId, out)
	fs.dc.NoteAttr(resp.Attr, resp.Feed)
	return fuse.OK
}

// create makes a new inode (name in parent) owned by the caller.
func create[Q any, PQ nsRequest[Q]](fs *FS, h *fuse.InHeader, d wire.Def[Q, ns.EntryRep], q PQ, parent uint64, name string, out *fuse.EntryOut) fuse.Status {
	resp, st := nsCall(fs, h, d, q, parent, name)
	if st != fuse.OK {
		return st
	}
	fs.entry(parent, name, resp.Attr, resp.Feed, out)
	return fuse.OK
}

// nsCall sends a change of name in directory parent and keeps the
// directory cache in step with it.
func nsCall[Q any, PQ nsRequest[Q]](fs *FS, h *fuse.InHeader, d wire.Def[Q, ns.EntryRep], q PQ, parent uint64, name string) (*ns.EntryRep, fuse.Status) {
	resp, st := call(fs, h, d, q)
	if st == fuse.OK && resp.Attr == nil && d.Op != ns.OpUnlink && d.Op != ns.OpRmdir {
		st = fuse.EIO // a redirect the forwarding daemon did not follow
	}
	if st != fuse.OK {
		fs.dc.ForgetDir(parent)
		return resp, st
	}
	added := d.Op != ns.OpUnlink && d.Op != ns.OpRmdir
	var made *wire.Attr
	if d.Op == ns.OpMkdir {
		made = resp.Attr
	}
	var ino uint64
	if resp.Attr != nil {
		ino = resp.Attr.Ino
	}
	fs.dc.Changed(parent, name, ino, added, resp.Parent, resp.Feed, made)
	return resp, st
}

// Mknod implements fuse.RawFileSystem: regular files, FIFOs, sockets and
// device files (whose data never reaches sluice: the kernel serves them).
func (fs *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	switch in.Mode & syscall.S_IFMT {
	case 0, syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return fuse.EINVAL
	}
	return create(fs, &in.InHeader, ns.Mknod, &ns.MknodReq{Parent: in.NodeId, Name: name,
		Mode: in.Mode&syscall.S_IFMT | in.Mode&^in.Umask&0o7777, Rdev: in.Rdev, Excl: true, Uid: in.Uid, Gid: in.Gid}, in.NodeId, name, out)
}

// Mkdir implements fuse.RawFileSystem: answered here in a directory this
// mount holds the delegation of (write-back, vfs.Creates).
func (fs *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	start := fs.cfg.Now()
	who := func() ident.ID { return fs.ident(&in.InHeader, ns.OpMkdir) }
	if a, ok := fs.wb.Mkdir(who, in.NodeId, name, in.Mode&^in.Umask&0o7777, in.Uid, in.Gid); ok {
		fs.met.wbLocal.Inc()
		fs.answered(&in.InHeader, ns.OpMkdir, in.NodeId, start, false)
		fs.entry(in.NodeId, name, a, fs.dc.Sent(), out)
		return fuse.OK
	}
	return create(fs, &in.InHeader, ns.Mkdir, &ns.MkdirReq{Parent: in.NodeId, Name: name,
		Mode: in.Mode &^ in.Umask & 0o7777, Uid: in.Uid, Gid: in.Gid}, in.NodeId, name, out)
}

// Symlink implements fuse.RawFileSystem.
func (fs *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return create(fs, h, ns.Symlink, &ns.SymlinkReq{Parent: h.NodeId, Name: name, Target: target, Uid: h.Uid, Gid: h.Gid}, h.NodeId, name, out)
}

// Link implements fuse.RawFileSystem.
func (fs *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	fs.dc.ForgetFile(in.Oldnodeid)
	fs.own.Disown(in.Oldnodeid) // reachable from another directory
	return create(fs, &in.InHeader, ns.Link, &ns.LinkReq{Ino: in.Oldnodeid, NewParent: in.NodeId, NewName: name}, in.NodeId, name, out)
}

// Readlink implements fuse.RawFileSystem.
func (fs *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	resp, st := call(fs, h, ns.Readlink, &ns.InoReq{Ino: h.NodeId})
	if st != fuse.OK {
		return nil, st
	}
	return []byte(resp.Target), fuse.OK
}

// Unlink implements fuse.RawFileSystem.
func (fs *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := fs.cfg.Now()
	fs.dc.ForgetFiles() // the file's link count and ctime change
	fs.own.DisownName(h.NodeId, name)
	if fs.wb.Unlink(func() ident.ID { return fs.ident(h, ns.OpUnlink) }, h.NodeId, name) {
		fs.met.wbUnlinks.Inc()
		fs.answered(h, ns.OpUnlink, h.NodeId, start, false)
		return fuse.OK
	}
	_, st := nsCall(fs, h, ns.Unlink, &ns.NameReq{Parent: h.NodeId, Name: name}, h.NodeId, name)
	return st
}

// Rmdir implements fuse.RawFileSystem: answered here for an empty
// directory this mount made and holds (write-back, vfs.Creates).
func (fs *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := fs.cfg.Now()
	if fs.wb.Rmdir(func() ident.ID { return fs.ident(h, ns.OpRmdir) }, h.NodeId, name) {
		fs.met.wbUnlinks.Inc()
		fs.answered(h, ns.OpRmdir, h.NodeId, start, false)
		return fuse.OK
	}
	child, _ := fs.dc.Present(h.NodeId, name)
	_, st := nsCall(fs, h, ns.Rmdir, &ns.NameReq{Parent: h.NodeId, Name: name}, h.NodeId, name)
	if st == fuse.OK && child != 0 {
		fs.wb.Removed(child)
	}
	return st
}

// Rename implements fuse.RawFileSystem.
func (fs *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	fs.dc.ForgetFiles() // the files' ctime (and a replaced one's links) change
	fs.own.DisownName(in.NodeId, oldName)
	fs.own.DisownName(in.Newdir, newName)
	replaced, _ := fs.dc.Present(in.Newdir, newName)
	_, st := call(fs, &in.InHeader, ns.Rename, &ns.RenameReq{Parent: in.NodeId, Name: oldName,
		NewParent: in.Newdir, NewName: newName, Flags: in.Flags})
	if st != fuse.OK {
		fs.dc.ForgetDir(in.NodeId)
		fs.dc.ForgetDir(in.Newdir)
		return st
	}
	exchange := in.Flags&unix.RENAME_EXCHANGE != 0
	if replaced != 0 && !exchange && (in.NodeId != in.Newdir || oldName != newName) {
		fs.wb.Removed(replaced) // a directory replaced: its delegation ended with it
	}
	fs.dc.Renamed(in.NodeId, oldName, in.Newdir, newName, exchange)
	return st
}

// Access implements fuse.RawFileSystem; the kernel checks permissions
// (default_permissions), so only existence is left.
func (fs *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return fuse.OK
}

// OpenDir implements fuse.RawFileSystem: it snapshots the listing, which
// ReadDir then serves by offset.
func (fs *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	entries := []wire.DirEntry{{Name: ".", Ino: in.NodeId, Mode: syscall.S_IFDIR}, {Name: "..", Ino: 1, Mode: syscall.S_IFDIR}}
	after := ""
	first, gen := true, uint64(0) // a listing of one reply is complete as of gen
	for {
		resp, st := call(fs, &in.InHeader, ns.Readdir, &ns.ReaddirReq{Ino: in.NodeId, After: after, Max: 4096})
		if st != fuse.OK {
			return st
		}
		if resp.Redirect != nil {
			return fuse.EIO // a redirect the forwarding daemon did not follow
		}
		entries = append(entries, resp.Entries...)
		if after == "" {
			gen = resp.Feed
		}
		if len(resp.Entries) < 4096 {
			break
		}
		first = false
		after = resp.Entries[len(resp.Entries)-1].Name
	}
	if first {
		fs.dc.Listed(in.NodeId, entries[2:], gen)
	}
	fh := fs.nextFh.Add(1)
	fs.dmu.Lock()
	fs.dirs[fh] = entries
	fs.dmu.Unlock()
	out.Fh = fh
	return fuse.OK
}

// ReadDir implements fuse.RawFileSystem.
func (fs *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	fs.dmu.Lock()
	entries := fs.dirs[in.Fh]
	fs.dmu.Unlock()
	for i := int(in.Offset); i < len(entries); i++ {
		e := entries[i]
		if !out.AddDirEntry(fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode, Off: uint64(i + 1)}) {
			break
		}
	}
	return fuse.OK
}

// ReleaseDir implements fuse.RawFileSystem.
func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) {
	fs.dmu.Lock()
	delete(fs.dirs, in.Fh)
	fs.dmu.Unlock()
}

// FsyncDir implements fuse.RawFileSystem.
func (fs *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	_, st := call(fs, &in.InHeader, ns.Fsync, &ns.SizeReq{Ino: in.NodeId})
	return st
}

// StatFs implements fuse.RawFileSystem: the tiers' total capacity.
func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	resp, st := call(fs, h, ns.Statfs, &ns.PingReq{})
	if st != fuse.OK {
		return st
	}
	const bs = 4096
	out.Bsize, out.Frsize = bs, bs
	out.Blocks = resp.Capacity / bs
	free := uint64(0)
	if resp.Capacity > resp.Used {
		free = (resp.Capacity - resp.Used) / bs
	}
	out.Bfree, out.Bavail = free, free
	out.Files = 1 << 40
	out.Ffree = 1 << 40
	out.NameLen = 255
	return fuse.OK
}
