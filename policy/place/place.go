// Package place is the chunk placement policy: given the data servers, what
// each holds and may hold, and a new chunk, it picks the tier and the group
// of servers the chunk's stripes go to. Today's rule: the fastest tier that
// has a live group with room for the chunk, the group rotated over the
// tier's servers so that files spread. A server keeps its write-stall
// reserve (ONFS's Cs-w) free: when no group of a tier has room above the
// reserves, a caller that may wait is told to (ErrStall) while the tiering
// manager frees space, and one that may not spills to the next tier; the
// reserves are given up only when no tier has room above them.
// (Performance-aware placement over resource pools and QoS will decide
// here too.)
//
// Pure: the caller passes the servers' state as it knows it (liveness
// already judged, space promised since their last report included) and a
// sequence number that turns the rotation; the policy returns a decision
// and what it charges each server, and keeps nothing. No clock, no I/O.
package place

import (
	"errors"
	"sort"
	"strconv"

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
	// Reserve is the free space a new chunk must leave (the server's
	// Cs-w while the tiering manager can free space on it; 0: none). A
	// tier with no group above its reserves, full or not, stalls if any of
	// its servers has one.
	Reserve uint64
	Alive   bool
	// Domain is its failure domain ("cabinet" in ONFS; "": its own). The
	// copies of a replicated chunk go to different domains.
	Domain string
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
	// MayWait: the writer can wait for a stalled tier to free space
	// (ErrStall) instead of spilling to the next tier.
	MayWait bool
	// Tier, if set, is tried before the others (a burst-buffer bypass
	// sends a cold checkpoint to the pfs tier); where it has no room the
	// chunk is placed as without it.
	Tier string
	// Copies is how many copies a chunk keeps on a tier, by tier name
	// (missing or below 2: one). A tier that cannot hold every copy in
	// groups of different failure domains does not take the chunk.
	Copies map[string]int
}

// Decision is where the chunk goes.
type Decision struct {
	Tier    string
	Servers []uint64 // stripe group, in stripe order
	Charge  []uint64 // bytes each of them is promised (same order)
	// Replicas is the group holding the second copy, member i mirroring
	// Servers[i] (empty: one copy), and ReplicaCharge what each of them is
	// promised.
	Replicas, ReplicaCharge []uint64
}

// ErrNoSpace: no tier has a live group with room.
var ErrNoSpace = errors.New("no tier has room for a new chunk")

// ErrStall: the fastest tier with room has it only inside its servers'
// reserves, and a lower tier has room: the writer should wait for the
// tier to free space (or, once it may not wait any longer, spill).
var ErrStall = errors.New("tier is at its write-stall threshold")

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
	for i, t := range tiers {
		if t == c.Tier && i > 0 {
			tiers = append([]string{t}, append(tiers[:i:i], tiers[i+1:]...)...)
			break
		}
	}
	unit := c.StripeUnit
	if unit == 0 {
		unit = c.ChunkSize
	}
	var fallback *Decision // the first group that fits only inside reserves
	stalled := false       // a faster tier is at its reserves and being freed
	for t, tier := range tiers {
		ss := byTier[tier]
		sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
		g := c.StripeCount
		if g < 1 || tier == "pfs" {
			g = 1 // the pfs tier keeps whole plain files
		}
		g = min(g, len(ss))
		start := int((c.Ino + c.Idx + c.Seq + uint64(t)) % uint64(len(ss)))
		copies := c.Copies[tier]
		if d, ok := group(tier, ss, start, g, unit, c.ChunkSize, true); ok && withReplicas(&d, ss, copies, unit, c.ChunkSize, true) {
			if stalled && c.MayWait {
				return Decision{}, ErrStall
			}
			return d, nil
		}
		for _, s := range ss {
			stalled = stalled || s.Reserve > 0
		}
		if fallback == nil {
			if d, ok := group(tier, ss, start, g, unit, c.ChunkSize, false); ok && withReplicas(&d, ss, copies, unit, c.ChunkSize, false) {
				fallback = &d
			}
		}
	}
	if fallback != nil {
		return *fallback, nil // every tier is at its reserve: use it
	}
	return Decision{}, ErrNoSpace
}

// ErrNoReplica: no live group of the tier, in failure domains other than
// the copy's, has room for another copy.
var ErrNoReplica = errors.New("no group in another failure domain has room for a copy")

// ChooseReplica picks a group of the chunk's tier for another copy of a
// chunk whose copies are on the groups in have (all the same size): live,
// not excluded, with room above their reserves, and in failure domains
// none of have's servers is in. The mem tier's lost copies are made again
// on such a group (re-replication).
func ChooseReplica(servers []Server, c Chunk, tier string, have ...[]uint64) (Decision, error) {
	var ss []Server
	for _, s := range servers {
		if s.Alive && s.Tier == tier && !excluded(s.ID, c.Exclude) {
			ss = append(ss, s)
		}
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
	if len(have) == 0 || len(have[0]) == 0 {
		return Decision{}, ErrNoReplica
	}
	unit := c.StripeUnit
	if unit == 0 {
		unit = c.ChunkSize
	}
	var taken []uint64
	for _, h := range have {
		taken = append(taken, h...)
	}
	d := Decision{Tier: tier}
	if r, charge, ok := replicaGroup(ss, taken, len(have[0]), int((c.Ino+c.Idx+c.Seq)%uint64(max(len(ss), 1))), unit, c.ChunkSize, true); ok {
		d.Servers, d.Charge = r, charge
		return d, nil
	}
	return Decision{}, ErrNoReplica
}

// withReplicas adds the replica group to d when the tier keeps copies
// (copies ≥ 2; one replica group is kept today), and says whether it
// found one.
func withReplicas(d *Decision, ss []Server, copies int, unit, chunk int64, keepReserve bool) bool {
	if copies < 2 {
		return true
	}
	r, charge, ok := replicaGroup(ss, d.Servers, len(d.Servers), 0, unit, chunk, keepReserve)
	d.Replicas, d.ReplicaCharge = r, charge
	return ok
}

// replicaGroup picks g servers of ss, from start on, that are in no
// failure domain of the servers in taken (nor one of them) and have room
// for their share of the chunk, each in a domain of its own.
func replicaGroup(ss []Server, taken []uint64, g, start int, unit, chunk int64, keepReserve bool) ([]uint64, []uint64, bool) {
	used := map[string]bool{}
	for _, s := range ss {
		if excluded(s.ID, taken) {
			used[domainOf(s)] = true
		}
	}
	for _, id := range taken { // servers not passed (down) still count
		used[domainOf(Server{ID: id})] = true
	}
	var ids, charge []uint64
	for i := 0; i < len(ss) && len(ids) < g; i++ {
		s := ss[(start+i)%len(ss)]
		if used[domainOf(s)] {
			continue
		}
		share := uint64(layout.LocalSize(len(ids), g, unit, chunk))
		need := share
		if keepReserve {
			need += s.Reserve
		}
		if s.Capacity == 0 || s.Used+need <= s.Capacity {
			used[domainOf(s)] = true
			ids = append(ids, s.ID)
			charge = append(charge, share)
		}
	}
	return ids, charge, len(ids) == g
}

// domainOf is a server's failure domain: its label, or the server itself.
func domainOf(s Server) string {
	if s.Domain != "" {
		return "d:" + s.Domain
	}
	return "s:" + strconv.FormatUint(s.ID, 10)
}

// group picks g servers of one tier from ss, starting at start, that have
// room for their share of the chunk (above their reserves if
// keepReserve).
func group(tier string, ss []Server, start, g int, unit, chunk int64, keepReserve bool) (Decision, bool) {
	d := Decision{Tier: tier}
	for i := 0; i < len(ss) && len(d.Servers) < g; i++ {
		s := ss[(start+i)%len(ss)]
		need := uint64(layout.LocalSize(len(d.Servers), g, unit, chunk))
		if keepReserve {
			need += s.Reserve
		}
		if s.Capacity == 0 || s.Used+need <= s.Capacity {
			d.Servers = append(d.Servers, s.ID)
			d.Charge = append(d.Charge, uint64(layout.LocalSize(len(d.Servers)-1, g, unit, chunk)))
		}
	}
	return d, len(d.Servers) == g
}

func excluded(id uint64, ex []uint64) bool {
	for _, x := range ex {
		if x == id {
			return true
		}
	}
	return false
}
