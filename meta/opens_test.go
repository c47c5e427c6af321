package meta

import (
	"io"
	"log/slog"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// restartable returns a function that opens a service on one in-memory
// engine, at the time *now, with a grace period of 40 s: each call is a
// restart or a standby taking over.
func restartable(t *testing.T, now *time.Time) func() *Service {
	e := engine.NewMem()
	return func() *Service {
		s, err := New(Config{Engine: e, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return *now },
			ReclaimWait: 40 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// TestReclaimAfterTakeover: a server that starts on another's engine
// keeps the files unlinked while open until the mounts have reclaimed
// their handles or the grace period has passed; what a mount reclaims
// keeps its file, what nobody reclaims goes when the period ends.
func TestReclaimAfterTakeover(t *testing.T) {
	now := time.Unix(1000, 0)
	open := restartable(t, &now)
	const a, b = 7, 8 // two mounts
	old := open()
	mk := func(s *Service, name string) uint64 {
		t.Helper()
		f, err := s.Create(RootIno, name, syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f.Ino
	}
	exists := func(s *Service, ino uint64) bool {
		_, err := s.Getattr(ino)
		if err != nil && !is(err, syscall.ENOENT) {
			t.Fatal(err)
		}
		return err == nil
	}
	f, g, h, k := mk(old, "f"), mk(old, "g"), mk(old, "h"), mk(old, "k")
	for _, o := range []struct{ client, ino uint64 }{{a, f}, {a, f}, {b, f}, {a, g}, {b, k}} {
		if _, err := old.Open(o.client, o.ino); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"f", "g"} {
		if err := old.Remove(RootIno, name, false); err != nil {
			t.Fatal(err)
		}
	}
	// the old server is gone; a new one starts on its engine (as a
	// standby taking over does) and knows no handle
	now = now.Add(5 * time.Second)
	s := open()
	if !exists(s, f) || !exists(s, g) {
		t.Fatal("files unlinked while open were removed at the start, before any mount could reclaim them")
	}
	// k is open on mount b, which has not reclaimed yet: its unlink
	// leaves it until the grace period ends
	if err := s.Remove(RootIno, "k", false); err != nil {
		t.Fatal(err)
	}
	if !exists(s, k) {
		t.Fatal("a file unlinked in the grace period went before its mount could reclaim it")
	}
	// a file made by this server is known whole: unlinked, it goes at once
	n := mk(s, "n")
	if err := s.Remove(RootIno, "n", false); err != nil || exists(s, n) {
		t.Fatalf("a file this server made, unlinked and not open, is still there (%v)", err)
	}
	// mount a reclaims f (twice open) and g, sending its table twice
	for range 2 {
		if err := s.Reclaim(a, map[uint64]int{f: 2, g: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if s.opens.total[f] != 2 || s.opens.total[g] != 1 {
		t.Fatalf("after reclaims sent twice: %v, want f 2 and g 1", s.opens.total)
	}
	// its last handle of g released in the grace period: kept for the sweep
	if err := s.Release(a, g); err != nil || !exists(s, g) {
		t.Fatalf("released in the grace period (%v): the orphan must wait for the other mounts' reclaims", err)
	}
	if s.sweepOrphans() {
		t.Fatal("the sweep ran in the grace period")
	}
	now = now.Add(41 * time.Second)
	if !s.sweepOrphans() {
		t.Fatal("the sweep did not run after the grace period")
	}
	if !exists(s, f) {
		t.Fatal("a reclaimed file unlinked while open was removed")
	}
	if exists(s, g) || exists(s, k) {
		t.Fatal("files nobody holds now were kept past the grace period")
	}
	if !exists(s, h) {
		t.Fatal("a linked file was removed")
	}
	// after the grace period, the last release removes at once
	s.Release(a, f)
	if !exists(s, f) {
		t.Fatal("removed with a handle still open")
	}
	s.Release(a, f)
	if exists(s, f) {
		t.Fatal("still there after its last reclaimed handle was released")
	}
	// a reclaim that gives a file up removes it
	if _, err := s.Open(b, h); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(RootIno, "h", false); err != nil || !exists(s, h) {
		t.Fatalf("open and unlinked: %v", err)
	}
	if err := s.Reclaim(b, nil); err != nil || exists(s, h) {
		t.Fatalf("a file its only holder no longer reclaims is still there (%v)", err)
	}
}

// TestOpenTableModel: random opens, releases and reclaims of several
// clients against a model that keeps each client's handles as a list.
func TestOpenTableModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 200 {
		var o openTable
		o.init()
		model := map[uint64][]uint64{} // client → inodes, one per handle
		count := func(ino uint64) int {
			n := 0
			for _, hs := range model {
				for _, h := range hs {
					if h == ino {
						n++
					}
				}
			}
			return n
		}
		for step := range 60 {
			client, ino := uint64(rng.Intn(3)), uint64(1+rng.Intn(4))
			switch rng.Intn(4) {
			case 0, 1:
				first := o.open(client, ino)
				if want := count(ino) == 0; first != want {
					t.Fatalf("round %d step %d: open reports first %v, want %v", round, step, first, want)
				}
				model[client] = append(model[client], ino)
			case 2:
				last := o.release(client, ino)
				held := model[client]
				at := -1
				for i, h := range held {
					if h == ino {
						at = i
					}
				}
				if at >= 0 {
					model[client] = append(held[:at:at], held[at+1:]...)
				}
				if want := at >= 0 && count(ino) == 0; last != want {
					t.Fatalf("round %d step %d: release reports last %v, want %v", round, step, last, want)
				}
			case 3:
				held := map[uint64]int{}
				var list []uint64
				for range rng.Intn(4) {
					i := uint64(1 + rng.Intn(4))
					held[i]++
					list = append(list, i)
				}
				before := map[uint64]int{}
				for _, h := range model[client] {
					before[h] = count(h)
				}
				closed := o.replace(client, held)
				model[client] = list
				var want []uint64
				for ino := range before {
					if count(ino) == 0 {
						want = append(want, ino)
					}
				}
				if len(closed) != len(want) {
					t.Fatalf("round %d step %d: reclaim closed %v, want %v", round, step, closed, want)
				}
			}
			for ino := uint64(1); ino <= 4; ino++ {
				if o.total[ino] != count(ino) {
					t.Fatalf("round %d step %d: inode %d counted %d open, want %d", round, step, ino, o.total[ino], count(ino))
				}
			}
		}
	}
}
