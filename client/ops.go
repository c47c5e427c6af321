package client

import (
	"log/slog"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-hpc/sluice/client/vfs"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// The go-fuse methods: each translates the kernel's request into a call
// of the core (vfs.FS) and its answer into the reply.

// cred is the caller of a kernel request.
func cred(h *fuse.InHeader) vfs.Cred { return vfs.Cred{Pid: h.Pid, Uid: h.Uid, Gid: h.Gid} }

// masked is the caller of a create with its umask: the kernel leaves it
// to the file system (DONT_MASK), which applies it unless the directory
// has a default ACL (POSIX_ACL; meta/acl.go).
func masked(h *fuse.InHeader, umask uint32) vfs.Cred {
	c := cred(h)
	c.Umask = umask & 0o777
	return c
}

// status is the reply's status for err.
func status(err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	return fuse.Status(rpc.Errno(err))
}

// toAttr fills attributes for the kernel.
func toAttr(a *wire.Attr, out *fuse.Attr) {
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

// entryOut fills an entry reply.
func entryOut(e vfs.Entry, err error, out *fuse.EntryOut) fuse.Status {
	if err != nil {
		return status(err)
	}
	out.NodeId = e.Attr.Ino
	out.Generation = 1
	out.SetEntryTimeout(e.TTL.Entry)
	out.SetAttrTimeout(e.TTL.Attr)
	toAttr(&e.Attr, &out.Attr)
	return fuse.OK
}

// attrOut fills an attribute reply.
func attrOut(a vfs.Attr, err error, out *fuse.AttrOut) fuse.Status {
	if err != nil {
		return status(err)
	}
	out.SetTimeout(a.TTL)
	toAttr(&a.Attr, &out.Attr)
	return fuse.OK
}

// openFlags are the flags of every open's reply: direct I/O (the core
// streams) unless the kernel caches data.
func (fs *FS) openFlags() uint32 {
	if fs.cfg.CacheData {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
}

// Lookup implements fuse.RawFileSystem.
func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	e, err := fs.v.Lookup(cred(h), h.NodeId, name)
	return entryOut(e, err, out)
}

// Forget implements fuse.RawFileSystem: node ids are inode numbers, so
// there is nothing to forget but the blocks the core keeps.
func (fs *FS) Forget(nodeid, nlookup uint64) { fs.v.Forget(nodeid) }

// GetAttr implements fuse.RawFileSystem.
func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	a, err := fs.v.GetAttr(cred(&in.InHeader), in.NodeId)
	return attrOut(a, err, out)
}

// SetAttr implements fuse.RawFileSystem.
func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	var s vfs.SetAttr
	if in.Valid&fuse.FATTR_MODE != 0 {
		s.Mask |= ns.SetMode
		s.Mode = in.Mode
	}
	if in.Valid&fuse.FATTR_UID != 0 {
		s.Mask |= ns.SetUid
		s.Uid = in.Owner.Uid
	}
	if in.Valid&fuse.FATTR_GID != 0 {
		s.Mask |= ns.SetGid
		s.Gid = in.Owner.Gid
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		s.Mask |= ns.SetSize
		s.Size = in.Size
	}
	if in.Valid&fuse.FATTR_ATIME != 0 {
		s.Mask |= ns.SetAtime
		s.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
		s.AtimeNow = in.Valid&fuse.FATTR_ATIME_NOW != 0
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		s.Mask |= ns.SetKillPriv
	}
	if in.Valid&fuse.FATTR_MTIME != 0 {
		s.Mask |= ns.SetMtime
		s.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
		s.MtimeNow = in.Valid&fuse.FATTR_MTIME_NOW != 0
	}
	a, err := fs.v.SetAttr(cred(&in.InHeader), in.NodeId, s)
	return attrOut(a, err, out)
}

// Mknod implements fuse.RawFileSystem.
func (fs *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	e, err := fs.v.Mknod(masked(&in.InHeader, in.Umask), in.NodeId, name, in.Mode&(syscall.S_IFMT|0o7777), in.Rdev)
	return entryOut(e, err, out)
}

// Mkdir implements fuse.RawFileSystem.
func (fs *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	e, err := fs.v.Mkdir(masked(&in.InHeader, in.Umask), in.NodeId, name, in.Mode&0o7777)
	return entryOut(e, err, out)
}

// Symlink implements fuse.RawFileSystem.
func (fs *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	e, err := fs.v.Symlink(cred(h), h.NodeId, name, target)
	return entryOut(e, err, out)
}

// Link implements fuse.RawFileSystem.
func (fs *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	e, err := fs.v.Link(cred(&in.InHeader), in.Oldnodeid, in.NodeId, name)
	return entryOut(e, err, out)
}

// Readlink implements fuse.RawFileSystem.
func (fs *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	t, err := fs.v.Readlink(cred(h), h.NodeId)
	if err != nil {
		return nil, status(err)
	}
	return []byte(t), fuse.OK
}

// Unlink implements fuse.RawFileSystem.
func (fs *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return status(fs.v.Unlink(cred(h), h.NodeId, name))
}

// Rmdir implements fuse.RawFileSystem.
func (fs *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return status(fs.v.Rmdir(cred(h), h.NodeId, name))
}

// Rename implements fuse.RawFileSystem.
func (fs *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return status(fs.v.Rename(cred(&in.InHeader), in.NodeId, oldName, in.Newdir, newName, in.Flags))
}

// Access implements fuse.RawFileSystem; the kernel checks permissions
// (default_permissions), so only existence is left.
func (fs *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return fuse.OK
}

// OpenDir implements fuse.RawFileSystem: the core takes the listing at
// the first read and at a rewind, and ReadDir serves it by offset.
func (fs *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	fh, err := fs.v.OpenDir(cred(&in.InHeader), in.NodeId)
	out.Fh = fh
	return status(err)
}

// ReadDir implements fuse.RawFileSystem.
func (fs *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	entries, err := fs.v.Listing(cred(&in.InHeader), in.Fh, in.Offset)
	if err != nil {
		return status(err)
	}
	for i := int(in.Offset); i < len(entries); i++ {
		e := entries[i]
		if !out.AddDirEntry(fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode, Off: uint64(i + 1)}) {
			break
		}
	}
	return fuse.OK
}

// ReleaseDir implements fuse.RawFileSystem.
func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) { fs.v.ReleaseDir(in.Fh) }

// FsyncDir implements fuse.RawFileSystem.
func (fs *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return status(fs.v.FsyncDir(cred(&in.InHeader), in.NodeId))
}

// StatFs implements fuse.RawFileSystem: the tiers' total capacity.
func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	capacity, used, err := fs.v.Statfs(cred(h))
	if err != nil {
		return status(err)
	}
	const bs = 4096
	out.Bsize, out.Frsize = bs, bs
	out.Blocks = capacity / bs
	free := uint64(0)
	if capacity > used {
		free = (capacity - used) / bs
	}
	out.Bfree, out.Bavail = free, free
	out.Files = 1 << 40
	out.Ffree = 1 << 40
	out.NameLen = 255
	return fuse.OK
}

// Create implements fuse.RawFileSystem.
func (fs *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	e, fh, err := fs.v.Create(masked(&in.InHeader, in.Umask), in.NodeId, name, in.Mode, in.Flags&syscall.O_EXCL != 0)
	if st := entryOut(e, err, &out.EntryOut); st != fuse.OK {
		return st
	}
	out.Fh = fh
	out.OpenFlags = fs.openFlags()
	return fuse.OK
}

// Open implements fuse.RawFileSystem.
func (fs *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	fh, err := fs.v.Open(cred(&in.InHeader), in.NodeId, in.Flags)
	if err != nil {
		return status(err)
	}
	out.Fh = fh
	out.OpenFlags = fs.openFlags()
	return fuse.OK
}

// Read implements fuse.RawFileSystem: from a readahead buffer, or
// directly into buf.
func (fs *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	r, err := fs.v.Read(cred(&in.InHeader), in.NodeId, in.Fh, in.Offset, buf[:in.Size])
	switch {
	case err != nil:
		return nil, status(err)
	case r.Hit != nil && r.Hit.Pipe != nil:
		return &pipeResult{h: r.Hit, log: fs.log}, fuse.OK
	case r.Hit != nil:
		return raResult{r.Hit}, fuse.OK
	}
	return fuse.ReadResultData(r.Data), fuse.OK
}

// Write implements fuse.RawFileSystem: in the background (write-behind)
// unless that is off.
func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, err := fs.v.Write(cred(&in.InHeader), in.NodeId, in.Fh, in.Offset, data, in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0, nil)
	return n, status(err)
}

// Fallocate implements fuse.RawFileSystem (vfs.FS.Fallocate).
func (fs *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return status(fs.v.Fallocate(cred(&in.InHeader), in.NodeId, in.Fh, in.Offset, in.Length, in.Mode))
}

var _ fuse.WriteOwner = (*FS)(nil)

// WriteOwned implements fuse.WriteOwner: Write, with data left in
// go-fuse's request buffer, which a write in the background then sends
// as it is instead of a copy (vfs.FS.KeptWrite); release gives the buffer
// back once nothing reads it.
func (fs *FS) WriteOwned(cancel <-chan struct{}, in *fuse.WriteIn, data []byte, release func()) (uint32, fuse.Status) {
	n, err := fs.v.KeptWrite(cred(&in.InHeader), in.NodeId, in.Fh, in.Offset, data, in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0, release)
	return n, status(err)
}

// Flush implements fuse.RawFileSystem: a close (vfs.FS.Flush).
func (fs *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	// a process's record locks on the file go at any close of it
	fs.v.ReleaseLocks(cred(&in.InHeader), in.NodeId, in.Fh, true, in.LockOwner, false)
	return status(fs.v.Flush(cred(&in.InHeader), in.NodeId, in.Fh))
}

// Fsync implements fuse.RawFileSystem: durable on the tier's medium.
func (fs *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return status(fs.v.Fsync(cred(&in.InHeader), in.NodeId, in.Fh))
}

// Release implements fuse.RawFileSystem.
func (fs *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	// the open file's flock and OFD locks go with it
	fs.v.ReleaseLocks(cred(&in.InHeader), in.NodeId, in.Fh, false, in.LockOwner, in.ReleaseFlags&fuse.FUSE_RELEASE_FLOCK_UNLOCK != 0)
	fs.v.Release(cred(&in.InHeader), in.NodeId, in.Fh)
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
