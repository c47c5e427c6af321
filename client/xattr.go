package client

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// xattrStatus is an extended attribute call's answer for the kernel:
// never ENOSYS, which would turn extended attributes off for the whole
// mount (a server of an older protocol, or a node-local file's data
// server, does not know the calls).
func xattrStatus(err error) fuse.Status {
	if rpc.Errno(err) == syscall.ENOSYS {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	return status(err)
}

// GetXAttr implements fuse.RawFileSystem. The kernel asks for
// security.capability at every write: answered "none" here, not by a
// round trip (file capabilities are not kept).
func (fs *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if attr == "security.capability" {
		return 0, fuse.ENOATTR
	}
	v, err := fs.v.Getxattr(cred(h), h.NodeId, attr)
	if err != nil {
		return 0, xattrStatus(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE // (a size query: go-fuse answers the size)
	}
	return uint32(copy(dest, v)), fuse.OK
}

// ListXAttr implements fuse.RawFileSystem.
func (fs *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	names, err := fs.v.Listxattr(cred(h), h.NodeId)
	if err != nil {
		return 0, xattrStatus(err)
	}
	var list []byte
	for _, n := range names {
		list = append(append(list, n...), 0)
	}
	if len(dest) < len(list) {
		return uint32(len(list)), fuse.ERANGE
	}
	return uint32(copy(dest, list)), fuse.OK
}

// SetXAttr implements fuse.RawFileSystem.
func (fs *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	flags := in.Flags & (ns.XattrCreate | ns.XattrReplace)
	if in.SetXAttrFlags&fuse.SETXATTR_ACL_KILL_SGID != 0 {
		flags |= ns.XattrKillSgid
	}
	return xattrStatus(fs.v.Setxattr(cred(&in.InHeader), in.NodeId, attr, data, flags))
}

// RemoveXAttr implements fuse.RawFileSystem.
func (fs *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return xattrStatus(fs.v.Removexattr(cred(h), h.NodeId, attr))
}
