package machine

import (
	"fmt"
	"slices"
)

// Local is what the simulator needs to know of a running local cluster
// (`sluice cluster up`) to describe it as a machine (`sluice sim day --machine
// local`): the caps its daemons were started with and what its data
// servers measured. The caller gathers it (cmd/sluice: the cluster's
// recorded flags and the metadata service's registry); FromLocal only
// turns it into a description.
type Local struct {
	// ComputeNodes is how many emulated compute nodes jobs may use
	// (0: FFMRatio per forwarding node).
	ComputeNodes int
	FFMRatio     int // compute nodes per forwarding node (sluice meta --fwd-ratio)
	Fwds         []LocalServer
	// Data are the data servers of the tier jobs write to (one storage
	// group: every forwarding node reaches every one of them), or, with
	// Mem, of the tier below the mem tier.
	Data []LocalServer
	// Mem, if set, are the mem tier's data servers in front of Data: the
	// machine's mem tier (MemTier), all of them as one server of their
	// capacities and bandwidths together (a local cluster is one storage
	// group, and the simulator's mem tier is a server per group).
	Mem []LocalServer
	// MemThresholds are the free bytes Cs-w, Cf-m, Cn-m the cluster's
	// metadata service keeps per server (sluice meta --tier-free; all 0:
	// derived, as the daemons do); MemManual: --tiering manual.
	MemThresholds [3]float64
	MemManual     bool
	MetaOps       float64 // 0: Default.MetaOps
	// MetaLatency is what one metadata operation took a process through
	// the cluster's mount, seconds (0: not modelled).
	MetaLatency float64
	ChunkSize   float64 // bytes; 0: the default 4 MiB
	// NodeBW is a compute node's I/O link (0: Default.NodeBW: loopback
	// does not limit a local cluster's clients).
	NodeBW float64
}

// LocalServer is one daemon's rate caps (0: not capped) and, for a data
// server, the bandwidth it measured (its max_perf) and its capacity.
type LocalServer struct {
	Name     string
	BW, Ops  float64 // configured caps, bytes/s and requests/s
	Measured float64 // bytes/s
	Capacity float64 // bytes (0: unbounded)
}

// LocalDefaults are the figures FromLocal uses where the cluster sets no
// cap: what one process on a small host sustains (docs/benchmarks.md).
var LocalDefaults = struct {
	FwdBW, FwdOps, DataBW, MetaOps, NodeBW float64
}{FwdBW: 1e9, FwdOps: 20000, DataBW: 1e9, MetaOps: 20000, NodeBW: 10e9}

// FromLocal describes the cluster l as a machine named "local", with the
// DFRA slides' interference (callers may replace it with their own
// measurements, PairsFromDFRA).
func FromLocal(l Local) (*Machine, error) {
	if len(l.Fwds) == 0 || len(l.Data) == 0 {
		return nil, fmt.Errorf("local machine: %d forwarding nodes and %d data servers: need at least one of each", len(l.Fwds), len(l.Data))
	}
	ratio := l.FFMRatio
	if ratio <= 0 {
		ratio = 4
	}
	nodes := l.ComputeNodes
	if nodes <= 0 {
		nodes = ratio * len(l.Fwds)
	}
	// one B_f for the forwarding layer, as the DFRA manager takes it: the
	// median of the caps
	var fbw, fops []float64
	for _, f := range l.Fwds {
		fbw = append(fbw, orDefault(f.BW, LocalDefaults.FwdBW))
		fops = append(fops, orDefault(f.Ops, LocalDefaults.FwdOps))
	}
	var tbw []float64
	for _, d := range l.Data {
		tbw = append(tbw, d.rate())
	}
	slides, err := Load("tiny") // its interference is the DFRA slides'
	if err != nil {
		return nil, err
	}
	m := &Machine{
		Name: "local",
		Notes: fmt.Sprintf("Generated from a running local cluster: %d forwarding nodes, %d data servers in one storage group, "+
			"%d emulated compute nodes (%d per forwarding node); forwarding nodes' and data servers' caps as configured, "+
			"a data server without a cap at what it measured; interference: the DFRA slides'.", len(l.Fwds), len(l.Data), nodes, ratio),
		ComputeNodes: nodes,
		NodeBW:       orDefault(l.NodeBW, LocalDefaults.NodeBW),
		FwdNodes:     len(l.Fwds),
		FwdBW:        median(fbw),
		FwdOps:       median(fops),
		FFMRatio:     ratio,
		Storage:      Storage{Groups: 1, Targets: len(tbw), TargetBWs: tbw, ChunkSize: orDefault(l.ChunkSize, 4<<20)},
		MetaOps:      orDefault(l.MetaOps, LocalDefaults.MetaOps),
		MetaLatency:  l.MetaLatency,
		Interference: slides.Interference,
	}
	if len(l.Mem) > 0 {
		mt := &MemTier{Thresholds: l.MemThresholds, Manual: l.MemManual}
		for _, d := range l.Mem {
			if d.Capacity <= 0 {
				return nil, fmt.Errorf("local machine: mem data server %s has no capacity", d.Name)
			}
			mt.Capacity += d.Capacity
			mt.BW += d.rate()
		}
		m.MemTier = mt
		m.Notes += fmt.Sprintf(" A mem tier of %d data servers in front of them, as one server of their capacity and bandwidth together.", len(l.Mem))
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("local machine: %w", err)
	}
	return m, nil
}

// rate is what data server d runs at: its cap, or what it measured if
// lower (or uncapped).
func (d LocalServer) rate() float64 {
	bw := orDefault(d.BW, LocalDefaults.DataBW)
	if d.Measured > 0 && (d.BW <= 0 || d.Measured < bw) {
		bw = d.Measured
	}
	return bw
}

func orDefault(v, d float64) float64 {
	if v > 0 {
		return v
	}
	return d
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
