package meta

import (
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/bbos"
)

// TestGrants: grants are admitted against the pool tier's capacity by the
// configured policy, kept across a restart of the service's view (the
// engine), and released; over-subscription only where the policy allows.
func TestGrants(t *testing.T) {
	for _, c := range []struct {
		policy bbos.Policy
		admits int
	}{{bbos.Dedicated, 3}, {bbos.BBOS, 7}} {
		s := truncService(t)
		s.cfg.BBPolicy = c.policy
		s.cfg.BBRates = bbos.Rates{WriteMax: 1000e6, WriteMin: 700e6, DemoteMin: 100e6, DemoteMax: 367e6}
		s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 100 << 20})
		n := 0
		for ; n < 20; n++ {
			a, err := s.Grant(BBGrant{Job: string(rune('a' + n)), Pool: "mem", Size: 30 << 20, Period: 3600})
			if err != nil {
				t.Fatal(err)
			}
			if !a.OK {
				if a.Reason == "" {
					t.Fatalf("%s: refused with no reason", c.policy)
				}
				break
			}
		}
		if n != c.admits {
			t.Fatalf("%s admitted %d grants of 30 MiB on 100 MiB, want %d", c.policy, n, c.admits)
		}
		if a, _ := s.Grant(BBGrant{Job: "a", Pool: "mem", Size: 30 << 20}); !a.OK {
			t.Fatalf("%s: a job's second request for the grant it holds was refused: %+v", c.policy, a)
		}
		if _, err := s.Grant(BBGrant{Job: "z", Pool: "pfs", Size: 1}); !is(err, syscall.EINVAL) {
			t.Fatalf("a grant of the pfs tier: %v, want EINVAL", err)
		}
		pools, _ := s.BBPools()
		if len(pools) != 1 || pools[0].Capacity != 100<<20 || pools[0].Granted != uint64(c.admits)*30<<20 {
			t.Fatalf("%s pools: %+v", c.policy, pools)
		}
		if c.policy == bbos.Dedicated && pools[0].Limit != 100<<20 || c.policy == bbos.BBOS && pools[0].Limit < 210<<20 {
			t.Fatalf("%s admits %d bytes per period", c.policy, pools[0].Limit)
		}
		if err := s.ReleaseGrant("a"); err != nil {
			t.Fatal(err)
		}
		if a, _ := s.Grant(BBGrant{Job: "new", Pool: "mem", Size: 30 << 20, Period: 3600}); !a.OK {
			t.Fatalf("%s: no room after a release: %+v", c.policy, a)
		}
		if gs, _ := s.Grants(); len(gs) != c.admits {
			t.Fatalf("%s: %d grants held, want %d", c.policy, len(gs), c.admits)
		}
	}
}
