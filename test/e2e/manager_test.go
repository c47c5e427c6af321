package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestManagerFailover: the forwarding manager in processes of its own
// (`sluice cluster up --engine etcd --manager-daemons 2`), one active by a
// lease on etcd, its registered jobs under keys of its own there. Jobs
// started through the metadata daemon are placed by the active manager;
// killed -9, the other takes over with the registered jobs within 10 s
// (a `job list` sent right after the kill answers once it has); stopped
// past its lease, the restarted one takes over, the jobs started
// meanwhile are its, and the stopped one, continued, exits saying its
// term ended.
func TestManagerFailover(t *testing.T) {
	requireEtcd(t)
	c := startCluster(t, "--engine", "etcd", "--manager-daemons", "2")
	const serves = "active: this forwarding manager now serves"
	terms := func(name string) int { return c.logCount(name, serves) }
	var active, standby string
	eventually(t, 20*time.Second, func() bool {
		for _, n := range []string{"manager-0", "manager-1"} {
			if terms(n) == 1 {
				active = n
			}
		}
		return active != ""
	}, "a forwarding manager to be active")
	standby = map[string]string{"manager-0": "manager-1", "manager-1": "manager-0"}[active]
	host, _ := os.Hostname()
	start := func(job, node string) []string {
		t.Helper()
		out, err := c.sluice("job", "start", "--nodes", node, job)
		if err != nil {
			t.Fatalf("job start %s: %v\n%s", job, err, out)
		}
		return placedOn(t, out)
	}
	listed := func(when string, want map[string][]string) {
		t.Helper()
		out, err := c.sluice("job", "list")
		if err != nil {
			t.Fatalf("%s: job list: %v\n%s", when, err, out)
		}
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "job ") {
				n++
			}
		}
		for job, fwds := range want {
			line := "job " + job + ": forwarding nodes " + strings.Join(fwds, " ") + " ("
			if !strings.Contains(out, line) {
				t.Fatalf("%s: job list lacks %q:\n%s", when, line, out)
			}
		}
		if n != len(want) {
			t.Fatalf("%s: job list shows %d jobs, want %d:\n%s", when, n, len(want), out)
		}
	}
	want := map[string][]string{"j1": start("j1", host), "j2": start("j2", "cn3")}
	if c.logCount(active, "job placed", "job=j1") != 1 || c.logCount("meta", "job placed") != 0 {
		t.Fatalf("j1 was not placed by %s alone", active)
	}
	listed("before any failure", want)
	// cluster status: the forwarding manager's row names the active
	// instance's address, the others' the metadata daemon's
	answering := func(when string) string {
		t.Helper()
		out, err := c.sluice("cluster", "status")
		if err != nil {
			t.Fatalf("%s: cluster status: %v\n%s", when, err, out)
		}
		rows := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			for _, role := range []string{"forwarding", "tiering", "burst buffer"} {
				if strings.HasPrefix(l, role+" ") {
					rows[role] = strings.TrimSpace(strings.TrimPrefix(l, role))
				}
			}
		}
		fwd := strings.Fields(rows["forwarding"])
		if !strings.HasPrefix(rows["forwarding"], "apart (sluice manager)") || len(fwd) != 4 || !strings.HasPrefix(rows["tiering"], "in the metadata service") {
			t.Fatalf("%s: cluster status's managers: %q\n%s", when, rows, out)
		}
		return fwd[3]
	}
	before := answering("before any failure")

	c.kill9(active)
	t0 := time.Now()
	listed("after the active manager's kill -9", want)
	took := time.Since(t0)
	t.Logf("kill -9 of the active forwarding manager: the job list answered %v later", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("takeover took %v, want at most 10 s", took)
	}
	if after := answering("after the takeover"); after == before {
		t.Errorf("cluster status names %s as the active forwarding manager after its kill -9", after)
	}
	if terms(standby) != 1 || c.logCount(standby, "registered jobs resumed from the engine", "jobs=2") != 1 {
		t.Fatalf("%s did not take over with the two registered jobs", standby)
	}
	if _, err := c.sluice("job", "end", "j2"); err != nil {
		t.Fatal(err)
	}
	delete(want, "j2")
	want["j3"] = start("j3", "cn5")

	// the killed one comes back as the standby; the active one stalls
	// past its lease
	c.restart(active)
	stalled := c.pid(standby)
	if err := syscall.Kill(stalled, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() bool { return terms(active) == 2 }, active+" to take over from the stopped "+standby)
	want["j4"] = start("j4", "cn7")
	if err := syscall.Kill(stalled, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool { return syscall.Kill(stalled, 0) != nil }, standby+", continued after its term ended, to exit")
	if c.logCount(standby, "term ended") == 0 {
		t.Fatalf("%s exited without saying its term ended", standby)
	}
	listed("after the stalled manager's takeover", want)
}
