package client

import (
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-hpc/sluice/client/vfs"
)

// File locks (vfs/locks.go): the kernel forwards POSIX, OFD and flock
// locks (MountOptions.EnableLocks); the metadata service holds them for
// every mount.

// lockArgs is the kernel's lock request as the core takes it.
func lockArgs(in *fuse.LkIn) vfs.LockArgs {
	return vfs.LockArgs{Flock: in.LkFlags&fuse.LK_FLOCK != 0, Type: uint8(in.Lk.Typ), Start: in.Lk.Start, End: in.Lk.End, Pid: in.Lk.Pid}
}

// GetLk implements fuse.RawFileSystem (F_GETLK, F_OFD_GETLK).
func (fs *FS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	a, err := fs.v.GetLock(cred(&in.InHeader), in.NodeId, in.Owner, lockArgs(in))
	if err != nil {
		return status(err)
	}
	out.Lk = fuse.FileLock{Start: a.Start, End: a.End, Typ: uint32(a.Type), Pid: a.Pid}
	return fuse.OK
}

// SetLk implements fuse.RawFileSystem (F_SETLK, flock with LOCK_NB).
func (fs *FS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return status(fs.v.SetLock(cred(&in.InHeader), in.NodeId, in.Fh, in.Owner, lockArgs(in), false, cancel))
}

// SetLkw implements fuse.RawFileSystem (F_SETLKW, flock): it waits until
// granted or the caller is interrupted.
func (fs *FS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return status(fs.v.SetLock(cred(&in.InHeader), in.NodeId, in.Fh, in.Owner, lockArgs(in), true, cancel))
}
