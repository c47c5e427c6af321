// Package place is the chunk placement policy: given the data servers, what
// each holds and may hold, and a new chunk, it picks the tier and the group
// of servers the chunk's stripes go to: the fastest tier that has a live
// group with room for the chunk (a file bound to a resource pool tries the
// pool's servers first), and within it the servers the placement Policy
// ranks first: the performance-aware rule of the Sunway storage system
// (§5: the target with the largest max_perf / (open_count + 1), here the
// server that would write the chunk soonest by its max_perf and the bytes
// placed on it and not yet written; docs/placement.md), round-robin, or
// weighted random by max_perf. A server keeps its write-stall reserve
// (ONFS's Cs-w) free: when no group of a tier has room above the
// reserves, a caller that may wait is told to (ErrStall) while the tiering
// manager frees space, and one that may not spills to the next tier; the
// reserves are given up only when no tier has room above them.
//
// Pure: the caller passes the servers' state as it knows it (liveness
// already judged, space promised since their last report included, each
// one's Backlog as of the time it passes) and a sequence number that
// turns the rotation; the policy returns a decision and what it charges
// each server, and keeps nothing. No clock, no I/O.
package place

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

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
	// MaxPerf is the bandwidth the server gives, bytes/s (measured by the
	// server or configured; 0: not known, counted as its tier's median).
	MaxPerf uint64
	// Pending is the bytes placed on the server that it has not written
	// yet, as the caller estimates them (Backlog): its load.
	Pending uint64
}

// Backlog estimates the bytes a server has been given and not written
// yet, for the perf policy, as the larger of two estimates:
//
//   - from its reports: what was placed on it, less what it reports
//     having written (its heartbeats), less what it can have written
//     since its last report. A chunk is charged whole when placed, and a
//     server's writes come later than placements (write-behind,
//     forwarding queues), so the reports anchor the estimate to what the
//     server really did: one slowed by other work shows it at its next
//     report. Between reports it drains at the server's max_perf (or
//     the rate of its last period if higher): the rate of one period is
//     too noisy to extrapolate — a 2.5 MB/s server writing 1 MiB
//     requests completes 1, 2 or 3 of them in a second, and drained at
//     1 MB/s it looked busy for seconds after it had gone idle, so the
//     placement gave it no more chunks (docs/experiments/placement.md).
//   - from a queue at its max_perf: each chunk placed on it starts when
//     the previous ones are done (or when placed, if the queue is empty)
//     and takes its bytes / max_perf. It cannot write faster, so this is
//     a floor on its backlog, also between reports.
//
// The zero value is an idle server. Pure: the caller passes the time and
// the server's max_perf.
type Backlog struct {
	out     uint64 // placed and not reported written, at the last report
	placed  uint64 // placed since the last report
	written uint64 // the server's count at its last report
	at      int64  // unix ns of the last report (0: none yet)
	rate    float64
	free    int64 // unix ns when the max_perf queue is empty
}

// Pending is the bytes still to write at now; maxPerf is the server's
// max_perf in bytes/s (0: not known; the reports' estimate drains at the
// last period's rate, and there is no queue floor).
func (b *Backlog) Pending(now time.Time, maxPerf uint64) uint64 {
	done := 0.0
	if b.at != 0 {
		done = max(b.rate, float64(maxPerf)) * float64(now.UnixNano()-b.at) / 1e9
	}
	left := float64(b.out) - done
	if left < 0 {
		left = 0
	}
	reported := uint64(left) + b.placed
	if maxPerf == 0 || b.free <= now.UnixNano() {
		return reported
	}
	return max(reported, uint64(float64(b.free-now.UnixNano())/1e9*float64(maxPerf)))
}

// Add charges n bytes placed on the server at now (maxPerf as Pending's).
func (b *Backlog) Add(now time.Time, n, maxPerf uint64) {
	b.placed += n
	if maxPerf > 0 {
		b.free = max(b.free, now.UnixNano()) + int64(float64(n)/float64(maxPerf)*1e9)
	}
}

// Settle takes back n bytes placed that will not be written (a new
// chunk's room past the bytes of a file closed short of it).
func (b *Backlog) Settle(now time.Time, n, maxPerf uint64) {
	from := min(b.placed, n)
	b.placed -= from
	b.out -= min(b.out, n-from)
	if maxPerf > 0 && b.free > now.UnixNano() {
		b.free = max(now.UnixNano(), b.free-int64(float64(n)/float64(maxPerf)*1e9))
	}
}

// Report takes the server's count of bytes written (since it started)
// at now. A count lower than the last one is a restarted server.
func (b *Backlog) Report(now time.Time, written uint64) {
	var delta uint64
	if written >= b.written {
		delta = written - b.written
	} else {
		delta = written
	}
	t := now.UnixNano()
	if b.at != 0 && t > b.at {
		b.rate = float64(delta) / (float64(t-b.at) / 1e9)
	}
	b.out += b.placed
	b.out -= min(b.out, delta)
	b.placed, b.written, b.at = 0, written, t
}

// Policy names a rule that ranks a tier's servers for a new chunk.
type Policy string

// The placement policies (`sluice meta --placement`).
const (
	// Perf ranks by the time the server would have written the chunk,
	// (Pending + the chunk's share) / MaxPerf, soonest first, ties in
	// rotation order: Sunway's max_perf / (open_count + 1) (§5) with the
	// load counted in bytes, not in open objects (docs/placement.md).
	Perf Policy = "perf"
	// RR rotates the group start over the tier's servers with the file,
	// the chunk and the sequence number (the zero Policy).
	RR Policy = "rr"
	// WRandom draws servers at random weighted by MaxPerf (Lustre's
	// weighted allocator), the draw seeded by the file, the chunk and the
	// sequence number.
	WRandom Policy = "wrandom"
)

// Policies are the valid Policy values.
var Policies = []Policy{Perf, RR, WRandom}

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
	// Policy ranks the servers of a tier ("": RR).
	Policy Policy
	// Pool, if set, are the servers of the resource pool the file is
	// bound to: they are tried first (fastest tier first); where none has
	// room the chunk is placed as without a pool. PoolPerf gives the
	// pool's own max_perf of some of them (bytes/s), used instead of the
	// servers'.
	Pool     []uint64
	PoolPerf map[uint64]uint64
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
// Choose's Decision names that tier (Tier) with it.
var ErrStall = errors.New("tier is at its write-stall threshold")

// Choose places c on servers.
func Choose(servers []Server, c Chunk) (Decision, error) {
	if len(c.Pool) > 0 {
		var in []Server
		for _, s := range servers {
			if excluded(s.ID, c.Pool) {
				if p := c.PoolPerf[s.ID]; p > 0 {
					s.MaxPerf = p
				}
				in = append(in, s)
			}
		}
		d, err := choose(in, c)
		if err == nil || err == ErrStall {
			return d, err
		}
	}
	return choose(servers, c)
}

func choose(servers []Server, c Chunk) (Decision, error) {
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
	stalledTier := ""      // the first such tier
	for t, tier := range tiers {
		ss := byTier[tier]
		sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
		g := c.StripeCount
		if g < 1 || tier == "pfs" {
			g = 1 // the pfs tier keeps whole plain files
		}
		g = min(g, len(ss))
		start := int((c.Seq + uint64(t)) % uint64(len(ss)))
		copies := c.Copies[tier]
		ranked := rank(ss, start, c)
		if d, ok := group(tier, ranked, g, unit, c.ChunkSize, true); ok && withReplicas(&d, ss, copies, unit, c.ChunkSize, true) {
			if stalled && c.MayWait {
				return Decision{Tier: stalledTier}, ErrStall
			}
			return d, nil
		}
		if !holds(tier, ss, g, copies, unit, c.ChunkSize) {
			// too few servers or failure domains for the stripe and its
			// copies, however much room they had: no place to wait at
			continue
		}
		for _, s := range ss {
			if s.Reserve > 0 && !stalled {
				stalled, stalledTier = true, tier
			}
		}
		if fallback == nil {
			if d, ok := group(tier, ranked, g, unit, c.ChunkSize, false); ok && withReplicas(&d, ss, copies, unit, c.ChunkSize, false) {
				fallback = &d
			}
		}
	}
	if fallback != nil {
		return *fallback, nil // every tier is at its reserve: use it
	}
	return Decision{}, ErrNoSpace
}

// holds says whether tier's servers ss could hold a chunk's group of g
// and its copies if they were empty.
func holds(tier string, ss []Server, g, copies int, unit, chunk int64) bool {
	empty := make([]Server, len(ss))
	for i, s := range ss {
		s.Used, s.Reserve = 0, 0
		empty[i] = s
	}
	d, ok := group(tier, empty, g, unit, chunk, false)
	return ok && withReplicas(&d, empty, copies, unit, chunk, false)
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

// rank orders one tier's servers ss (sorted by ID) for chunk c as its
// policy says; start is the rotation's first server.
func rank(ss []Server, start int, c Chunk) []Server {
	out := make([]Server, 0, len(ss))
	for i := range ss {
		out = append(out, ss[(start+i)%len(ss)])
	}
	switch c.Policy {
	case Perf:
		perf := perfs(out)
		share := float64(c.ChunkSize)
		if c.StripeCount > 1 {
			share /= float64(c.StripeCount)
		}
		// the server that would have written the chunk soonest first;
		// stable: ties keep the rotation order
		done := func(s Server) float64 { return (float64(s.Pending) + share) / float64(perf[s.ID]) }
		sort.SliceStable(out, func(i, j int) bool { return done(out[i]) < done(out[j]) })
	case WRandom:
		// Efraimidis–Spirakis: key u^(1/w), largest first, is a draw
		// without replacement weighted by w
		perf := perfs(out)
		key := map[uint64]float64{}
		for _, s := range out {
			u := unitFloat(c.Ino, c.Idx, c.Seq, s.ID)
			key[s.ID] = math.Pow(u, 1/float64(max(perf[s.ID], 1)))
		}
		sort.SliceStable(out, func(i, j int) bool { return key[out[i].ID] > key[out[j].ID] })
	}
	return out
}

// perfs is each server's MaxPerf, the median of the known ones where it
// is not known (1 if none is).
func perfs(ss []Server) map[uint64]uint64 {
	var known []uint64
	for _, s := range ss {
		if s.MaxPerf > 0 {
			known = append(known, s.MaxPerf)
		}
	}
	fill := uint64(1)
	if len(known) > 0 {
		slices.Sort(known)
		fill = known[len(known)/2]
	}
	out := make(map[uint64]uint64, len(ss))
	for _, s := range ss {
		out[s.ID] = cmp.Or(s.MaxPerf, fill)
	}
	return out
}

// unitFloat is a number in (0, 1) drawn from its arguments (splitmix64).
func unitFloat(xs ...uint64) float64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, x := range xs {
		h ^= x
		h += 0x9e3779b97f4a7c15
		h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
		h = (h ^ h>>27) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return (float64(h>>11) + 0.5) / (1 << 53)
}

// group picks g servers of one tier from ss, in order, that have room
// for their share of the chunk (above their reserves if keepReserve).
func group(tier string, ss []Server, g int, unit, chunk int64, keepReserve bool) (Decision, bool) {
	d := Decision{Tier: tier}
	for i := 0; i < len(ss) && len(d.Servers) < g; i++ {
		s := ss[i]
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
