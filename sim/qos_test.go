package sim

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-hpc/sluice/policy/qos"
)

func rule(t *testing.T, line string) qos.Rule {
	t.Helper()
	w := strings.Fields(line)
	r, err := qos.ParseRule(w[0], w[1:])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestQoSCaps: two 8-node jobs of the tiny machine share one forwarding
// node of 400 MB/s under the fixed mapping (class single: no
// interference), each writing 4 GB. Without rules each gets half: 20 s.
// A rule capping job a at 50 MiB/s leaves b the rest (4 GB at 400 − 52.4
// MB/s), and a runs at its cap throughout, alone as well (slowdown 1); a
// rule on reads or on another job changes nothing; a share of 3 gives a
// three times b's bandwidth while both write; an operations cap on
// metadata holds a metadata job to it.
func TestQoSCaps(t *testing.T) {
	jobs := []Job{
		{ID: "a", App: "x", Nodes: 8, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1},
		{ID: "b", App: "y", Nodes: 8, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1},
	}
	io := func(r *Result) map[string]JobResult {
		out := map[string]JobResult{}
		for _, j := range r.Jobs {
			out[j.ID] = j
		}
		return out
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-3*want }
	const cap50 = 50 << 20
	for _, tc := range []struct {
		name  string
		rules []string
		a, b  float64 // I/O times
		hit   []string
	}{
		{"none", nil, 20, 20, nil},
		{"cap a", []string{"cap job=a rate=50M"}, 4e9 / cap50, 4e9 / (400e6 - cap50), []string{"cap"}},
		{"cap by app", []string{"cap app=x op=write rate=50M"}, 4e9 / cap50, 4e9 / (400e6 - cap50), []string{"cap"}},
		{"reads only", []string{"cap job=a op=read rate=50M"}, 20, 20, nil},
		{"another job", []string{"cap job=c rate=50M"}, 20, 20, nil},
		// a share of 3 against b's 1: 300 and 100 MB/s while both write,
		// then b alone
		{"share only", []string{"cap job=a share=3"}, 4e9 / 300e6, 20, []string{"cap"}},
	} {
		var rules []qos.Rule
		for _, l := range tc.rules {
			rules = append(rules, rule(t, l))
		}
		r := io(run(t, Config{Machine: tiny(t), Jobs: jobs, Policy: "ffm", QoS: rules}))
		a, b := r["a"], r["b"]
		if a.FwdIDs[0] != b.FwdIDs[0] {
			t.Fatalf("%s: the jobs are on %v and %v, want one forwarding node", tc.name, a.FwdIDs, b.FwdIDs)
		}
		if !near(a.IOTime, tc.a) || !near(b.IOTime, tc.b) {
			t.Errorf("%s: I/O a %.3f s, b %.3f s; want %.3f, %.3f", tc.name, a.IOTime, b.IOTime, tc.a, tc.b)
		}
		if tc.a > 20 && !near(a.IOAlone, tc.a) {
			t.Errorf("%s: a alone %.3f s, want its cap's %.3f", tc.name, a.IOAlone, tc.a)
		}
		if !slices.Equal(a.QoS, tc.hit) || len(b.QoS) != 0 {
			t.Errorf("%s: rules matched: a %v, b %v; want %v and none", tc.name, a.QoS, b.QoS, tc.hit)
		}
	}

	// operations: 2,000 metadata operations over one forwarding node
	// (5,000 ops/s) capped at 100/s take 20 s
	meta := []Job{{ID: "m", App: "md", Nodes: 8, Compute: 1, Pattern: "N-N", Class: "meta", Write: 1, Phases: 1, MetaOps: 2000}}
	r := io(run(t, Config{Machine: tiny(t), Jobs: meta, Policy: "ffm", QoS: []qos.Rule{rule(t, "md app=md op=meta iops=100")}}))
	if m := r["m"]; !near(m.IOTime, 20) {
		t.Errorf("metadata job under iops=100: I/O %.3f s, want 20", m.IOTime)
	}
	r = io(run(t, Config{Machine: tiny(t), Jobs: meta, Policy: "ffm"}))
	if m := r["m"]; m.IOTime > 1 {
		t.Errorf("metadata job without a rule: I/O %.3f s, want 2,000 ops at 5,000/s", m.IOTime)
	}

	// the cap holds at each storage target as well: one storage group of
	// one target (250 MB/s) behind every forwarding node, a 32-node job
	// over two forwarding nodes: their caps would give it 2 × 50 MiB/s,
	// the target's gives it 50
	m := tiny(t)
	m.Storage.Groups, m.Storage.Targets = 1, 1
	wide := []Job{{ID: "a", App: "x", Nodes: 32, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1}}
	r = io(run(t, Config{Machine: m, Jobs: wide, Policy: "ffm", QoS: []qos.Rule{rule(t, "cap job=a rate=50M")}}))
	if a := r["a"]; a.Fwds != 2 || !near(a.IOTime, 4e9/cap50) {
		t.Errorf("32-node job on one target: %d forwarding nodes, I/O %.3f s; want 2 and %.3f", a.Fwds, a.IOTime, 4e9/cap50)
	}

	if _, err := New(Config{Machine: tiny(t), Jobs: jobs, Policy: "ffm", QoS: []qos.Rule{rule(t, "n node=cn0* rate=1M")}}); err == nil {
		t.Error("a rule matching by node was taken")
	}
}

// TestFairByJob: a server shares between jobs (or the rules they match),
// not between their flows. One forwarding node (400 MB/s, storage not
// limiting): a job of 8 nodes writes to four targets, a job of one node
// to one; each has half the node (200 MB/s: 20 s for 4 GB), where five
// flows sharing it alike would give the first four fifths. A storage
// target (one of 250 MB/s behind every forwarding node) shares between
// jobs only while there are rules (a data server's gate schedules only
// then): a job over two forwarding nodes has two flows there against
// another's one: two thirds without rules, half with any rule.
func TestFairByJob(t *testing.T) {
	m := tiny(t)
	m.NodeBW = 1e9
	m.Storage.Targets, m.Storage.TargetBW = 4, 1e9
	jobs := []Job{
		{ID: "a", App: "x", Nodes: 8, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1},
		{ID: "b", App: "y", Nodes: 1, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1},
	}
	r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm"})
	for _, j := range r.Jobs {
		if j.FwdIDs[0] != "fwd0000" || math.Abs(j.IOTime-20) > 1e-3*20 {
			t.Errorf("one forwarding node: job %s on %v, I/O %.3f s; want fwd0000, 20 s", j.ID, j.FwdIDs, j.IOTime)
		}
	}

	m = tiny(t)
	m.Storage.Groups, m.Storage.Targets, m.Storage.TargetBW = 1, 1, 250e6
	jobs = []Job{
		{ID: "a", App: "x", Nodes: 32, Compute: 1, Pattern: "N-N", Class: "single", Write: 3e9, Phases: 1},
		{ID: "b", App: "y", Nodes: 16, Compute: 1, Pattern: "N-N", Class: "single", Write: 3e9, Phases: 1},
	}
	for _, tc := range []struct {
		rules []qos.Rule
		a     float64 // a's I/O time (b ends later)
	}{
		{nil, 3e9 / (250e6 * 2 / 3)},
		{[]qos.Rule{rule(t, "other job=zz rate=1M")}, 3e9 / 125e6},
	} {
		r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm", QoS: tc.rules})
		for _, j := range r.Jobs {
			if j.ID == "a" && (j.Fwds != 2 || math.Abs(j.IOTime-tc.a) > 1e-3*tc.a) {
				t.Errorf("one target, %d rules: a over %d forwarding nodes, I/O %.3f s; want 2 and %.3f", len(tc.rules), j.Fwds, j.IOTime, tc.a)
			}
		}
	}
}
