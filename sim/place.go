package sim

import (
	"math"

	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/sim/flow"
)

// Where a job's bytes go: its files' chunks placed on storage targets
// (place.go of policy/place), and what it reads back.

// targetBytes is a flow's part on one storage target (an index of
// Sim.targets), or with mem on the mem server of group t.
type targetBytes struct {
	t     int
	bytes float64
	mem   bool
}

// server is the part's kind of server, for its QoS caps.
func (p targetBytes) server() string {
	if p.mem {
		return "mem"
	}
	return "ost"
}

// partRes is the resource of part p.
func (s *Sim) partRes(p targetBytes) *flow.Resource {
	if p.mem {
		return s.mem[p.t].r
	}
	return s.targets[p.t]
}

// readBack spreads b bytes over the targets and the mem servers in
// proportion to what wrote and onMem (nil: no mem tier) say is on each;
// nil if nothing is.
func readBack(wrote, onMem []float64, b float64) []targetBytes {
	var sum float64
	for _, x := range wrote {
		sum += x
	}
	for _, x := range onMem {
		sum += max(0, x)
	}
	if sum <= 0 {
		return nil
	}
	var out []targetBytes
	for g, x := range onMem {
		if x > 0 {
			out = append(out, targetBytes{t: g, bytes: b * x / sum, mem: true})
		}
	}
	for t, x := range wrote {
		if x > 0 {
			out = append(out, targetBytes{t: t, bytes: b * x / sum})
		}
	}
	return out
}

// place spreads bytes of files (one per I/O node: nodes of them) over
// the targets of group g, asking policy/place for each unit of them; it
// charges placed (the targets' placed bytes; a target's backlog is that
// less what it has written, written nil: nothing) and returns the bytes
// per target of the group.
func (s *Sim) place(j *job, g int, bytes, nodes float64, placed []float64, written func(t int) float64) []float64 {
	T := s.m.Storage.Targets
	units := int(math.Ceil(nodes))
	units = max(1, min(units, max(16, 16*T/max(1, len(j.perFwd)))))
	if c := s.m.Storage.ChunkSize; c > 0 {
		units = max(1, int(math.Ceil(bytes/c)))
	}
	return s.placeUnits(uint64(j.num)<<20, units, g, bytes, placed, written)
}

// placeUnits places bytes of file ino in units equal units over the
// targets of group g (policy/place for each), charging placed, and
// returns the bytes per target of the group.
func (s *Sim) placeUnits(ino uint64, units, g int, bytes float64, placed []float64, written func(t int) float64) []float64 {
	T := s.m.Storage.Targets
	out := make([]float64, T)
	unit := bytes / float64(units)
	servers := make([]place.Server, T)
	for u := 0; u < units; u++ {
		for k := 0; k < T; k++ {
			t := g*T + k
			pending := placed[t]
			if written != nil {
				pending -= written(t)
			}
			// a target down (Config.Changes) is passed over meanwhile
			servers[k] = place.Server{ID: uint64(k + 1), Tier: "pfs", Alive: s.targets[t].Capacity() > 0, MaxPerf: uint64(s.targets[t].Capacity()),
				Pending: uint64(math.Max(0, pending))}
		}
		s.seq++
		d, err := place.Choose(servers, place.Chunk{Ino: ino | uint64(u), ChunkSize: int64(unit), StripeCount: 1,
			Seq: s.seq, Policy: s.cfg.Placement})
		k := u % T // (every target down: it waits for its target)
		if err == nil && len(d.Servers) == 1 {
			k = int(d.Servers[0] - 1)
		}
		out[k] += unit
		placed[g*T+k] += unit
	}
	return out
}
