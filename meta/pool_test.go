package meta

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
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

func errnoOf(err error) syscall.Errno {
	var re *rpc.Error
	if errors.As(err, &re) {
		return re.Errno
	}
	return 0
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

// poolCall is a pool request in the test's table of calls.
type poolCall struct {
	Pool Pool
	Ino  uint64
	Job  string
}

// TestPools: a directory bound to a pool gets its chunks there (the
// pool's own max_perf counting), and so does a job bound to one; a pool
// in use cannot be removed; bindings of directories survive a restart,
// a job's ends with the job.
func TestPools(t *testing.T) {
	now := time.Unix(1e6, 0)
	e := engine.NewMem()
	s, ids := poolService(t, e, &now)
	ctx := context.Background()
	c := serveOn(t, s)
	call := func(name string, q poolCall) (PoolList, error) {
		var l *PoolList
		var err error
		b := &api.PoolBinding{Pool: q.Pool.Name, Ino: q.Ino, Job: q.Job}
		switch name {
		case "create":
			l, err = rpc.Do(ctx, c, api.PoolCreate, &q.Pool)
		case "rm":
			l, err = rpc.Do(ctx, c, api.PoolRemove, &api.PoolRef{Name: q.Pool.Name})
		case "bind":
			l, err = rpc.Do(ctx, c, api.PoolBind, b)
		case "unbind":
			l, err = rpc.Do(ctx, c, api.PoolUnbind, b)
		case "list":
			l, err = rpc.Do(ctx, c, api.PoolLs, &wire.Empty{})
		}
		if err != nil {
			return PoolList{}, err
		}
		return *l, nil
	}
	if _, err := call("create", poolCall{Pool: Pool{Name: "p", Servers: []uint64{ids[2], 99}}}); errnoOf(err) != syscall.EINVAL {
		t.Fatalf("a pool with a server that is not one: %v", err)
	}
	if _, err := call("create", poolCall{Pool: Pool{Name: "p", Servers: []uint64{ids[2], ids[3]}, Perf: map[uint64]float64{ids[3]: 30}}}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	sub, _ := s.Create(d.Ino, "sub", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if _, err := call("bind", poolCall{Pool: Pool{Name: "p"}, Ino: d.Ino}); err != nil {
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
	if _, err := call("bind", poolCall{Pool: Pool{Name: "p"}, Job: "42"}); err != nil {
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
	if _, err := call("rm", poolCall{Pool: Pool{Name: "p"}}); errnoOf(err) != syscall.EBUSY {
		t.Fatalf("removing a bound pool: %v", err)
	}
	s.JobEnded("42")
	l, _ := call("list", poolCall{})
	if len(l.Pools) != 1 || l.DirPools[d.Ino] != "p" || len(l.Jobs) != 0 || l.Placement != "perf" {
		t.Fatalf("list after the job ended: %+v", l)
	}
	// a new service on the same engine has the pool and the directory's binding
	s2, err := New(Config{Engine: e, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if l := s2.Pools(); len(l.Pools) != 1 || l.DirPools[d.Ino] != "p" {
		t.Fatalf("after a restart: %+v", l)
	}
	if _, err := call("unbind", poolCall{Ino: d.Ino}); err != nil {
		t.Fatal(err)
	}
	if _, err := call("rm", poolCall{Pool: Pool{Name: "p"}}); err != nil {
		t.Fatal(err)
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
