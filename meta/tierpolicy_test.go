package meta

import (
	"syscall"
	"testing"
)

// TestTierPolicy: a file follows the nearest directory above it with a
// policy; removing it falls back to the next one up; bad values are
// refused.
func TestTierPolicy(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open func() *Service) {
		s := open()
		a, _ := s.Create(RootIno, "a", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
		b, _ := s.Create(a.Ino, "b", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
		f, err := s.Create(b.Ino, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p, from, err := s.TierPolicyOf(f.Ino); err != nil || p != (TierPolicy{}) || from != 0 || s.HasTierPolicies() {
			t.Fatalf("no policy yet: %+v from %d (%v)", p, from, err)
		}
		if err := s.SetTierPolicy(a.Ino, TierPolicy{Drain: "on-close"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTierPolicy(b.Ino, TierPolicy{Pin: "mem"}); err != nil {
			t.Fatal(err)
		}
		if p, from, _ := s.TierPolicyOf(f.Ino); p.Pin != "mem" || from != b.Ino {
			t.Fatalf("policy %+v from %d, want b's pin", p, from)
		}
		if err := s.SetTierPolicy(b.Ino, TierPolicy{}); err != nil {
			t.Fatal(err)
		}
		if p, from, _ := s.TierPolicyOf(f.Ino); p.Drain != "on-close" || from != a.Ino || !s.HasTierPolicies() {
			t.Fatalf("policy %+v from %d, want a's drain", p, from)
		}
		for _, bad := range []TierPolicy{{Pin: "pfs"}, {Pin: "hdd"}, {Drain: "sometimes"}} {
			if err := s.SetTierPolicy(a.Ino, bad); !is(err, syscall.EINVAL) {
				t.Fatalf("%+v: %v, want EINVAL", bad, err)
			}
		}
		if err := s.SetTierPolicy(f.Ino, TierPolicy{Drain: "now"}); !is(err, syscall.ENOTDIR) {
			t.Fatalf("policy on a file: %v, want ENOTDIR", err)
		}
	})
}
