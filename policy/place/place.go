// Package place is the chunk placement policy: given the data servers, what
// each holds and may hold, and a new chunk, it picks the tier and the group
// of servers the chunk's stripes go to. Today's rule: the fastest tier that
// has a live group with room for the chunk, the group rotated over the
// tier's servers so that files spread. (Performance-aware placement over
// resource pools, ONFS-style tiering and QoS will decide here too.)
//
// Pure: the caller passes the servers' state as it knows it (liveness
// already judged, space promised since their last report included) and a
// sequence number that turns the rotation; the policy returns a decision
// and what it charges each server, and keeps nothing. No clock, no I/O.
package place

import (
	"errors"
	"sort"

	"github.com/sluice-hpc/sluice/layout"
)

// Server is a data server as the caller knows it.
type Server struct {
	ID   uint64
	Tier string
	Rank uint32 // its tier's rank: lower is faster
	// Capacity is its budget in bytes (0: unbounded); Used what it holds
	// plus what has been promised to it since its last report.
	Capacity, Used uint64
	Alive          bool
}

// Chunk is the chunk to place.
type Chunk struct {
	Ino, Idx    uint64
	ChunkSize   int64
	StripeCount int   // servers the chunk's stripes go to (1: not striped)
	StripeUnit  int64 // 0: the chunk size
	// Exclude lists servers that must not get it (they just refused it).
	Exclude []uint64
	// Seq turns the rotation: the caller passes a number that changes from
	// one placement to the next.
	Seq uint64
}

// Decision is where the chunk goes.
type Decision struct {
	Tier    string
	Servers []uint64 // stripe group, in stripe order
	Charge  []uint64 // bytes each of them is promised (same order)
}

// ErrNoSpace: no tier has a live group with room.
var ErrNoSpace = errors.New("no tier has room for a new chunk")

// Choose places c on servers.
func Choose(servers []Server, c Chunk) (Decision, error) {
	byTier := map[string][]Server{}
	var tiers []string
	for _, s := range servers {
		if !s.Alive || excluded(s.ID, c.Exclude) {
			continue
		}
		if byTier[s.Tier] == nil {
			tiers = append(tiers, s.Tier)
		}
		byTier[s.Tier] = append(byTier[s.Tier], s)
	}
	sort.Slice(tiers, func(i, j int) bool {
		ri, rj := byTier[tiers[i]][0].Rank, byTier[tiers[j]][0].Rank
		if ri != rj {
			return ri < rj
		}
		return tiers[i] < tiers[j]
	})
	unit := c.StripeUnit
	if unit == 0 {
		unit = c.ChunkSize
	}
	for t, tier := range tiers {
		ss := byTier[tier]
		sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
		g := c.StripeCount
		if g < 1 || tier == "pfs" {
			g = 1 // the pfs tier keeps whole plain files
		}
		g = min(g, len(ss))
		start := int((c.Ino + c.Idx + c.Seq + uint64(t)) % uint64(len(ss)))
		d := Decision{Tier: tier}
		for i := 0; i < len(ss) && len(d.Servers) < g; i++ {
			s := ss[(start+i)%len(ss)]
			need := uint64(layout.LocalSize(len(d.Servers), g, unit, c.ChunkSize))
			if s.Capacity == 0 || s.Used+need <= s.Capacity {
				d.Servers = append(d.Servers, s.ID)
				d.Charge = append(d.Charge, need)
			}
		}
		if len(d.Servers) == g {
			return d, nil
		}
	}
	return Decision{}, ErrNoSpace
}

func excluded(id uint64, ex []uint64) bool {
	for _, x := range ex {
		if x == id {
			return true
		}
	}
	return false
}
