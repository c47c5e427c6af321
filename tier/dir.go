package tier

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

func init() {
	for _, k := range []string{"mem", "ssd", "hdd"} {
		kind := k
		Register(kind, func(cfg Config) (Store, error) { return OpenDir(kind, cfg) })
	}
}

// DirStore keeps each chunk as a file <dir>/<ino mod 256>/<ino>/<idx>.
// For the mem tier dir is on tmpfs, so chunks survive a crash of the data
// server daemon (not of the node).
//
// Freed pages kept (Config.KeepFreed): a deleted chunk's file (a file
// removed, a chunk demoted off this tier) is moved into <dir>/.sluice-freed
// instead of being unlinked, while the pages kept and the chunks' room
// together stay within the capacity, and for at most KeepFreed. A new chunk
// unlinks kept files worth its reservation just before its first write, so
// the kernel hands it pages that were in use a moment ago. Under a
// hypervisor that takes back a guest's free memory (free page reporting,
// ballooning) pages freed seconds earlier are gone from the host, and
// writing into them costs several times a copy into pages that are
// still there (docs/benchmarks.md, "New files: pages the host took back").
// A new chunk never gets a kept file's bytes: it is a new, empty file.
type DirStore struct {
	kind string
	dir  string

	now     func() time.Time
	reclaim time.Duration // see Config.ReclaimAfter
	keepFor time.Duration // see Config.KeepFreed; 0: freed pages are not kept

	mu sync.Mutex // guards capacity, used, reserved, byIno, loans, files, lru, freed, kept, seq
	// freed are the deleted chunks' files kept for their pages, oldest
	// first; kept is their bytes (allocated); seq names the next one
	freed    []freedFile
	kept     int64
	seq      uint64
	capacity int64
	used     int64
	reserved map[ChunkID]int64 // bytes charged per chunk
	// byIno holds the chunks of reserved per file, so a file's sync or
	// deletion looks at its own chunks, not every chunk of the tier
	byIno map[uint64]map[uint64]struct{}
	// loans are the chunks charged more than their bytes (a new chunk's
	// reservation ahead of its writes), with their bytes and last write:
	// only recently written tails, so a scan of them is short
	loans map[ChunkID]*loan
	files map[ChunkID]*list.Element
	lru   *list.List // of *openFile, most recent first
}

// loan is a chunk's reservation beyond its bytes.
type loan struct {
	end  int64     // bytes of the chunk written (highest end)
	last time.Time // its last write
}

// freedFile is a deleted chunk's file kept for its pages.
type freedFile struct {
	path  string
	bytes int64 // allocated
	at    time.Time
}

type openFile struct {
	id ChunkID
	f  *os.File
}

const maxOpenFiles = 512

var (
	_ Store        = (*DirStore)(nil)
	_ ChunkFiles   = (*DirStore)(nil)
	_ Settler      = (*DirStore)(nil)
	_ SourceWriter = (*DirStore)(nil)
	_ FreedKeeper  = (*DirStore)(nil)
)

// freedDir is where a store keeps deleted chunks' files (under its dir).
const freedDir = ".sluice-freed"

// OpenDir opens (and scans) a directory store.
func OpenDir(kind string, cfg Config) (*DirStore, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%s tier: no directory given", kind)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	s := &DirStore{kind: kind, dir: cfg.Dir, capacity: cfg.Capacity, now: cfg.Now, reclaim: cfg.ReclaimAfter,
		reserved: map[ChunkID]int64{}, byIno: map[uint64]map[uint64]struct{}{}, loans: map[ChunkID]*loan{}, files: map[ChunkID]*list.Element{}, lru: list.New()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.reclaim <= 0 {
		s.reclaim = DefaultReclaimAfter
	}
	switch {
	case cfg.KeepFreed > 0:
		s.keepFor = cfg.KeepFreed
	case cfg.KeepFreed == 0 && kind == "mem":
		s.keepFor = DefaultKeepFreed
	}
	// pages kept by an earlier run are not worth a scan
	if err := os.RemoveAll(filepath.Join(cfg.Dir, freedDir)); err != nil {
		return nil, err
	}
	if s.keepFor > 0 {
		if err := os.Mkdir(filepath.Join(cfg.Dir, freedDir), 0o700); err != nil {
			return nil, err
		}
	}
	if s.capacity == 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(cfg.Dir, &st); err != nil {
			return nil, err
		}
		s.capacity = int64(st.Blocks) * st.Bsize
	}
	// charge chunks left by an earlier run at their current size
	err := filepath.WalkDir(cfg.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ino, err1 := strconv.ParseUint(filepath.Base(filepath.Dir(p)), 10, 64)
		idx, err2 := strconv.ParseUint(d.Name(), 10, 64)
		if err1 != nil || err2 != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s.chargeLocked(ChunkID{Ino: ino, Idx: idx}, info.Size())
		return nil
	})
	return s, err
}

// chargeLocked records new chunk id, charged reserve bytes. Caller holds
// mu.
func (s *DirStore) chargeLocked(id ChunkID, reserve int64) {
	s.reserved[id] = reserve
	s.used += reserve
	m := s.byIno[id.Ino]
	if m == nil {
		m = map[uint64]struct{}{}
		s.byIno[id.Ino] = m
	}
	m[id.Idx] = struct{}{}
}

// unchargeLocked forgets chunk id's charge and loan. Caller holds mu.
func (s *DirStore) unchargeLocked(id ChunkID) {
	s.used -= s.reserved[id]
	delete(s.reserved, id)
	delete(s.loans, id)
	if m := s.byIno[id.Ino]; m != nil {
		delete(m, id.Idx)
		if len(m) == 0 {
			delete(s.byIno, id.Ino)
		}
	}
}

// chunksLocked lists the chunks of file ino. Caller holds mu.
func (s *DirStore) chunksLocked(ino uint64) []ChunkID {
	ids := make([]ChunkID, 0, len(s.byIno[ino]))
	for idx := range s.byIno[ino] {
		ids = append(ids, ChunkID{Ino: ino, Idx: idx})
	}
	return ids
}

func (s *DirStore) inoDir(ino uint64) string {
	return filepath.Join(s.dir, strconv.FormatUint(ino%256, 16), strconv.FormatUint(ino, 10))
}

func (s *DirStore) path(id ChunkID) string {
	return filepath.Join(s.inoDir(id.Ino), strconv.FormatUint(id.Idx, 10))
}

// key drops ChunkSize, which does not name a chunk.
func key(id ChunkID) ChunkID { return ChunkID{Ino: id.Ino, Idx: id.Idx} }

// file returns an open file for the chunk, creating it (and charging
// reserve) when create is set. It returns nil, nil for a missing chunk when
// !create. A new chunk's share of the kept freed files is unlinked before
// it returns, so the chunk's first write takes their pages.
func (s *DirStore) file(id ChunkID, create bool, reserve int64) (*os.File, error) {
	s.mu.Lock()
	f, unkept, err := s.openLocked(key(id), create, reserve)
	s.mu.Unlock()
	removeFiles(unkept)
	return f, err
}

// openLocked is file's work under s.mu; it also returns the kept freed
// files to unlink once s.mu is released.
func (s *DirStore) openLocked(id ChunkID, create bool, reserve int64) (*os.File, []string, error) {
	if e, ok := s.files[id]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*openFile).f, nil, nil
	}
	_, exists := s.reserved[id]
	if !exists && !create {
		f, err := os.OpenFile(s.path(id), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		s.cacheLocked(id, f)
		return f, nil, nil
	}
	if !exists {
		if s.used+reserve > s.capacity {
			s.reclaimLocked()
		}
		if s.used+reserve > s.capacity {
			return nil, nil, fmt.Errorf("%s tier full (%d of %d bytes used): %w", s.kind, s.used, s.capacity, syscall.ENOSPC)
		}
		if err := os.MkdirAll(s.inoDir(id.Ino), 0o700); err != nil {
			return nil, nil, err
		}
	}
	f, err := os.OpenFile(s.path(id), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	var unkept []string
	if !exists {
		s.chargeLocked(id, reserve)
		if reserve > 0 {
			s.loans[id] = &loan{last: s.now()}
		}
		unkept = s.unkeepLocked(max(reserve, 1))
	}
	s.cacheLocked(id, f)
	return f, unkept, nil
}

// keepLocked disposes of a deleted chunk's file at path: kept for its
// pages if that keeps the pages kept and the chunks' room within the
// capacity, else unlinked. Caller holds s.mu (and has uncharged the chunk).
func (s *DirStore) keepLocked(path string) error {
	var st syscall.Stat_t
	if s.keepFor > 0 && syscall.Stat(path, &st) == nil {
		bytes := st.Blocks * 512
		kept := filepath.Join(s.dir, freedDir, strconv.FormatUint(s.seq, 10))
		if bytes > 0 && s.used+s.kept+bytes <= s.capacity && os.Rename(path, kept) == nil {
			s.seq++
			s.freed = append(s.freed, freedFile{path: kept, bytes: bytes, at: s.now()})
			s.kept += bytes
			return nil
		}
	}
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return err
}

// unkeepLocked takes kept files off the list, oldest first: those the
// chunks' room no longer leaves space for, then at least need bytes more
// (for a new chunk's writes), and returns them to unlink. Caller holds s.mu.
func (s *DirStore) unkeepLocked(need int64) []string {
	var out []string
	for len(s.freed) > 0 && (s.used+s.kept > s.capacity || need > 0) {
		need -= s.freed[0].bytes
		out = append(out, s.popLocked())
	}
	return out
}

// popLocked takes the oldest kept file off the list and returns its path.
// Caller holds s.mu.
func (s *DirStore) popLocked() string {
	f := s.freed[0]
	s.freed = s.freed[1:]
	s.kept -= f.bytes
	return f.path
}

// expireLocked takes off the list the kept files older than s.keepFor and
// returns them to unlink. Caller holds s.mu.
func (s *DirStore) expireLocked(now time.Time) []string {
	var out []string
	for len(s.freed) > 0 && now.Sub(s.freed[0].at) >= s.keepFor {
		out = append(out, s.popLocked())
	}
	return out
}

// removeFiles unlinks kept files; one already gone does not matter.
func removeFiles(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// KeptFreed implements FreedKeeper.
func (s *DirStore) KeptFreed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept
}

// reclaimLocked takes back the room reserved past their bytes by chunks
// not written for s.reclaim. Caller holds s.mu.
func (s *DirStore) reclaimLocked() {
	now := s.now()
	for id, l := range s.loans {
		if now.Sub(l.last) < s.reclaim {
			continue
		}
		if r := s.reserved[id]; r > l.end {
			s.used -= r - l.end
			s.reserved[id] = l.end
		}
		delete(s.loans, id)
	}
}

// Settle implements Settler.
func (s *DirStore) Settle(id ChunkID) {
	id = key(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.loans[id]; l != nil {
		s.used -= s.reserved[id] - l.end
		s.reserved[id] = l.end
		delete(s.loans, id)
	}
}

// wroteLocked charges a write of [off, end) into chunk id: growth past
// its reservation is charged again, a loan notes the bytes and the time.
// Caller holds s.mu.
func (s *DirStore) wroteLocked(id ChunkID, end int64) {
	r, ok := s.reserved[id]
	if !ok {
		return
	}
	if end > r {
		s.used += end - r
		s.reserved[id] = end
	}
	if l := s.loans[id]; l != nil {
		l.end = max(l.end, end)
		l.last = s.now()
		if l.end >= s.reserved[id] {
			delete(s.loans, id)
		}
	}
}

func (s *DirStore) cacheLocked(id ChunkID, f *os.File) {
	s.files[id] = s.lru.PushFront(&openFile{id: id, f: f})
	for s.lru.Len() > maxOpenFiles {
		e := s.lru.Back()
		of := e.Value.(*openFile)
		s.lru.Remove(e)
		delete(s.files, of.id)
		of.f.Close()
	}
}

func (s *DirStore) forgetLocked(id ChunkID) {
	if e, ok := s.files[id]; ok {
		s.lru.Remove(e)
		delete(s.files, id)
		e.Value.(*openFile).f.Close()
	}
}

// Write implements Store.
func (s *DirStore) Write(id ChunkID, off int64, p []byte, reserve int64) error {
	return s.writeWith(id, off, len(p), reserve, func(f *os.File) error {
		_, err := f.WriteAt(p, off)
		return err
	})
}

// WriteFrom implements SourceWriter.
func (s *DirStore) WriteFrom(id ChunkID, off int64, src Source, reserve int64) error {
	return s.writeWith(id, off, src.Len(), reserve, func(f *os.File) error {
		return src.WriteToFile(f, off, 0, src.Len())
	})
}

// writeWith writes n bytes at off of chunk id with write, on the chunk's
// file (created, charging reserve, if new).
func (s *DirStore) writeWith(id ChunkID, off int64, n int, reserve int64, write func(f *os.File) error) error {
	f, err := s.file(id, true, reserve)
	if err != nil {
		return err
	}
	err = write(f)
	if errors.Is(err, os.ErrClosed) {
		// evicted from the cache by a concurrent request: retry once
		if f, err = s.file(id, true, reserve); err == nil {
			err = write(f)
		}
	}
	if err == nil {
		s.mu.Lock()
		s.wroteLocked(key(id), off+int64(n))
		s.mu.Unlock()
	}
	return err
}

// Read implements Store.
func (s *DirStore) Read(id ChunkID, off int64, p []byte) error {
	f, err := s.file(id, false, 0)
	if err != nil {
		return err
	}
	n := 0
	if f != nil {
		n, err = f.ReadAt(p, off)
		if errors.Is(err, os.ErrClosed) {
			if f, err = s.file(id, false, 0); err == nil && f != nil {
				n, err = f.ReadAt(p, off)
			}
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	clear(p[n:])
	return nil
}

// ChunkFile implements ChunkFiles.
func (s *DirStore) ChunkFile(id ChunkID) (*os.File, error) {
	return s.file(id, false, 0)
}

// Truncate implements Store.
func (s *DirStore) Truncate(id ChunkID, size int64) error {
	k := key(id)
	if size == 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.forgetLocked(k)
		s.unchargeLocked(k)
		return s.keepLocked(s.path(k))
	}
	// only ever shrink: a chunk never holds bytes past the file's size,
	// and growing it would only make a sparse tail. By path, so a cached
	// descriptor evicted meanwhile does not matter.
	st, err := os.Stat(s.path(k))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Size() <= size {
		return nil
	}
	if err := os.Truncate(s.path(k), size); err != nil {
		return err
	}
	// the room cut off is a loan now: taken back once it stays unwritten
	s.mu.Lock()
	if r, ok := s.reserved[k]; ok && r > size {
		s.loans[k] = &loan{end: size, last: s.now()} // its bytes now
	}
	s.mu.Unlock()
	return nil
}

// LocalSize implements Sizer.
func (s *DirStore) LocalSize(id ChunkID) (int64, error) {
	st, err := os.Stat(s.path(key(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

var _ Sizer = (*DirStore)(nil)

// Holds implements Holder.
func (s *DirStore) Holds(id ChunkID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.reserved[key(id)]
	return ok
}

var _ Holder = (*DirStore)(nil)

// DeleteFile implements Store.
func (s *DirStore) DeleteFile(ino uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.chunksLocked(ino)
	for _, id := range ids {
		s.forgetLocked(id)
		s.unchargeLocked(id)
	}
	if s.keepFor > 0 {
		for _, id := range ids {
			s.keepLocked(s.path(id)) // what is not kept goes below
		}
	}
	return os.RemoveAll(s.inoDir(ino))
}

// Sync implements Store.
func (s *DirStore) Sync(ino uint64) error {
	s.mu.Lock()
	ids := s.chunksLocked(ino)
	s.mu.Unlock()
	for _, id := range ids {
		f, err := s.file(id, false, 0)
		if err != nil {
			return err
		}
		if f != nil {
			if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
				return err
			}
		}
	}
	if len(ids) > 0 {
		if d, err := os.Open(s.inoDir(ino)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// Usage implements Store.
func (s *DirStore) Usage() (int64, int64) {
	s.mu.Lock()
	s.reclaimLocked()
	c, u := s.capacity, s.used
	var expired []string
	if s.keepFor > 0 {
		expired = s.expireLocked(s.now())
	}
	s.mu.Unlock()
	removeFiles(expired)
	return c, u
}

// SetCapacity implements Store.
func (s *DirStore) SetCapacity(c int64) {
	s.mu.Lock()
	s.capacity = c
	s.mu.Unlock()
}

// Close implements Store.
func (s *DirStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.files {
		s.forgetLocked(id)
	}
	// the kept pages go back to the system with the store
	s.freed, s.kept = nil, 0
	return os.RemoveAll(filepath.Join(s.dir, freedDir))
}
