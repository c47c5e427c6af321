package tier

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	Register("pfs", func(cfg Config) (Store, error) { return OpenPFS(cfg) })
}

// PFSStore keeps each file as one plain object <dir>/.sluice/objects/<ino>
// in an existing PFS mount (any POSIX directory), and makes the file's
// namespace path <dir>/<path> a hard link to it, so users read drained data
// straight from the PFS. Chunk idx of a file lives at byte idx·ChunkSize of
// the object. Space is the PFS's own: there is no budget.
type PFSStore struct {
	dir  string
	objs string

	mu       sync.Mutex // guards files, capacity
	files    map[uint64]*os.File
	capacity int64 // 0: the PFS's size
}

var (
	_ Store    = (*PFSStore)(nil)
	_ PathView = (*PFSStore)(nil)
)

// OpenPFS opens a pfs store rooted at cfg.Dir.
func OpenPFS(cfg Config) (*PFSStore, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("pfs tier: no directory given")
	}
	objs := filepath.Join(cfg.Dir, ".sluice", "objects")
	if err := os.MkdirAll(objs, 0o700); err != nil {
		return nil, err
	}
	return &PFSStore{dir: cfg.Dir, objs: objs, files: map[uint64]*os.File{}, capacity: cfg.Capacity}, nil
}

func (s *PFSStore) obj(ino uint64) string { return filepath.Join(s.objs, strconv.FormatUint(ino, 10)) }

func (s *PFSStore) file(ino uint64, create bool) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[ino]; f != nil {
		return f, nil
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(s.obj(ino), flags, 0o644)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(s.files) >= maxOpenFiles {
		for k, of := range s.files {
			of.Close()
			delete(s.files, k)
			break
		}
	}
	s.files[ino] = f
	return f, nil
}

// Write implements Store.
func (s *PFSStore) Write(id ChunkID, off int64, p []byte, _ int64) error {
	f, err := s.file(id.Ino, true)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(p, int64(id.Idx)*int64(id.ChunkSize)+off)
	return err
}

// Read implements Store.
func (s *PFSStore) Read(id ChunkID, off int64, p []byte) error {
	f, err := s.file(id.Ino, false)
	if err != nil {
		return err
	}
	n := 0
	if f != nil {
		n, err = f.ReadAt(p, int64(id.Idx)*int64(id.ChunkSize)+off)
		if err != nil && err != io.EOF {
			return err
		}
	}
	clear(p[n:])
	return nil
}

// Truncate implements Store: the object only ever shrinks here.
func (s *PFSStore) Truncate(id ChunkID, size int64) error {
	f, err := s.file(id.Ino, false)
	if err != nil || f == nil {
		return err
	}
	end := int64(id.Idx)*int64(id.ChunkSize) + size
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > end {
		return f.Truncate(end)
	}
	return nil
}

// Discard implements Discarder: a chunk at the object's end is cut off,
// one in the middle becomes a hole (the object keeps its size, and the
// chunks after it their bytes).
func (s *PFSStore) Discard(id ChunkID) error {
	if id.ChunkSize == 0 {
		return nil // not told where the chunk is: nothing to drop
	}
	f, err := s.file(id.Ino, false)
	if err != nil || f == nil {
		return err
	}
	start, end := int64(id.Idx)*int64(id.ChunkSize), int64(id.Idx+1)*int64(id.ChunkSize)
	st, err := f.Stat()
	if err != nil || st.Size() <= start {
		return err
	}
	if st.Size() <= end {
		return f.Truncate(start)
	}
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, start, end-start)
}

var _ Discarder = (*PFSStore)(nil)

// LocalSize implements Sizer: the part of the object in the chunk's range.
func (s *PFSStore) LocalSize(id ChunkID) (int64, error) {
	f, err := s.file(id.Ino, false)
	if err != nil || f == nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return min(max(st.Size()-int64(id.Idx)*int64(id.ChunkSize), 0), int64(id.ChunkSize)), nil
}

var _ Sizer = (*PFSStore)(nil)

// DeleteFile implements Store.
func (s *PFSStore) DeleteFile(ino uint64) error {
	s.mu.Lock()
	if f := s.files[ino]; f != nil {
		f.Close()
		delete(s.files, ino)
	}
	s.mu.Unlock()
	err := os.Remove(s.obj(ino))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Sync implements Store.
func (s *PFSStore) Sync(ino uint64) error {
	f, err := s.file(ino, false)
	if err != nil || f == nil {
		return err
	}
	return f.Sync()
}

// Usage implements Store.
func (s *PFSStore) Usage() (int64, int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		return 0, 0
	}
	total := int64(st.Blocks) * st.Bsize
	used := total - int64(st.Bavail)*st.Bsize
	s.mu.Lock()
	c := s.capacity
	s.mu.Unlock()
	if c > 0 {
		return c, used
	}
	return total, used
}

// SetCapacity implements Store.
func (s *PFSStore) SetCapacity(c int64) {
	s.mu.Lock()
	s.capacity = c
	s.mu.Unlock()
}

// Close implements Store.
func (s *PFSStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.files {
		f.Close()
		delete(s.files, k)
	}
	return nil
}

// The namespace view walks paths one component at a time from the PFS
// directory with *at calls, never following symbolic links: a path of
// any depth works (whole paths stop at PATH_MAX), and a link someone made
// in the PFS cannot lead outside it.

// parts splits a namespace path into its components, refusing anything
// that would escape the directory or touch the object store.
func parts(p string) ([]string, error) {
	c := filepath.Clean("/" + p)
	if c == "/" || c == "/.sluice" || strings.HasPrefix(c, "/.sluice/") {
		return nil, fmt.Errorf("pfs: invalid path %q: %w", p, syscall.EINVAL)
	}
	return strings.Split(c[1:], "/"), nil
}

// parent opens the directory holding the last component of path (making
// missing directories with create) and returns it with that component.
// The caller closes the descriptor.
func (s *PFSStore) parent(path string, create bool) (int, string, error) {
	ps, err := parts(path)
	if err != nil {
		return -1, "", err
	}
	fd, err := unix.Open(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	for _, d := range ps[:len(ps)-1] {
		next, err := unix.Openat(fd, d, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, d, 0o755); err == nil || err == unix.EEXIST {
				next, err = unix.Openat(fd, d, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, "", fmt.Errorf("pfs: %q: %w", path, err)
		}
		fd = next
	}
	return fd, ps[len(ps)-1], nil
}

// Grow implements PathView.
func (s *PFSStore) Grow(ino uint64, size int64) error {
	f, err := s.file(ino, false)
	if err != nil || f == nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < size {
		return f.Truncate(size)
	}
	return nil
}

// Link implements PathView.
func (s *PFSStore) Link(ino uint64, path string) error {
	if _, err := s.file(ino, true); err != nil {
		return err
	}
	dir, name, err := s.parent(path, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	unix.Unlinkat(dir, name, 0)
	return unix.Linkat(unix.AT_FDCWD, s.obj(ino), dir, name, 0)
}

var _ AttrSetter = (*PFSStore)(nil)

// SetAttrs implements AttrSetter: the file's plain file gets its permission
// bits, owner and times (ns since the epoch).
func (s *PFSStore) SetAttrs(ino uint64, mode, uid, gid uint32, atime, mtime int64) error {
	p := s.obj(ino)
	if err := os.Chmod(p, os.FileMode(mode&0o777)); err != nil {
		return err
	}
	if err := os.Lchown(p, int(uid), int(gid)); err != nil && !errors.Is(err, os.ErrPermission) {
		return err
	}
	return unix.UtimesNano(p, []unix.Timespec{unix.NsecToTimespec(atime), unix.NsecToTimespec(mtime)})
}

// Rename implements PathView.
func (s *PFSStore) Rename(oldPath, newPath string) error {
	from, oldName, err := s.parent(oldPath, false)
	if err != nil {
		return err
	}
	defer unix.Close(from)
	to, newName, err := s.parent(newPath, true)
	if err != nil {
		return err
	}
	defer unix.Close(to)
	return unix.Renameat(from, oldName, to, newName)
}

// Unlink implements PathView.
func (s *PFSStore) Unlink(path string) error {
	dir, name, err := s.parent(path, false)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	err = unix.Unlinkat(dir, name, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
	}
	if err == unix.ENOTEMPTY || err == unix.EEXIST {
		return nil // a directory holding files sluice does not know about
	}
	return err
}
