package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"sort"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// forEachEngine runs a test against the service on every registered engine:
// the metadata conformance suite.
func forEachEngine(t *testing.T, f func(t *testing.T, open func() *Service)) {
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		f(t, func() *Service {
			s, err := New(Config{Engine: reopen(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func is(err error, e syscall.Errno) bool { return errors.Is(err, e) }

func TestNamespace(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open func() *Service) {
		s := open()
		d, err := s.Create(RootIno, "dir", syscall.S_IFDIR|0o755, 1, 2, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Create(d.Ino, "f", syscall.S_IFREG|0o644, 1, 2, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(d.Ino, "f", syscall.S_IFREG|0o644, 1, 2, "", true, 0); !is(err, syscall.EEXIST) {
			t.Fatalf("exclusive create of existing: %v", err)
		}
		if a, err := s.Create(d.Ino, "f", syscall.S_IFREG|0o644, 1, 2, "", false, 0); err != nil || a.Ino != f.Ino {
			t.Fatalf("non-exclusive create returns the file: %v", err)
		}
		if err := s.Remove(RootIno, "dir", true); !is(err, syscall.ENOTEMPTY) {
			t.Fatalf("rmdir non-empty: %v", err)
		}
		if _, err := s.Link(f.Ino, RootIno, "hard"); err != nil {
			t.Fatal(err)
		}
		if a, _ := s.Getattr(f.Ino); a.Nlink != 2 {
			t.Fatalf("nlink %d", a.Nlink)
		}
		if err := s.Rename(d.Ino, "f", RootIno, "moved", 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Rename(RootIno, "dir", d.Ino, "sub", 0); !is(err, syscall.EINVAL) {
			t.Fatalf("dir into itself: %v", err)
		}
		// unlink while open keeps the inode until release
		s.Remove(RootIno, "hard", false)
		s.Open(0, f.Ino)
		if err := s.Remove(RootIno, "moved", false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Getattr(f.Ino); err != nil {
			t.Fatalf("open unlinked file vanished: %v", err)
		}
		s.Release(0, f.Ino)
		if _, err := s.Getattr(f.Ino); !is(err, syscall.ENOENT) {
			t.Fatalf("released orphan still there: %v", err)
		}
		// everything survives a restart of the service on the same store
		if _, err := s.Create(d.Ino, "keep", syscall.S_IFREG|0o600, 0, 0, "", true, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Extend(mustLookup(t, s, d.Ino, "keep"), 12345, 99, 0); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.e.(*engine.Mem); ok {
			return
		}
		s = open()
		a, err := s.Lookup(d.Ino, "keep")
		if err != nil || a.Size != 12345 {
			t.Fatalf("after restart: %+v %v", a, err)
		}
	})
}

func mustLookup(t *testing.T, s *Service, parent uint64, name string) uint64 {
	a, err := s.Lookup(parent, name)
	if err != nil {
		t.Fatal(err)
	}
	return a.Ino
}

// TestRandomAgainstModel applies random namespace operations and compares
// the tree with a map of path → kind after each one.
func TestRandomAgainstModel(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open func() *Service) {
		s := open()
		r := rand.New(rand.NewSource(42))
		model := map[string]bool{"": true} // path → is directory
		names := []string{"a", "b", "c"}
		randPath := func() string {
			p := ""
			for i := 0; i < 1+r.Intn(3); i++ {
				if p != "" {
					p += "/"
				}
				p += names[r.Intn(len(names))]
			}
			return p
		}
		split := func(p string) (string, string) {
			for i := len(p) - 1; i >= 0; i-- {
				if p[i] == '/' {
					return p[:i], p[i+1:]
				}
			}
			return "", p
		}
		resolve := func(p string) (uint64, error) {
			ino := uint64(RootIno)
			if p == "" {
				return ino, nil
			}
			start := 0
			for i := 0; i <= len(p); i++ {
				if i == len(p) || p[i] == '/' {
					a, err := s.Lookup(ino, p[start:i])
					if err != nil {
						return 0, err
					}
					ino = a.Ino
					start = i + 1
				}
			}
			return ino, nil
		}
		for step := 0; step < 1500; step++ {
			p := randPath()
			dir, name := split(p)
			isDirModel, exists := model[p]
			parentIsDir, parentExists := model[dir]
			pino, perr := resolve(dir)
			if (perr == nil) != parentExists {
				t.Fatalf("step %d: resolve %q: %v, model %v", step, dir, perr, parentExists)
			}
			if perr != nil {
				continue
			}
			if !parentIsDir {
				if _, err := s.Create(pino, name, syscall.S_IFREG|0o644, 0, 0, "", true, 0); !is(err, syscall.ENOTDIR) {
					t.Fatalf("step %d: create under a file: %v", step, err)
				}
				continue
			}
			switch r.Intn(4) {
			case 0, 1:
				mode := uint32(syscall.S_IFREG | 0o644)
				if r.Intn(2) == 0 {
					mode = syscall.S_IFDIR | 0o755
				}
				_, err := s.Create(pino, name, mode, 0, 0, "", true, 0)
				if exists != is(err, syscall.EEXIST) || (!exists && err != nil) {
					t.Fatalf("step %d create %q: %v (exists %v)", step, p, err, exists)
				}
				if !exists {
					model[p] = mode&syscall.S_IFMT == syscall.S_IFDIR
				}
			case 2:
				err := s.Remove(pino, name, isDirModel)
				empty := true
				for q := range model {
					if len(q) > len(p) && q[:len(p)+1] == p+"/" {
						empty = false
					}
				}
				switch {
				case !exists:
					if !is(err, syscall.ENOENT) {
						t.Fatalf("step %d remove missing %q: %v", step, p, err)
					}
				case isDirModel && !empty:
					if !is(err, syscall.ENOTEMPTY) {
						t.Fatalf("step %d rmdir non-empty %q: %v", step, p, err)
					}
				default:
					if err != nil {
						t.Fatalf("step %d remove %q: %v", step, p, err)
					}
					delete(model, p)
				}
			case 3:
				q := randPath()
				qdir, qname := split(q)
				qpIsDir, qpExists := model[qdir]
				if !exists || !qpExists || !qpIsDir || q == p || (len(q) > len(p) && q[:len(p)+1] == p+"/") {
					continue
				}
				if _, taken := model[q]; taken {
					continue
				}
				qino, _ := resolve(qdir)
				if err := s.Rename(pino, name, qino, qname, 0); err != nil {
					t.Fatalf("step %d rename %q→%q: %v", step, p, q, err)
				}
				for k, v := range model {
					if k == p || (len(k) > len(p) && k[:len(p)+1] == p+"/") {
						delete(model, k)
						model[q+k[len(p):]] = v
					}
				}
			}
		}
		// walk the service's tree and compare
		var got, want []string
		var walk func(ino uint64, prefix string)
		walk = func(ino uint64, prefix string) {
			es, err := s.Readdir(ino, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				p := prefix + e.Name
				got = append(got, fmt.Sprintf("%s:%v", p, e.Mode&syscall.S_IFMT == syscall.S_IFDIR))
				if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
					walk(e.Ino, p+"/")
				}
			}
		}
		walk(RootIno, "")
		for k, v := range model {
			if k != "" {
				want = append(want, fmt.Sprintf("%s:%v", k, v))
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("tree differs:\n got %v\nwant %v", got, want)
		}
	})
}

func TestAllocPrefersFastestTierWithRoom(t *testing.T) {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ChunkSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: "x:1", Capacity: 2 << 20})
	ssd, _ := s.Register(wire.ServerInfo{Role: "data", Tier: "ssd", Addr: "x:2", Capacity: 100 << 20})
	f, _ := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	var got []uint64
	for idx := uint64(0); idx < 4; idx++ {
		loc, _, err := s.Alloc(context.Background(), f.Ino, idx, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, loc.Servers[0])
	}
	if fmt.Sprint(got) != fmt.Sprint([]uint64{mem, mem, ssd, ssd}) {
		t.Fatalf("placement %v (mem %d, ssd %d)", got, mem, ssd)
	}
	// the same chunk asked again keeps its place
	if loc, _, _ := s.Alloc(context.Background(), f.Ino, 0, 0, nil); loc.Servers[0] != mem {
		t.Fatal("allocation not stable")
	}
}

// TestRenameWhiteout: RENAME_WHITEOUT (no whiteouts here) and
// NOREPLACE with EXCHANGE are refused with EINVAL, and nothing moves.
func TestRenameWhiteout(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open func() *Service) {
		s := open()
		if _, err := s.Create(RootIno, "a", syscall.S_IFREG|0o644, 0, 0, "", true, 0); err != nil {
			t.Fatal(err)
		}
		for _, flags := range []uint32{4, ns.RenameNoReplace | ns.RenameExchange} {
			if err := s.Rename(RootIno, "a", RootIno, "b", flags); !is(err, syscall.EINVAL) {
				t.Fatalf("rename flags %#x: %v, want EINVAL", flags, err)
			}
		}
		mustLookup(t, s, RootIno, "a")
	})
}

// TestChownSetID: a chown clears set-user-ID, and set-group-ID only with
// group execution (without it the bit marks mandatory locking), as Linux
// does (xfstests generic/193).
func TestChownSetID(t *testing.T) {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[uint32]uint32{0o6644: 0o2644, 0o6654: 0o0654, 0o4755: 0o0755} {
		name := fmt.Sprintf("f%o", mode)
		a, err := s.Create(RootIno, name, syscall.S_IFREG|mode, 1000, 1000, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Setattr(context.Background(), &ns.SetattrReq{Ino: a.Ino, Mask: ns.SetUid, Uid: 0})
		if err != nil || got.Mode&0o7777 != want {
			t.Fatalf("chown of a %o file: %o (%v), want %o", mode, got.Mode&0o7777, err, want)
		}
	}
}

// TestLookupDots: "." of an inode is itself and ".." of a directory its
// parent (how the kernel resolves a file handle: open_by_handle_at); an
// inode that is gone is ESTALE.
func TestLookupDots(t *testing.T) {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(d.Ino, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ino  uint64
		name string
		want uint64
	}{{f.Ino, ".", f.Ino}, {d.Ino, "..", RootIno}, {RootIno, "..", RootIno}, {d.Ino, ".", d.Ino}} {
		a, err := s.Lookup(c.ino, c.name)
		if err != nil || a.Ino != c.want {
			t.Fatalf("lookup %q in %d: %v %v, want inode %d", c.name, c.ino, a, err, c.want)
		}
	}
	if _, err := s.Lookup(f.Ino, ".."); !is(err, syscall.ENOTDIR) {
		t.Fatalf(`".." of a file: %v, want ENOTDIR`, err)
	}
	if err := s.Remove(d.Ino, "f", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(f.Ino, "."); !is(err, syscall.ESTALE) {
		t.Fatalf(`"." of a removed file: %v, want ESTALE`, err)
	}
}
