package meta

import (
	"context"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Extended attributes. An inode's attributes are kept beside it ('X' ino
// name → value) and go with it; being metadata, they stay with a file
// that moves between tiers. The namespaces are Linux's user., trusted.
// and security.; the kernel checks who may read and write each (the
// mount runs with default_permissions: user. needs the file's read or
// write permission, trusted. CAP_SYS_ADMIN), and its limits (names of 255
// bytes, values of 64 KiB). Of system., the POSIX ACLs are kept (acl.go);
// other system. names and unknown namespaces are refused with
// EOPNOTSUPP.

// xattrMax bounds the bytes of one inode's attributes, names and values
// together (ENOSPC beyond), as a file system's inode or block does.
const xattrMax = 1 << 20

func xattrPrefix(ino uint64) []byte { return key1(pXattr, ino) }

func xattrKey(ino uint64, name string) []byte { return append(xattrPrefix(ino), name...) }

// xattrName refuses names outside the supported namespaces.
func xattrName(name string) error {
	if name == aclAccess || name == aclDefault {
		return nil
	}
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) && len(name) > len(ns) {
			if len(name) > 255 {
				return errno(syscall.ERANGE, "attribute name of %d bytes (255 at most)", len(name))
			}
			return nil
		}
	}
	return errno(syscall.EOPNOTSUPP, "attribute %q: the namespaces are user., trusted. and security. (and the POSIX ACLs of system.)", name)
}

// Getxattr returns attribute name of ino (ENODATA if it has none).
func (s *Service) Getxattr(ino uint64, name string) ([]byte, error) {
	if err := xattrName(name); err != nil {
		return nil, err
	}
	if _, err := s.getInode(ino); err != nil {
		return nil, err
	}
	v, err := s.e.Get(xattrKey(ino, name))
	if err == engine.ErrNotFound {
		return nil, errno(syscall.ENODATA, "no attribute %q", name)
	}
	return v, err
}

// Listxattr returns the names of ino's attributes.
func (s *Service) Listxattr(ino uint64) ([]string, error) {
	if _, err := s.getInode(ino); err != nil {
		return nil, err
	}
	var names []string
	pre := xattrPrefix(ino)
	err := s.e.Scan(pre, nil, func(k, _ []byte) bool {
		names = append(names, string(k[len(pre):]))
		return true
	})
	return names, err
}

// Setxattr sets (value non-nil) or removes (remove) attribute name of
// ino; flags are setxattr(2)'s. The inode's ctime changes, as Linux's.
func (s *Service) Setxattr(ino uint64, name string, value []byte, flags uint32, remove bool) error {
	if err := xattrName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.getInode(ino)
	if err != nil {
		return err
	}
	old, err := s.e.Get(xattrKey(ino, name))
	exists := err == nil
	if err != nil && err != engine.ErrNotFound {
		return err
	}
	switch {
	case remove && !exists, flags&ns.XattrReplace != 0 && !exists:
		return errno(syscall.ENODATA, "no attribute %q", name)
	case flags&ns.XattrCreate != 0 && exists:
		return errno(syscall.EEXIST, "attribute %q exists", name)
	}
	var b engine.Batch
	if !remove && (name == aclAccess || name == aclDefault) {
		// an access ACL sets the mode, and is not kept if it says no more
		if value, err = setACLLocked(n, name, value); err != nil {
			return err
		}
		if name == aclAccess && flags&ns.XattrKillSgid != 0 {
			n.Mode &^= syscall.S_ISGID
		}
		remove = value == nil
	}
	if remove {
		b.Del(xattrKey(ino, name))
	} else {
		total := len(name) + len(value) - len(old)
		pre := xattrPrefix(ino)
		s.e.Scan(pre, nil, func(k, v []byte) bool {
			total += len(k) - len(pre) + len(v)
			return true
		})
		if exists {
			total -= len(name)
		}
		if total > xattrMax {
			return errno(syscall.ENOSPC, "inode %d's attributes would take %d bytes (%d at most)", ino, total, xattrMax)
		}
		b.Set(xattrKey(ino, name), value)
	}
	n.Ctime = s.now().UnixNano()
	b.Set(inodeKey(ino), n.encode())
	return s.e.Apply(&b, false)
}

// dropXattrs removes ino's attributes in b (the inode goes).
func (s *Service) dropXattrs(b *engine.Batch, ino uint64) {
	pre := xattrPrefix(ino)
	s.e.Scan(pre, nil, func(k, _ []byte) bool {
		b.Del(append([]byte(nil), k...))
		return true
	})
}

// serveXattrs adds the extended attribute operations to t.
func (s *Service) serveXattrs(t *rpc.Table) {
	theIno := func(_ *Service, q *ns.XattrReq) ([]uint64, uint64) {
		if q.Name == aclDefault {
			// its creates need the inheritance: another mount's
			// delegation of the directory is recalled first
			return []uint64{q.Ino}, 0
		}
		return nil, q.Ino
	}
	nsOp(s, t, ns.Getxattr, theIno, func(_ context.Context, q *ns.XattrReq) (*ns.XattrRep, []ns.Change, error) {
		v, err := s.Getxattr(q.Ino, q.Name)
		return &ns.XattrRep{Value: v}, nil, err
	})
	nsOp(s, t, ns.Listxattr, theIno, func(_ context.Context, q *ns.XattrReq) (*ns.XattrRep, []ns.Change, error) {
		names, err := s.Listxattr(q.Ino)
		return &ns.XattrRep{Names: names}, nil, err
	})
	nsOp(s, t, ns.Setxattr, theIno, func(_ context.Context, q *ns.XattrReq) (*ns.XattrRep, []ns.Change, error) {
		return &ns.XattrRep{}, []ns.Change{attrChange(q.Ino)}, s.Setxattr(q.Ino, q.Name, q.Value, q.Flags, false)
	})
	nsOp(s, t, ns.Removexattr, theIno, func(_ context.Context, q *ns.XattrReq) (*ns.XattrRep, []ns.Change, error) {
		return &ns.XattrRep{}, []ns.Change{attrChange(q.Ino)}, s.Setxattr(q.Ino, q.Name, nil, 0, true)
	})
}
