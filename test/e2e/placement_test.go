package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
)

// fwdsUsed returns the forwarding nodes Beacon saw a job's I/O on.
func fwdsUsed(rep jobReport) []string {
	var out []string
	for _, s := range rep.Servers {
		if s.Layer == beacon.LayerFwd && s.Bytes > 0 {
			out = append(out, s.Server)
		}
	}
	return out
}

// placedOn parses `sluice job start` output: "job J: forwarding nodes A B (policy...)".
func placedOn(t *testing.T, out string) []string {
	t.Helper()
	line := strings.SplitN(out, "\n", 2)[0]
	i, j := strings.Index(line, "forwarding nodes "), strings.Index(line, " (")
	if i < 0 || j < i {
		t.Fatalf("unexpected placement output:\n%s", out)
	}
	return strings.Fields(line[i+len("forwarding nodes ") : j])
}

// TestJobPlacement: a job whose application's profile is N-1 gets a
// dedicated forwarding node, its I/O goes there, a job without history
// keeps the fixed mapping but not on the dedicated node, and a running
// job's client follows its placement when it changes mid-write, losing
// and reordering nothing (the workload verifies every block it reads back).
func TestJobPlacement(t *testing.T) {
	// capped links make the last writer run long enough to be moved
	c := startCluster(t, "--fwds", "3", "--fwd-max-mbps", "100")
	host, _ := os.Hostname()
	// history: one N-1 run of application "shared"
	c.workload(t, "seed", "--kind", "n1", "--app", "shared", "--ranks", "2", "--size", "8M", c.path("seed"))
	time.Sleep(2500 * time.Millisecond)
	if out, err := c.sluice("profile", "build", "seed"); err != nil || !strings.Contains(out, "shared: N-1") {
		t.Fatalf("profile: %v\n%s", err, out)
	}

	out, err := c.sluice("job", "start", "--app", "shared", "--nodes", host, "j1")
	if err != nil || !strings.Contains(out, "dedicated") || !strings.Contains(out, "isolated: N-1") {
		t.Fatalf("N-1 job not isolated: %v\n%s", err, out)
	}
	j1 := placedOn(t, out)
	out, err = c.sluice("job", "start", "--nodes", host, "j2")
	if err != nil || !strings.Contains(out, "no I/O history") {
		t.Fatalf("job without history: %v\n%s", err, out)
	}
	j2 := placedOn(t, out)
	if len(j1) != 1 || len(j2) == 0 || j2[0] == j1[0] {
		t.Fatalf("j2 %v shares j1's dedicated node %v", j2, j1)
	}

	c.workload(t, "j1", "--kind", "n1", "--app", "shared", "--ranks", "2", "--size", "16M", c.path("j1"))
	c.workload(t, "j2", "--kind", "nn", "--ranks", "2", "--size", "16M", c.path("j2"))
	if got := fwdsUsed(c.job(t, "j1")); len(got) != 1 || got[0] != j1[0] {
		t.Fatalf("j1's I/O went through %v, placed on %v", got, j1)
	}
	if got := fwdsUsed(c.job(t, "j2")); len(got) != 1 || got[0] != j2[0] {
		t.Fatalf("j2's I/O went through %v, placed on %v", got, j2)
	}

	// live remap: a job's placement changes while it writes (re-registered
	// on other compute nodes, so its fixed mapping moves); its client
	// follows within a few seconds
	if _, err := c.sluice("job", "end", "j1"); err != nil {
		t.Fatal(err)
	}
	out, err = c.sluice("job", "start", "--nodes", "cn0", "j3")
	if err != nil {
		t.Fatal(err)
	}
	before := placedOn(t, out)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.workload(t, "j3", "--kind", "nn", "--ranks", "2", "--size", "192M", c.path("j3"))
	}()
	time.Sleep(1500 * time.Millisecond)
	c.sluice("job", "end", "j3")
	out, err = c.sluice("job", "start", "--nodes", "cn4", "j3")
	if err != nil {
		t.Fatal(err)
	}
	after := placedOn(t, out)
	if after[0] == before[0] {
		t.Fatalf("the fixed mapping of cn0 and cn4 is the same node %v", after)
	}
	wg.Wait() // the workload verified every block it read back
	out, _ = c.sluice("job", "list")
	if !strings.Contains(out, "job j3:") || strings.Contains(out, "job j1:") {
		t.Fatalf("registered jobs:\n%s", out)
	}
	got := fwdsUsed(c.job(t, "j3"))
	if len(got) != 2 || !(contains(got, before[0]) && contains(got, after[0])) {
		t.Fatalf("the writer used %v; placed on %v then %v", got, before, after)
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

// TestFailSlowAvoidance: two jobs on two forwarding nodes; one node is made
// ten times slower. Beacon flags it, the manager moves the job off it, and
// the job's next run is as fast as before the fault. Reports the time to
// detection and to remapping, and the job's I/O time healthy, on the slow
// node, and after the move.
func TestFailSlowAvoidance(t *testing.T) {
	c := startCluster(t, "--fwds", "2", "--fwd-max-mbps", "100")
	outA, err := c.sluice("job", "start", "--nodes", "cn0", "a")
	if err != nil {
		t.Fatal(err)
	}
	outB, err := c.sluice("job", "start", "--nodes", "cn4", "b")
	if err != nil {
		t.Fatal(err)
	}
	na, nb := placedOn(t, outA)[0], placedOn(t, outB)[0]
	if na == nb {
		t.Fatalf("both jobs on %s", na)
	}
	ioTime := func(job string) time.Duration {
		out, err := run(3*time.Minute, sluiceBin, "workload", "--json", "--job", job, "--kind", "nn", "--ranks", "2",
			"--size", "24M", c.path("w-"+job))
		if err != nil {
			t.Fatalf("%v %s", err, out)
		}
		var s struct{ Slowest time.Duration }
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return s.Slowest
	}
	healthy := ioTime("a")
	if _, err := c.sluice("cluster", "fault", "--server", strings.TrimPrefix(na, "fwd-"), "--slow", "10"); err != nil {
		t.Fatal(err)
	}
	injected := time.Now()
	// both jobs keep working while Beacon watches
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var slowRun time.Duration
	for _, j := range []string{"a", "b"} {
		wg.Add(1)
		go func(j string) {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				d := ioTime(j)
				if j == "a" && k == 0 {
					slowRun = d
				}
			}
		}(j)
	}
	var detected, moved time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for moved == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if detected == 0 {
			if out, _ := c.sluice("cluster", "status"); strings.Contains(out, "FAIL-SLOW") {
				detected = time.Since(injected)
			}
		}
		if out, _ := c.sluice("job", "list"); strings.Contains(out, "became fail-slow") {
			if now := placedOn(t, out[strings.Index(out, "job a:"):]); now[0] != na {
				moved = time.Since(injected)
			}
		}
	}
	close(stop)
	wg.Wait()
	if detected == 0 || moved == 0 {
		out, _ := c.sluice("cluster", "status")
		t.Fatalf("slow %s not avoided (detected after %v, moved after %v):\n%s", na, detected, moved, out)
	}
	after := ioTime("a")
	t.Logf("fail-slow %s: flagged after %v, job moved after %v; job a's I/O time healthy %v, on the slow node %v, after the move %v",
		na, detected.Round(100*time.Millisecond), moved.Round(100*time.Millisecond), healthy, slowRun, after)
	if after > 3*healthy || slowRun < 2*healthy {
		t.Fatalf("I/O time healthy %v, slow %v, after the move %v", healthy, slowRun, after)
	}
}

// TestScaleUp: an N-N job on four emulated compute nodes, all on one
// forwarding node under the fixed mapping (ratio 8), fills that node's
// capped link. Its next run is given two forwarding nodes (DFRA scale-up:
// the last run was bound by its forwarding nodes), its compute nodes are
// spread over them, and it runs faster. `sluice job show ID` shows the
// decisions with their reasons.
func TestScaleUp(t *testing.T) {
	c := startCluster(t, "--fwds", "3", "--fwd-max-mbps", "40", "--meta-flags", "--fwd-ratio 8 --dfra-vmin 16M")
	run := func(job string) jobReport {
		c.workload(t, job, "--register", "--state", c.dir, "--kind", "nn", "--app", "wide", "--ranks", "4",
			"--nodes", "cn0,cn1,cn2,cn3", "--size", "16M", c.path(job))
		return c.job(t, job)
	}
	r1 := run("s1")
	if got := fwdsUsed(r1); len(got) != 1 || r1.IONodes != 4 {
		t.Fatalf("first run: want one forwarding node (fixed mapping) and 4 I/O nodes, got %v, %d nodes", got, r1.IONodes)
	}
	if len(r1.Decisions) != 2 || r1.Decisions[0].Event != "start" || r1.Decisions[0].Policy != "ffm" || r1.Decisions[1].Event != "end" {
		t.Fatalf("first run's decisions: %+v", r1.Decisions)
	}
	if out, err := c.sluice("profile", "build", "s1"); err != nil {
		t.Fatalf("profile: %v\n%s", err, out)
	}
	r2 := run("s2")
	d := r2.Decisions
	if len(d) == 0 || d[0].Policy != "dfra" || len(d[0].Fwds) != 2 || !strings.Contains(strings.Join(d[0].Reasons, ";"), "filled its 1 forwarding node") {
		t.Fatalf("second run not scaled up: %+v", d)
	}
	if got := fwdsUsed(r2); len(got) != 2 {
		t.Fatalf("second run's I/O went through %v, placed on %v", got, d[0].Fwds)
	}
	t.Logf("bandwidth: %.0f MB/s on 1 forwarding node, %.0f MB/s on 2", r1.BW/1e6, r2.BW/1e6)
	if r2.BW < 1.4*r1.BW {
		t.Fatalf("scale-up gained too little: %.0f → %.0f MB/s", r1.BW/1e6, r2.BW/1e6)
	}
	out, err := c.sluice("job", "show", "s2")
	if err != nil || !strings.Contains(out, "decisions:") || !strings.Contains(out, "scale up to 2") {
		t.Fatalf("job report: %v\n%s", err, out)
	}
}
