package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// changeMachine is two forwarding nodes of 100 MB/s (one compute node
// each under the fixed mapping) over one group of two 40 MB/s targets
// placed chunk by chunk: a job of one node is bound by the targets.
func changeMachine(t *testing.T) *machine.Machine {
	m := tiny(t)
	m.Name = "local"
	m.Storage = machine.Storage{Groups: 1, Targets: 2, ChunkSize: 4 << 20, TargetBWs: []float64{40e6, 40e6}}
	m.ComputeNodes, m.FwdNodes, m.StaticFwds, m.FFMRatio, m.FwdBW, m.NodeBW = 2, 2, 2, 1, 100e6, 1e12
	return m
}

func runChanges(t *testing.T, m *machine.Machine, jobs []Job, changes ...string) *Result {
	t.Helper()
	cfg := Config{Machine: m, Jobs: jobs, Policy: "ffm", Placement: place.RR, Sample: engine.Second}
	for _, c := range changes {
		x, err := machine.ParseChange(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Changes = append(cfg.Changes, x)
	}
	return run(t, cfg)
}

func nearly(a, b float64) bool { return math.Abs(a-b) <= 0.01*math.Max(a, b)+1e-3 }

// A target down stops the flows that use it until it is back: a job
// whose files are on both targets waits out the maintenance; a job that
// starts while a target is down places nothing on it.
func TestChangeTargetDown(t *testing.T) {
	const b = 400e6 // 5 s on both 40 MB/s targets
	job := func(id string, submit float64) Job {
		return Job{ID: id, App: id, Submit: submit, Nodes: 1, OnNodes: []int{0}, Pattern: "N-N", Class: "bw", Write: b, Phases: 1}
	}
	base := runChanges(t, changeMachine(t), []Job{job("a", 0)}).Jobs[0].IOTime
	if !nearly(base, 5) {
		t.Fatalf("alone: %.2f s, want 5", base)
	}
	r := runChanges(t, changeMachine(t), []Job{job("a", 0)}, "at=2s for=3s targets=ost00001 factor=0")
	if got := r.Jobs[0].IOTime; !nearly(got, base+3) {
		t.Errorf("a target down 3 s in the middle of the job: %.2f s, want %.2f (it waits for it)", got, base+3)
	}
	if len(r.Changes) != 2 || r.Changes[0].Targets[0] != "ost00001" || r.Changes[1].End != true {
		t.Errorf("changes as run: %+v", r.Changes)
	}
	// started during a long maintenance: everything on the other target
	r = runChanges(t, changeMachine(t), []Job{job("b", 1)}, "at=0 for=100s targets=ost00001 factor=0")
	if got := r.Jobs[0].IOTime; !nearly(got, b/40e6) {
		t.Errorf("a job started while a target is down: %.2f s, want %.2f (all of it on the other target)", got, b/40e6)
	}
	if got := r.Jobs[0].IOAlone; !(got > 0) || math.IsInf(got, 0) {
		t.Errorf("its I/O alone: %v", got)
	}
	if len(r.Timeline) < 5 {
		t.Fatalf("%d timeline samples", len(r.Timeline))
	}
	for _, s := range r.Timeline {
		if s.T < 100 && s.TargetsDown != 1 {
			t.Errorf("timeline at %.0f s: %d targets down, want 1", s.T, s.TargetsDown)
		}
	}
}

// A forwarding node down moves its running jobs to the next one (the
// fixed mapping skips a dead node), keeps new jobs off it while it is,
// and takes them again once it is back.
func TestChangeFwdDown(t *testing.T) {
	m := changeMachine(t)
	m.Storage.TargetBWs = []float64{1e12, 1e12} // bound by the forwarding nodes: 100 MB/s
	job := func(id string, submit float64) Job {
		return Job{ID: id, App: id, Submit: submit, Nodes: 1, OnNodes: []int{0}, Pattern: "N-N", Class: "bw", Write: 500e6, Phases: 1}
	}
	r := runChanges(t, m, []Job{job("a", 0), job("b", 20), job("c", 40)}, "at=2s for=30s fwds=fwd0000 factor=0")
	by := map[string]JobResult{}
	for _, j := range r.Jobs {
		by[j.ID] = j
	}
	if a := by["a"]; a.Remapped != 1 || !nearly(a.IOTime, 5) {
		t.Errorf("job a, on fwd0000 when it went down: remapped %d times, I/O %.2f s; want 1 and 5 s (the other node as fast)", a.Remapped, a.IOTime)
	}
	if b := by["b"]; strings.Join(b.FwdIDs, ",") != "fwd0001" {
		t.Errorf("job b, started while fwd0000 was down: on %v, want fwd0001", b.FwdIDs)
	}
	if c := by["c"]; strings.Join(c.FwdIDs, ",") != "fwd0000" {
		t.Errorf("job c, started after fwd0000 was back: on %v, want fwd0000", c.FwdIDs)
	}
	if len(r.Changes) != 2 || r.Changes[0].Remaps != 1 || r.Changes[0].Fwds[0] != "fwd0000" {
		t.Errorf("changes as run: %+v", r.Changes)
	}
	if _, err := New(Config{Machine: m, Policy: "ffm", Changes: []machine.Change{
		{At: 0, For: 10, Fwds: []string{"fwd0000"}}, {At: 5, Fwds: []string{"fwd0001"}}}}); err == nil {
		t.Error("changes taking every forwarding node down at 5 s: accepted")
	}
	if _, err := New(Config{Machine: m, Policy: "ffm", Changes: []machine.Change{
		{At: 0, For: 10, Fwds: []string{"fwd0000"}}, {At: 5, Targets: []string{"ost00000..ost00001"}}}}); err == nil {
		t.Error("fwd0000 down and the only storage group down at 5 s (fwd0001 out of service with it): accepted")
	}
	if _, err := New(Config{Machine: m, Policy: "ffm", Changes: []machine.Change{{At: 0, Fwds: []string{"fwd0002"}, Factor: 0.5}}}); err == nil {
		t.Error("a change naming fwd0002 on a machine of two: accepted")
	}
}

// Changes that overlap multiply, and the fail-slow scenario's factor
// with them; each end restores what the others leave.
func TestChangesMultiply(t *testing.T) {
	m := changeMachine(t)
	job := Job{ID: "a", App: "a", Nodes: 1, OnNodes: []int{0}, Pattern: "N-N", Class: "bw", Write: 800e6, Phases: 1}
	// 80 MB/s on both targets: 0-2 s 160 MB, then both at 0.25 (20 MB/s)
	// for 4 s (80 MB), then one ends: 0.5 (40 MB/s) for 4 s (160 MB),
	// then 80 MB/s for the last 400 MB (5 s): 15 s
	r := runChanges(t, m, []Job{job}, "at=2s for=8s groups=0 factor=0.5", "at=2s for=4s targets=ost00000..ost00001 factor=0.5")
	if got := r.Jobs[0].IOTime; !nearly(got, 15) {
		t.Errorf("two overlapping halvings: %.2f s, want 15", got)
	}
	r = run(t, Config{Machine: m, Jobs: []Job{job}, Policy: "ffm", Placement: place.RR, FailSlow: FailSlow{Targets: 2, Factor: 2},
		Changes: []machine.Change{{At: 0, For: 5, Groups: []int{0}, Factor: 0.5}}})
	// 20 MB/s for 5 s (100 MB), then the fail-slow half alone: 40 MB/s for 700 MB
	if got := r.Jobs[0].IOTime; !nearly(got, 5+700/40.0) {
		t.Errorf("a change beside the fail-slow scenario: %.2f s, want %.2f", got, 5+700/40.0)
	}
}

func TestParseChange(t *testing.T) {
	c, err := machine.ParseChange("at=2h for=30m fwds=fwd0000..fwd0023,fwd0100 groups=3 factor=0")
	if err != nil {
		t.Fatal(err)
	}
	if c.At != 7200 || c.For != 1800 || !c.Down() || len(c.Fwds) != 2 || c.Groups[0] != 3 {
		t.Fatalf("parsed %+v", c)
	}
	if back, err := machine.ParseChange(c.String()); err != nil || back.String() != c.String() {
		t.Errorf("round trip: %q -> %+v, %v", c.String(), back, err)
	}
	f, tg, err := c.Expand(240, 4, 35)
	if err != nil || len(f) != 25 || f[24] != 100 || len(tg) != 35 || tg[0] != 105 {
		t.Errorf("expanded: %v %v %v", f, tg, err)
	}
	for _, bad := range []string{"at=1h fwds=fwd0001", "at=1h factor=0", "at=-1 fwds=fwd0001 factor=0", "fwds=fwd9..fwd1 factor=1",
		"fwds=node3 factor=0", "targets=ost1 factor=-1", "when=3 fwds=fwd1 factor=0", "fwds=fwd1 factor=x"} {
		if _, err := machine.ParseChange(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, _, err := (machine.Change{Groups: []int{4}, Factor: 1}).Expand(8, 4, 2); err == nil {
		t.Error("group 4 of 4: accepted")
	}
}

// A forwarding node whose whole storage group is down is out of service:
// its running jobs move, new jobs go elsewhere.
func TestChangeGroupDownTakesItsFwds(t *testing.T) {
	m := changeMachine(t)
	m.Storage = machine.Storage{Groups: 2, Targets: 1, ChunkSize: 4 << 20, TargetBWs: []float64{40e6, 40e6}}
	job := func(id string, submit float64) Job {
		return Job{ID: id, App: id, Submit: submit, Nodes: 1, OnNodes: []int{0}, Pattern: "N-N", Class: "bw", Write: 400e6, Phases: 1}
	}
	r := runChanges(t, m, []Job{job("a", 0), job("b", 20)}, "at=2s for=30s groups=0 factor=0")
	by := map[string]JobResult{}
	for _, j := range r.Jobs {
		by[j.ID] = j
	}
	if a := by["a"]; a.Remapped != 1 || !nearly(a.IOTime, 10) {
		t.Errorf("job a, writing through fwd0000 when group 0 went down: remapped %d, I/O %.2f s; want 1 and 10 s (on to fwd0001's group)", a.Remapped, a.IOTime)
	}
	if b := by["b"]; strings.Join(b.FwdIDs, ",") != "fwd0001" || !nearly(b.IOTime, 10) {
		t.Errorf("job b, started with group 0 down: on %v for %.2f s, want fwd0001, 10 s", b.FwdIDs, b.IOTime)
	}
	n := 0
	for _, s := range r.Timeline {
		if s.T > 2 && s.T < 32 {
			n++
			if s.FwdsDown != 1 {
				t.Errorf("timeline at %.0f s: %d forwarding nodes out of service, want 1", s.T, s.FwdsDown)
			}
		}
	}
	if n == 0 {
		t.Error("no timeline sample while group 0 was down")
	}
}

// A target down for good under a running job's files: the run stops with
// an error that says so, not a hang.
func TestChangeDownForGoodStops(t *testing.T) {
	cfg := Config{Machine: changeMachine(t), Policy: "ffm", Placement: place.RR,
		Jobs:    []Job{{ID: "a", App: "a", Nodes: 1, Pattern: "N-N", Class: "bw", Write: 400e6, Phases: 1}},
		Changes: []machine.Change{{At: 1, Targets: []string{"ost00000"}}}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(); err == nil || !strings.Contains(err.Error(), "down for good") {
		t.Fatalf("got %v, want an error naming the targets down for good", err)
	}
}

// A job that reads back what it wrote reads it where it wrote it: moved
// to another forwarding node (and storage group) in the middle of its
// write, it reads the part written before the move from the old group's
// target, through the forwarding node it has now.
func TestReadBackFollowsWrites(t *testing.T) {
	m := changeMachine(t)
	// two groups of one target: group 0's slow (20 MB/s), group 1's fast
	m.Storage = machine.Storage{Groups: 2, Targets: 1, ChunkSize: 1 << 20, TargetBWs: []float64{20e6, 200e6}}
	job := Job{ID: "a", App: "a", Nodes: 1, OnNodes: []int{0}, Pattern: "N-N", Class: "bw", Write: 100e6, Read: 100e6, ReadBack: true, Phases: 1}
	if got := runChanges(t, m, []Job{job}).Jobs[0].IOTime; !nearly(got, 10) {
		t.Errorf("written and read back on group 0's 20 MB/s target: %.2f s, want 10", got)
	}
	// fwd0000 down at 2 s: 40 MB written on group 0, the other 60 through
	// fwd0001 (100 MB/s) on group 1 (0.6 s); the read-back's one flow
	// takes 0.4 of its bytes from the 20 MB/s target: 50 MB/s, 2 s (read
	// anew through fwd0001 it would take 1 s)
	r := runChanges(t, m, []Job{job}, "at=2s for=100s fwds=fwd0000 factor=0")
	if a := r.Jobs[0]; a.Remapped != 1 || !nearly(a.IOTime, 2+0.6+2) {
		t.Errorf("moved at 2 s: remapped %d times, I/O %.2f s; want 1 and %.2f (its first 40 MB read from group 0)", a.Remapped, a.IOTime, 2+0.6+2)
	}
}
