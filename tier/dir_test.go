package tier

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDirKeepsFreedPages: a mem store keeps deleted chunks' files for
// their pages, within its capacity and for Config.KeepFreed, hands them to
// new chunks (unlinked before the chunk's first write, never their bytes)
// and gives them back when they expire, when the chunks' room needs them
// and when it closes.
func TestDirKeepsFreedPages(t *testing.T) {
	const cs = 1 << 20
	dir := t.TempDir()
	clock := time.Unix(1000, 0)
	open := func(keep time.Duration) *DirStore {
		s, err := OpenDir("mem", Config{Dir: dir, Capacity: 8 * cs, Now: func() time.Time { return clock }, KeepFreed: keep})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	kept := func(s *DirStore) (n int) {
		es, _ := os.ReadDir(filepath.Join(dir, freedDir))
		return len(es)
	}
	full := bytes.Repeat([]byte{7}, cs)
	s := open(0) // mem: DefaultKeepFreed
	if s.keepFor != DefaultKeepFreed {
		t.Fatalf("keepFor %v, want the mem default", s.keepFor)
	}
	for i := uint64(0); i < 4; i++ {
		if err := s.Write(ChunkID{Ino: 5, Idx: i}, 0, full, cs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteFile(5); err != nil {
		t.Fatal(err)
	}
	if _, used := s.Usage(); used != 0 || s.KeptFreed() < 4*cs || kept(s) != 4 {
		t.Fatalf("after delete: used %d, kept %d bytes in %d files; want 0 and 4 files of %d", used, s.KeptFreed(), kept(s), cs)
	}
	if _, err := os.Stat(s.inoDir(5)); !os.IsNotExist(err) {
		t.Fatalf("the deleted file's directory stayed: %v", err)
	}
	// a new chunk takes one kept file's pages (its reservation's worth),
	// not its bytes
	id := ChunkID{Ino: 6, Idx: 0}
	if err := s.Write(id, 4096, []byte{1}, cs); err != nil {
		t.Fatal(err)
	}
	if kept(s) != 3 || s.KeptFreed() != 3*cs {
		t.Fatalf("after a new chunk: %d files, %d bytes kept; want 3 of %d", kept(s), s.KeptFreed(), cs)
	}
	got := make([]byte, cs)
	if err := s.Read(id, 0, got); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, cs)
	want[4096] = 1
	if !bytes.Equal(got, want) {
		t.Fatal("a new chunk read bytes it was not written")
	}
	if n, _ := s.LocalSize(id); n != 4097 {
		t.Fatalf("new chunk's size %d, want 4097", n)
	}
	// a truncation to nothing keeps the chunk's pages too
	if err := s.Truncate(id, 0); err != nil {
		t.Fatal(err)
	}
	if kept(s) != 4 {
		t.Fatalf("after truncate to 0: %d files kept, want 4", kept(s))
	}
	// the chunks' room comes first: kept pages never push the store past
	// its capacity
	for i := uint64(0); i < 7; i++ {
		if err := s.Write(ChunkID{Ino: 8, Idx: i}, 0, full, cs); err != nil {
			t.Fatal(err)
		}
		if _, used := s.Usage(); used+s.KeptFreed() > 8*cs {
			t.Fatalf("chunk %d: used %d + kept %d past the capacity %d", i, used, s.KeptFreed(), 8*cs)
		}
	}
	if kept(s) != 0 {
		t.Fatalf("7 of 8 MiB used and %d files still kept", kept(s))
	}
	// deleting more than the room left keeps only what fits
	if err := s.Write(ChunkID{Ino: 9, Idx: 0}, 0, full, cs); err != nil {
		t.Fatal(err)
	}
	s.DeleteFile(8)
	if _, used := s.Usage(); used+s.KeptFreed() > 8*cs || kept(s) != 7 {
		t.Fatalf("after deleting 7 chunks: used %d, kept %d in %d files", used, s.KeptFreed(), kept(s))
	}
	// they expire
	clock = clock.Add(DefaultKeepFreed)
	s.Usage()
	if kept(s) != 0 || s.KeptFreed() != 0 {
		t.Fatalf("after %v: %d files, %d bytes kept", DefaultKeepFreed, kept(s), s.KeptFreed())
	}
	// and go with the store: on close, and those left by a crash on open
	s.DeleteFile(9)
	if kept(s) != 1 {
		t.Fatalf("%d files kept, want 1", kept(s))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, freedDir)); !os.IsNotExist(err) {
		t.Fatalf("kept files outlived Close: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, freedDir), 0o700)
	os.WriteFile(filepath.Join(dir, freedDir, "3"), full, 0o600)
	s = open(-1)
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, freedDir)); !os.IsNotExist(err) {
		t.Fatalf("files kept by an earlier run survived open: %v", err)
	}
	if _, used := s.Usage(); used != 0 {
		t.Fatalf("kept files were charged as chunks: used %d", used)
	}
	// KeepFreed < 0: nothing kept
	s.Write(ChunkID{Ino: 10, Idx: 0}, 0, full, cs)
	s.DeleteFile(10)
	if s.KeptFreed() != 0 {
		t.Fatalf("KeepFreed < 0 kept %d bytes", s.KeptFreed())
	}
}
