package meta

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/pools"
)

// poolService is a service on e with four mem servers of max_perf 40,
// 20, 10 and 10 MB/s (ids in that order) and a clock the test turns.
func poolService(t *testing.T, e engine.Engine, now *time.Time) (*Service, []uint64) {
	t.Helper()
	s, err := New(Config{Engine: e, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ChunkSize: 1 << 20,
		Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for i, mb := range []uint64{40, 20, 10, 10} {
		id, err := s.Register(wire.ServerInfo{ID: uint64(i + 1), Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30,
			MaxPerf: mb * 1e6})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return s, ids
}

// TestPerfPlacementFollowsBacklog: chunks placed at once spread by
// max_perf (40:20:10:10 of 16 chunks is 8:4:2:2); a server that reports
// its bytes written gets new chunks again, one that has written nothing
// does not.
func TestPerfPlacementFollowsBacklog(t *testing.T) {
	now := time.Unix(1e6, 0)
	s, ids := poolService(t, engine.NewMem(), &now)
	ctx := context.Background()
	count := map[uint64]int{}
	for i := 0; i < 16; i++ {
		f, err := s.Create(RootIno, "f"+string(rune('a'+i)), syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		loc, _, err := s.Alloc(ctx, f.Ino, 0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		count[loc.Servers[0]]++
	}
	if count[ids[0]] != 8 || count[ids[1]] != 4 || count[ids[2]] != 2 || count[ids[3]] != 2 {
		t.Fatalf("16 chunks at once over 40,20,10,10 MB/s: %v", count)
	}
	// a second later the fast server reports its 8 MiB written, the
	// others nothing: the next chunk goes to it
	now = now.Add(time.Second)
	for i, id := range ids {
		w := uint64(0)
		if i == 0 {
			w = 8 << 20
		}
		s.Register(wire.ServerInfo{ID: id, Role: "data", Tier: "mem", Addr: s.reg.servers[id].info.Addr, Capacity: 1 << 30,
			MaxPerf: s.reg.servers[id].info.MaxPerf, Written: w})
	}
	f, _ := s.Create(RootIno, "next", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	loc, _, err := s.Alloc(ctx, f.Ino, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Servers[0] != ids[0] {
		t.Fatalf("the drained server did not get the chunk: %v (pending %v)", loc.Servers, s.Servers())
	}
	for _, si := range s.Servers() {
		if si.ID == ids[1] && si.Pending != 4<<20 {
			t.Errorf("server %d pending %d, want its 4 chunks", si.ID, si.Pending)
		}
	}
}

// TestPoolPlacement: a directory bound to a pool (meta/pools) gets its
// chunks there, the pool's own max_perf counting, and so does a job bound
// to one, wherever its files are; an unbound job's go anywhere.
func TestPoolPlacement(t *testing.T) {
	now := time.Unix(1e6, 0)
	e := engine.NewMem()
	s, ids := poolService(t, e, &now)
	ctx := context.Background()
	pls, err := pools.Open(pools.Config{Engine: e, NS: s, Servers: s.Servers})
	if err != nil {
		t.Fatal(err)
	}
	s.SetPools(pls)
	if err := pls.Create(api.Pool{Name: "p", Servers: []uint64{ids[2], ids[3]}, Perf: map[uint64]float64{ids[3]: 30}}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	sub, _ := s.Create(d.Ino, "sub", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if err := pls.Bind(d.Ino, "", "p"); err != nil {
		t.Fatal(err)
	}
	count := map[uint64]int{}
	for i := 0; i < 8; i++ {
		f, _ := s.Create(sub.Ino, "f"+string(rune('a'+i)), syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		loc, _, err := s.Alloc(ctx, f.Ino, 0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		count[loc.Servers[0]]++
	}
	// the pool says ids[3] gives 30 MB/s, ids[2] 10: 6 and 2 of 8
	if count[ids[2]] != 2 || count[ids[3]] != 6 {
		t.Fatalf("8 chunks in the bound directory: %v", count)
	}
	// a job bound to the pool writes there wherever its files are
	if err := pls.Bind(0, "42", "p"); err != nil {
		t.Fatal(err)
	}
	f, _ := s.Create(RootIno, "jobfile", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	loc, _, _, err := s.AllocWait(ctx, f.Ino, 0, 0, nil, 0, "42")
	if err != nil || (loc.Servers[0] != ids[2] && loc.Servers[0] != ids[3]) {
		t.Fatalf("job 42's chunk at %v (%v)", loc.Servers, err)
	}
	g, _ := s.Create(RootIno, "other", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if loc, _, _, _ := s.AllocWait(ctx, g.Ino, 0, 0, nil, 0, "43"); loc.Servers[0] != ids[0] {
		t.Fatalf("an unbound job's chunk at %v, want the idle fast server", loc.Servers)
	}
}

// TestBacklogCountsReplicas: a replicated chunk's second copy loads its
// servers as the first does.
func TestBacklogCountsReplicas(t *testing.T) {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ChunkSize: 1 << 20,
		Copies: map[string]int{"mem": 2}})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []string{"cab0", "cab1"} {
		if _, err := s.Register(wire.ServerInfo{ID: uint64(i + 1), Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30,
			Domain: d, MaxPerf: 10e6}); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	loc, _, err := s.Alloc(context.Background(), f.Ino, 0, 0, nil)
	if err != nil || len(loc.Replicas) != 1 {
		t.Fatalf("placed %+v, %v", loc, err)
	}
	for _, si := range s.Servers() {
		if si.Pending != 1<<20 {
			t.Errorf("server %d pending %d, want the chunk's 1 MiB", si.ID, si.Pending)
		}
	}
}
