package meta

import (
	"context"
	"fmt"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/layout"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Attributes: a mount's changes (Setattr), the forwarding daemons' size
// reports (Extend), a directory's layout for new files (SetLayout).

// Setattr changes the attributes selected by mask. Setting the size
// raises the file's truncation generation and records the trims of every
// chunk past the new size in the same commit; they are sent to the data
// servers before the reply (trunc.go), and any a server did not apply stay
// pending until it does.
func (s *Service) Setattr(ctx context.Context, m *ns.SetattrReq) (*wire.Attr, error) {
	s.mu.Lock()
	n, err := s.getInode(m.Ino)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if s.replied(&m.Head) {
		// sent again after its answer was lost (replies.go): made
		// already, and not made twice (a truncate would cut what was
		// written since)
		s.mu.Unlock()
		return &n.Attr, nil
	}
	t := s.now().UnixNano()
	if m.Mask&ns.SetMode != 0 {
		n.Mode = n.Mode&syscall.S_IFMT | m.Mode&^uint32(syscall.S_IFMT)
	}
	if m.Mask&ns.SetUid != 0 {
		n.Uid = m.Uid
	}
	if m.Mask&ns.SetGid != 0 {
		n.Gid = m.Gid
	}
	if m.Mask&(ns.SetUid|ns.SetGid) != 0 && !isDir(n.Mode) && m.Mask&ns.SetMode == 0 {
		// a chown clears set-user-ID, and set-group-ID if group
		// execution is allowed (without it the bit marks mandatory
		// locking and stays), as Linux's notify_change does
		n.Mode &^= syscall.S_ISUID
		if n.Mode&syscall.S_IXGRP != 0 {
			n.Mode &^= syscall.S_ISGID
		}
	}
	if m.Mask&ns.SetKillPriv != 0 && !isDir(n.Mode) {
		n.Mode &^= syscall.S_ISUID
		if n.Mode&syscall.S_IXGRP != 0 || m.Mask&ns.SetKillSgid != 0 {
			n.Mode &^= syscall.S_ISGID
		}
	}
	if m.Mask&ns.SetAtime != 0 {
		n.Atime = m.Atime
	}
	if m.Mask&ns.SetMtime != 0 {
		n.Mtime = m.Mtime
	}
	var b engine.Batch
	if m.Mask&ns.SetMode != 0 {
		// an access ACL follows the new mode (acl.go)
		if err := s.chmodACLLocked(&b, n.Ino, n.Mode); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	var trimServers []uint64
	if m.Mask&ns.SetSize != 0 {
		if isDir(n.Mode) {
			s.mu.Unlock()
			return nil, errno(syscall.EISDIR, "cannot truncate a directory")
		}
		if n.Mode&syscall.S_IFMT != syscall.S_IFREG {
			s.mu.Unlock()
			return nil, errno(syscall.EINVAL, "inode %d is not a regular file", n.Ino)
		}
		// every chunk past the new size is cut, whatever size this
		// service knew: growth a forwarding node has not reported yet
		// is in the chunks too
		n.Trunc++
		trimServers = s.trimsLocked(&b, n, m.Size)
		n.Size = m.Size
		if m.Mask&ns.SetMtime == 0 {
			n.Mtime = t
		}
	}
	n.Ctime = t
	b.Set(inodeKey(n.Ino), n.encode())
	withReply(&b, []*engine.Batch{s.replyBatch(&m.Head)})
	err = s.e.Apply(&b, false)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.sendTrims(ctx, n.Ino, trimServers)
	if m.Mask&ns.SetSize != 0 && s.hasPfsData(n.Ino) {
		// the plain file in the PFS shows a truncate up too
		pfsEach(s, chunk.PfsGrow, &chunk.PfsGrowReq{Ino: n.Ino, Size: m.Size}, fmt.Sprintf("inode %d", n.Ino))
	}
	return &n.Attr, nil
}

// Touch moves the access times of inodes a mount read forward to
// atimes[i] (ns.Touch: the mount applied its atime rule): nothing else
// changes, not the ctime. Inodes gone since are skipped. It returns the
// inodes changed, for the change feed.
func (s *Service) Touch(inos, atimes []uint64) ([]uint64, error) {
	if len(inos) != len(atimes) {
		return nil, errno(syscall.EINVAL, "touch: %d inodes, %d access times", len(inos), len(atimes))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got := make(map[uint64]*inode, len(inos)) // an inode named twice changes once
	var changed []uint64
	for i, ino := range inos {
		n := got[ino]
		if n == nil {
			var err error
			if n, err = s.getInode(ino); err != nil {
				continue // removed since it was read
			}
		}
		if at := int64(atimes[i]); at > n.Atime {
			if got[ino] == nil {
				changed = append(changed, ino)
			}
			n.Atime, got[ino] = at, n
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	var b engine.Batch
	for _, ino := range changed {
		b.Set(inodeKey(ino), got[ino].encode())
	}
	return changed, s.e.Apply(&b, false)
}

// Extend raises a file's size to at least size and sets its mtime (the
// forwarding node reports writes this way). A report made under an older
// truncation generation than the file's is about writes a truncate came
// after: it changes nothing.
func (s *Service) Extend(ino, size uint64, mtime int64, gen uint64) (*wire.Attr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.getInode(ino)
	if err != nil {
		return nil, err
	}
	if gen != n.Trunc {
		return &n.Attr, nil
	}
	changed := false
	if size > n.Size {
		n.Size = size
		changed = true
	}
	if mtime > n.Mtime {
		n.Mtime, n.Ctime = mtime, mtime
		changed = true
	}
	if changed {
		var b engine.Batch
		b.Set(inodeKey(ino), n.encode())
		if err := s.e.Apply(&b, false); err != nil {
			return nil, err
		}
	}
	return &n.Attr, nil
}

// SetLayout sets a directory's chunk size and striping, inherited by files
// and directories created in it afterwards.
func (s *Service) SetLayout(ino uint64, chunk, cnt, unit uint32) (*wire.Attr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.getDir(ino)
	if err != nil {
		return nil, err
	}
	if chunk != 0 {
		if chunk < layout.MinChunkSize || chunk > layout.MaxChunkSize || chunk&(chunk-1) != 0 {
			return nil, errno(syscall.EINVAL, "chunk size must be a power of two between %d and %d", layout.MinChunkSize, layout.MaxChunkSize)
		}
		n.ChunkSize = chunk
	}
	if cnt != 0 {
		if cnt > 64 {
			return nil, errno(syscall.EINVAL, "stripe count %d too large", cnt)
		}
		n.StripeCnt = cnt
	}
	if unit != 0 {
		n.StripeUnit = unit
	}
	if n.StripeUnit > n.ChunkSize || n.ChunkSize%n.StripeUnit != 0 {
		return nil, errno(syscall.EINVAL, "stripe unit %d must divide chunk size %d", n.StripeUnit, n.ChunkSize)
	}
	var b engine.Batch
	b.Set(inodeKey(ino), n.encode())
	if err := s.e.Apply(&b, false); err != nil {
		return nil, err
	}
	return &n.Attr, nil
}
