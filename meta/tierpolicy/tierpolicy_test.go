package tierpolicy

import (
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/meta/dirtree"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestPolicies: a file follows the nearest directory above it with a
// policy; removing that falls back to the next one up; bad values and
// files are refused; the policies survive a restart.
func TestPolicies(t *testing.T) {
	const root, a, b, f = 1, 2, 3, 4
	ns := dirtree.Fake{Parents: map[uint64]uint64{root: 0, a: root, b: a, f: b}, Dirs: map[uint64]bool{root: true, a: true, b: true}}
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		ps := New(reopen(), ns)
		if p, from, err := ps.Of(f); err != nil || p != (api.TierPolicy{}) || from != 0 || ps.Any() {
			t.Fatalf("no policy yet: %+v from %d (%v)", p, from, err)
		}
		if err := ps.Set(a, api.TierPolicy{Drain: "on-close"}); err != nil {
			t.Fatal(err)
		}
		if err := ps.Set(b, api.TierPolicy{Pin: "mem", KeepCache: true}); err != nil {
			t.Fatal(err)
		}
		if p, from, _ := ps.Of(f); p.Pin != "mem" || !p.KeepCache || from != b {
			t.Fatalf("policy %+v from %d, want b's pin", p, from)
		}
		if err := ps.Set(b, api.TierPolicy{}); err != nil {
			t.Fatal(err)
		}
		if p, from, _ := ps.Of(f); p.Drain != "on-close" || from != a || !ps.Any() {
			t.Fatalf("policy %+v from %d, want a's drain", p, from)
		}
		for _, bad := range []api.TierPolicy{{Pin: "pfs"}, {Pin: "hdd"}, {Drain: "sometimes"}} {
			if err := ps.Set(a, bad); rpc.Errno(err) != syscall.EINVAL {
				t.Fatalf("%+v: %v, want EINVAL", bad, err)
			}
		}
		if err := ps.Set(f, api.TierPolicy{Drain: "now"}); rpc.Errno(err) != syscall.ENOTDIR {
			t.Fatalf("policy on a file: %v, want ENOTDIR", err)
		}
		if err := ps.Set(99, api.TierPolicy{Drain: "now"}); rpc.Errno(err) != syscall.ENOENT {
			t.Fatalf("policy on no inode: %v, want ENOENT", err)
		}
		if t.Name() == "TestPolicies/mem" {
			return // nothing survives the in-memory engine
		}
		ps = New(reopen(), ns)
		if p, from, _ := ps.Of(f); p.Drain != "on-close" || from != a {
			t.Fatalf("after a restart: policy %+v from %d, want a's drain", p, from)
		}
	})
}
