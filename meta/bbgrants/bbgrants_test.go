package bbgrants

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/rpc/rpctest"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
	"github.com/sluice-hpc/sluice/policy/bbos"
)

// TestGrants: grants are admitted against the pool tier's live capacity
// by the configured policy, kept across a restart (the engine), and
// released; over-subscription only where the policy allows; a dead server
// adds no capacity.
func TestGrants(t *testing.T) {
	servers := func() []wire.ServerInfo {
		return []wire.ServerInfo{{ID: 1, Role: "data", Tier: "mem", Capacity: 100 << 20, Alive: true},
			{ID: 2, Role: "data", Tier: "mem", Capacity: 100 << 20}, // dead
			{ID: 3, Role: "fwd", Capacity: 1 << 40, Alive: true}}
	}
	for _, c := range []struct {
		policy bbos.Policy
		admits int
	}{{bbos.Dedicated, 3}, {bbos.BBOS, 7}} {
		t.Run(string(c.policy), func(t *testing.T) { testGrants(t, c.policy, c.admits, servers) })
	}
}

func testGrants(t *testing.T, policy bbos.Policy, admits int, servers func() []wire.ServerInfo) {
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		cfg := Config{Policy: policy, Rates: bbos.Rates{WriteMax: 1000e6, WriteMin: 700e6, DemoteMin: 100e6, DemoteMax: 367e6},
			Servers: servers, Engine: reopen()}
		gs := New(cfg)
		n := 0
		for ; n < 20; n++ {
			a, err := gs.Grant(api.Grant{Job: string(rune('a' + n)), Pool: "mem", Size: 30 << 20, Period: 3600})
			if err != nil {
				t.Fatal(err)
			}
			if !a.OK {
				if a.Reason == "" {
					t.Fatalf("%s: refused with no reason", policy)
				}
				break
			}
		}
		if n != admits {
			t.Fatalf("%s admitted %d grants of 30 MiB on 100 MiB, want %d", policy, n, admits)
		}
		if a, _ := gs.Grant(api.Grant{Job: "a", Pool: "mem", Size: 30 << 20}); !a.OK {
			t.Fatalf("%s: a job's second request for the grant it holds was refused: %+v", policy, a)
		}
		if _, err := gs.Grant(api.Grant{Job: "z", Pool: "pfs", Size: 1}); rpc.Errno(err) != syscall.EINVAL {
			t.Fatalf("a grant of the pfs tier: %v, want EINVAL", err)
		}
		pools, _ := gs.Pools()
		if len(pools) != 1 || pools[0].Capacity != 100<<20 || pools[0].Granted != uint64(admits)*30<<20 {
			t.Fatalf("%s pools: %+v", policy, pools)
		}
		if policy == bbos.Dedicated && pools[0].Limit != 100<<20 || policy == bbos.BBOS && pools[0].Limit < 210<<20 {
			t.Fatalf("%s admits %d bytes per period", policy, pools[0].Limit)
		}
		if err := gs.Release("a"); err != nil {
			t.Fatal(err)
		}
		if a, _ := gs.Grant(api.Grant{Job: "new", Pool: "mem", Size: 30 << 20, Period: 3600}); !a.OK {
			t.Fatalf("%s: no room after a release: %+v", policy, a)
		}
		if l, _ := gs.List(); len(l) != admits {
			t.Fatalf("%s: %d grants held, want %d", policy, len(l), admits)
		}
		if strings.HasSuffix(t.Name(), "/mem") {
			return // nothing survives the in-memory engine
		}
		cfg.Engine = reopen()
		if l, _ := New(cfg).List(); len(l) != admits {
			t.Fatalf("%s: %d grants after a restart, want %d", policy, len(l), admits)
		}
	})
}

// TestServe: a grant over the wire is answered after the OnGrant hook
// ran, and the pools' listing shows it.
func TestServe(t *testing.T) {
	gs := New(Config{Engine: engine.NewMem(), Servers: func() []wire.ServerInfo {
		return []wire.ServerInfo{{ID: 1, Role: "data", Tier: "ssd", Capacity: 1 << 30, Alive: true}}
	}})
	ticks := 0
	gs.OnGrant(func(context.Context) { ticks++ })
	tb := &rpc.Table{Name: "metadata daemon"}
	gs.Serve(tb)
	c := rpctest.Serve(t, &rpc.Mux{Tables: []*rpc.Table{tb}})
	ctx := context.Background()
	a, err := rpc.Do(ctx, c, api.BBGrantOp, &api.Grant{Job: "7", Pool: "ssd", Size: 1 << 20})
	if err != nil || !a.OK || ticks != 1 {
		t.Fatalf("grant: %+v %v after %d ticks", a, err, ticks)
	}
	l, err := rpc.Do(ctx, c, api.BBPoolsOp, &wire.Empty{})
	if err != nil || len(l.Grants) != 1 || l.Grants[0].Job != "7" || l.Grants[0].Since == 0 || len(l.Pools) != 1 || l.Pools[0].Granted != 1<<20 {
		t.Fatalf("pools: %+v %v", l, err)
	}
	if _, err := rpc.Do(ctx, c, api.BBRelease, &api.JobRef{Job: "7"}); err != nil || ticks != 2 {
		t.Fatalf("release: %v after %d ticks", err, ticks)
	}
}
