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

// resolve turns a namespace path into a path under dir, refusing anything
// that would escape it or touch the object store.
func (s *PFSStore) resolve(p string) (string, error) {
	c := filepath.Clean("/" + p)
	if c == "/" || strings.HasPrefix(c, "/.sluice") {
		return "", fmt.Errorf("pfs: invalid path %q: %w", p, syscall.EINVAL)
	}
	return filepath.Join(s.dir, c), nil
}

// Link implements PathView.
func (s *PFSStore) Link(ino uint64, path string) error {
	dst, err := s.resolve(path)
	if err != nil {
		return err
	}
	if _, err := s.file(ino, true); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	os.Remove(dst)
	return os.Link(s.obj(ino), dst)
}

// Rename implements PathView.
func (s *PFSStore) Rename(oldPath, newPath string) error {
	src, err := s.resolve(oldPath)
	if err != nil {
		return err
	}
	dst, err := s.resolve(newPath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(src, dst)
}

// Unlink implements PathView.
func (s *PFSStore) Unlink(path string) error {
	p, err := s.resolve(path)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return nil // a directory holding files sluice does not know about
	}
	return err
}
