package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/sim/swf"
)

func tiny(t *testing.T) *machine.Machine {
	t.Helper()
	m, err := machine.Load("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDFRAClimbs: three runs in a row of one N-N application on 16 nodes
// of the tiny machine (one forwarding node of 400 MB/s under the fixed
// mapping; storage groups of 500 MB/s; 100 MB/s per node). Under FFM
// each writes 4 GB in 10 s. Under DFRA the first has no profile (10 s);
// the second's profile shows it filled its forwarding node, so it gets
// twice as many, dedicated (high bandwidth): 5 s; the third gets four:
// 2.5 s (its nodes' links: 1.6 GB/s).
func TestDFRAClimbs(t *testing.T) {
	var jobs []Job
	for i := 0; i < 3; i++ {
		jobs = append(jobs, Job{ID: "j" + string(rune('0'+i)), App: "a", Submit: float64(i) * 100, Nodes: 16, Compute: 1,
			Pattern: "N-N", Class: "bw", Write: 4e9, Phases: 1})
	}
	want := map[string][]float64{"ffm": {10, 10, 10}, "dfra": {10, 5, 2.5}}
	for p, w := range want {
		r := run(t, Config{Machine: tiny(t), Jobs: jobs, Policy: p})
		for i, j := range r.Jobs {
			if math.Abs(j.IOTime-w[i]) > 1e-6 {
				t.Errorf("%s run %d: I/O %.3f s on %d forwarding nodes (%s), want %.1f", p, i, j.IOTime, j.Fwds, j.Reason, w[i])
			}
			if math.Abs(j.IOTime-j.IOAlone) > 1e-6 {
				t.Errorf("%s run %d: alone %.3f s, ran %.3f s with nothing beside it", p, i, j.IOAlone, j.IOTime)
			}
		}
	}
}

// TestInterference: an N-1 job and an iops job sharing one forwarding
// node under FFM run slower than alone by the machine's factor for the
// pair; DFRA isolates the N-1 job once it has a profile.
func TestInterference(t *testing.T) {
	m := tiny(t)
	jobs := []Job{
		{ID: "n1", App: "n1", Submit: 0, Nodes: 8, Compute: 1, Pattern: "N-1", Class: "n1", Write: 4e9, Phases: 1},
		{ID: "io", App: "io", Submit: 0, Nodes: 8, Compute: 1, Pattern: "N-N", Class: "iops", Write: 4e9, Phases: 1},
	}
	r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm"})
	f := m.Interference.Factor("n1", "iops")
	for _, j := range r.Jobs {
		// together at 400×f MB/s for the both of them
		if want := 8e9 / (400e6 * f); math.Abs(j.IOTime-want) > 1e-3*want {
			t.Errorf("%s: I/O %.3f s, want %.3f (factor %.3f)", j.ID, j.IOTime, want, f)
		}
		if j.Slowdown <= 1.5 {
			t.Errorf("%s: slowdown %.2f", j.ID, j.Slowdown)
		}
	}
}

// TestDeterministic: the same input gives byte-identical results, on
// taihulight as described and with a mem tier.
func TestDeterministic(t *testing.T) {
	log, err := swf.ParseFile("testdata/NASA-iPSC-1993-3.1-cln.swf.gz")
	if err != nil {
		t.Skip("shared log not found:", err)
	}
	m, err := machine.Load("taihulight")
	if err != nil {
		t.Fatal(err)
	}
	jobs := FromSWF(log, m, GenOptions{Seed: 3, For: 48 * 3600})
	// as described, and with a mem tier (sim/memtier.go)
	withMem := *m
	withMem.MemTier = &machine.MemTier{Capacity: 64e9, BW: 10e9}
	for _, m := range []*machine.Machine{m, &withMem} {
		var mem *MemStats
		out := func() []byte {
			var b bytes.Buffer
			r := run(t, Config{Machine: m, Jobs: jobs, Policy: "dfra"})
			enc := json.NewEncoder(&b)
			for _, j := range r.Jobs {
				enc.Encode(j)
			}
			enc.Encode(r.Mem)
			WriteTimeline(&b, r.Timeline)
			mem = r.Mem
			return b.Bytes()
		}
		a, b := out(), out()
		if !bytes.Equal(a, b) {
			t.Fatalf("mem tier %v: two runs of one input differ", m.MemTier != nil)
		}
		if len(jobs) < 20 || !bytes.Contains(a, []byte(`"policy":"dfra"`)) {
			t.Fatalf("%d jobs, DFRA never changed an allocation", len(jobs))
		}
		if m.MemTier != nil && (mem.Written <= 0 || mem.Moves == 0 || mem.Looks == 0) {
			t.Fatalf("mem tier unused: %+v", mem)
		}
	}
}

// TestPoliciesNotReimplemented: the simulator decides nothing a policy
// package decides. No function of package sim or its sub-packages has
// the name of a policy decision, and sim calls policy/dfra's.
func TestPoliciesNotReimplemented(t *testing.T) {
	banned := map[string]bool{}
	for _, n := range []string{"Decide", "FFM", "Share", "ShareAll", "Demand", "Remap", "Choose", "Place", "Demote",
		"Coolness", "Admit", "Plan", "Rate", "Detect", "Allocate", "Victims", "Select", "Bypass", "Cold", "Order", "Throttle", "Evict", "Hot", "Concurrency", "ModeOf", "Classify", "Matches"} {
		banned[strings.ToLower(n)] = true
	}
	calls := map[string]bool{}
	inspectSources(t, func(path string, n ast.Node) {
		switch x := n.(type) {
		case *ast.FuncDecl:
			if x.Recv == nil && banned[strings.ToLower(x.Name.Name)] {
				t.Errorf("%s: func %s looks like a policy decision: call policy/ instead", path, x.Name.Name)
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && (id.Name == "dfra" || id.Name == "place" || id.Name == "failslow" || id.Name == "bbos" || id.Name == "tiering" || id.Name == "qos") {
				calls[id.Name+"."+x.Sel.Name] = true
			}
		}
	})
	for _, need := range []string{"dfra.Decide", "dfra.ShareAll", "dfra.Remap", "place.Choose", "failslow.Detect",
		"bbos.Admit", "bbos.PlanPeriod", "bbos.Throttle", "bbos.Order", "bbos.Bypass", "bbos.PeriodLoad", "bbos.PredictDWPP", "tiering.Plan", "qos.Classify"} {
		if !calls[need] {
			t.Errorf("sim does not call %s", need)
		}
	}
}

// TestSingleThreaded: the simulator and its packages start no goroutine
// (the engine is one event loop), which is why `make unit` runs ./sim
// without the race detector: under it the validation replays alone took
// 410 of the package's 522 s, past go test's 10 min limit in CI. A
// goroutine added here must bring ./sim back under -race.
func TestSingleThreaded(t *testing.T) {
	inspectSources(t, func(path string, n ast.Node) {
		if g, ok := n.(*ast.GoStmt); ok {
			t.Errorf("%s: a go statement at offset %d: run ./sim under -race in the Makefile's unit target", path, g.Pos())
		}
	})
}

// inspectSources calls f on every node of the non-test Go sources under
// sim/.
func inspectSources(t *testing.T, f func(path string, n ast.Node)) {
	t.Helper()
	err := filepath.Walk(".", func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			f(path, n)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestJobsRoundTrip: a workload written as JSON Lines reads back.
func TestJobsRoundTrip(t *testing.T) {
	jobs := []Job{{ID: "a", App: "x", Nodes: 4, Compute: 10, Pattern: "N-N", Class: "bw", Read: 1, Write: 2, Phases: 2},
		{ID: "b", App: "y", Nodes: 2, Pattern: "1-1", Class: "iops", Write: 4096, Phases: 1, Requests: 1, NodeBW: 1e6, OpsRate: 10,
			OnNodes: []int{3, 1}, Profile: &beacon.Profile{Key: "y", Mode: "1-1", Classes: []string{"iops"}}}}
	var b bytes.Buffer
	if err := WriteJobs(&b, jobs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJobs(&b)
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[1], jobs[1]) || !reflect.DeepEqual(got[0], jobs[0]) {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := ReadJobs(strings.NewReader(`{"id":"b","nodes":0,"phases":1}`)); err == nil {
		t.Fatal("a job of 0 nodes was read")
	}
	if _, err := ReadJobs(strings.NewReader(`{"id":"b","nodes":2,"phases":1,"on_nodes":[1]}`)); err == nil {
		t.Fatal("a job of 2 nodes on 1 was read")
	}
}

// TestPlacementOnAgedTargets: one N-N job over 10 targets whose speeds
// spread 5× (from 50 to 250 MB/s). Round-robin placement gives every
// target the same share, so the slowest sets the pace: 10 × 50 MB/s.
// policy/place's perf rule gives each a share by its speed: close to the
// sum (1.5 GB/s).
func TestPlacementOnAgedTargets(t *testing.T) {
	m := tiny(t)
	m.Storage = machine.Storage{Groups: 1, Targets: 10, TargetBW: 2.5e8, Spread: 5}
	m.FwdBW = 1e10 // the forwarding layer is not the limit
	jobs := []Job{{ID: "a", App: "a", Nodes: 64, Compute: 0, Pattern: "N-N", Class: "bw", Read: 6e10, Phases: 1}}
	bw := map[string]float64{}
	for _, p := range []string{"rr", "perf"} {
		r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm", Placement: place.Policy(p)})
		bw[p] = 6e10 / r.Jobs[0].IOTime
	}
	if bw["rr"] < 4.9e8 || bw["rr"] > 5.6e8 {
		t.Errorf("rr: %.0f MB/s, want 500 (10 × the slowest; 64 files on 10 targets: up to 7 on one)", bw["rr"]/1e6)
	}
	if bw["perf"] < 1.35e9 {
		t.Errorf("perf: %.0f MB/s, want close to 1500", bw["perf"]/1e6)
	}
}

// TestFailSlowDetected: one of the tiny machine's four static forwarding
// nodes turns 10× slower; jobs keep every forwarding node busy. With
// detection, policy/failslow names that node and no other, policy/dfra
// remaps the job on it, and that job's I/O takes a fraction of the time
// it takes without (1,000 s: 40 GB at 40 MB/s).
func TestFailSlowDetected(t *testing.T) {
	m := tiny(t)
	var jobs []Job
	for i := 0; i < 12; i++ { // 4 jobs of 16 nodes at a time, one per forwarding node
		jobs = append(jobs, Job{ID: fmt.Sprintf("j%02d", i), App: fmt.Sprintf("a%d", i%4), Submit: float64(i/4) * 200, Nodes: 16, Compute: 1,
			Pattern: "N-N", Class: "bw", Write: 4e10, Phases: 1})
	}
	io := map[bool]float64{} // the I/O time of j00, on the node that turns slow
	for _, detect := range []bool{false, true} {
		r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm", FailSlow: FailSlow{Nodes: 1, Factor: 10, Detect: detect}})
		if len(r.Slow) != 1 {
			t.Fatalf("slow nodes %v", r.Slow)
		}
		for _, j := range r.Jobs {
			if j.ID == "j00" {
				io[detect] = j.IOTime
			}
		}
		if !detect {
			if len(r.Detected) != 0 || r.Remaps != 0 {
				t.Fatalf("detection off, yet %v detected, %d remaps", r.Detected, r.Remaps)
			}
			continue
		}
		if len(r.Detected) != 1 || r.Detected[0].Fwd != r.Slow[0] || r.Remaps == 0 {
			t.Fatalf("slow %v, detected %+v, %d remaps", r.Slow, r.Detected, r.Remaps)
		}
	}
	if io[false] < 999 || io[true] > io[false]/3 {
		t.Errorf("I/O time of the job on the slow node: with detection %.0f s, without %.0f s", io[true], io[false])
	}
}

// The time a run has left: from the jobs done, or the submit span
// simulated when that says more; nothing before any progress, nothing
// once done.
func TestETA(t *testing.T) {
	h := engine.Time(3600 * 1e9)
	for _, c := range []struct {
		el        time.Duration
		now       engine.Time
		last      float64
		done, tot int
		want      time.Duration
	}{
		{10 * time.Second, 0, 7200, 0, 100, 0},
		{10 * time.Second, h, 7200, 50, 100, 10 * time.Second},            // half the jobs
		{10 * time.Second, h, 7200, 0, 100, 10 * time.Second * 525 / 475}, // half the span (× 0.95)
		{10 * time.Second, 0, 0, 25, 100, 30 * time.Second},               // all submitted at once
		{10 * time.Second, 2 * h, 7200, 100, 100, 0},
	} {
		if got := ETA(c.el, c.now, c.last, c.done, c.tot); got.Round(time.Millisecond) != c.want.Round(time.Millisecond) {
			t.Errorf("ETA(%v, %v, %v, %d/%d) = %v, want %v", c.el, c.now, c.last, c.done, c.tot, got, c.want)
		}
	}
}

// TestWorkloadFromProfiles: with profiles, every application of the log
// does what the profile it drew shows, per I/O node, and the workload is
// the same for the same seed.
func TestWorkloadFromProfiles(t *testing.T) {
	log, err := swf.ParseFile("testdata/NASA-iPSC-1993-3.1-cln.swf.gz")
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.Load("taihulight")
	if err != nil {
		t.Fatal(err)
	}
	profiles := []beacon.Profile{
		{Key: "ior", Mode: beacon.ModeNN, Classes: []string{beacon.ClassBandwidth}, IONodes: 4, ReadBytes: 4 << 30, WriteBytes: 8 << 30, NodeBW: 500e6},
		{Key: "dlio", Mode: beacon.Mode1, Classes: []string{beacon.ClassIOPS}, IONodes: 1, ReadBytes: 1 << 30, NodeBW: 50e6},
		{Key: "mdtest", Mode: beacon.ModeNN, Classes: []string{beacon.ClassMetadata}, IONodes: 2, MetaOps: 40000, NodeBW: 1e6},
	}
	var b bytes.Buffer
	for _, p := range profiles {
		json.NewEncoder(&b).Encode(p)
	}
	if back, err := ReadProfiles(&b); err != nil || !reflect.DeepEqual(back, profiles) {
		t.Fatalf("profiles read back: %v %v", back, err)
	}
	for _, bad := range []string{"", `{"Key": "x"} {"Key": 3}`} {
		if _, err := ReadProfiles(strings.NewReader(bad)); err == nil {
			t.Fatalf("%q read as profiles", bad)
		}
	}
	o := GenOptions{Seed: 5, For: 24 * 3600, Profiles: profiles}
	jobs := FromSWF(log, m, o)
	if len(jobs) < 20 || !reflect.DeepEqual(jobs, FromSWF(log, m, o)) {
		t.Fatalf("%d jobs, or not deterministic", len(jobs))
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		io := float64(ioNodes(j.Pattern, j.Nodes))
		var want Job
		switch j.Class {
		case "bw":
			want = Job{Pattern: "N-N", Read: 1 << 30, Write: 2 << 30, NodeBW: 500e6}
		case "single":
			want = Job{Pattern: "1-1", Read: 1 << 30, NodeBW: 50e6}
		case "meta":
			want = Job{Pattern: "N-N", MetaOps: 20000, NodeBW: 1e6}
		default:
			t.Fatalf("%s: class %q from no profile", j.ID, j.Class)
		}
		seen[j.Class] = true
		// per I/O node, ±20 % per job
		in := func(got, per float64) bool { return got >= 0.8*per*io-1 && got <= 1.2*per*io+1 }
		if j.Pattern != want.Pattern || j.NodeBW != want.NodeBW || !in(j.Read, want.Read) || !in(j.Write, want.Write) || !in(j.MetaOps, want.MetaOps) {
			t.Fatalf("%s (%s, %d nodes): %+v, want per I/O node %+v", j.ID, j.Class, j.Nodes, j, want)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("classes drawn: %v", seen)
	}
	// and it runs
	run(t, Config{Machine: m, Jobs: jobs, Policy: "dfra"})
}

// TestFailSlowTargets: one storage target of the tiny machine (ost00000,
// group 0's first, 250 MB/s) turns ten times slower from the start. The
// jobs on forwarding node 0 write 40 GB each to group 0's two targets
// (the others' jobs keep their targets busy beside it for 100 s: the
// detector compares a target with its peers under load): spread round
// robin, half of each job's bytes wait on the slow one; the perf
// placement (policy/place) sends most of them to the fast one. With
// detection on, policy/failslow names that target and nothing else.
func TestFailSlowTargets(t *testing.T) {
	var jobs []Job
	for i := 0; i < 12; i++ { // 4 jobs of 16 nodes at a time, one per forwarding node
		jobs = append(jobs, Job{ID: fmt.Sprintf("j%02d", i), App: fmt.Sprintf("a%d", i%4), Submit: float64(i/4) * 200, Nodes: 16, Compute: 1,
			Pattern: "N-N", Class: "single", Write: 4e10, Phases: 1})
	}
	io := map[place.Policy]float64{} // j00's, on group 0
	for _, p := range []place.Policy{place.RR, place.Perf} {
		for _, detect := range []bool{false, true} {
			r := run(t, Config{Machine: tiny(t), Jobs: jobs, Policy: "ffm", Placement: p,
				FailSlow: FailSlow{Targets: 1, Factor: 10, Detect: detect}})
			if !reflect.DeepEqual(r.Slow, []string{"ost00000"}) {
				t.Fatalf("slow %v", r.Slow)
			}
			for _, j := range r.Jobs {
				if j.ID == "j00" {
					io[p] = j.IOTime
				}
			}
			t.Logf("%s, detection %v: j00's I/O %.1f s, detected %+v", p, detect, io[p], r.Detected)
			switch {
			case !detect && len(r.Detected) != 0:
				t.Errorf("%s: detection off, yet %+v", p, r.Detected)
			case detect && p == place.RR && (len(r.Detected) != 1 || r.Detected[0].Target != "ost00000"):
				t.Errorf("%s: detected %+v, want ost00000 alone", p, r.Detected)
			case detect:
				for _, d := range r.Detected {
					if d.Target != "ost00000" {
						t.Errorf("%s: detected %+v", p, d)
					}
				}
			}
		}
	}
	// round robin: 20 GB at 25 MB/s
	if io[place.RR] < 700 || io[place.Perf] > io[place.RR]/3 {
		t.Errorf("j00's I/O on the slow target's group: round robin %.1f s, perf %.1f s", io[place.RR], io[place.Perf])
	}
}

// TestFailSlowWholeOps: with the daemons' cadence (1 s windows, checks
// every 5 s over 30 s) a target slowed to 3.7 MiB/s (250 MB/s over 65)
// is named within 10 s beside a busy peer: its records count 3 or 4
// whole 1 MiB operations a window, the rest carried to the next, as a
// daemon counts them (dropping the rest, it showed 3 in every window,
// one short of the detector's minimum, and was never named).
func TestFailSlowWholeOps(t *testing.T) {
	jobs := []Job{{ID: "j", App: "a", Nodes: 16, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1}}
	r := run(t, Config{Machine: tiny(t), Jobs: jobs, Policy: "ffm", Placement: place.RR,
		FailSlow: FailSlow{Targets: 1, Factor: 65, Detect: true, Window: engine.Second, Span: 30 * engine.Second, Every: 5 * engine.Second}})
	if len(r.Detected) != 1 || r.Detected[0].Target != "ost00000" || r.Detected[0].At > 10 {
		t.Fatalf("detected %+v; want ost00000 within 10 s", r.Detected)
	}
}

// TestFailSlowLag: records reach the detector Lag after their window
// closes (the daemons ship a closed window at their next tick), so a
// detector checking every 5 s names the slow target one check later
// when the records are a whole check interval late, and never sooner
// with any lag.
func TestFailSlowLag(t *testing.T) {
	jobs := []Job{{ID: "j", App: "a", Nodes: 16, Compute: 1, Pattern: "N-N", Class: "single", Write: 4e9, Phases: 1}}
	at := map[engine.Time]float64{}
	for _, lag := range []engine.Time{0, engine.Second, 5 * engine.Second} {
		r := run(t, Config{Machine: tiny(t), Jobs: jobs, Policy: "ffm", Placement: place.RR,
			FailSlow: FailSlow{Targets: 1, Factor: 65, Detect: true, Window: engine.Second, Span: 30 * engine.Second, Every: 5 * engine.Second, Lag: lag}})
		if len(r.Detected) != 1 || r.Detected[0].Target != "ost00000" {
			t.Fatalf("lag %v: detected %+v", lag, r.Detected)
		}
		at[lag] = r.Detected[0].At
	}
	if at[engine.Second] < at[0] || at[5*engine.Second] != at[0]+5 {
		t.Errorf("detected at %.0f s (no lag), %.0f s (1 s), %.0f s (5 s); want the last one check after the first", at[0], at[engine.Second], at[5*engine.Second])
	}
}

// TestChunkedLockstep: on a machine whose files are placed chunk by chunk
// (Storage.ChunkSize: `local`, as sluice's metadata service places them),
// a writer goes through its file's chunks in order, so the slowest of its
// targets holds it and the healthy ones wait with it: halfway through an
// N-N job on four 40 MB/s targets, one slowed ×10, the healthy targets
// have moved half their part (the old model, a flow per target, had them
// done in a tenth of the time and idle after). Their records then keep
// the peers the detector compares the slow target with, so small jobs
// have it named in the first check, as the daemons do within 6–10 s
// (bench/sim/liveslow.sh's smoke; the old model: 20 s).
func TestChunkedLockstep(t *testing.T) {
	m := tiny(t)
	m.Name = "local"
	m.Storage = machine.Storage{Groups: 1, Targets: 4, ChunkSize: 4 << 20, TargetBWs: []float64{40e6, 40e6, 40e6, 40e6}}
	m.ComputeNodes, m.FwdNodes, m.StaticFwds, m.FFMRatio, m.FwdBW, m.NodeBW = 4, 2, 2, 2, 1e12, 1e12
	const b = 128 << 20
	jobs := []Job{{ID: "s1", App: "w1", Nodes: 2, OnNodes: []int{0, 1}, Pattern: "N-N", Class: "bw", Read: b, Write: b, Phases: 1},
		{ID: "s2", App: "w2", Nodes: 2, OnNodes: []int{2, 3}, Pattern: "N-N", Class: "bw", Read: b, Write: b, Phases: 1}}
	cfg := Config{Machine: m, Jobs: jobs, Policy: "ffm", Placement: place.RR,
		FailSlow: FailSlow{Targets: 1, Factor: 10, Detect: true, Window: engine.Second, Span: 30 * engine.Second, Every: 5 * engine.Second}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// each target holds a quarter of the 512 MiB read and written: the
	// slowed one at 4 MB/s takes 33.6 s, the others 3.4 s alone
	const total = 4 * b / 4 / 4e6
	var half []float64
	s.e.At(engine.FromSeconds(total/4), engine.Func(func(now engine.Time) { // halfway through the write phase
		for _, r := range s.targets {
			half = append(half, r.Busy(now))
		}
	}))
	r, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.Jobs {
		if math.Abs(j.IOTime-total) > 0.01*total {
			t.Errorf("job %s: I/O %.2f s, want %.2f (the slowed target's part at its speed)", j.ID, j.IOTime, total)
		}
	}
	for k := 1; k < 4; k++ {
		if want := half[0]; math.Abs(half[k]-want) > 0.05*want {
			t.Errorf("target %d had moved %.1f MB halfway through the write, the slowed one %.1f: want the same (lockstep)", k, half[k]/1e6, want/1e6)
		}
	}
	if len(r.Detected) != 1 || r.Detected[0].Target != "ost00000" || r.Detected[0].At > 5 {
		t.Fatalf("detected %+v; want ost00000 at the first check (5 s)", r.Detected)
	}
}

// A job's read comes first, or with ReadBack after its writes (what
// `sluice workload`'s write-and-read behaviours do): here a neighbour
// writing from the start shares the forwarding node with the first
// phase only, so its I/O time shows which phase that was.
func TestReadBack(t *testing.T) {
	for _, back := range []bool{false, true} {
		m := ForwardingMachine("one", 1, 2, 40e6, 1e6, []string{"bw"})
		jobs := []Job{
			{ID: "a", Nodes: 1, OnNodes: []int{0}, Pattern: "N-N", Class: "bw", Read: 40e6, Write: 40e6, Phases: 1, Compute: 2, ReadBack: back},
			{ID: "b", Nodes: 1, OnNodes: []int{1}, Pattern: "N-N", Class: "bw", Write: 40e6, Phases: 1},
		}
		s, err := New(Config{Machine: m, Jobs: jobs, Policy: "dfra"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Run()
		if err != nil {
			t.Fatal(err)
		}
		io := map[string]float64{}
		for _, j := range r.Jobs {
			io[j.ID] = j.IOTime
		}
		// read first: a's read and b's write share the node (2 s each),
		// a writes alone after computing; read back: a computes first, b
		// writes alone (1 s), a writes and reads alone
		want := map[string]float64{"a": 3, "b": 2}
		if back {
			want = map[string]float64{"a": 2, "b": 1}
		}
		for id, w := range want {
			if math.Abs(io[id]-w) > 0.01 {
				t.Errorf("read back %v: job %s I/O %.3f s, want %.0f", back, id, io[id], w)
			}
		}
	}
}

// TestAloneIsAlone: a job with the machine to itself takes as long as its
// replay alone (slowdown 1), also when its flows' rates change during a
// phase (targets of different speeds: the fast ones' parts end first and
// the rest speed up). The replay alone once ended each phase at the last
// event fired, which included the completion events that rate changes
// had superseded: 322 of 1,400 jobs of a day on taihulight came out faster
// shared than alone (slowdown down to 0.89).
func TestAloneIsAlone(t *testing.T) {
	m := tiny(t)
	// three files over the two targets of the forwarding node's group,
	// both faster than their half of the forwarding node: the target with
	// one file ends first, and the other's flow speeds up
	m.Storage.TargetBWs = []float64{80e6, 80e6, 80e6, 80e6, 80e6, 80e6, 80e6, 80e6}
	m.FwdBW, m.NodeBW = 100e6, 1e12
	jobs := []Job{{ID: "a", App: "a", Nodes: 3, Pattern: "N-N", Class: "bw", Read: 3e9, Write: 3e9, Phases: 2}}
	r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm", Placement: place.RR})
	j := r.Jobs[0]
	t.Logf("I/O %.6f s, alone %.6f s", j.IOTime, j.IOAlone)
	if j.IOTime <= 0 || math.Abs(j.IOAlone-j.IOTime) > 1e-6*j.IOTime {
		t.Fatalf("I/O %.6f s with the machine to itself, alone %.6f s (slowdown %.4f): want the same", j.IOTime, j.IOAlone, j.Slowdown)
	}
}

// TestFinishedJobsLetGo: nothing keeps a finished job alive while the
// simulation goes on. The array behind the queue of waiting jobs kept
// the jobs started from it, and the flow model's scratch buffers and
// resources' user lists kept finished flows and through their done funcs
// their jobs, with every job's nodes' numbers and names: 93 % of the
// heap at the peak of the whole NASA log on the 40,960-node machine (966
// MiB of RSS; docs/benchmarks.md, "Simulator"). Here jobs queue for the
// tiny machine's nodes and share its forwarding node and targets.
func TestFinishedJobsLetGo(t *testing.T) {
	var jobs []Job
	for i := range 300 {
		jobs = append(jobs, Job{ID: fmt.Sprint("j", i), App: fmt.Sprint("a", i%7), Submit: float64(i / 20), Nodes: 1 + i%16, Compute: 1,
			Pattern: "N-N", Class: "bw", Write: float64(1+i%5) * 1e8, Read: 5e7, Phases: 1 + i%3, MetaOps: 1000})
	}
	for _, p := range []string{"ffm", "dfra"} {
		s, err := New(Config{Machine: tiny(t), Jobs: jobs, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		var started []weak.Pointer[job]
		s.onStart = func(j *job) { started = append(started, weak.Make(j)) }
		if _, err := s.Run(); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		alive := 0
		for _, w := range started {
			if w.Value() != nil {
				alive++
			}
		}
		if len(started) != len(jobs) || alive > 0 {
			t.Errorf("%s: %d of %d jobs started kept alive after they ended", p, alive, len(started))
		}
		runtime.KeepAlive(s)
	}
}

// TestMetaLatency: with a metadata operation taking 1 ms, a process (one
// per I/O node) issues at most 1,000 a second however idle the service:
// a one-node job's 2,000 operations take 2 s (0.4 s at the tiny
// machine's 5,000/s forwarding rate without it), two such jobs on one
// forwarding node take 2 s each (2,000/s in all, under the rate), a
// 16-node job is held by the forwarding node's rate, not the latency
// (32,000 operations at 5,000/s), and a job with a rate of its own
// (measured alone: its latency is in it) is held by that rate only.
func TestMetaLatency(t *testing.T) {
	jobs := []Job{
		{ID: "one", App: "a", Nodes: 1, Pattern: "N-N", Class: "meta", Phases: 1, MetaOps: 2000},
		{ID: "pair1", App: "b", Submit: 100, Nodes: 1, Pattern: "N-N", Class: "meta", Phases: 1, MetaOps: 2000, OnNodes: []int{0}},
		{ID: "pair2", App: "b", Submit: 100, Nodes: 1, Pattern: "N-N", Class: "meta", Phases: 1, MetaOps: 2000, OnNodes: []int{1}},
		{ID: "wide", App: "c", Submit: 200, Nodes: 16, Pattern: "N-N", Class: "meta", Phases: 1, MetaOps: 32000},
		{ID: "own", App: "d", Submit: 300, Nodes: 1, Pattern: "N-N", Class: "meta", Phases: 1, MetaOps: 2000, OpsRate: 4000},
	}
	want := map[float64]map[string]float64{
		0:     {"one": 0.4, "pair1": 0.8, "pair2": 0.8, "wide": 6.4, "own": 0.5},
		0.001: {"one": 2, "pair1": 2, "pair2": 2, "wide": 6.4, "own": 0.5},
	}
	for lat, w := range want {
		m := tiny(t)
		m.MetaLatency = lat
		r := run(t, Config{Machine: m, Jobs: jobs, Policy: "ffm"})
		for _, j := range r.Jobs {
			if math.Abs(j.IOTime-w[j.ID]) > 0.01*w[j.ID] {
				t.Errorf("latency %g s: %s's I/O took %.3f s, want %.3f", lat, j.ID, j.IOTime, w[j.ID])
			}
		}
	}
	m := tiny(t)
	m.MetaLatency = -1
	if m.Check() == nil {
		t.Error("a negative meta_latency passed the check")
	}
}

// TestBurstPhases: a job's write phases in bursts get its computation
// before each burst only (Job.BurstPhases).
func TestBurstPhases(t *testing.T) {
	// 4 phases of 1 GB at a group's 500 MB/s (2 s each), 10 s of
	// computation: before every phase (2.5 s each) or before each of two
	// bursts (5 s each); the job ends after 8 s of I/O either way
	for _, c := range []struct {
		burst int
		want  []float64
	}{{0, []float64{2.5, 2.5, 2.5, 2.5}}, {2, []float64{5, 0, 5, 0}}, {3, []float64{5, 0, 0, 5}}} {
		j := Job{ID: "b", App: "b", Nodes: 16, Compute: 10, Pattern: "N-N", Class: "bw", Write: 4e9, Phases: 4, BurstPhases: c.burst}
		for i, p := range phasesOf(j) {
			if math.Abs(p.compute-c.want[i]) > 1e-9 {
				t.Errorf("burst_phases %d: phase %d computes %.2f s first, want %.2f", c.burst, i, p.compute, c.want[i])
			}
		}
		got := run(t, Config{Machine: memMachine(t, 0, false), Jobs: []Job{j}, Policy: "ffm"}).Jobs[0]
		if math.Abs(got.IOTime-8) > 1e-6 || math.Abs(got.End-18) > 1e-6 {
			t.Errorf("burst_phases %d: I/O %.3f s, end %.3f s: want 8 and 18", c.burst, got.IOTime, got.End)
		}
	}
}
