package tiering

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/tiering"
)

// prefetchNS: one mem server of 100 MiB and files of 4 MiB on hdd; moves
// take 20 ms; the test closes files to mark them read.
type prefetchNS struct {
	noPolicies
	noReplicas
	mu     sync.Mutex
	tier   map[uint64]string    // ino → tier of its one chunk
	closed map[uint64]time.Time // last close
	order  []uint64             // promotions as they started
	peak   int                  // most files moving at once
	moving int
}

func (f *prefetchNS) Servers() []wire.ServerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var used uint64
	for _, t := range f.tier {
		if t == "mem" {
			used += 4 << 20
		}
	}
	return []wire.ServerInfo{{ID: 1, Role: "data", Tier: "mem", Capacity: 100 << 20, Used: used, Alive: true},
		{ID: 2, Role: "data", Tier: "hdd", Rank: 2, Capacity: 1 << 30, Alive: true}}
}

func (f *prefetchNS) ServerFiles() (map[uint64][]api.FileUse, error) { return nil, nil }
func (f *prefetchNS) FinishMoves(context.Context) int                { return 0 }
func (f *prefetchNS) WakeStalled()                                   {}
func (f *prefetchNS) ChunkMoves(uint64) ([]api.ChunkMove, error)     { return nil, nil }

func (f *prefetchNS) Getattr(ino uint64) (*wire.Attr, error) {
	return &wire.Attr{Ino: ino, Size: 4 << 20}, nil
}

func (f *prefetchNS) Activity(ino uint64) (wire.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return wire.Activity{LastClose: f.closed[ino].UnixNano()}, nil
}

func (f *prefetchNS) Layout(ino uint64) ([]wire.ChunkLoc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []wire.ChunkLoc{{Idx: 0, Tier: f.tier[ino], Servers: []uint64{map[string]uint64{"mem": 1, "hdd": 2}[f.tier[ino]]}}}, nil
}

func (f *prefetchNS) MoveChunk(_ context.Context, ino, _ uint64, tier string, _ []uint64) (uint64, error) {
	f.mu.Lock()
	f.order = append(f.order, ino)
	f.moving++
	f.peak = max(f.peak, f.moving)
	f.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moving--
	f.tier[ino] = tier
	return 4 << 20, nil
}

func (f *prefetchNS) onMem() (n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tier {
		if t == "mem" {
			n++
		}
	}
	return n
}

// TestPrefetchWindow: 20 files of 4 MiB, a mem tier with 40 MiB above
// Cf-m: at most 10 files are promoted ahead of the reader, in the list's
// order, two at a time; each read (close) lets the next one up; at the end
// every file was promoted and the list is done.
func TestPrefetchWindow(t *testing.T) {
	ns := &prefetchNS{tier: map[uint64]string{}, closed: map[uint64]time.Time{}}
	var list []uint64
	for ino := uint64(100); ino < 120; ino++ {
		ns.tier[ino] = "hdd"
		list = append(list, ino)
	}
	m := New(Config{NS: ns, Auto: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now,
		Policy: pol.Config{Thresholds: pol.Thresholds{StallWrite: 4 << 20, ForcedOut: 60 << 20, NormalOut: 80 << 20}}})
	m.Prefetch("j", list)
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s (on mem %d, status %+v)", what, ns.onMem(), m.Prefetches())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// 100 MiB free, Cf-m 60 MiB: a 40 MiB window, ten files
	wait("the first window", func() bool { return ns.onMem() == 10 })
	time.Sleep(300 * time.Millisecond)
	if n := ns.onMem(); n != 10 {
		t.Fatalf("%d files promoted before any was read, want the 40 MiB window's 10", n)
	}
	m.mu.Lock()
	pinned := len(m.pinned)
	m.mu.Unlock()
	if pinned != 10 {
		t.Fatalf("%d files pinned, want the window's 10", pinned)
	}
	// the job reads: each close, and the policy moving the read file
	// down, makes room for the next one
	for _, ino := range list {
		wait("file to be on mem before it is read", func() bool { ns.mu.Lock(); defer ns.mu.Unlock(); return ns.tier[ino] == "mem" })
		ns.mu.Lock()
		ns.closed[ino] = time.Now()
		ns.tier[ino] = "hdd" // read, and moved down by the policy
		ns.mu.Unlock()
	}
	wait("the list to be done", func() bool { st := m.Prefetches(); return len(st) == 1 && st[0].Done })
	st := m.Prefetches()[0]
	if st.Promoted != 20 || st.Read != 20 || st.Failed != 0 {
		t.Fatalf("status %+v, want 20 promoted and read", st)
	}
	for i, ino := range ns.order {
		// two at a time: within a pair either may reach the server first
		if d := int(ino-list[0]) - i; d < -1 || d > 1 {
			t.Fatalf("promotion order %v, want the list's", ns.order)
		}
	}
	if ns.peak > prefetchStreams {
		t.Fatalf("%d files moved at once, want at most %d", ns.peak, prefetchStreams)
	}
}

// TestPrefetchUnread: files a job does not read are unpinned after
// PrefetchHold, and all of them when the job ends.
func TestPrefetchUnread(t *testing.T) {
	ns := &prefetchNS{tier: map[uint64]string{}, closed: map[uint64]time.Time{}}
	list := []uint64{1, 2, 3}
	for _, ino := range list {
		ns.tier[ino] = "hdd"
	}
	cfg := Config{NS: ns, Auto: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now,
		Policy: pol.Config{Thresholds: pol.Thresholds{StallWrite: 4 << 20, ForcedOut: 60 << 20, NormalOut: 80 << 20}}}
	pinned := func(m *Manager) int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.pinned) }
	cfg.PrefetchHold = 100 * time.Millisecond
	m := New(cfg)
	m.Prefetch("j", list)
	deadline := time.Now().Add(5 * time.Second)
	for st := m.Prefetches(); !st[0].Done; st = m.Prefetches() {
		if time.Now().After(deadline) {
			t.Fatalf("unread files still held: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := m.Prefetches()[0]; st.Promoted != 3 || st.Dropped != 3 || st.Read != 0 || pinned(m) != 0 {
		t.Fatalf("status %+v, %d pinned: want 3 promoted, dropped unread, none pinned", st, pinned(m))
	}
	// the job ends before it reads: its window is unpinned at once
	ns.mu.Lock()
	for _, ino := range list {
		ns.tier[ino] = "hdd"
	}
	ns.mu.Unlock()
	cfg.PrefetchHold = time.Hour
	m = New(cfg)
	m.Prefetch("k", list)
	for ns.onMem() < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	m.EndPrefetch("k")
	if st := m.Prefetches()[0]; !st.Done || pinned(m) != 0 {
		t.Fatalf("after the job ended: %+v, %d pinned", st, pinned(m))
	}
}
