package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// memFSOptions are the mount options of the mem tier's own tmpfs, beside
// mode, size and nr_inodes. huge=within_size lets the kernel back a file
// with large folios (of the writes' size, up to 2 MiB) wherever the
// file's size covers them: a 4 MiB chunk written 1 MiB at a time is held
// in four folios instead of 1,024 pages, so writing a new chunk allocates,
// charges and maps four things instead of 1,024, and copying into it or
// sending from it walks four. On this VM 512 new 4 MiB
// files cost 0.18 s of system time against 0.69 s on a tmpfs as /dev/shm
// is mounted (bench/memfs.sh; docs/benchmarks.md, "The mem tier on large
// pages"); a file smaller than a large folio (a small file's one chunk)
// keeps small pages, so the memory it holds does not grow.
const memFSOptions = "huge=within_size"

// mountMemFS mounts a tmpfs of its own, with large folios, on parent, the
// per-cluster directory under /dev/shm that holds the mem tier servers'
// directories, and returns the options it used. It mounts only where
// parent is missing or empty (an existing mem tier, kept by `down` without
// --purge for the next `up`, is never hidden under a new mount) and not a
// mount already; it returns "" and no error where it did not mount because
// the directory was in use, and an error where the mount failed (not root,
// a kernel without huge= for tmpfs): the caller then keeps the tier in
// /dev/shm's own tmpfs. The new tmpfs gets /dev/shm's size and inode
// count, so the tier may hold what it could before.
func mountMemFS(parent string) (string, error) {
	if isMountPoint(parent) {
		return memFSOptions, nil // an earlier up's, with the tier in it
	}
	if ents, err := os.ReadDir(parent); err == nil && len(ents) > 0 {
		return "", nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(parent), &st); err != nil {
		return "", err
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	data := fmt.Sprintf("%s,mode=0700,size=%d,nr_inodes=%d", memFSOptions, int64(st.Blocks)*st.Bsize, st.Files)
	if err := syscall.Mount("tmpfs", parent, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, data); err != nil {
		os.Remove(parent)
		return "", fmt.Errorf("mount tmpfs on %s (%s): %w", parent, data, err)
	}
	return memFSOptions, nil
}

// removeMemDir removes the per-cluster mem tier directory parent and all
// it holds, unmounting its own tmpfs first if it has one.
func removeMemDir(parent string) error {
	if isMountPoint(parent) {
		if err := syscall.Unmount(parent, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", parent, err)
		}
	}
	return os.RemoveAll(parent)
}

// isMountPoint reports whether dir is on another file system than its
// parent directory.
func isMountPoint(dir string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
