// Package dirtree is the namespace as the metadata daemon's other
// services see it (meta/pools, meta/tierpolicy): whether an inode is a
// directory and which is its parent, nothing more. The metadata service
// implements it; Fake is one for their tests. It must not grow into a
// second way to change the namespace.
package dirtree

import (
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
)

// Namespace is the namespace as the metadata daemon's other services see
// it.
type Namespace interface {
	// Dir fails unless ino is a directory (ENOENT, ENOTDIR).
	Dir(ino uint64) error
	// Parent is ino's primary parent (0 for the root).
	Parent(ino uint64) (uint64, error)
}

// Fake is a namespace of a few inodes, for tests: each inode's parent
// (the root's is 0), and which are directories.
type Fake struct {
	Parents map[uint64]uint64
	Dirs    map[uint64]bool
}

// Dir implements Namespace.
func (f Fake) Dir(ino uint64) error {
	if _, ok := f.Parents[ino]; !ok {
		return rpc.Errorf(syscall.ENOENT, "no inode %d", ino)
	}
	if !f.Dirs[ino] {
		return rpc.Errorf(syscall.ENOTDIR, "inode %d is not a directory", ino)
	}
	return nil
}

// Parent implements Namespace.
func (f Fake) Parent(ino uint64) (uint64, error) {
	p, ok := f.Parents[ino]
	if !ok {
		return 0, rpc.Errorf(syscall.ENOENT, "no inode %d", ino)
	}
	return p, nil
}
