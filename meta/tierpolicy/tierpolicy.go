// Package tierpolicy keeps directories' tiering policies (`sluice tier
// set DIR`, docs/tiering.md): a tier to pin a directory's files to, when
// they drain to the PFS, whether a drained copy stays as a cache. A file
// follows the nearest directory above it (by primary parent) that has
// one. The policies live under their own keys in the metadata daemon's
// engine; the namespace is asked only whether a directory is one and for
// an inode's parent. It must not decide anything (the tiering manager
// does).
package tierpolicy

import (
	"encoding/binary"
	"slices"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/meta/dirtree"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/tier"
)

// Prefix is the first byte of the policies' engine keys ('P' ino); the
// metadata daemon's key schema (meta/schema.go) reserves it.
const Prefix = 'P'

// DrainModes are the valid api.TierPolicy.Drain values.
var DrainModes = []string{"now", "on-close", "cool", "never"}

// Namespace is what the package needs of the namespace.
type Namespace = dirtree.Namespace

// Policies is the directories' tiering policies.
type Policies struct {
	e  engine.Engine
	ns Namespace
}

// New returns the policies kept in e.
func New(e engine.Engine, ns Namespace) *Policies { return &Policies{e: e, ns: ns} }

func key(ino uint64) []byte { return binary.BigEndian.AppendUint64([]byte{Prefix}, ino) }

func encode(p api.TierPolicy) []byte {
	s := p.Pin + "|" + p.Drain
	if p.KeepCache {
		s += "|keep-cache"
	}
	return []byte(s)
}

func decode(b []byte) api.TierPolicy {
	pin, rest, _ := strings.Cut(string(b), "|")
	drain, flags, _ := strings.Cut(rest, "|")
	return api.TierPolicy{Pin: pin, Drain: drain, KeepCache: flags == "keep-cache"}
}

// Set sets directory dir's policy; the zero policy removes it.
func (ps *Policies) Set(dir uint64, p api.TierPolicy) error {
	if p.Pin != "" {
		if r, ok := tier.Rank(p.Pin); !ok || p.Pin == "pfs" || r > 1 {
			return rpc.Errorf(syscall.EINVAL, "--pin %q: want mem or ssd", p.Pin)
		}
	}
	if p.Drain != "" && !slices.Contains(DrainModes, p.Drain) {
		return rpc.Errorf(syscall.EINVAL, "--drain %q: want one of %s", p.Drain, strings.Join(DrainModes, ", "))
	}
	if err := ps.ns.Dir(dir); err != nil {
		return err
	}
	var b engine.Batch
	if p == (api.TierPolicy{}) {
		b.Del(key(dir))
	} else {
		b.Set(key(dir), encode(p))
	}
	return ps.e.Apply(&b, true)
}

// Of returns the policy file or directory ino follows and the directory
// it is set on (0: none).
func (ps *Policies) Of(ino uint64) (api.TierPolicy, uint64, error) {
	for depth := 0; ino != 0 && depth < 4096; depth++ {
		if v, err := ps.e.Get(key(ino)); err == nil {
			return decode(v), ino, nil
		}
		parent, err := ps.ns.Parent(ino)
		if err != nil {
			return api.TierPolicy{}, 0, err
		}
		ino = parent
	}
	return api.TierPolicy{}, 0, nil
}

// Any reports whether any directory has a policy.
func (ps *Policies) Any() bool {
	found := false
	ps.e.Scan([]byte{Prefix}, nil, func(_, _ []byte) bool {
		found = true
		return false
	})
	return found
}
