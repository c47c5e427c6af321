package meta

import (
	"github.com/sluice-hpc/sluice/api"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/tier"
)

// Directory tiering policies (`sluice tier set DIR`), kept under the 'P'
// keys and inherited: a file follows the nearest directory above it (by
// primary parent) that has one.

// TierPolicy is a directory's tiering policy. The zero value is "no
// policy": the ONFS policy alone decides, and files drain to the PFS as
// the tiering manager's default says.
type TierPolicy = api.TierPolicy

// DrainModes are the valid TierPolicy.Drain values.
var DrainModes = []string{"now", "on-close", "cool", "never"}

func encodePolicy(p TierPolicy) []byte {
	s := p.Pin + "|" + p.Drain
	if p.KeepCache {
		s += "|keep-cache"
	}
	return []byte(s)
}

func decodePolicy(b []byte) TierPolicy {
	pin, rest, _ := strings.Cut(string(b), "|")
	drain, flags, _ := strings.Cut(rest, "|")
	return TierPolicy{Pin: pin, Drain: drain, KeepCache: flags == "keep-cache"}
}

func policyKey(ino uint64) []byte { return key1(pPolicy, ino) }

// SetTierPolicy sets directory dir's policy; the zero policy removes it.
func (s *Service) SetTierPolicy(dir uint64, p TierPolicy) error {
	if p.Pin != "" {
		if r, ok := tier.Rank(p.Pin); !ok || p.Pin == "pfs" || r > 1 {
			return errno(syscall.EINVAL, "--pin %q: want mem or ssd", p.Pin)
		}
	}
	if p.Drain != "" && !contains(DrainModes, p.Drain) {
		return errno(syscall.EINVAL, "--drain %q: want one of %s", p.Drain, strings.Join(DrainModes, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.getDir(dir); err != nil {
		return err
	}
	var b engine.Batch
	if p == (TierPolicy{}) {
		b.Del(policyKey(dir))
	} else {
		b.Set(policyKey(dir), encodePolicy(p))
	}
	return s.e.Apply(&b, true)
}

// TierPolicyOf returns the policy file or directory ino follows and the
// directory it is set on (0: none).
func (s *Service) TierPolicyOf(ino uint64) (TierPolicy, uint64, error) {
	for depth := 0; ino != 0 && depth < 4096; depth++ {
		if v, err := s.e.Get(policyKey(ino)); err == nil {
			return decodePolicy(v), ino, nil
		}
		if ino == RootIno {
			break
		}
		n, err := s.getInode(ino)
		if err != nil {
			return TierPolicy{}, 0, err
		}
		ino = n.Parent
	}
	return TierPolicy{}, 0, nil
}

// HasTierPolicies reports whether any directory has a policy.
func (s *Service) HasTierPolicies() bool {
	found := false
	s.e.Scan([]byte{pPolicy}, nil, func(_, _ []byte) bool {
		found = true
		return false
	})
	return found
}

func contains(ss []string, x string) bool {
	for _, s := range ss {
		if s == x {
			return true
		}
	}
	return false
}
