package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/sluice-hpc/sluice/sim/machine"
)

// Measured is a run measured alone on real daemons, as Beacon and the
// workload report it.
type Measured struct {
	Bytes, Ops float64 // its own I/O (what it times)
	Secs       float64 // the time of that I/O
	// SetupBytes and SetupOps are what else it sent through the
	// forwarding layer (creating the files it then reads, flushes).
	SetupBytes, SetupOps float64
	// Lead is the time from its start to its I/O (launch, a start
	// barrier), Elapsed the time from its start to its end, seconds.
	Lead, Elapsed float64
}

// FromRun is a job on one compute node replaying a run measured alone on
// forwarding nodes of fwdBW bytes/s and fwdOps requests/s. Its own
// limits are what it reached alone (NodeBW, OpsRate), so that alone in
// the simulator its I/O takes Secs as long as the forwarding node does
// not hold it back. Operations faster than the node serves went batched
// (the mount's write-back creates carry many in one request): such a job
// costs the node at most the requests it serves in Secs. It waits Lead,
// sends its setup traffic, does its I/O and stays until Elapsed (less
// its setup traffic's time alone at the node's caps).
func FromRun(id, app, class string, r Measured, fwdBW, fwdOps float64) Job {
	j := Job{ID: id, App: app, Class: class, Nodes: 1, Phases: 1, Pattern: "1-1", Write: r.Bytes, Requests: r.Ops,
		SetupBytes: math.Max(0, r.SetupBytes), SetupRequests: math.Max(0, r.SetupOps), Lead: math.Max(0, r.Lead)}
	if r.Elapsed > 0 && fwdBW > 0 && fwdOps > 0 {
		j.Hold = math.Max(0, r.Elapsed-j.Lead-r.Secs-j.SetupBytes/fwdBW-j.SetupRequests/fwdOps)
	}
	if fwdOps > 0 && r.Secs > 0 {
		j.Requests = math.Min(r.Ops, r.Secs*fwdOps)
	}
	if r.Secs > 0 {
		j.NodeBW = r.Bytes / r.Secs
		j.OpsRate = j.Requests / r.Secs
	}
	return j
}

// CalibrateFactors turns measured pairwise slowdowns (measured["a/b"] =
// [s_a, s_b]: an application of class a and one of class b on one
// forwarding node, each against its time alone) into the interference
// factors of machine.Interference: each pair runs in the simulator on
// one forwarding node of m, first without interference (max-min sharing
// alone), then with its factors multiplied by the measured slowdowns over
// the simulated ones, until they agree within 0.5 % (at most 30 rounds).
// A factor acts only while both jobs share the node, so the job that runs
// on alone after its partner ended needs a factor well above its
// slowdown over the whole run. Factors stay within [1, 100]; a pair the
// model cannot match (a slowdown longer than the partner's stay) ends at
// the bound. A slowdown that adds less than noise seconds to a job's time
// alone is taken as none (a job of 0.1 s measured 1.6× slower is launch
// jitter, not interference). alone gives each class's job, as measured
// alone (FromRun); pairs whose classes it lacks are left out.
func CalibrateFactors(m *machine.Machine, alone map[string]Job, measured map[string][2]float64, noise float64) (map[string][2]float64, error) {
	keys := make([]string, 0, len(measured))
	for k := range measured {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string][2]float64{}
	for _, k := range keys {
		a, b, ok := strings.Cut(k, "/")
		if !ok {
			return nil, fmt.Errorf("pair %q: want class/class", k)
		}
		ja, oka := alone[a]
		jb, okb := alone[b]
		if !oka || !okb {
			continue
		}
		s := measured[k]
		if t, err := aloneTime(m, ja); err != nil {
			return nil, fmt.Errorf("pair %q: %w", k, err)
		} else if (s[0]-1)*t < noise {
			s[0] = 1
		}
		if t, err := aloneTime(m, jb); err != nil {
			return nil, fmt.Errorf("pair %q: %w", k, err)
		} else if (s[1]-1)*t < noise {
			s[1] = 1
		}
		f := [2]float64{1, 1}
		for round := 0; round < 30; round++ {
			sa, sb, err := pairSlowdowns(m, ja, jb, f)
			if err != nil {
				return nil, fmt.Errorf("pair %q: %w", k, err)
			}
			ra, rb := s[0]/sa, s[1]/sb
			if a == b { // one factor for both
				ra = (ra + rb) / 2
				rb = ra
			}
			next := [2]float64{math.Min(100, math.Max(1, f[0]*ra)), math.Min(100, math.Max(1, f[1]*rb))}
			if math.Abs(next[0]-f[0]) < 0.005*f[0] && math.Abs(next[1]-f[1]) < 0.005*f[1] {
				break
			}
			f = next
		}
		out[k] = f
	}
	return out, nil
}

// aloneTime is j's I/O time alone on one forwarding node of m.
func aloneTime(m *machine.Machine, j Job) (float64, error) {
	pm := *m
	pm.Interference = machine.Interference{Classes: m.Interference.Classes}
	pm.ComputeNodes, pm.FwdNodes, pm.StaticFwds, pm.FFMRatio = j.Nodes, 1, 0, j.Nodes
	j.Submit, j.Warmup, j.Profile, j.Hold, j.Lead, j.OnNodes = 0, false, nil, 0, 0, seq(0, j.Nodes)
	s, err := New(Config{Machine: &pm, Jobs: []Job{j}, Policy: "ffm"})
	if err != nil {
		return 0, err
	}
	res, err := s.Run()
	if err != nil {
		return 0, err
	}
	return res.Jobs[0].IOTime, nil
}

// pairSlowdowns runs a and b at once on one forwarding node of m with
// factors f (a's class beside b's, b's beside a's) and returns each one's
// I/O time over its time alone.
func pairSlowdowns(m *machine.Machine, a, b Job, f [2]float64) (float64, float64, error) {
	pm := *m
	pm.Interference = machine.Interference{Classes: m.Interference.Classes, Factors: map[string][2]float64{a.Class + "/" + b.Class: f}}
	pm.ComputeNodes = a.Nodes + b.Nodes
	pm.FwdNodes, pm.StaticFwds, pm.FFMRatio = 1, 0, pm.ComputeNodes
	a.ID, b.ID, a.Submit, b.Submit, a.Warmup, b.Warmup, a.Profile, b.Profile = "a", "b", 0, 0, false, false, nil, nil
	a.Hold, b.Hold, a.Lead, b.Lead = 0, 0, 0, 0
	a.OnNodes, b.OnNodes = seq(0, a.Nodes), seq(a.Nodes, b.Nodes)
	s, err := New(Config{Machine: &pm, Jobs: []Job{a, b}, Policy: "ffm"})
	if err != nil {
		return 0, 0, err
	}
	res, err := s.Run()
	if err != nil {
		return 0, 0, err
	}
	by := map[string]float64{}
	for _, r := range res.Jobs {
		by[r.ID] = r.Slowdown
	}
	if by["a"] <= 0 || by["b"] <= 0 {
		return 0, 0, fmt.Errorf("a job of the pair moved nothing")
	}
	return by["a"], by["b"], nil
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// FactorsFromDFRA calibrates interference factors from the raw results of
// the DFRA pairwise experiment (bench/dfra/pairwise.jsonl): its runs alone
// (with what crossed the forwarding layer, where kept) become jobs
// (FromRun), its fixed-mapping pairs the measured slowdowns, and
// CalibrateFactors runs each pair on one forwarding node of fwdBW bytes/s
// and fwdOps requests/s: the experiment's caps, as its lines give them
// (fwd_mbps, fwd_iops), else these. Kinds map to classes by classOf.
// Slowdowns adding less than 0.1 s are taken as none: on the experiment's
// host the metadata behaviour's runs of 0.08 s spread to 0.17 s whatever
// ran beside them (launch jitter).
func FactorsFromDFRA(r io.Reader, classOf map[string]string, fwdBW, fwdOps float64) (map[string][2]float64, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	alone := map[string]Job{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var x struct {
			Mode, Kind, With string
			Run              struct{ Bytes, Ops, Slowest float64 }
			Fwd              struct {
				Bytes float64 `json:"fwd_bytes"`
				Ops   float64 `json:"fwd_ops"`
			}
			MBps float64 `json:"fwd_mbps"`
			IOPS float64 `json:"fwd_iops"`
		}
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("pairwise line %d: %w", n, err)
		}
		if x.MBps > 0 && x.IOPS > 0 {
			fwdBW, fwdOps = x.MBps*1e6, x.IOPS
		}
		c := classOf[x.Kind]
		if x.Mode != "ffm" || x.With != "" || c == "" {
			continue
		}
		setupB, setupO := x.Fwd.Bytes-x.Run.Bytes, x.Fwd.Ops-x.Run.Ops
		if x.Fwd.Bytes == 0 && x.Fwd.Ops == 0 { // runs before the forwarding layer's figures were kept
			setupB, setupO = 0, 0
		}
		alone[c] = FromRun(c, c, c, Measured{Bytes: x.Run.Bytes, Ops: x.Run.Ops, Secs: x.Run.Slowest / 1e9,
			SetupBytes: setupB, SetupOps: setupO}, fwdBW, fwdOps)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	measured, err := machine.PairsFromDFRAAs(bytes.NewReader(raw), classOf)
	if err != nil {
		return nil, err
	}
	var classes []string
	for c := range alone {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	return CalibrateFactors(ForwardingMachine("dfra-pairwise", 1, 2, fwdBW, fwdOps, classes), alone, measured, 0.1)
}

// ForwardingMachine is a machine whose only bound is its forwarding
// layer, as in the DFRA experiments' local clusters: fwds forwarding nodes
// of fwdBW bytes/s and fwdOps operations/s, ratio compute nodes per
// forwarding node, interference classes classes (no pairs, no factors);
// compute links, storage and metadata unbounded.
func ForwardingMachine(name string, fwds, ratio int, fwdBW, fwdOps float64, classes []string) *machine.Machine {
	return &machine.Machine{Name: name, ComputeNodes: fwds * ratio, NodeBW: 1e12, FwdNodes: fwds, FwdBW: fwdBW, FwdOps: fwdOps,
		FFMRatio: ratio, Storage: machine.Storage{Groups: 1, Targets: 1, TargetBW: 1e12}, MetaOps: 1e9,
		Interference: machine.Interference{Classes: classes}}
}
