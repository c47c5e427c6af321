package meta

import (
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// TestActivity: a file's open/close history counts transitions, not
// handles, and its means are the gaps the clock saw.
func TestActivity(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := clockedService(t, &now)
	a, err := s.Create(1, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	ino := a.Ino
	step := func(d time.Duration) { now = now.Add(d) }
	// two handles over 10 s, closed 60 s, one handle for 20 s, closed 30 s, open
	s.Open(0, ino)
	step(time.Second)
	s.Open(0, ino)
	step(9 * time.Second)
	s.Release(0, ino)
	if act, _ := s.Activity(ino); act.Open != 1 || act.LastClose != 0 {
		t.Fatalf("one of two handles released: %+v", act)
	}
	s.Release(0, ino)
	step(60 * time.Second)
	s.Open(0, ino)
	step(20 * time.Second)
	s.Release(0, ino)
	step(30 * time.Second)
	s.Open(0, ino)
	act, err := s.Activity(ino)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Activity{Open: 1, Opened: 3, LastOpen: now.UnixNano(), LastClose: now.Add(-30 * time.Second).UnixNano(),
		MeanTco: 45 * time.Second, MeanToc: 15 * time.Second}
	if act != want {
		t.Fatalf("activity %+v, want %+v", act, want)
	}
	// forwarding daemons report accesses: the latest one counts, an
	// older report does not move it back
	s.Accessed(now.Add(5*time.Second).UnixNano(), []ns.FileAccess{{Ino: ino, Ago: 2 * time.Second}, {Ino: 999, Ago: time.Millisecond}})
	s.Accessed(now.UnixNano(), []ns.FileAccess{{Ino: ino}})
	act, _ = s.Activity(ino)
	if act.LastAccess != now.Add(3*time.Second).UnixNano() {
		t.Fatalf("last access %v, want 3 s after the open", time.Duration(act.LastAccess-now.UnixNano()))
	}
	if _, err := s.Activity(999); err == nil {
		t.Fatal("activity of a missing inode")
	}
}
