// Package machine describes a machine for the simulator: compute nodes,
// forwarding nodes, storage, metadata service and burst buffer, with
// their capacities and the forwarding layer's interference between
// request classes, in a documented JSON format (docs/sim.md), with
// presets (taihulight, cori-bb, shentu, bbos-testbed, tiny) embedded.
//
// It owns the description and its validation only: it builds no
// resources (package sim does) and runs no policy.
package machine

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Machine is one machine's description. Bandwidths are bytes/s, rates
// operations/s, sizes bytes.
type Machine struct {
	Name  string `json:"name"`
	Notes string `json:"notes,omitempty"` // the assumptions, in words

	ComputeNodes int     `json:"compute_nodes"`
	NodeBW       float64 `json:"node_bw"` // one compute node's I/O link (B_c's ceiling)

	FwdNodes int     `json:"fwd_nodes"`
	FwdBW    float64 `json:"fwd_bw"`  // B_f
	FwdOps   float64 `json:"fwd_ops"` // metadata operations one forwarding node relays per second
	// FFMRatio is the compute nodes per forwarding node of the fixed
	// mapping; StaticFwds the forwarding nodes it uses (the rest are the
	// reserved group DFRA allocates from). 0: all of them.
	FFMRatio   int `json:"ffm_ratio"`
	StaticFwds int `json:"static_fwds,omitempty"`

	// Storage is the parallel file system behind the forwarding nodes,
	// in groups of storage targets; forwarding node i writes to group
	// i mod Groups.
	Storage Storage `json:"storage"`

	MetaOps float64 `json:"meta_ops"` // the metadata service's operations/s
	// MetaLatency is the time one metadata operation takes a process when
	// nothing queues (client, forwarding node, metadata service and
	// back), seconds. A process issues them one at a time, so an I/O
	// node's go at most 1/MetaLatency per second however idle the
	// service. 0: not modelled (the rates alone).
	MetaLatency float64 `json:"meta_latency,omitempty"`

	BurstBuffer *BurstBuffer `json:"burst_buffer,omitempty"`

	// MemTier, if set, is a memory tier in front of the PFS (MemTier).
	MemTier *MemTier `json:"mem_tier,omitempty"`

	Interference Interference `json:"interference"`

	// Changes are scheduled changes of capacity: maintenance, degraded
	// or slowed devices (Change).
	Changes []Change `json:"changes,omitempty"`
}

// Storage is the PFS: Groups groups of Targets targets of TargetBW each.
type Storage struct {
	Groups   int     `json:"groups"`
	Targets  int     `json:"targets_per_group"`
	TargetBW float64 `json:"target_bw"`
	// Spread is the ratio of the fastest to the slowest target after
	// aging (Sunway: about 5 after four to five years; 1 or 0: none):
	// targets' speeds are spread evenly between TargetBW/Spread and
	// TargetBW.
	Spread float64 `json:"spread,omitempty"`
	// TargetBWs, if set, are the targets' bandwidths one by one (group g's
	// are [g×Targets, (g+1)×Targets)), instead of TargetBW and Spread.
	TargetBWs []float64 `json:"target_bws,omitempty"`
	// ChunkSize, if set, is the unit files are placed in (a file's chunks
	// go to targets one by one, as sluice's metadata service places
	// them); 0: a few units per forwarding node.
	ChunkSize float64 `json:"chunk_size,omitempty"`
}

// BurstBuffer is a shared SSD burst buffer (DataWarp-like).
type BurstBuffer struct {
	Nodes    int     `json:"nodes"`
	Capacity float64 `json:"capacity"` // bytes per node
	BW       float64 `json:"bw"`       // per node: checkpoint writes alone (BBOS's Bw_max)
	Grain    float64 `json:"grain"`    // allocation unit (bytes)
	// WriteMin is a node's checkpoint write rate while demotion runs at
	// DemoteMax (Bw_min; 0: BW × 3/3.56, the BBOS testbed's ratio).
	WriteMin float64 `json:"write_min,omitempty"`
	// DemoteMax and DemoteMin are the whole buffer's demotion rates to
	// the PFS (Br_max, Br_min; 0: the storage partition's bandwidth, and
	// DemoteMax × 0.05 as the testbed's 0.08 of 1.6 GB/s).
	DemoteMax float64 `json:"demote_max,omitempty"`
	DemoteMin float64 `json:"demote_min,omitempty"`
}

// MemTier is a memory tier in front of the PFS: one mem data server per
// storage group beside its targets (ONFS's DS-m, sluice's `data --tier
// mem`), reached through the group's forwarding nodes. New files land on
// it while it has room above its write-stall threshold; policy/tiering
// moves them down to the group's targets by its free space.
type MemTier struct {
	Capacity float64 `json:"capacity"` // bytes per server
	BW       float64 `json:"bw"`       // a server's bandwidth, reads and writes together (bytes/s)
	// Thresholds are the free bytes Cs-w, Cf-m, Cn-m of every server
	// (sluice meta --tier-free); all 0: policy/tiering's defaults from
	// the capacity, N and the files' mean size.
	Thresholds [3]float64 `json:"thresholds,omitempty"`
	// Manual: nothing moves down and a full server spills new files to
	// the PFS at once (sluice meta --tiering manual); else the tiering
	// manager runs policy/tiering and a write that finds the server at
	// Cs-w waits for room, at most StallMax seconds (default 15, the
	// forwarding daemon's), then spills.
	Manual   bool    `json:"manual,omitempty"`
	StallMax float64 `json:"stall_max,omitempty"`
	// Every is the tiering manager's period, seconds (default 1); after a
	// move ends it looks again at once, at most every 0.1 s, as
	// manager/tiering does.
	Every float64 `json:"every,omitempty"`
	// Phase: its looks fall at phase + k × every seconds from the run's
	// start (default every/2: a daemon's ticker runs from the metadata
	// daemon's start, at a phase no job knows; half a period is the
	// expected wait for its first look).
	Phase float64 `json:"phase,omitempty"`
}

// BBRates are the whole buffer's figures for policy/bbos: bytes, and
// bytes/s as bbos.Rates orders them (WriteMax, WriteMin, DemoteMin,
// DemoteMax).
func (m *Machine) BBRates() (s float64, rates [4]float64, err error) {
	bb := m.BurstBuffer
	if bb == nil {
		return 0, rates, fmt.Errorf("machine %q has no burst buffer", m.Name)
	}
	n := float64(bb.Nodes)
	wmin := bb.WriteMin
	if wmin <= 0 {
		wmin = bb.BW * 3 / 3.56
	}
	dmax := bb.DemoteMax
	if dmax <= 0 {
		dmax = float64(m.Storage.Groups*m.Storage.Targets) * m.Storage.TargetBW
	}
	dmin := bb.DemoteMin
	if dmin <= 0 {
		dmin = dmax * 0.05
	}
	return n * bb.Capacity, [4]float64{n * bb.BW, n * wmin, dmin, dmax}, nil
}

// Interference is the forwarding layer's slowdown between request
// classes: Pairs["a/b"] = [s_a, s_b] are the slowdowns of an application
// of class a and one of class b sharing one forwarding node, relative to
// each alone (the DFRA slides' pairwise study; (2, 2) is a fair share).
// A forwarding node carrying classes a and b of different jobs delivers
// Factor(a, b) = min(1, 2 / mean(s_a, s_b)) of its capacity.
//
// Factors, when set, replace Pairs with a model in which one application
// suffers more than the other: Factors["a/b"] = [k_a, k_b] (each ≥ 1)
// means a flow of class a on a forwarding node that also carries a flow
// of class b of another job keeps its max-min share of the node's
// bandwidth and operation rate but moves at 1/k_a of it (the largest
// factor over the other classes there counts). sim.CalibrateFactors
// derives them from measured pairs: the measured slowdown over the one
// max-min sharing alone gives.
type Interference struct {
	Classes []string              `json:"classes"`
	Pairs   map[string][2]float64 `json:"pairs"`
	Factors map[string][2]float64 `json:"factors,omitempty"`
}

// Slowdown is class a's factor beside class b (Factors; 1 if unknown).
func (in Interference) Slowdown(a, b string) float64 {
	if k, ok := in.Factors[a+"/"+b]; ok {
		return k[0]
	}
	if k, ok := in.Factors[b+"/"+a]; ok {
		return k[1]
	}
	return 1
}

// Factor is the capacity factor of a forwarding node carrying classes a
// and b (of different jobs); 1 for an unknown pair.
func (in Interference) Factor(a, b string) float64 {
	s, ok := in.Pairs[a+"/"+b]
	if !ok {
		if s, ok = in.Pairs[b+"/"+a]; !ok {
			return 1
		}
	}
	m := (s[0] + s[1]) / 2
	if m <= 2 {
		return 1
	}
	return 2 / m
}

//go:embed presets/*.json
var presets embed.FS

// Presets lists the embedded machines.
func Presets() []string {
	ents, _ := presets.ReadDir("presets")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// Load reads a preset by name, or a description file by path.
func Load(nameOrPath string) (*Machine, error) {
	b, err := presets.ReadFile("presets/" + nameOrPath + ".json")
	if err != nil {
		if b, err = os.ReadFile(nameOrPath); err != nil {
			return nil, fmt.Errorf("machine %q: not a preset (%s) nor a readable file: %w", nameOrPath, strings.Join(Presets(), ", "), err)
		}
	}
	return Parse(b)
}

// Parse reads a description and checks it.
func Parse(b []byte) (*Machine, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var m Machine
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("machine description: %w", err)
	}
	return &m, m.Check()
}

// Check validates the description.
func (m *Machine) Check() error {
	var bad []string
	pos := func(name string, v float64) {
		if !(v > 0) {
			bad = append(bad, name+" must be > 0")
		}
	}
	pos("compute_nodes", float64(m.ComputeNodes))
	pos("node_bw", m.NodeBW)
	pos("fwd_nodes", float64(m.FwdNodes))
	pos("fwd_bw", m.FwdBW)
	pos("fwd_ops", m.FwdOps)
	pos("ffm_ratio", float64(m.FFMRatio))
	pos("storage.groups", float64(m.Storage.Groups))
	pos("storage.targets_per_group", float64(m.Storage.Targets))
	if len(m.Storage.TargetBWs) == 0 {
		pos("storage.target_bw", m.Storage.TargetBW)
	}
	pos("meta_ops", m.MetaOps)
	if m.StaticFwds < 0 || m.StaticFwds > m.FwdNodes {
		bad = append(bad, "static_fwds must be within 0..fwd_nodes")
	}
	if m.Storage.Spread < 0 {
		bad = append(bad, "storage.spread must be ≥ 0")
	}
	if n := len(m.Storage.TargetBWs); n > 0 && n != m.Storage.Groups*m.Storage.Targets {
		bad = append(bad, fmt.Sprintf("storage.target_bws lists %d targets, want groups × targets_per_group = %d", n, m.Storage.Groups*m.Storage.Targets))
	}
	for _, b := range m.Storage.TargetBWs {
		if !(b > 0) {
			bad = append(bad, "storage.target_bws must be > 0")
			break
		}
	}
	if m.Storage.ChunkSize < 0 {
		bad = append(bad, "storage.chunk_size must be ≥ 0")
	}
	if !(m.MetaLatency >= 0) {
		bad = append(bad, "meta_latency must be ≥ 0")
	}
	known := map[string]bool{}
	for _, c := range m.Interference.Classes {
		known[c] = true
	}
	for what, pairs := range map[string]map[string][2]float64{"pair": m.Interference.Pairs, "factor": m.Interference.Factors} {
		for k, s := range pairs {
			a, b, ok := strings.Cut(k, "/")
			if !ok || !known[a] || !known[b] {
				bad = append(bad, fmt.Sprintf("interference %s %q: want class/class of %v", what, k, m.Interference.Classes))
			}
			if what == "pair" && (s[0] <= 0 || s[1] <= 0) || what == "factor" && (s[0] < 1 || s[1] < 1) {
				bad = append(bad, fmt.Sprintf("interference %s %q: pairs must be > 0, factors ≥ 1", what, k))
			}
		}
	}
	if mt := m.MemTier; mt != nil {
		pos("mem_tier.capacity", mt.Capacity)
		pos("mem_tier.bw", mt.BW)
		t := mt.Thresholds
		if t != [3]float64{} && !(t[0] >= 0 && t[0] < t[1] && t[1] < t[2] && t[2] < mt.Capacity) {
			bad = append(bad, "mem_tier.thresholds: want 0 ≤ Cs-w < Cf-m < Cn-m < capacity")
		}
		if mt.StallMax < 0 || mt.Every < 0 || mt.Phase < 0 {
			bad = append(bad, "mem_tier: stall_max, every and phase must be ≥ 0")
		}
	}
	if bb := m.BurstBuffer; bb != nil {
		pos("burst_buffer.nodes", float64(bb.Nodes))
		pos("burst_buffer.capacity", bb.Capacity)
		pos("burst_buffer.bw", bb.BW)
		if bb.WriteMin > bb.BW || bb.WriteMin < 0 || bb.DemoteMin < 0 || bb.DemoteMax < 0 || bb.DemoteMax > 0 && bb.DemoteMin > bb.DemoteMax {
			bad = append(bad, "burst_buffer: want 0 ≤ write_min ≤ bw and 0 ≤ demote_min ≤ demote_max")
		}
	}
	for _, c := range m.Changes {
		if _, _, err := c.Expand(m.FwdNodes, m.Storage.Groups, m.Storage.Targets); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("machine %q: %s", m.Name, strings.Join(bad, "; "))
	}
	return nil
}

// Static is the number of forwarding nodes the fixed mapping uses.
func (m *Machine) Static() int {
	if m.StaticFwds > 0 {
		return m.StaticFwds
	}
	return m.FwdNodes
}

// StorageBW is the PFS's aggregate bandwidth (before aging).
func (m *Machine) StorageBW() float64 {
	if bws := m.Storage.TargetBWs; len(bws) > 0 {
		var sum float64
		for _, b := range bws {
			sum += b
		}
		return sum
	}
	return float64(m.Storage.Groups*m.Storage.Targets) * m.Storage.TargetBW
}
