package meta

import (
	"errors"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Rename moves parent/name to newParent/newName, atomically replacing an
// existing target; flags are renameat2's RENAME_NOREPLACE and
// RENAME_EXCHANGE (RENAME_WHITEOUT, for overlay file systems, is refused
// with EINVAL, as by file systems without whiteouts).
func (s *Service) Rename(parent uint64, name string, newParent uint64, newName string, flags uint32, reply ...*engine.Batch) error {
	if err := validName(newName); err != nil {
		return err
	}
	if flags&^(ns.RenameNoReplace|ns.RenameExchange) != 0 || flags == ns.RenameNoReplace|ns.RenameExchange {
		return errno(syscall.EINVAL, "rename flags %#x: only RENAME_NOREPLACE or RENAME_EXCHANGE", flags)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.getDir(parent)
	if err != nil {
		return err
	}
	dst := src
	if newParent != parent {
		if dst, err = s.getDir(newParent); err != nil {
			return err
		}
	}
	ino, _, err := s.lookupEntry(parent, name)
	if err != nil {
		return err
	}
	n, err := s.getInode(ino)
	if err != nil {
		return err
	}
	if parent == newParent && name == newName {
		return nil
	}
	if isDir(n.Mode) && newParent != parent {
		if err := s.notBelowLocked(ino, newParent); err != nil {
			return err
		}
	}
	tino, _, terr := s.lookupEntry(newParent, newName)
	if terr != nil && !errors.Is(terr, syscall.ENOENT) {
		return terr
	}
	exists := terr == nil
	if flags&ns.RenameNoReplace != 0 && exists {
		return errno(syscall.EEXIST, "%q exists", newName)
	}
	if exists && tino == ino && flags&ns.RenameExchange == 0 {
		return nil // both names are links to one file: POSIX says do nothing
	}
	oldPath := s.pfsPathLocked(ino, parent, name)
	newPath := s.pfsPathLocked(newParent, 0, "")
	if newPath != "" {
		newPath += "/" + newName
	}
	r := renaming{src: src, dst: dst, n: n, name: name, newName: newName, t: s.now().UnixNano()}
	if flags&ns.RenameExchange != 0 {
		if !exists {
			return errno(syscall.ENOENT, "%q not found", newName)
		}
		err = s.exchangeLocked(&r, tino)
	} else {
		err = s.moveLocked(&r, tino, exists)
	}
	if err != nil {
		return err
	}
	r.src.Mtime, r.src.Ctime = r.t, r.t
	r.dst.Mtime, r.dst.Ctime = r.t, r.t
	r.b.Set(inodeKey(parent), r.src.encode())
	if newParent != parent {
		r.b.Set(inodeKey(newParent), r.dst.encode())
	}
	if exists && flags&ns.RenameExchange == 0 {
		r.b.Del(delegKey(tino)) // a directory replaced: its delegation ends with it
	}
	withReply(&r.b, reply)
	if err := s.e.Apply(&r.b, false); err != nil {
		return err
	}
	if exists && flags&ns.RenameExchange == 0 {
		s.dropDeleg(tino) // a directory replaced: its delegation ends with it
	}
	if flags&ns.RenameExchange == 0 {
		s.pfsRename(oldPath, newPath)
	}
	s.kickGC()
	return nil
}

// renaming is a rename being made: the directories (src, dst, the same
// one for a rename in place), the inode renamed, its names, the time and
// the batch that commits it.
type renaming struct {
	src, dst      *inode
	n             *inode
	name, newName string
	t             int64
	b             engine.Batch
}

// notBelowLocked fails if directory dir is newParent or above it: a
// directory must not move into its own subtree. Caller holds s.mu.
func (s *Service) notBelowLocked(dir, newParent uint64) error {
	for p := newParent; p != RootIno && p != 0; {
		if p == dir {
			return errno(syscall.EINVAL, "cannot move a directory into itself")
		}
		pn, err := s.getInode(p)
		if err != nil {
			return err
		}
		p = pn.Parent
	}
	return nil
}

// exchangeLocked swaps r's inode and the one named r.newName in r.dst
// (tino) (RENAME_EXCHANGE). Caller holds s.mu.
func (s *Service) exchangeLocked(r *renaming, tino uint64) error {
	tn, err := s.getInode(tino)
	if err != nil {
		return err
	}
	n := r.n
	r.b.Set(dentryKey(r.src.Ino, r.name), encodeDentry(tino, tn.Mode))
	r.b.Set(dentryKey(r.dst.Ino, r.newName), encodeDentry(n.Ino, n.Mode))
	n.Parent, n.Name, n.Ctime = r.dst.Ino, r.newName, r.t
	tn.Parent, tn.Name, tn.Ctime = r.src.Ino, r.name, r.t
	if isDir(n.Mode) != isDir(tn.Mode) && r.src != r.dst {
		if isDir(n.Mode) {
			r.src.Nlink--
			r.dst.Nlink++
		} else {
			r.src.Nlink++
			r.dst.Nlink--
		}
	}
	r.b.Set(inodeKey(n.Ino), n.encode())
	r.b.Set(inodeKey(tino), tn.encode())
	return nil
}

// moveLocked moves r's inode to r.newName in r.dst, replacing what is
// there (tino, if exists): a file by a file, an empty directory by a
// directory. Caller holds s.mu.
func (s *Service) moveLocked(r *renaming, tino uint64, exists bool) error {
	n := r.n
	if exists {
		tn, err := s.getInode(tino)
		if err != nil {
			return err
		}
		switch {
		case isDir(n.Mode) && !isDir(tn.Mode):
			return errno(syscall.ENOTDIR, "%q is not a directory", r.newName)
		case !isDir(n.Mode) && isDir(tn.Mode):
			return errno(syscall.EISDIR, "%q is a directory", r.newName)
		case isDir(tn.Mode) && s.hasEntries(tino):
			return errno(syscall.ENOTEMPTY, "directory %q not empty", r.newName)
		}
		if isDir(tn.Mode) {
			r.dst.Nlink--
		}
		s.dropLinkLocked(&r.b, tn, r.t)
	}
	r.b.Del(dentryKey(r.src.Ino, r.name))
	r.b.Set(dentryKey(r.dst.Ino, r.newName), encodeDentry(n.Ino, n.Mode))
	n.Parent, n.Name, n.Ctime = r.dst.Ino, r.newName, r.t
	r.b.Set(inodeKey(n.Ino), n.encode())
	if isDir(n.Mode) && r.src != r.dst {
		r.src.Nlink--
		r.dst.Nlink++
	}
	return nil
}
