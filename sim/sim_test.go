package sim

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestDeterministic: the same input gives byte-identical results.
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
	out := func() []byte {
		var b bytes.Buffer
		r := run(t, Config{Machine: m, Jobs: jobs, Policy: "dfra"})
		enc := json.NewEncoder(&b)
		for _, j := range r.Jobs {
			enc.Encode(j)
		}
		WriteTimeline(&b, r.Timeline)
		return b.Bytes()
	}
	a, b := out(), out()
	if !bytes.Equal(a, b) {
		t.Fatal("two runs of one input differ")
	}
	if len(jobs) < 20 || !bytes.Contains(a, []byte(`"policy":"dfra"`)) {
		t.Fatalf("%d jobs, DFRA never changed an allocation", len(jobs))
	}
}

// TestPoliciesNotReimplemented: the simulator decides nothing a policy
// package decides. No function of package sim or its sub-packages has
// the name of a policy decision, and sim calls policy/dfra's.
func TestPoliciesNotReimplemented(t *testing.T) {
	banned := map[string]bool{}
	for _, n := range []string{"Decide", "FFM", "Share", "ShareAll", "Demand", "Remap", "Choose", "Place", "Demote",
		"Coolness", "Admit", "Plan", "Rate", "Detect", "Allocate", "Victims", "Select"} {
		banned[strings.ToLower(n)] = true
	}
	calls := map[string]bool{}
	err := filepath.Walk(".", func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				if x.Recv == nil && banned[strings.ToLower(x.Name.Name)] {
					t.Errorf("%s: func %s looks like a policy decision: call policy/ instead", path, x.Name.Name)
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "dfra" {
					calls[x.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, need := range []string{"Decide", "ShareAll"} {
		if !calls[need] {
			t.Errorf("sim does not call dfra.%s", need)
		}
	}
}

// TestJobsRoundTrip: a workload written as JSON Lines reads back.
func TestJobsRoundTrip(t *testing.T) {
	jobs := []Job{{ID: "a", App: "x", Nodes: 4, Compute: 10, Pattern: "N-N", Class: "bw", Read: 1, Write: 2, Phases: 2}}
	var b bytes.Buffer
	if err := WriteJobs(&b, jobs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJobs(&b)
	if err != nil || len(got) != 1 || got[0] != jobs[0] {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := ReadJobs(strings.NewReader(`{"id":"b","nodes":0,"phases":1}`)); err == nil {
		t.Fatal("a job of 0 nodes was read")
	}
}
