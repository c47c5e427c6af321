// Package dfra is the forwarding-node allocation policy of DFRA (Ji et al.,
// "Automatically Tuning the Forwarding Layer", after the Sunway TaihuLight
// deployment): from a job's I/O profile and the state of the forwarding
// layer it decides which forwarding nodes serve the job's compute nodes.
//
// It is pure: the caller passes the forwarding nodes (capacity, health),
// the jobs already placed and the new job with its profile; the policy
// returns an Assignment with its reasons. No clock, no I/O, no locks; the
// manager in the metadata daemon and the simulator call the same code.
//
// The rules, with the paper's names:
//
//   - Default: the fixed forwarding mapping (FFM) — compute nodes are
//     spread over the forwarding nodes, Ratio compute nodes per forwarding
//     node, each node always on the same one. A job without history, or
//     when no better choice is free, keeps FFM (and the decision says so).
//   - Scale-up: a job is eligible when its volume exceeds VMin, more than
//     NMin of its nodes do I/O, and its metadata rate is under WMeta (a
//     metadata-bound job gains nothing from more forwarding nodes). Its
//     demand S = N_io × B_c / B_f (I/O nodes × per-node bandwidth over a
//     forwarding node's capacity); when S > N_f, the number of forwarding
//     nodes FFM gives it, it gets ⌈S⌉ of them (capped by MaxFwds and by
//     what is free). A profile measured while the job filled the
//     forwarding nodes it had only bounds B_c from below (the measured
//     N_io × B_c is B_f × N_f), so such a job is offered twice the nodes
//     of its last run: over successive runs it climbs until the
//     forwarding layer no longer limits it.
//   - Isolation: a job whose profile is N-1, metadata-heavy or
//     high-bandwidth gets forwarding nodes no other job uses, and a job
//     whose FFM nodes already serve such a job is moved off them.
//   - Idle first (beyond the paper): a job with a profile whose
//     fixed-mapping nodes already serve other jobs takes idle forwarding
//     nodes instead, when there are, no more than its I/O nodes
//     (Config.NoSpread turns this off).
//   - Never a forwarding node flagged fail-slow or down.
package dfra

import (
	"fmt"
	"github.com/sluice-hpc/sluice/internal/rendezvous"
	"hash/fnv"
	"math"
	"sort"

	"github.com/sluice-hpc/sluice/beacon"
)

// Config holds the thresholds, with the paper's meaning.
type Config struct {
	Ratio int // compute nodes per forwarding node under FFM (default 4)
	// VMin: a job moving less than this per run is not scaled up (bytes;
	// default 1 GiB).
	VMin uint64
	// NMin: a job with this many I/O nodes or fewer is not scaled up
	// (default 1; negative means 0).
	NMin int
	// WMeta: a job whose metadata rate reaches this (operations/s) is not
	// scaled up (default 1000).
	WMeta float64
	// HighBW: a job whose aggregate bandwidth reaches this fraction of one
	// forwarding node's capacity is high-bandwidth, and isolated
	// (default 0.5).
	HighBW float64
	// MaxFwds caps the forwarding nodes of one job (0: no cap).
	MaxFwds int
	// NoSpread keeps a job with a profile on its fixed-mapping nodes even
	// when they already serve other jobs while other forwarding nodes are
	// idle (the paper's behaviour; by default such a job takes idle nodes).
	NoSpread bool
	// Saturated: a job whose last run moved at least this fraction of
	// the capacity of the forwarding nodes it used was bound by them; its
	// B_c is unknown beyond that, so it is offered twice as many (default
	// 0.8; see Demand).
	Saturated float64
}

func (c Config) withDefaults() Config {
	if c.Ratio <= 0 {
		c.Ratio = 4
	}
	if c.VMin == 0 {
		c.VMin = 1 << 30
	}
	if c.NMin == 0 {
		c.NMin = 1
	}
	if c.NMin < 0 {
		c.NMin = 0
	}
	if c.WMeta == 0 {
		c.WMeta = 1000
	}
	if c.HighBW == 0 {
		c.HighBW = 0.5
	}
	if c.Saturated == 0 {
		c.Saturated = 0.8
	}
	return c
}

// Fwd is one forwarding node as the manager sees it.
type Fwd struct {
	ID       string
	Capacity float64 // B_f, bytes/s
	Alive    bool
	Slow     bool // flagged fail-slow by Beacon
}

// Usable reports whether jobs may be sent to f.
func (f Fwd) Usable() bool { return f.Alive && !f.Slow }

// Job is a job about to start.
type Job struct {
	ID      string
	App     string
	Nodes   []string        // its compute nodes
	Profile *beacon.Profile // its application's history; nil: none
}

// Assignment is a job's forwarding nodes and why.
type Assignment struct {
	Job       string
	Fwds      []string // the job's compute nodes spread over these
	Dedicated bool     // no other job may use them
	Isolate   bool     // the job's profile makes it a bad neighbour
	Policy    string   // "ffm" or "dfra"
	Reasons   []string
}

// FFM returns the forwarding node of a compute node under the fixed
// mapping: as on TaihuLight, consecutive compute nodes share a forwarding
// node, Ratio of them per node, in id order (stable while the set of
// forwarding nodes is). A node's number is the trailing digits of its name
// ("cn0042" is 42); a name without them is hashed. The compute nodes of
// an unusable forwarding node (down or fail-slow) go together to one
// stand-in: the usable node that rendezvous hashing ranks first for it.
// Nodes that fail together (a cabinet taken down) get different stand-ins
// instead of all landing on their first usable neighbour, and a
// stand-in changes only if it becomes unusable too.
func FFM(node string, fwds []Fwd, ratio int) (string, bool) {
	if len(fwds) == 0 {
		return "", false
	}
	if ratio <= 0 {
		ratio = 1
	}
	return ffmSorted(node, sortedFwds(fwds), ratio)
}

// ffmSorted is FFM over fwds sorted by id, ratio > 0.
func ffmSorted(node string, sorted []Fwd, ratio int) (string, bool) {
	own := sorted[(nodeNumber(node)/ratio)%len(sorted)]
	if own.Usable() {
		return own.ID, true
	}
	if s := StandIns(own.ID, sorted); len(s) > 0 {
		return s[0], true
	}
	return "", false
}

// StandIns ranks the usable forwarding nodes other than home as its
// stand-ins, best first (rendezvous hashing): FFM gives home's compute
// nodes the first once home is unusable, and a mount whose home does not
// answer tries them in this order before the registry has noticed.
func StandIns(home string, fwds []Fwd) []string {
	type ranked struct {
		id    string
		score uint64
	}
	var rs []ranked
	for _, f := range fwds {
		if f.ID != home && f.Usable() {
			rs = append(rs, ranked{f.ID, rendezvous.Score(home, f.ID)})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].score > rs[j].score })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.id
	}
	return out
}

// Demand is S = N_io × B_c / B_f for a profile on forwarding nodes of
// capacity bf.
func Demand(p *beacon.Profile, bf float64) float64 {
	if p == nil || bf <= 0 {
		return 0
	}
	return float64(p.IONodes) * p.NodeBW / bf
}

// bad reports whether a profile makes a job a bad neighbour, and why.
func bad(p *beacon.Profile, bf float64, cfg Config) (bool, string) {
	if p == nil {
		return false, ""
	}
	switch {
	case p.Mode == beacon.ModeN1:
		return true, "N-1 shared-file I/O"
	case p.Has(beacon.ClassMetadata) || p.MetaRate >= cfg.WMeta:
		return true, fmt.Sprintf("metadata-heavy (%.0f ops/s)", p.MetaRate)
	case bf > 0 && float64(p.IONodes)*p.NodeBW >= cfg.HighBW*bf:
		return true, fmt.Sprintf("high bandwidth (%.0f MB/s, %.0f%% of a forwarding node)",
			float64(p.IONodes)*p.NodeBW/1e6, 100*float64(p.IONodes)*p.NodeBW/bf)
	}
	return false, ""
}

// Decide places a job. placed are the jobs running now (their
// assignments); fwds the forwarding nodes.
func Decide(cfg Config, fwds []Fwd, placed []Assignment, job Job) Assignment {
	cfg = cfg.withDefaults()
	d := newDecision(cfg, fwds, placed, job)
	if len(d.ffm) == 0 {
		d.a.Reasons = append(d.a.Reasons, "no usable forwarding node")
		return d.a
	}
	if job.Profile == nil {
		return d.fallback("no I/O history for this application: fixed mapping")
	}
	bf := capacityOf(fwds)
	p := job.Profile
	isBad, why := bad(p, bf, cfg)
	d.a.Isolate = isBad
	want := d.scaleUp(p, bf)
	// does FFM put the job next to a bad neighbour, or on a dedicated node?
	neighbourBad := false
	for _, f := range d.ffm {
		if d.hostsBad[f] || d.dedicated[f] {
			neighbourBad = true
		}
	}
	switch {
	case !isBad && !neighbourBad && want <= len(d.ffm):
		return d.keepOrSpread(p)
	case isBad:
		d.a.Reasons = append(d.a.Reasons, "isolated: "+why)
		return d.dedicate(want)
	case neighbourBad:
		d.a.Reasons = append(d.a.Reasons, "its fixed-mapping forwarding nodes serve an isolated job")
		return d.awayFromBad(want)
	}
	return d.grow(want)
}

// decision is Decide's view of the forwarding nodes for one job.
type decision struct {
	cfg    Config
	a      Assignment
	ffm    []string        // the nodes the job's compute nodes map to
	ffmSet map[string]bool // the same, as a set
	// users counts the jobs on each node; dedicated and hostsBad are the
	// nodes dedicated to a job or serving an isolated one
	users               map[string]int
	dedicated, hostsBad map[string]bool
	// free: usable, unused by any job; open: usable, shared with good
	// neighbours only, least used first
	free, open []string
}

func newDecision(cfg Config, fwds []Fwd, placed []Assignment, job Job) *decision {
	d := &decision{cfg: cfg, a: Assignment{Job: job.ID, Policy: "ffm"}, ffmSet: map[string]bool{},
		users: map[string]int{}, dedicated: map[string]bool{}, hostsBad: map[string]bool{}}
	// FFM first: the nodes the job's compute nodes map to
	if len(fwds) > 0 {
		sorted := sortedFwds(fwds)
		for _, n := range job.Nodes {
			if f, ok := ffmSorted(n, sorted, cfg.Ratio); ok {
				d.ffmSet[f] = true
			}
		}
	}
	d.ffm = keys(d.ffmSet)
	d.a.Fwds = d.ffm
	for _, pa := range placed {
		for _, f := range pa.Fwds {
			d.users[f]++
			if pa.Dedicated {
				d.dedicated[f] = true
			}
			if pa.Isolate {
				d.hostsBad[f] = true
			}
		}
	}
	for _, f := range sortedFwds(fwds) {
		if f.Usable() && d.users[f.ID] == 0 {
			d.free = append(d.free, f.ID)
		}
		if f.Usable() && !d.dedicated[f.ID] && !d.hostsBad[f.ID] {
			d.open = append(d.open, f.ID)
		}
	}
	sort.SliceStable(d.open, func(i, j int) bool { return d.users[d.open[i]] < d.users[d.open[j]] })
	return d
}

// fallback is the fixed mapping without nodes dedicated to other jobs.
func (d *decision) fallback(why string) Assignment {
	a := d.a
	a.Reasons = append(a.Reasons, why)
	a.Policy, a.Dedicated = "ffm", false
	var keep []string
	for _, f := range d.ffm {
		if !d.dedicated[f] {
			keep = append(keep, f)
		}
	}
	switch {
	case len(keep) > 0:
		a.Fwds = keep
	case len(d.open) > 0:
		a.Fwds = d.open[:1]
		a.Reasons = append(a.Reasons, "its fixed-mapping nodes are dedicated to other jobs: moved to "+d.open[0])
	default:
		a.Fwds = d.ffm
		a.Reasons = append(a.Reasons, "every usable forwarding node is dedicated: sharing")
	}
	return a
}

// scaleUp is how many forwarding nodes the job wants (scale-up), its
// reason noted.
func (d *decision) scaleUp(p *beacon.Profile, bf float64) int {
	cfg, ffm := d.cfg, d.ffm
	want := len(ffm)
	s := Demand(p, bf)
	saturated := p.RunFwds > 0 && bf > 0 && p.RunBW >= cfg.Saturated*float64(p.RunFwds)*bf
	if saturated && float64(2*p.RunFwds) > s {
		s = float64(2 * p.RunFwds)
	}
	var why string
	switch {
	case p.Volume <= cfg.VMin:
		why = fmt.Sprintf("volume %s ≤ V_min: no scale-up", size(p.Volume))
	case p.IONodes <= cfg.NMin:
		why = fmt.Sprintf("%d I/O node(s) ≤ N_min=%d: no scale-up", p.IONodes, cfg.NMin)
	case p.MetaRate >= cfg.WMeta:
		why = fmt.Sprintf("metadata rate %.0f/s ≥ W_meta: no scale-up", p.MetaRate)
	case s > float64(len(ffm)):
		want = int(math.Ceil(s))
		if cfg.MaxFwds > 0 && want > cfg.MaxFwds {
			want = cfg.MaxFwds
		}
		if saturated {
			why = fmt.Sprintf("last run filled its %d forwarding node(s) (%.0f MB/s of %.0f): B_c unknown, S ≥ %.0f > N_f = %d: scale up to %d",
				p.RunFwds, p.RunBW/1e6, float64(p.RunFwds)*bf/1e6, s, len(ffm), want)
		} else {
			why = fmt.Sprintf("S = %d × %.0f MB/s / %.0f MB/s = %.1f > N_f = %d: scale up to %d",
				p.IONodes, p.NodeBW/1e6, bf/1e6, s, len(ffm), want)
		}
	default:
		why = fmt.Sprintf("S = %.1f ≤ N_f = %d: FFM is enough", s, len(ffm))
	}
	d.a.Reasons = append(d.a.Reasons, why)
	return want
}

// keepOrSpread keeps the fixed mapping, or moves a job whose fixed-mapping
// nodes serve others to idle ones.
func (d *decision) keepOrSpread(p *beacon.Profile) Assignment {
	shared := 0
	for _, f := range d.ffm {
		shared += d.users[f]
	}
	if shared == 0 || d.cfg.NoSpread || len(d.free) == 0 {
		return d.fallback("fixed mapping kept")
	}
	n := min(len(d.ffm), len(d.free))
	if p.IONodes > 0 && p.IONodes < n {
		// no more than its I/O nodes use: a 1-1 job of thousands of
		// nodes takes one, not the dozens its nodes map to
		n = p.IONodes
	}
	a := d.a
	a.Fwds, a.Policy = d.free[:n], "dfra"
	a.Reasons = append(a.Reasons, fmt.Sprintf("its fixed-mapping nodes serve %d other job(s) while %d are idle: %d idle one(s) instead of sharing (%d I/O node(s))",
		shared, len(d.free), n, p.IONodes))
	return a
}

// awayFromBad moves a good job to nodes without bad neighbours.
func (d *decision) awayFromBad(want int) Assignment {
	if len(d.open) == 0 {
		return d.fallback("no forwarding node without an isolated job: fixed mapping kept")
	}
	a := d.a
	n := min(max(want, 1), len(d.open))
	a.Fwds = d.open[:n]
	a.Policy = "dfra"
	sort.Strings(a.Fwds)
	return a
}

// dedicate gives an isolated job free nodes of its own.
func (d *decision) dedicate(want int) Assignment {
	if len(d.free) == 0 {
		return d.fallback("not enough free forwarding nodes: fixed mapping kept")
	}
	a := d.a
	n := min(want, len(d.free))
	a.Fwds = d.free[:n]
	a.Dedicated = true
	a.Policy = "dfra"
	if n < want {
		a.Reasons = append(a.Reasons, fmt.Sprintf("only %d free forwarding node(s) of %d wanted", n, want))
	}
	return a
}

// grow scales a good neighbour up: its FFM nodes (unless dedicated) plus
// free ones.
func (d *decision) grow(want int) Assignment {
	var chosen []string
	for _, f := range d.ffm {
		if !d.dedicated[f] {
			chosen = append(chosen, f)
		}
	}
	for _, f := range d.free {
		if len(chosen) >= want {
			break
		}
		if !d.ffmSet[f] {
			chosen = append(chosen, f)
		}
	}
	if len(chosen) <= len(d.ffm) {
		return d.fallback("not enough free forwarding nodes: fixed mapping kept")
	}
	a := d.a
	a.Fwds = chosen
	a.Policy = "dfra"
	if len(chosen) < want {
		a.Reasons = append(a.Reasons, fmt.Sprintf("only %d forwarding node(s) of %d wanted", len(chosen), want))
	}
	return a
}

// Remap re-decides the running jobs whose forwarding nodes became unusable
// (fail-slow or down): each such job is placed again as if starting, with
// the other jobs as they are. Jobs unaffected keep their assignment. It
// returns every job's assignment and the indices of the jobs it moved.
func Remap(cfg Config, fwds []Fwd, placed []Assignment, jobs map[string]Job) ([]Assignment, []int) {
	usable := map[string]bool{}
	for _, f := range fwds {
		usable[f.ID] = f.Usable()
	}
	out := append([]Assignment(nil), placed...)
	var moved []int
	for i, pa := range out {
		broken := false
		for _, f := range pa.Fwds {
			if !usable[f] {
				broken = true
			}
		}
		if !broken {
			continue
		}
		others := append(append([]Assignment(nil), out[:i]...), out[i+1:]...)
		na := Decide(cfg, fwds, others, jobs[pa.Job])
		na.Reasons = append([]string{"remapped: a forwarding node became fail-slow or down"}, na.Reasons...)
		out[i] = na
		moved = append(moved, i)
	}
	return out, moved
}

func nodeNumber(name string) int {
	j := len(name)
	for j > 0 && name[j-1] >= '0' && name[j-1] <= '9' {
		j--
	}
	if j < len(name) && len(name)-j <= 9 {
		n := 0
		for _, c := range name[j:] {
			n = n*10 + int(c-'0')
		}
		return n
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() & 0x7fffffff)
}

func capacityOf(fwds []Fwd) float64 {
	var caps []float64
	for _, f := range fwds {
		if f.Capacity > 0 {
			caps = append(caps, f.Capacity)
		}
	}
	if len(caps) == 0 {
		return 0
	}
	sort.Float64s(caps)
	return caps[len(caps)/2]
}

func sortedFwds(fwds []Fwd) []Fwd {
	s := append([]Fwd(nil), fwds...)
	sort.Slice(s, func(i, j int) bool { return s[i].ID < s[j].ID })
	return s
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func size(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// Share returns the forwarding nodes of assignment a that serve one of the
// job's compute nodes. Under the fixed mapping a node keeps its own
// forwarding node when the assignment has it. Otherwise the job's nodes
// (in node-number order) are spread evenly: with more compute nodes than
// forwarding nodes, consecutive blocks of compute nodes share one; with
// fewer, compute node j gets every forwarding node i with i mod n = j. A
// node that is not one of the job's gets all of them.
func Share(cfg Config, fwds []Fwd, a Assignment, nodes []string, node string) []string {
	if len(a.Fwds) <= 1 {
		return a.Fwds
	}
	for _, n := range nodes {
		if n == node {
			return ShareAll(cfg, fwds, a, nodes)[node]
		}
	}
	return a.Fwds
}

// ShareAll is Share for every one of the job's nodes at once (in
// O(n log n), where Share is that per node).
func ShareAll(cfg Config, fwds []Fwd, a Assignment, nodes []string) map[string][]string {
	cfg = cfg.withDefaults()
	out := make(map[string][]string, len(nodes))
	if len(a.Fwds) <= 1 {
		for _, n := range nodes {
			out[n] = a.Fwds
		}
		return out
	}
	sorted := append([]string(nil), nodes...)
	nums := make(map[string]int, len(nodes))
	for _, n := range nodes {
		nums[n] = nodeNumber(n)
	}
	sort.SliceStable(sorted, func(i, k int) bool {
		ni, nk := nums[sorted[i]], nums[sorted[k]]
		if ni != nk {
			return ni < nk
		}
		return sorted[i] < sorted[k]
	})
	in := map[string]bool{}
	for _, x := range a.Fwds {
		in[x] = true
	}
	var sf []Fwd
	if a.Policy == "ffm" && len(fwds) > 0 {
		sf = sortedFwds(fwds)
	}
	n, k := len(sorted), len(a.Fwds)
	for j, node := range sorted {
		if sf != nil {
			if f, ok := ffmSorted(node, sf, cfg.Ratio); ok && in[f] {
				out[node] = []string{f}
				continue
			}
		}
		if n >= k {
			out[node] = []string{a.Fwds[j*k/n]}
			continue
		}
		var fs []string
		for i := j; i < k; i += n {
			fs = append(fs, a.Fwds[i])
		}
		out[node] = fs
	}
	return out
}
