package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkloadJobs: `sluice workload --jobs` runs the simulator's workload
// description live: each job at its submit time as the behaviour its class
// and pattern call for, with its nodes as processes (up to --max-ranks),
// registered with the forwarding-map manager, and one result line per job;
// a workload larger than --max-bytes is refused with the scale to use.
func TestWorkloadJobs(t *testing.T) {
	c := startCluster(t)
	jobs := filepath.Join(t.TempDir(), "jobs.jsonl")
	lines := []string{
		`{"id":"j1","app":"ckpt","submit":10,"nodes":2,"compute":1,"pattern":"N-N","class":"bw","read":0,"write":8388608,"phases":2,"meta_ops":0}`,
		`{"id":"j2","app":"shared","submit":10.5,"nodes":3,"compute":0,"pattern":"N-1","class":"n1","read":0,"write":6291456,"phases":1,"meta_ops":0}`,
		`{"id":"j3","app":"mdtest","submit":11,"nodes":1,"compute":0,"pattern":"N-N","class":"meta","read":0,"write":0,"phases":1,"meta_ops":300}`,
		`{"id":"j4","app":"wide","submit":11,"nodes":8,"compute":0,"pattern":"N-N","class":"bw","read":4194304,"write":4194304,"phases":1,"meta_ops":0}`,
	}
	if err := os.WriteFile(jobs, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.mnt, "live")
	out, err := run(3*time.Minute, sluiceBin, "workload", "--jobs", jobs, "--time-scale", "0.5", "--register", "--state", c.dir, dir)
	if err != nil {
		t.Fatalf("workload --jobs: %v\n%s", err, out)
	}
	type result struct {
		ID, Kind, Error string
		Ranks, Ops      int
		Bytes, Submit   float64
		IOTime          float64 `json:"io_time"`
		Policy          string
	}
	got := map[string]result{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got[r.ID] = r
	}
	want := map[string]struct {
		kind  string
		ranks int
		bytes float64 // at least
		at    float64 // submit, scaled
	}{
		"j1": {"ckpt", 2, 8 << 20, 0},
		"j2": {"n1", 3, 6 << 20, 0.25},
		"j3": {"meta", 1, 0, 0.5},
		"j4": {"nn", 4, 4 << 20, 0.5},
	}
	for id, w := range want {
		r, ok := got[id]
		if !ok {
			t.Fatalf("no result for %s in\n%s", id, out)
		}
		if r.Error != "" || r.Kind != w.kind || r.Ranks != w.ranks || r.Bytes < w.bytes || r.IOTime <= 0 || r.Policy != "live" {
			t.Errorf("%s: %+v, want kind %s, %d ranks, at least %.0f bytes, an I/O time", id, r, w.kind, w.ranks, w.bytes)
		}
		if r.Submit < w.at-0.05 || r.Submit > w.at+0.5 {
			t.Errorf("%s submitted at %.2f s, want %.2f (its submit time × 0.5)", id, r.Submit, w.at)
		}
	}
	if got["j3"].Ops < 100 {
		t.Errorf("j3 made %d metadata operations, want 100 files' worth", got["j3"].Ops)
	}
	for _, f := range []string{"job-j1/ckpt.1.1", "job-j2/n1.shared", "job-j4/nn.3"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Beacon and the forwarding-map manager know the job by its id and
	// application, with its compute nodes
	rep := c.job(t, "j4")
	if rep.App != "tag:wide" || rep.IONodes != 4 || len(rep.Decisions) != 2 || rep.Decisions[0].Event != "start" {
		t.Errorf("job j4 as Beacon saw it: app %q, %d I/O nodes, decisions %+v; want tag:wide, 4, start and end", rep.App, rep.IONodes, rep.Decisions)
	}
	out, err = run(time.Minute, sluiceBin, "workload", "--jobs", jobs, "--max-bytes", "1M", dir)
	if err == nil || !strings.Contains(out, "--volume-scale") {
		t.Errorf("a workload over --max-bytes: %v\n%s", err, out)
	}
}
