package pools

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/rpc/rpctest"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/dirtree"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestPools: pools are made of data servers with positive max_perf
// figures of members; a directory bound to one has it for everything
// below it, a job's binding goes before the directory's and ends with the
// job; a pool in use cannot be removed; pools and directories' bindings
// survive a restart on every engine, over the wire as in process.
func TestPools(t *testing.T) {
	const root, d, sub, f = 1, 2, 3, 4
	ns := dirtree.Fake{Parents: map[uint64]uint64{root: 0, d: root, sub: d, f: sub}, Dirs: map[uint64]bool{root: true, d: true, sub: true}}
	servers := func() []wire.ServerInfo {
		return []wire.ServerInfo{{ID: 1, Role: "data", Tier: "mem"}, {ID: 2, Role: "data", Tier: "ssd"}, {ID: 9, Role: "fwd"}}
	}
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		open := func() (*Pools, *rpc.Client) {
			ps, err := Open(Config{Engine: reopen(), NS: ns, Servers: servers, Placement: "perf"})
			if err != nil {
				t.Fatal(err)
			}
			tb := &rpc.Table{Name: "metadata daemon"}
			ps.Serve(tb)
			return ps, rpctest.Serve(t, &rpc.Mux{Tables: []*rpc.Table{tb}})
		}
		ps, c := open()
		ctx := context.Background()
		bind := func(ino uint64, job, pool string) (*api.PoolList, error) {
			return rpc.Do(ctx, c, api.PoolBind, &api.PoolBinding{Ino: ino, Job: job, Pool: pool})
		}
		for _, bad := range []api.Pool{{Name: "p", Servers: []uint64{1, 9}}, {Name: "p"}, {Name: "a b", Servers: []uint64{1}},
			{Name: "p", Servers: []uint64{1}, Perf: map[uint64]float64{2: 10}}, {Name: "p", Servers: []uint64{1}, Perf: map[uint64]float64{1: 0}}} {
			if _, err := rpc.Do(ctx, c, api.PoolCreate, &bad); rpc.Errno(err) != syscall.EINVAL {
				t.Fatalf("pool %+v: %v, want EINVAL", bad, err)
			}
		}
		if l, err := rpc.Do(ctx, c, api.PoolCreate, &api.Pool{Name: "p", Servers: []uint64{1, 2}, Perf: map[uint64]float64{2: 30}}); err != nil ||
			len(l.Pools) != 1 || l.Placement != "perf" {
			t.Fatalf("create: %+v %v", l, err)
		}
		ps.Create(api.Pool{Name: "q", Servers: []uint64{2}})
		if _, err := bind(f, "", "p"); rpc.Errno(err) != syscall.ENOTDIR {
			t.Fatalf("binding a file: %v, want ENOTDIR", err)
		}
		if _, err := bind(d, "", "zz"); rpc.Errno(err) != syscall.ENOENT {
			t.Fatalf("binding to no pool: %v, want ENOENT", err)
		}
		if _, err := bind(d, "7", "p"); rpc.Errno(err) != syscall.EINVAL {
			t.Fatalf("binding a directory and a job at once: %v, want EINVAL", err)
		}
		if _, err := bind(d, "", "p"); err != nil {
			t.Fatal(err)
		}
		if p := ps.Of(sub, ""); p == nil || p.Name != "p" || p.Perf[2] != 30 {
			t.Fatalf("a file two levels below the bound directory: pool %+v, want p", p)
		}
		if p := ps.Of(root, ""); p != nil {
			t.Fatalf("a file above the bound directory: pool %+v, want none", p)
		}
		if _, err := bind(0, "7", "q"); err != nil {
			t.Fatal(err)
		}
		if p := ps.Of(sub, "7"); p == nil || p.Name != "q" {
			t.Fatalf("job 7's file in the bound directory: pool %+v, want the job's q", p)
		}
		if _, err := rpc.Do(ctx, c, api.PoolRemove, &api.PoolRef{Name: "q"}); rpc.Errno(err) != syscall.EBUSY {
			t.Fatalf("removing a pool a job is bound to: %v, want EBUSY", err)
		}
		if !strings.HasSuffix(t.Name(), "/mem") { // a standby taking over finds the job's binding
			ps, c = open()
			if p := ps.Of(sub, "7"); p == nil || p.Name != "q" {
				t.Fatalf("job 7's file after a restart: pool %+v, want the job's q", p)
			}
		}
		if err := ps.JobEnded("7"); err != nil {
			t.Fatal(err)
		}
		if l, _ := rpc.Do(ctx, c, api.PoolLs, &wire.Empty{}); len(l.Pools) != 2 || l.DirPools[d] != "p" || len(l.Jobs) != 0 {
			t.Fatalf("list after the job ended: %+v", l)
		}
		if _, err := rpc.Do(ctx, c, api.PoolRemove, &api.PoolRef{Name: "q"}); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(t.Name(), "/mem") { // nothing survives the in-memory engine
			ps, c = open()
			if l := ps.List(); len(l.Pools) != 1 || l.DirPools[d] != "p" || len(l.Jobs) != 0 {
				t.Fatalf("after a restart: %+v", l)
			}
		}
		if _, err := rpc.Do(ctx, c, api.PoolRemove, &api.PoolRef{Name: "p"}); rpc.Errno(err) != syscall.EBUSY {
			t.Fatalf("removing a pool a directory is bound to: %v, want EBUSY", err)
		}
		if _, err := rpc.Do(ctx, c, api.PoolUnbind, &api.PoolBinding{Ino: d}); err != nil {
			t.Fatal(err)
		}
		if _, err := rpc.Do(ctx, c, api.PoolRemove, &api.PoolRef{Name: "p"}); err != nil {
			t.Fatal(err)
		}
	})
}
