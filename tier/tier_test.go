package tier

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConformance runs every store kind through the same checks, including
// a randomised sequence of writes, truncates and reads against a model.
func TestConformance(t *testing.T) {
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			clock := time.Unix(1000, 0)
			s, err := Open(kind, Config{Dir: dir, Capacity: 64 << 20, Now: func() time.Time { return clock }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const cs = 1 << 16
			id := ChunkID{Ino: 7, Idx: 3, ChunkSize: cs}
			// holes read as zeros, including a chunk never written
			buf := bytes.Repeat([]byte{9}, 100)
			if err := s.Read(ChunkID{Ino: 99, Idx: 0, ChunkSize: cs}, 0, buf); err != nil || !bytes.Equal(buf, make([]byte, 100)) {
				t.Fatalf("missing chunk: %v", err)
			}
			r := rand.New(rand.NewSource(3))
			model := make([]byte, 0, cs)
			for i := 0; i < 300; i++ {
				switch r.Intn(5) {
				case 0:
					n := int64(r.Intn(cs / 2))
					if n < int64(len(model)) {
						model = model[:n]
						if err := s.Truncate(id, n); err != nil {
							t.Fatal(err)
						}
					}
				default:
					off := r.Intn(cs - 1)
					n := 1 + r.Intn(cs-off)
					p := make([]byte, n)
					r.Read(p)
					var err error
					if sw, ok := s.(SourceWriter); ok && i%2 == 1 {
						// the bytes from outside the process
						err = sw.WriteFrom(id, int64(off), bytesSource(p), cs)
					} else {
						err = s.Write(id, int64(off), p, cs)
					}
					if err != nil {
						t.Fatal(err)
					}
					if off+n > len(model) {
						model = append(model, make([]byte, off+n-len(model))...)
					}
					copy(model[off:], p)
				}
				got := make([]byte, cs)
				if err := s.Read(id, 0, got); err != nil {
					t.Fatal(err)
				}
				want := append(append([]byte(nil), model...), make([]byte, cs-len(model))...)
				if !bytes.Equal(got, want) {
					t.Fatalf("step %d: content differs from model", i)
				}
			}
			if err := s.Sync(7); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteFile(7); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 10)
			s.Read(id, 0, got)
			if !bytes.Equal(got, make([]byte, 10)) {
				t.Fatal("data survived DeleteFile")
			}
			// a chunk created again holds only its new bytes (a store
			// that keeps deleted chunks' pages never hands out their data)
			if err := s.Write(id, 100, []byte("0123456789"), cs); err != nil {
				t.Fatal(err)
			}
			got = make([]byte, cs)
			if err := s.Read(id, 0, got); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, cs)
			copy(want[100:], "0123456789")
			if !bytes.Equal(got, want) {
				t.Fatal("a chunk written again after DeleteFile holds old bytes")
			}
			if err := s.DeleteFile(7); err != nil {
				t.Fatal(err)
			}
			if kind == "pfs" {
				return
			}
			// budget: a new chunk that does not fit is refused
			s.SetCapacity(cs*2 + cs/2)
			if err := s.Write(ChunkID{Ino: 1, Idx: 0}, 0, []byte{1}, cs); err != nil {
				t.Fatal(err)
			}
			if err := s.Write(ChunkID{Ino: 1, Idx: 1}, 0, []byte{1}, cs); err != nil {
				t.Fatal(err)
			}
			err = s.Write(ChunkID{Ino: 1, Idx: 2}, 0, []byte{1}, cs)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("want ENOSPC, got %v", err)
			}
			// writes into reserved chunks still succeed
			if err := s.Write(ChunkID{Ino: 1, Idx: 0}, 100, []byte{1}, cs); err != nil {
				t.Fatal(err)
			}
			// chunk 1 holds 1 byte of its reservation; once it has gone
			// unwritten for ReclaimAfter the room is lent to a new chunk
			clock = clock.Add(DefaultReclaimAfter / 2)
			if err := s.Write(ChunkID{Ino: 1, Idx: 0}, 200, []byte{1}, cs); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(DefaultReclaimAfter/2 + time.Millisecond)
			if err := s.Write(ChunkID{Ino: 1, Idx: 2}, 0, []byte{1}, cs); err != nil {
				t.Fatalf("the idle chunk's room was not reclaimed: %v", err)
			}
			// chunk 0 was written more recently: its room stays
			if _, used := s.Usage(); used != 1+cs+cs {
				t.Fatalf("used %d, want %d (chunk 0 reserved, chunk 1 its byte, chunk 2 reserved)", used, 1+2*cs)
			}
			// an existing chunk grows past its bytes even on a full tier,
			// and what it grows by is charged
			if err := s.Write(ChunkID{Ino: 1, Idx: 1}, 0, make([]byte, 1000), cs); err != nil {
				t.Fatal(err)
			}
			if _, used := s.Usage(); used != 1000+2*cs {
				t.Fatalf("used %d after growth, want %d", used, 1000+2*cs)
			}
			// a shrunk chunk's room is reclaimed too (and, idle now, chunk
			// 2's): every chunk counts at its bytes
			if err := s.Truncate(ChunkID{Ino: 1, Idx: 0}, 10); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(DefaultReclaimAfter)
			if _, used := s.Usage(); used != 1000+10+1 {
				t.Fatalf("used %d after truncate, want %d", used, 1000+10+1)
			}
			got = make([]byte, 201)
			if err := s.Read(ChunkID{Ino: 1, Idx: 0}, 0, got); err != nil || got[0] != 1 || got[100] != 0 {
				t.Fatalf("chunk 0 after truncate: %v %v", got[:11], err)
			}
			s.DeleteFile(1)
			if _, used := s.Usage(); used != 0 {
				t.Fatalf("used %d after delete", used)
			}
		})
	}
}

func TestPFSView(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenPFS(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Link(5, "proj/run1/ckpt.0"); err != nil {
		t.Fatal(err)
	}
	s.Write(ChunkID{Ino: 5, Idx: 1, ChunkSize: 4}, 0, []byte("data"), 0)
	got, err := os.ReadFile(filepath.Join(dir, "proj/run1/ckpt.0"))
	if err != nil || string(got) != "\x00\x00\x00\x00data" {
		t.Fatalf("plain file: %q %v", got, err)
	}
	if err := s.Rename("proj/run1", "proj/run2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "proj/run2/ckpt.0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink("proj/run2/ckpt.0"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../etc/passwd", ".sluice/objects/5", "/"} {
		if err := s.Link(5, bad); err == nil && bad != "../etc/passwd" {
			t.Fatalf("accepted %q", bad)
		}
	}
	// "../etc/passwd" is cleaned to a path inside dir, never outside
	if _, err := os.Stat(filepath.Join(dir, "etc/passwd")); err != nil {
		t.Fatalf("cleaned path not kept inside: %v", err)
	}
}

// TestPFSViewDeepAndSymlinks: the namespace view follows paths longer than
// PATH_MAX (the mount accepts any depth) and never follows a symbolic link
// planted in the PFS.
func TestPFSViewDeepAndSymlinks(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenPFS(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var comps []string
	for len(strings.Join(comps, "/")) < 6000 {
		comps = append(comps, strings.Repeat(string(rune('a'+len(comps)%26)), 250))
	}
	deep := strings.Join(comps, "/")
	if err := s.Link(7, deep+"/f"); err != nil {
		t.Fatalf("link at depth %d (%d bytes): %v", len(comps), len(deep), err)
	}
	if err := s.Rename(deep+"/f", deep+"/g"); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(comps[0], "top"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink("top/" + strings.Join(comps[1:], "/") + "/g"); err != nil {
		t.Fatal(err)
	}
	// a link in the PFS pointing outside it is not followed
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := s.Link(7, "escape/x"); err == nil {
		t.Fatal("followed a symbolic link out of the PFS directory")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("wrote outside the PFS directory: %v", ents)
	}
}

// bytesSource is a Source over bytes in memory (zerocopy.Pipe's splice is
// tested in its package).
type bytesSource []byte

func (b bytesSource) Len() int { return len(b) }

func (b bytesSource) WriteToFile(f *os.File, at int64, off, n int) error {
	_, err := f.WriteAt(b[off:off+n], at)
	return err
}
