package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbmgr "github.com/sluice-hpc/sluice/manager/bbos"
)

// bbStatus is the burst-buffer manager's state (`sluice bb status --json`).
func (c *cluster) bbStatus(t *testing.T) bbmgr.Status {
	t.Helper()
	out, err := c.sluice("bb", "status", "--json")
	if err != nil {
		t.Fatalf("bb status: %v %s", err, out)
	}
	var st bbmgr.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("bb status: %v\n%s", err, out)
	}
	return st
}

// bbSetup gives job a burst-buffer grant with the directives of a job
// script, as Slurm's setup stage does.
func (c *cluster) bbSetup(t *testing.T, job string, directives ...string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "job.sh")
	body := "#!/bin/sh\n"
	for _, d := range directives {
		body += "#BB_LUA " + d + "\n"
	}
	if err := os.WriteFile(script, []byte(body+"true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.sluice("bb", "setup", "--mount", c.mnt, "--job", job, "--script", script, "--uid", "0", "--gid", "0"); err != nil {
		t.Fatalf("bb setup %s: %v %s", job, err, out)
	}
}

// writeAs writes data to p as a process of job (fsynced, direct I/O).
func writeAs(t *testing.T, job, p string, data []byte) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dd", "if="+src, "of="+p, "bs=1M", "oflag=direct", "conv=fsync")
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID="+job)
	if out, err := runCmd(time.Minute, cmd); err != nil {
		t.Fatalf("writing %s as job %s: %v\n%s", p, job, err, out)
	}
}

// TestBurstBufferBBOS: six checkpointing applications fill a 48 MiB
// buffer under the bbos policy; the manager demotes their checkpoints to
// the PFS, keeping the buffer copies as caches. A seventh application's
// first checkpoint, once the period has written what the buffer holds and
// colder (higher MTBF) than everything on it, goes straight to the PFS.
// The application that fails most often then writes its next version:
// room is made by evicting its old version first, and the new one stays
// on the buffer for its restart. Every checkpoint reads back intact, the
// I/O scheduler ran phases, and the decisions are in Beacon's log of the
// job.
func TestBurstBufferBBOS(t *testing.T) {
	c := startCluster(t, "--mem", "48M", "--ssd", "0", "--fwds", "1", "--data-max-mbps", "150", "--pfs-max-mbps", "50",
		"--meta-flags", "--bb-policy bbos --bb-rates 150,100,1,50 --bb-period 60s --tier-free 1M,2M,4M")
	const size = 8 << 20
	apps := []struct{ name, mtbf string }{{"a1", "10m"}, {"a2", "20m"}, {"a3", "1h"}, {"a4", "2h"}, {"a5", "5h"}, {"a6", "10h"}, {"arch", "100h"}}
	if err := os.Mkdir(c.path("ck"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range apps {
		if err := os.Mkdir(c.path("ck/"+a.name), 0o755); err != nil {
			t.Fatal(err)
		}
		c.bbSetup(t, a.name, "capacity=8M pool=mem period=60s mtbf="+a.mtbf+" checkpoint="+c.path("ck/"+a.name)+"/v*")
	}
	want := map[string][]byte{}
	write := func(job, name string, seed int) {
		p := c.path("ck/" + job + "/" + name)
		want[p] = pattern(seed, size)
		writeAs(t, job, p, want[p])
	}
	allDemoted := func(n int) func() bool {
		return func() bool {
			st := c.bbStatus(t)
			for _, v := range st.Versions {
				if !v.Demoted && !v.Bypassed {
					return false
				}
			}
			return len(st.Versions) == n
		}
	}
	for i, a := range apps[:6] {
		write(a.name, "v1", 2000+i)
	}
	eventually(t, 30*time.Second, allDemoted(6), "the six checkpoints to be demoted to the PFS")
	eventually(t, 10*time.Second, func() bool { return c.bbStatus(t).Pools[0].DWSF >= 48<<20 }, "the period's writes to be counted")
	// the period has written what the buffer holds: the coldest
	// application's checkpoint, with no older version to demote instead,
	// bypasses the buffer
	write("arch", "v1", 3000)
	write("a1", "v2", 2100)
	eventually(t, 30*time.Second, allDemoted(len(want)), "every checkpoint to be demoted to the PFS")
	// the deleters keep a checkpoint's room free (and a stalled writer's),
	// evicting at their next look, superseded versions first: a1's old
	// version goes before its new one. Whether a1's v2 alone takes the
	// buffer below that room depends on what was evicted while a writer
	// stalled, so the other applications write their next versions
	// until it does
	a1v1 := func() bool { return strings.Join(c.chunkTiers(t, c.path("ck/a1/v1")), " ") == "pfs pfs" }
	for _, a := range []string{"a6", "a5", "a4"} {
		if within(5*time.Second, a1v1) {
			break
		}
		write(a, "v2", 2200+len(want))
		eventually(t, 30*time.Second, allDemoted(len(want)), "every checkpoint to be demoted to the PFS")
	}
	eventually(t, 10*time.Second, a1v1, "a1's old version to be evicted (pfs)")
	if tiers := c.chunkTiers(t, c.path("ck/a1/v2")); strings.Join(tiers, " ") != "mem mem" {
		t.Fatalf("the newest version of the application most likely to restart is on %v, want the buffer", tiers)
	}
	st := c.bbStatus(t)
	for p, data := range want {
		if got := mustRead(t, p); !bytes.Equal(got, data) {
			t.Fatalf("%s reads back wrong", p)
		}
	}
	if tiers := c.chunkTiers(t, c.path("ck/arch/v1")); strings.Join(tiers, " ") != "pfs pfs" {
		t.Fatalf("the coldest checkpoint is on %v, want the PFS (bypass)", tiers)
	}
	if b, _ := os.ReadFile(filepath.Join(c.dir, "pfs", "ck", "arch", "v1")); !bytes.Equal(b, want[c.path("ck/arch/v1")]) {
		t.Fatal("the bypassed checkpoint is not a plain file on the PFS directory")
	}
	if st.Totals.BypassedFiles != 1 || st.Totals.Bypassed != size {
		t.Fatalf("bypass totals %+v", st.Totals)
	}
	// the buffered checkpoints are demoted (allDemoted above, with the
	// bypassed one). The totals count the demotions that copied bytes,
	// which is not one per version: the manager demotes some versions
	// twice (the meta log shows it), and a demotion that finds every
	// chunk already clean on the PFS copies nothing (a CI run under load
	// counted 6 of 7)
	demoted := 0
	for _, v := range st.Versions {
		if v.Demoted && !v.Bypassed {
			demoted++
		}
	}
	if demoted != len(want)-1 || st.Totals.DemotedFiles < 1 || st.Totals.EvictedFiles < 1 {
		t.Fatalf("%d versions demoted, totals %+v: want the %d buffered checkpoints demoted, by the manager's copies at least once, and at least one evicted",
			demoted, st.Totals, len(want)-1)
	}
	if len(st.Pools) != 1 || st.Pools[0].Phases == 0 {
		t.Fatalf("pools %+v: want the I/O scheduler's phases counted", st.Pools)
	}
	if out, err := c.sluice("job", "show", "a1"); err != nil || !strings.Contains(out, "demote v1") {
		t.Fatalf("job a1's decisions do not show its demotion: %v\n%s", err, out)
	}
	// the grants go: the controls are lifted and the pool forgotten
	for _, a := range apps {
		if out, err := c.sluice("bb", "teardown", "--mount", c.mnt, "--job", a.name, "--script", "/dev/null"); err != nil {
			t.Fatalf("teardown %s: %v %s", a.name, err, out)
		}
	}
	eventually(t, 10*time.Second, func() bool { return len(c.bbStatus(t).Pools) == 0 }, "the pool to be forgotten")
}

// TestBurstBufferGrantFromProfile: a job that asks for a pool but names no
// capacity gets its grant from its application's Beacon profile: the
// checkpoint size and period its past run's write bursts showed.
func TestBurstBufferGrantFromProfile(t *testing.T) {
	c := startCluster(t, "--meta-flags", "--bb-policy bbos --bb-rates 1000,700,10,300")
	// a past run: 2 ranks, 3 checkpoints of 2 × 8 MiB, 3 s apart
	c.workload(t, "past-1", "--kind", "ckpt", "--app", "climate", "--ranks", "2", "--size", "24M", "--bursts", "3",
		"--period", "3s", c.path("past"))
	if out, err := c.sluice("profile", "build", "past-1"); err != nil {
		t.Fatalf("profile build: %v %s", err, out)
	}
	c.bbSetup(t, "next-1", "pool=mem app=climate")
	out, err := c.sluice("bb", "status", "--mount", c.mnt)
	if err != nil {
		t.Fatalf("bb status: %v %s", err, out)
	}
	// 16 MiB per checkpoint, a period of 3 s and the write's time: the
	// profile's windows are whole seconds
	if !strings.Contains(out, "grant: job next-1 pool mem 16.0 MiB every 3s") && !strings.Contains(out, "grant: job next-1 pool mem 16.0 MiB every 4s") {
		t.Fatalf("the grant is not the profile's checkpoint:\n%s", out)
	}
	// no profile: a clear refusal
	script := filepath.Join(t.TempDir(), "job.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n#BB_LUA pool=mem app=unknown\ntrue\n"), 0o644)
	if out, err := c.sluice("bb", "setup", "--mount", c.mnt, "--job", "x", "--script", script, "--uid", "0", "--gid", "0"); err == nil ||
		!strings.Contains(out, "no Beacon profile of application \"unknown\"") {
		t.Fatalf("setup without capacity or profile: %v %s", err, out)
	}
}
