package tiering

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/tiering"
)

// fakeNS is a metadata service with one mem server short of space, two
// ssd servers and files of one chunk each on the mem server.
type fakeNS struct {
	noReplicas
	mu     sync.Mutex
	used   uint64
	closed map[uint64]time.Time // ino → last close (open files: absent)
	moves  []string
}

func (f *fakeNS) Servers() []wire.ServerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []wire.ServerInfo{
		{ID: 1, Role: "data", Tier: "mem", Rank: 0, Capacity: 100 << 20, Used: f.used, Alive: true},
		{ID: 2, Role: "data", Tier: "ssd", Rank: 1, Capacity: 1 << 30, Used: 0, Alive: true},
		{ID: 3, Role: "data", Tier: "ssd", Rank: 1, Capacity: 1 << 30, Used: 512 << 20, Alive: true},
		{ID: 4, Role: "fwd", Alive: true},
	}
}

func (f *fakeNS) ServerFiles() (map[uint64][]api.FileUse, error) {
	var out []api.FileUse
	for ino := uint64(10); ino < 30; ino++ {
		out = append(out, api.FileUse{Ino: ino, Bytes: 4 << 20})
	}
	return map[uint64][]api.FileUse{1: out}, nil
}

func (f *fakeNS) Activity(ino uint64) (wire.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.closed[ino]
	if !ok {
		return wire.Activity{Open: 1, Opened: 1, LastOpen: 1}, nil
	}
	return wire.Activity{Opened: 1, LastOpen: t.Add(-time.Second).UnixNano(), LastClose: t.UnixNano(), MeanToc: time.Second}, nil
}

func (f *fakeNS) Layout(ino uint64) ([]wire.ChunkLoc, error) {
	return []wire.ChunkLoc{{Idx: 0, Tier: "mem", Servers: []uint64{1}}}, nil
}

func (f *fakeNS) MoveChunk(_ context.Context, ino, idx uint64, tier string, servers []uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves = append(f.moves, fmt.Sprintf("%d>%s", ino, tier))
	if len(servers) != 1 || servers[0] != 2 {
		return 0, fmt.Errorf("destination %v, want the emptiest ssd server [2]", servers)
	}
	f.used -= 4 << 20
	return 4 << 20, nil
}

func (f *fakeNS) FinishMoves(context.Context) int { return 0 }

func (f *fakeNS) WakeStalled() {}

// decisionLog keeps the decisions it is given.
type decisionLog struct {
	mu   sync.Mutex
	jobs []string
	ds   []fwdmap.Decision
}

func (l *decisionLog) PutDecision(job string, _ time.Time, v []byte) error {
	var d fwdmap.Decision
	if err := json.Unmarshal(v, &d); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs, l.ds = append(l.jobs, job), append(l.ds, d)
	return nil
}

func (f *fakeNS) ChunkMoves(uint64) ([]api.ChunkMove, error) { return nil, nil }

func (f *fakeNS) Getattr(ino uint64) (*wire.Attr, error) {
	return &wire.Attr{Ino: ino, Size: 4 << 20}, nil
}

// TestTickMovesCoolestClosedFiles: in normal out the manager moves closed
// files only, the longest closed first, to the emptiest ssd server, no
// more at once than N, and stops when free space is above Cn-m.
func TestTickMovesCoolestClosedFiles(t *testing.T) {
	now := time.Unix(1e6, 0)
	ns := &fakeNS{used: 80 << 20, closed: map[uint64]time.Time{}}
	for ino := uint64(10); ino < 20; ino++ { // 10..19 closed, 19 the longest ago
		ns.closed[ino] = now.Add(-time.Duration(ino) * time.Minute)
	}
	log := &decisionLog{}
	m := New(Config{NS: ns, Auto: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
		Policy:    pol.Config{Thresholds: pol.Thresholds{StallWrite: 4 << 20, ForcedOut: 10 << 20, NormalOut: 30 << 20}, DefaultConcurrent: 3},
		Decisions: log})
	m.Tick(context.Background())
	waitMoves(t, m)
	st := m.Status()
	// free 20 MiB ≤ Cn-m 30 MiB: normal out, N = 3 (no bandwidth known)
	if len(st.Servers) != 3 || st.Servers[0].Mode != "normal-out" || st.Servers[0].Concurrency != 3 {
		t.Fatalf("status %+v", st)
	}
	for _, si := range ns.Servers()[:3] {
		if r := m.StallReserve(si); r != 4<<20 {
			t.Fatalf("server %d: placement keeps %d bytes for stalled writes, want its Cs-w (4 MiB)", si.ID, r)
		}
	}
	if st.Totals.Chunks != 3 || st.Totals.Files != 3 || st.Totals.Bytes != 12<<20 || st.Totals.Failed != 0 {
		t.Fatalf("totals %+v (moves %v)", st.Totals, ns.moves)
	}
	sort.Strings(ns.moves)
	if fmt.Sprint(ns.moves) != "[17>ssd 18>ssd 19>ssd]" {
		t.Fatalf("moved %v, want the three longest-closed files 17, 18, 19", ns.moves)
	}
	// the decision is in Beacon's log, under the migration job, with
	// the server's state and each move
	if len(log.ds) != 1 || log.jobs[0] != wire.MigrationJob || log.ds[0].Kind != "tiering" || log.ds[0].Event != "normal-out" ||
		len(log.ds[0].Reasons) != 4 || !strings.Contains(log.ds[0].Reasons[0], "server 1 (mem): 20.0 MiB free") ||
		!strings.Contains(log.ds[0].Reasons[1], "move inode 19") {
		t.Fatalf("decision log %q %+v", log.jobs, log.ds)
	}
	// a second tick: 32 MiB free now, above Cn-m: nothing more moves
	m.Tick(context.Background())
	time.Sleep(50 * time.Millisecond)
	if st := m.Status(); st.Totals.Chunks != 3 || st.Servers[0].Mode != "calm" {
		t.Fatalf("after the moves: %+v", st)
	}
	// short of space (normal out) with every file open: nothing can move
	// until forced out, so placement must not hold the last bytes back
	ns.mu.Lock()
	ns.used = 80 << 20
	ns.closed = map[uint64]time.Time{}
	ns.mu.Unlock()
	m.Tick(context.Background())
	if st, r := m.Status(), m.StallReserve(ns.Servers()[0]); st.Servers[0].Mode != "normal-out" || r != 0 {
		t.Fatalf("nothing movable (%+v): placement still keeps %d bytes of server 1 back", st.Servers[0], r)
	}
	// before its first look at a server the manager gives its Cs-w too
	fresh := New(Config{NS: ns, Auto: true, Log: m.cfg.Log, Now: m.cfg.Now, Policy: m.cfg.Policy})
	if r := fresh.StallReserve(ns.Servers()[0]); r != 4<<20 {
		t.Fatalf("unseen server: reserve %d, want its Cs-w", r)
	}
	// tiering manual: nothing frees space, nothing waits
	manual := New(Config{NS: ns, Log: m.cfg.Log, Now: m.cfg.Now, Policy: m.cfg.Policy})
	if r := manual.StallReserve(ns.Servers()[0]); r != 0 {
		t.Fatalf("manual tiering: reserve %d, want none", r)
	}
}

// TestGroup: the policy's server first, then the emptiest live servers of
// the tier, as many as the chunk's stripe count allows.
func TestGroup(t *testing.T) {
	ss := []wire.ServerInfo{
		{ID: 1, Role: "data", Tier: "ssd", Capacity: 100, Used: 90, Alive: true},
		{ID: 2, Role: "data", Tier: "ssd", Capacity: 100, Used: 10, Alive: true},
		{ID: 3, Role: "data", Tier: "ssd", Capacity: 100, Used: 0, Alive: false},
		{ID: 4, Role: "data", Tier: "ssd", Capacity: 100, Used: 50, Alive: true},
		{ID: 5, Role: "data", Tier: "mem", Capacity: 100, Alive: true},
	}
	for _, c := range []struct {
		first uint64
		g     int
		want  []uint64
	}{{1, 1, []uint64{1}}, {1, 2, []uint64{1, 2}}, {1, 4, []uint64{1, 2, 4}}, {0, 2, []uint64{2, 4}}, {3, 1, []uint64{2}}} {
		got := group(ss, "ssd", c.first, c.g)
		if len(got) != len(c.want) {
			t.Fatalf("group(first %d, g %d) = %v, want %v", c.first, c.g, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("group(first %d, g %d) = %v, want %v", c.first, c.g, got, c.want)
			}
		}
	}
}

// accessNS is fakeNS whose files are all open, opened at the same time,
// and last read or written as the forwarding daemons reported (ino 29
// longest ago: the head of the LRU of open files; with the opens alone,
// ties would put ino 10 there).
type accessNS struct{ *fakeNS }

func (f accessNS) Activity(ino uint64) (wire.Activity, error) {
	return wire.Activity{Open: 1, Opened: 1, LastOpen: 1, LastAccess: int64(100-ino) * int64(time.Second)}, nil
}

// TestForcedOutByLastAccess: in forced out, open files move down least
// recently accessed first, by the accesses the forwarding daemons report
// (not by when they were opened, which is the same for all).
func TestForcedOutByLastAccess(t *testing.T) {
	now := time.Unix(1e6, 0)
	ns := accessNS{&fakeNS{used: 95 << 20, closed: map[uint64]time.Time{}}}
	m := New(Config{NS: ns, Auto: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
		Policy: pol.Config{Thresholds: pol.Thresholds{StallWrite: 2 << 20, ForcedOut: 10 << 20, NormalOut: 30 << 20}, DefaultConcurrent: 2}})
	m.Tick(context.Background())
	waitMoves(t, m)
	sort.Strings(ns.moves)
	if fmt.Sprint(ns.moves) != "[28>ssd 29>ssd]" {
		t.Fatalf("moved %v, want the two least recently accessed open files 28 and 29", ns.moves)
	}
}

// waitMoves waits until no file migration runs.
func waitMoves(t *testing.T, m *Manager) {
	t.Helper()
	waitNone(t, m, func() int { return len(m.migrating) }, "moves to finish")
}

// waitNone waits until busy, read with m.mu held, is 0.
func waitNone(t *testing.T, m *Manager, busy func() int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		n := busy()
		m.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKickLooks: between ticks, a Kick (a writer stalled at Cs-w,
// cmd/sluice's SetOnStall) runs the policy at once: the moves start
// without waiting for the next tick.
func TestKickLooks(t *testing.T) {
	now := time.Unix(1e6, 0)
	ns := &fakeNS{used: 80 << 20, closed: map[uint64]time.Time{}}
	for ino := uint64(10); ino < 20; ino++ {
		ns.closed[ino] = now.Add(-time.Duration(ino) * time.Minute)
	}
	m := New(Config{NS: ns, Auto: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
		Policy: pol.Config{Thresholds: pol.Thresholds{StallWrite: 4 << 20, ForcedOut: 10 << 20, NormalOut: 30 << 20}, DefaultConcurrent: 3}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	never := make(chan time.Time) // no tick comes
	go m.Run(ctx, never)
	time.Sleep(50 * time.Millisecond)
	if st := m.Status(); st.Totals.Chunks != 0 {
		t.Fatalf("moves before any tick or kick: %+v", st.Totals)
	}
	m.Kick()
	deadline := time.Now().Add(5 * time.Second)
	for m.Status().Totals.Chunks < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no moves 5 s after a kick: %+v (moves %v)", m.Status().Totals, ns.moves)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gatedNS is fakeNS whose moves wait for gate and whose moved files leave
// the mem server's list.
type gatedNS struct {
	*fakeNS
	gate  chan struct{}
	moved map[uint64]bool // guarded by fakeNS.mu
}

func (g *gatedNS) MoveChunk(ctx context.Context, ino, idx uint64, tier string, servers []uint64) (uint64, error) {
	<-g.gate
	n, err := g.fakeNS.MoveChunk(ctx, ino, idx, tier, servers)
	g.mu.Lock()
	g.moved[ino] = true
	g.mu.Unlock()
	return n, err
}

func (g *gatedNS) ServerFiles() (map[uint64][]api.FileUse, error) {
	all, _ := g.fakeNS.ServerFiles()
	g.mu.Lock()
	defer g.mu.Unlock()
	var left []api.FileUse
	for _, f := range all[1] {
		if !g.moved[f.Ino] {
			left = append(left, f)
		}
	}
	return map[uint64][]api.FileUse{1: left}, nil
}

// TestNotStuckWhileMovesEnd: a look that finds nothing new to move
// because every movable file is moving already does not make the server
// "stuck" once those moves end: until the next look, placement keeps its
// Cs-w for writers to wait at instead of letting a new chunk take the
// last bytes and the next one spill to a lower tier (the CI's
// TestTieringWritesWait). A look with nothing moving that finds nothing
// to move still does.
func TestNotStuckWhileMovesEnd(t *testing.T) {
	now := time.Unix(1e6, 0)
	ns := &gatedNS{fakeNS: &fakeNS{used: 86 << 20, closed: map[uint64]time.Time{}}, gate: make(chan struct{}), moved: map[uint64]bool{}}
	for ino := uint64(10); ino < 13; ino++ { // 10, 11, 12 closed; the rest open
		ns.closed[ino] = now.Add(-time.Duration(ino) * time.Minute)
	}
	m := New(Config{NS: ns, Auto: true, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now },
		Policy: pol.Config{Thresholds: pol.Thresholds{StallWrite: 4 << 20, ForcedOut: 10 << 20, NormalOut: 30 << 20}, DefaultConcurrent: 3}})
	mem := func() wire.ServerInfo { return ns.Servers()[0] }
	m.Tick(context.Background()) // the three closed files start moving
	m.Tick(context.Background()) // nothing new: they are all moving
	if st := m.Status(); st.Servers[0].Mode != "normal-out" || st.Servers[0].InFlight != 3 {
		t.Fatalf("with the moves in flight: %+v", st.Servers[0])
	}
	if r := m.StallReserve(mem()); r != 4<<20 {
		t.Fatalf("moves in flight: reserve %d, want Cs-w", r)
	}
	close(ns.gate)
	waitMoves(t, m)
	// the moves ended and nobody looked since: writers still wait
	if r := m.StallReserve(mem()); r != 4<<20 {
		t.Fatalf("moves just ended, no look since: reserve %d, want Cs-w (a decision made while they were under way said nothing of what is left)", r)
	}
	// the next look finds every file left open: nothing can move now
	m.Tick(context.Background())
	if st, r := m.Status(), m.StallReserve(mem()); st.Servers[0].Mode != "normal-out" || r != 0 {
		t.Fatalf("nothing movable and nothing moving (%+v): reserve %d, want 0", st.Servers[0], r)
	}
}
