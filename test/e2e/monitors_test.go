package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// TestMonitors: Beacon's records kept by two monitor daemons (`sluice
// cluster up --monitor-daemons 2`): the jobs are divided between them,
// each job's records on one, and `sluice job show` (asking the metadata
// daemon, which asks both) finds every job. A monitor killed with kill -9
// hides its jobs, with an error naming it, and nothing else: file
// operations go on unhindered, new jobs' records go to the other one. Back,
// it has every record it had been sent.
func TestMonitors(t *testing.T) {
	c := startCluster(t, "--monitor-daemons", "2")
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	var mons []string
	for _, d := range cl.Daemons {
		if strings.HasPrefix(d.Name, "monitor-") {
			mons = append(mons, d.Args[slices.Index(d.Args, "--listen")+1])
		}
	}
	if len(mons) != 2 {
		t.Fatalf("monitor daemons %v, want 2", mons)
	}
	// onMonitor reports whether the monitor at addr has records of job
	onMonitor := func(addr, job string) bool {
		out, err := run(time.Minute, sluiceBin, "monitor", "records", "--meta", addr, "--secret-file", cl.SecretFile(), "--job", job)
		if err != nil {
			t.Fatalf("records of job %s at monitor %s: %v %s", job, addr, err, out)
		}
		return strings.Count(out, "\n") > 1 // a header, then records
	}
	shown := func(job string) bool {
		out, err := c.sluice("job", "show", job)
		return err == nil && strings.Contains(out, "job "+job)
	}
	// every layer's records of a job in: the mount's, the forwarding
	// node's and the data server's (each ships its windows once closed)
	whole := func(job string) bool {
		out, err := c.sluice("job", "show", job)
		return err == nil && strings.Contains(out, "figures from the client layer") && strings.Contains(out, "servers: fwd-") &&
			strings.Contains(out, "data-mem")
	}
	var jobs []string
	for i := range 16 {
		job := fmt.Sprint(7000 + i)
		jobs = append(jobs, job)
		writeAs(t, job, c.path("f"+job), pattern(i, 1<<20))
	}
	eventually(t, 20*time.Second, func() bool {
		for _, j := range jobs {
			if !whole(j) {
				return false
			}
		}
		return true
	}, "every layer's records of every job to reach the monitors")
	owner := map[string]int{}
	held := [2][]string{}
	for _, j := range jobs {
		on := []bool{onMonitor(mons[0], j), onMonitor(mons[1], j)}
		if on[0] == on[1] {
			t.Fatalf("job %s's records on monitors %v, want on one", j, on)
		}
		owner[j] = slices.Index(on, true)
		held[owner[j]] = append(held[owner[j]], j)
	}
	if len(held[0]) == 0 || len(held[1]) == 0 {
		t.Fatalf("jobs per monitor %v: want them divided", held)
	}
	t.Logf("jobs per monitor: %d and %d", len(held[0]), len(held[1]))

	// monitor-1 dies: file operations do not wait on it
	w := startWriter(c.path(""), "w", 0)
	time.Sleep(300 * time.Millisecond)
	c.kill9("monitor-1")
	var later []string
	for i := range 4 {
		job := fmt.Sprint(7100 + i)
		later = append(later, job)
		writeAs(t, job, c.path("g"+job), pattern(i, 1<<20))
	}
	time.Sleep(2 * time.Second)
	w.halt()
	if n, worst := w.mark(); len(w.errs) > 0 || worst > time.Second {
		t.Fatalf("file operations across a monitor's kill -9: %d made, the slowest %v, errors %v", n, worst, w.errs)
	}
	w.check(t, c, "after a monitor's kill -9", c.path(""))
	eventually(t, 20*time.Second, func() bool {
		for _, j := range later {
			if !shown(j) {
				return false
			}
		}
		return true
	}, "the records of jobs that ran while a monitor was dead to reach the other")
	for _, j := range held[0] {
		if !shown(j) {
			t.Fatalf("job %s, on the live monitor, is not shown", j)
		}
	}
	out, err := c.sluice("job", "show", held[1][0])
	if err == nil || !strings.Contains(out, mons[1]) || !strings.Contains(out, "does not answer") {
		t.Fatalf("a job of the dead monitor: %v\n%s\nwant an error naming monitor %s", err, out, mons[1])
	}
	// back, with every record it had acknowledged
	c.restart("monitor-1")
	eventually(t, 30*time.Second, func() bool {
		for _, j := range held[1] {
			if !shown(j) {
				return false
			}
		}
		return true
	}, "the restarted monitor's jobs to be shown again")
	// a profile built from a job's records on one monitor is found by
	// asking both
	if out, err := c.sluice("profile", "build", held[1][0]); err != nil {
		t.Fatalf("profile build: %v %s", err, out)
	}
	if out, err := c.sluice("profile", "show"); err != nil || !strings.Contains(out, "dd") {
		t.Fatalf("profile show after a build on one monitor: %v\n%s", err, out)
	}
}
