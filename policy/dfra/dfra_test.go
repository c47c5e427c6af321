package dfra

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-hpc/sluice/beacon"
)

const mb = 1e6

func fwds(n int) []Fwd {
	var out []Fwd
	for i := 0; i < n; i++ {
		out = append(out, Fwd{ID: fmt.Sprintf("fwd-%02d", i), Capacity: 1000 * mb, Alive: true})
	}
	return out
}

func nodes(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s%03d", prefix, i))
	}
	return out
}

func has(a Assignment, s string) bool { return strings.Contains(strings.Join(a.Reasons, "; "), s) }

func TestNoHistoryKeepsFFM(t *testing.T) {
	a := Decide(Config{}, fwds(8), nil, Job{ID: "j", Nodes: nodes("cn", 2)})
	if a.Policy != "ffm" || len(a.Fwds) == 0 || !has(a, "no I/O history") {
		t.Fatalf("%+v", a)
	}
}

func TestScaleUp(t *testing.T) {
	p := &beacon.Profile{Volume: 100 << 30, IONodes: 16, NodeBW: 250 * mb, Mode: beacon.ModeNN}
	// 16 nodes × 250 MB/s / 1000 MB/s = 4 forwarding nodes, where FFM
	// gives the 16 consecutive nodes 2 (ratio 8)
	fs := fwds(10)
	job := Job{ID: "big", Nodes: nodes("cn", 16), Profile: p}
	cfg := Config{Ratio: 8, HighBW: 10}
	a := Decide(cfg, fs, nil, job)
	if s := Demand(p, 1000*mb); s != 4 {
		t.Fatalf("S = %v", s)
	}
	ffm := Decide(cfg, fs, nil, Job{ID: "x", Nodes: job.Nodes})
	if len(ffm.Fwds) != 2 {
		t.Fatalf("FFM gives %v", ffm.Fwds)
	}
	if a.Policy != "dfra" || len(a.Fwds) != 4 || a.Dedicated {
		t.Fatalf("want 4 shared forwarding nodes: %+v", a)
	}
	for _, f := range ffm.Fwds {
		if !contains(a.Fwds, f) {
			t.Fatalf("scale-up dropped FFM node %s: %+v", f, a)
		}
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func TestEligibility(t *testing.T) {
	base := beacon.Profile{Volume: 100 << 30, IONodes: 16, NodeBW: 250 * mb}
	small := base
	small.Volume = 1 << 20
	few := base
	few.IONodes = 1
	few.NodeBW = 4000 * mb
	meta := base
	meta.MetaRate = 5000
	for name, p := range map[string]beacon.Profile{"V_min": small, "N_min": few, "W_meta": meta} {
		a := Decide(Config{}, fwds(8), nil, Job{ID: "j", Nodes: nodes("cn", 16), Profile: &p})
		if !has(a, name) {
			t.Errorf("%s: %+v", name, a)
		}
	}
}

func TestIsolation(t *testing.T) {
	fs := fwds(8)
	n1 := &beacon.Profile{Volume: 1 << 20, IONodes: 4, NodeBW: mb, Mode: beacon.ModeN1}
	a := Decide(Config{}, fs, nil, Job{ID: "n1", Nodes: nodes("a", 4), Profile: n1})
	if !a.Dedicated || !a.Isolate || a.Policy != "dfra" || !has(a, "N-1") {
		t.Fatalf("N-1 job not isolated: %+v", a)
	}
	md := &beacon.Profile{Volume: 0, Classes: []string{beacon.ClassMetadata}, MetaRate: 3000}
	b := Decide(Config{}, fs, []Assignment{a}, Job{ID: "md", Nodes: nodes("b", 4), Profile: md})
	if !b.Dedicated || overlap(a.Fwds, b.Fwds) {
		t.Fatalf("metadata job not isolated from the N-1 job: %+v %+v", a, b)
	}
	// a light job whose FFM node serves the isolated job moves off it
	light := &beacon.Profile{Volume: 1 << 20, IONodes: 1, NodeBW: mb, Mode: beacon.ModeNN}
	for i := 0; i < 50; i++ {
		j := Job{ID: "light", Nodes: []string{fmt.Sprintf("c%d", i)}, Profile: light}
		ffm := Decide(Config{}, fs, nil, Job{ID: "x", Nodes: j.Nodes})
		c := Decide(Config{}, fs, []Assignment{a, b}, j)
		if overlap(c.Fwds, a.Fwds) || overlap(c.Fwds, b.Fwds) || len(c.Fwds) == 0 {
			t.Fatalf("light job left next to an isolated one: %+v", c)
		}
		if (overlap(ffm.Fwds, a.Fwds) || overlap(ffm.Fwds, b.Fwds)) && !has(c, "serve an isolated job") {
			t.Fatalf("move not explained: %+v", c)
		}
	}
}

func overlap(a, b []string) bool {
	for _, x := range a {
		if contains(b, x) {
			return true
		}
	}
	return false
}

func TestNotEnoughFreeNodes(t *testing.T) {
	fs := fwds(1)
	n1 := &beacon.Profile{Mode: beacon.ModeN1, IONodes: 4}
	first := Decide(Config{}, fs, nil, Job{ID: "a", Nodes: nodes("a", 2), Profile: &beacon.Profile{Mode: beacon.ModeNN}})
	a := Decide(Config{}, fs, []Assignment{first}, Job{ID: "n1", Nodes: nodes("b", 4), Profile: n1})
	if a.Policy != "ffm" || !has(a, "not enough free") {
		t.Fatalf("%+v", a)
	}
}

func TestFailSlowAvoided(t *testing.T) {
	fs := fwds(4)
	fs[1].Slow = true
	fs[2].Alive = false
	for i := 0; i < 100; i++ {
		a := Decide(Config{}, fs, nil, Job{ID: "j", Nodes: []string{fmt.Sprintf("n%d", i)}})
		for _, f := range a.Fwds {
			if f == fs[1].ID || f == fs[2].ID {
				t.Fatalf("chose unusable %s", f)
			}
		}
	}
	// a running job on a node that turns slow is remapped
	fs = fwds(4)
	j := Job{ID: "j", Nodes: nodes("cn", 1)}
	a := Decide(Config{}, fs, nil, j)
	for i := range fs {
		if fs[i].ID == a.Fwds[0] {
			fs[i].Slow = true
		}
	}
	out, moved := Remap(Config{}, fs, []Assignment{a}, map[string]Job{"j": j})
	if out[0].Fwds[0] == a.Fwds[0] || !has(out[0], "remapped") || len(moved) != 1 || moved[0] != 0 {
		t.Fatalf("not remapped: %+v → %+v", a, out[0])
	}
}

// TestRandomInvariants: over random forwarding layers and job mixes, every
// decision uses usable nodes only, a dedicated node serves one job, and an
// isolated job never shares a node.
func TestRandomInvariants(t *testing.T) {
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	modes := []string{beacon.ModeNN, beacon.ModeN1, beacon.Mode1, beacon.ModeNM}
	for round := 0; round < 200; round++ {
		fs := fwds(1 + rng.Intn(12))
		for i := range fs {
			fs[i].Slow = rng.Intn(8) == 0
			fs[i].Alive = rng.Intn(10) != 0
		}
		var placed []Assignment
		for j := 0; j < 1+rng.Intn(8); j++ {
			job := Job{ID: fmt.Sprintf("j%d", j), Nodes: nodes(fmt.Sprintf("r%dj%d-", round, j), 1+rng.Intn(32))}
			if rng.Intn(4) != 0 {
				job.Profile = &beacon.Profile{Volume: uint64(rng.Int63n(1 << 40)), IONodes: 1 + rng.Intn(32),
					NodeBW: float64(rng.Intn(2000)) * mb, Mode: modes[rng.Intn(len(modes))], MetaRate: float64(rng.Intn(3000))}
			}
			a := Decide(Config{}, fs, placed, job)
			for _, f := range a.Fwds {
				for _, x := range fs {
					if x.ID == f && !x.Usable() {
						t.Fatalf("seed %d: unusable %s chosen: %+v", seed, f, a)
					}
				}
				for _, pa := range placed {
					if contains(pa.Fwds, f) && (pa.Dedicated || a.Dedicated) && !has(a, "every usable forwarding node is dedicated") {
						t.Fatalf("seed %d: dedicated node %s shared by %s and %s", seed, f, pa.Job, a.Job)
					}
				}
			}
			if len(a.Reasons) == 0 {
				t.Fatalf("decision without a reason: %+v", a)
			}
			placed = append(placed, a)
		}
	}
}

// TestSaturatedDoubles: a job whose last run filled the forwarding nodes it
// had is offered twice as many, run after run, until it no longer fills
// them; then its measured demand holds.
func TestSaturatedDoubles(t *testing.T) {
	fs := fwds(8)
	cfg := Config{Ratio: 8, VMin: 1}
	job := Job{ID: "nn", Nodes: nodes("cn", 8)}
	had := 1
	for _, want := range []int{2, 4, 8, 8} {
		// the run filled its nodes (95 %)
		bw := 0.95 * float64(had) * 1000 * mb
		job.Profile = &beacon.Profile{Volume: 10 << 30, IONodes: 8, NodeBW: bw / 8, RunBW: bw, RunFwds: had, Mode: beacon.ModeNN}
		a := Decide(cfg, fs, nil, job)
		if len(a.Fwds) != want || !has(a, "filled its") {
			t.Fatalf("after a saturated run on %d: want %d nodes, got %+v", had, want, a)
		}
		had = len(a.Fwds)
	}
	// a run on 4 nodes that moved 2.5 nodes' worth was not bound by them:
	// S = 2.5 → 3 nodes
	job.Profile = &beacon.Profile{Volume: 10 << 30, IONodes: 8, NodeBW: 2500 * mb / 8, RunBW: 2500 * mb, RunFwds: 4, Mode: beacon.ModeNN}
	if a := Decide(cfg, fs, nil, job); len(a.Fwds) != 3 || has(a, "filled its") {
		t.Fatalf("unsaturated run: %+v", a)
	}
}

// TestShare: a job's compute nodes are spread over its forwarding nodes;
// under the fixed mapping each keeps its own.
func TestShare(t *testing.T) {
	fs := fwds(8)
	cfg := Config{Ratio: 2}
	ns := nodes("cn", 8)
	a := Assignment{Job: "j", Fwds: []string{"fwd-01", "fwd-03"}, Policy: "dfra"}
	count := map[string]int{}
	for _, n := range ns {
		s := Share(cfg, fs, a, ns, n)
		if len(s) != 1 {
			t.Fatalf("%s: %v", n, s)
		}
		count[s[0]]++
	}
	if count["fwd-01"] != 4 || count["fwd-03"] != 4 {
		t.Fatalf("uneven: %v", count)
	}
	// fewer compute nodes than forwarding nodes: each gets its own subset
	few := ns[:2]
	a.Fwds = []string{"fwd-01", "fwd-02", "fwd-03", "fwd-04", "fwd-05"}
	if s0, s1 := Share(cfg, fs, a, few, few[0]), Share(cfg, fs, a, few, few[1]); len(s0) != 3 || len(s1) != 2 || contains(s0, s1[0]) {
		t.Fatalf("%v %v", s0, s1)
	}
	// a node outside the job gets all; FFM keeps each node's own
	if s := Share(cfg, fs, a, few, "elsewhere"); len(s) != 5 {
		t.Fatalf("outsider: %v", s)
	}
	ffm := Decide(cfg, fs, nil, Job{ID: "f", Nodes: ns[:4]})
	for _, n := range ns[:4] {
		own, _ := FFM(n, fs, cfg.Ratio)
		if s := Share(cfg, fs, ffm, ns[:4], n); len(s) != 1 || s[0] != own {
			t.Fatalf("FFM %s: %v, own %s", n, s, own)
		}
	}
}

// TestIdleFirst: a small, well-behaved job whose fixed-mapping node already
// serves another job goes to an idle node; with NoSpread it shares.
func TestIdleFirst(t *testing.T) {
	fs := fwds(4)
	p := &beacon.Profile{Volume: 1 << 20, IONodes: 1, NodeBW: 1 * mb, Mode: beacon.ModeNN, Classes: []string{beacon.ClassIOPS}}
	first := Decide(Config{}, fs, nil, Job{ID: "a", Nodes: []string{"cn0"}, Profile: p})
	second := Decide(Config{}, fs, []Assignment{first}, Job{ID: "b", Nodes: []string{"cn1"}, Profile: p})
	if len(second.Fwds) != 1 || second.Fwds[0] == first.Fwds[0] || !has(second, "instead of sharing") {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	shared := Decide(Config{NoSpread: true}, fs, []Assignment{first}, Job{ID: "b", Nodes: []string{"cn1"}, Profile: p})
	if len(shared.Fwds) != 1 || shared.Fwds[0] != first.Fwds[0] {
		t.Fatalf("NoSpread: %+v", shared)
	}
}

// TestIdleFirstIONodes: a large job whose I/O goes through few of its
// nodes (1-1: one) takes as many idle forwarding nodes as its I/O nodes
// need, not all that its nodes map to.
func TestIdleFirstIONodes(t *testing.T) {
	fs := fwds(8)
	var nodes []string
	for i := 0; i < 16; i++ {
		nodes = append(nodes, fmt.Sprintf("cn%d", i))
	}
	other := Decide(Config{}, fs, nil, Job{ID: "a", Nodes: []string{"cn0"}})
	for _, io := range []int{1, 3, 16} {
		p := &beacon.Profile{Volume: 1 << 20, IONodes: io, NodeBW: 1 * mb, Mode: beacon.Mode1, Classes: []string{beacon.ClassBandwidth}}
		a := Decide(Config{}, fs, []Assignment{other}, Job{ID: "b", Nodes: nodes, Profile: p})
		if want := min(io, 4); a.Policy != "dfra" || len(a.Fwds) != want || slices.Contains(a.Fwds, other.Fwds[0]) {
			t.Fatalf("%d I/O nodes: want %d idle forwarding nodes, got %+v", io, want, a)
		}
	}
}

// shareRef is Share as it was written per node, before ShareAll: the
// reference ShareAll is checked against.
func shareRef(cfg Config, fwds []Fwd, a Assignment, nodes []string, node string) []string {
	cfg = cfg.withDefaults()
	if len(a.Fwds) <= 1 {
		return a.Fwds
	}
	sorted := append([]string(nil), nodes...)
	sort.SliceStable(sorted, func(i, k int) bool {
		ni, nk := nodeNumber(sorted[i]), nodeNumber(sorted[k])
		if ni != nk {
			return ni < nk
		}
		return sorted[i] < sorted[k]
	})
	j := -1 // index of node among the job's nodes
	for i, n := range sorted {
		if n == node {
			j = i
			break
		}
	}
	if j < 0 {
		return a.Fwds
	}
	if a.Policy == "ffm" {
		if f, ok := FFM(node, fwds, cfg.Ratio); ok {
			for _, x := range a.Fwds {
				if x == f {
					return []string{f}
				}
			}
		}
	}
	n, k := len(sorted), len(a.Fwds)
	if n >= k {
		return []string{a.Fwds[j*k/n]}
	}
	var out []string
	for i := j; i < k; i += n {
		out = append(out, a.Fwds[i])
	}
	return out
}

// TestShareAllIsShare: ShareAll (and Share, which uses it) gives every
// node what the per-node reference gives it.
func TestShareAllIsShare(t *testing.T) {
	fw := fwds(12)
	for _, a := range []Assignment{
		{Fwds: []string{"fwd01", "fwd02", "fwd07"}, Policy: "ffm"},
		{Fwds: []string{"fwd03", "fwd04", "fwd05", "fwd06", "fwd08"}, Policy: "dfra"},
		{Fwds: []string{"fwd09"}, Policy: "dfra"},
	} {
		for _, n := range []int{2, 5, 40} {
			ns := nodes("cn", n)
			all := ShareAll(Config{Ratio: 4}, fw, a, ns)
			for _, node := range append(ns, "cn999") {
				want := strings.Join(shareRef(Config{Ratio: 4}, fw, a, ns, node), ",")
				if got := strings.Join(Share(Config{Ratio: 4}, fw, a, ns, node), ","); got != want {
					t.Fatalf("%v, %d nodes, %s: Share %s, reference %s", a.Fwds, n, node, got, want)
				}
				if got := strings.Join(all[node], ","); node != "cn999" && got != want {
					t.Fatalf("%v, %d nodes, %s: ShareAll %s, reference %s", a.Fwds, n, node, got, want)
				}
			}
		}
	}
}

// TestFFMStandIns: the compute nodes of a forwarding node that is down go
// together to one usable stand-in; nodes down together (a cabinet) get
// different stand-ins, not all their first usable neighbour; a stand-in
// stays while it is usable, whatever else goes down.
func TestFFMStandIns(t *testing.T) {
	const ratio = 8
	fs := fwds(64)
	for i := 0; i < 16; i++ {
		fs[i].Alive = false // fwd-00..fwd-15, a cabinet
	}
	standIn := map[int]string{} // dead node -> its stand-in
	load := map[string]int{}
	for n := 0; n < 16*ratio; n++ {
		f, ok := FFM(fmt.Sprintf("cn%04d", n), fs, ratio)
		if !ok {
			t.Fatal("no forwarding node")
		}
		if f <= "fwd-15" {
			t.Fatalf("cn%04d on %s, which is down", n, f)
		}
		if s, seen := standIn[n/ratio]; seen && s != f {
			t.Fatalf("the compute nodes of fwd-%02d went to %s and %s: want one stand-in", n/ratio, s, f)
		}
		standIn[n/ratio] = f
		load[f]++
	}
	if len(load) < 10 {
		t.Errorf("16 nodes down: their compute nodes on %d stand-ins (%v), want them spread", len(load), load)
	}
	for f, n := range load {
		if n > 3*ratio {
			t.Errorf("%s stands in for %d nodes' worth", f, n/ratio)
		}
	}
	// another node goes down: only the compute nodes whose stand-in it
	// was move
	victim := standIn[0]
	for i := range fs {
		if fs[i].ID == victim {
			fs[i].Alive = false
		}
	}
	for d, s := range standIn {
		f, _ := FFM(fmt.Sprintf("cn%04d", d*ratio), fs, ratio)
		if s != victim && f != s {
			t.Errorf("fwd-%02d's stand-in moved from %s to %s when %s went down", d, s, f, victim)
		}
		if s == victim && f == victim {
			t.Errorf("fwd-%02d's stand-in %s is down and kept", d, s)
		}
	}
	// a usable node keeps its own compute nodes
	if f, _ := FFM(fmt.Sprintf("cn%04d", 40*ratio), fs, ratio); f != "fwd-40" {
		t.Errorf("cn%04d on %s, want its own fwd-40", 40*ratio, f)
	}
}

// TestStandInsOrder: a mount whose home does not answer tries the
// stand-ins in the order FFM would hand its compute nodes to them as
// nodes go down: the first is FFM's stand-in for home; with that one down
// too, FFM's next is the second; home and unusable nodes are never listed.
func TestStandInsOrder(t *testing.T) {
	fs := fwds(12)
	fs[5].Slow = true
	home := fs[0].ID
	s := StandIns(home, fs)
	if len(s) != 10 {
		t.Fatalf("%d stand-ins of 12 nodes, one of them home and one fail-slow: %v", len(s), s)
	}
	for _, id := range s {
		if id == home || id == fs[5].ID {
			t.Fatalf("%s among the stand-ins %v", id, s)
		}
	}
	fs[0].Alive = false
	for i := 0; i < 3; i++ {
		got, _ := FFM("cn0000", fs, 1)
		if got != s[i] {
			t.Fatalf("with home and %v down FFM picks %s, the stand-ins' order says %s", s[:i], got, s[i])
		}
		for k := range fs {
			if fs[k].ID == got {
				fs[k].Alive = false
			}
		}
	}
}
