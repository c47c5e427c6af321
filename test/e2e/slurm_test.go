package e2e

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSlurmBurstBuffer runs real Slurm (slurmctld, slurmd and munge from
// apt, on loopback) with contrib/slurm/burst_buffer.lua against a sluice
// cluster: a job's stage-in file is in the mem tier when it runs, its
// output is a plain file on the PFS directory after stage-out, the pool
// is the mem tier's capacity, a second job whose request does not fit
// beside the first waits for the first one's teardown, and teardown
// removes the buffer; contrib/slurm/prolog.sh and epilog.sh register
// every job with sluice and end it. SLUICE_REQUIRE_SLURM=1 (CI) turns a
// missing Slurm into a failure instead of a skip.
func TestSlurmBurstBuffer(t *testing.T) {
	for _, bin := range []string{"slurmctld", "slurmd", "munged", "sbatch", "scontrol"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("SLUICE_REQUIRE_SLURM") != "" {
				t.Fatalf("%s not installed (apt-get install slurm-wlm munge)", bin)
			}
			t.Skipf("%s not installed (apt-get install slurm-wlm munge)", bin)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: slurmd runs jobs as another user")
	}
	pfs := filepath.Join(t.TempDir(), "pfs")
	c := startCluster(t, "--mem", "64M", "--pfs", pfs)
	// the job's user must reach the mount
	for d := filepath.Dir(c.mnt); d != filepath.Dir(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	jobUser(t, "sluicebb")
	startMunge(t)

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(out, 0o777)
	ctldPort, slurmdPort := freePort(t), freePort(t)
	conf := fmt.Sprintf(`ClusterName=sluice
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%d
SlurmdPort=%d
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=%[3]s/state
SlurmdSpoolDir=%[3]s/spool
SlurmctldPidFile=%[3]s/slurmctld.pid
SlurmdPidFile=%[3]s/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile=%[3]s/slurmctld.log
SlurmdLogFile=%[3]s/slurmd.log
BurstBufferType=burst_buffer/lua
DebugFlags=BurstBuffer
Prolog=%[3]s/prolog.sh
Epilog=%[3]s/epilog.sh
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
`, ctldPort, slurmdPort, dir)
	lua, err := os.ReadFile("../../contrib/slurm/burst_buffer.lua")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"slurm.conf":        conf,
		"burst_buffer.conf": "Directive=BB_LUA\nStageInTimeout=120\nStageOutTimeout=120\nOtherTimeout=60\n",
		"burst_buffer.lua":  string(lua),
		"sluice.conf":       fmt.Sprintf("SLUICE=%s\nMOUNT=%s\nDIR=%s\n", sluiceBin, c.mnt, c.dir),
		// slurmd gives prologs a small environment of its own
		"prolog.sh": fmt.Sprintf("#!/bin/sh\nSLUICE_CONF=%s/sluice.conf exec %s\n", dir, abs(t, "../../contrib/slurm/prolog.sh")),
		"epilog.sh": fmt.Sprintf("#!/bin/sh\nSLUICE_CONF=%s/sluice.conf exec %s\n", dir, abs(t, "../../contrib/slurm/epilog.sh")),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"state", "spool"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	env := append(os.Environ(), "SLURM_CONF="+filepath.Join(dir, "slurm.conf"), "SLUICE_BB_CONF="+filepath.Join(dir, "sluice.conf"))
	daemon := func(name string) {
		cmd := exec.Command(name, "-D", "-f", filepath.Join(dir, "slurm.conf"))
		cmd.Env = env
		logf, _ := os.Create(filepath.Join(dir, name+".out"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		record(t, leftover{Procs: []proc{procOf(cmd.Process.Pid)}})
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				t.Logf("---- %s log (tail) ----\n%s", name, tail(string(b), 30))
			}
		})
	}
	daemon("slurmctld")
	daemon("slurmd")
	slurm := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		o, err := runCmd(time.Minute, cmd)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, o)
		}
		return o
	}
	eventually(t, 30*time.Second, func() bool {
		cmd := exec.Command("sinfo", "-h", "-o", "%T")
		cmd.Env = env
		o, _ := cmd.Output()
		return strings.TrimSpace(string(o)) == "idle"
	}, "slurmd registered and idle")
	if o := slurm("scontrol", "show", "burst"); !strings.Contains(o, "PoolName[0]=mem") || !strings.Contains(o, "TotalSpace=64MiB") {
		t.Fatalf("scontrol show burst: the mem pool is not the mem tier (64 MiB):\n%s", o)
	}
	if o := slurm("scontrol", "show", "bbstat"); !regexp.MustCompile(`mem\s+dedicated\s+64\.0 MiB\s+64\.0 MiB`).MatchString(o) {
		t.Fatalf("scontrol show bbstat does not show the mem pool:\n%s", o)
	}

	// the input, drained to the PFS
	input := c.path("in/input.dat")
	os.MkdirAll(filepath.Dir(input), 0o755)
	data := make([]byte, 3<<20)
	rand.Read(data)
	if err := os.WriteFile(input, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := c.sluice("file", "migrate", "--tier", "pfs", input); err != nil {
		t.Fatalf("migrate: %v\n%s", err, o)
	}
	if o, _ := c.sluice("file", "stat", input); !strings.Contains(o, "tier pfs") {
		t.Fatalf("the input is not on the PFS before the job:\n%s", o)
	}
	if err := os.Mkdir(c.path("out"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(c.path("out"), 0o777)

	submit := func(name string) string {
		script := filepath.Join(dir, name+".sh")
		body := fmt.Sprintf(`#!/bin/bash
#SBATCH -o %[1]s/%[2]s.txt
#BB_LUA capacity=40M pool=mem app=bbtest
#BB_LUA stage_in source=%[3]s destination=input.dat
#BB_LUA stage_out source=result.dat destination=%[4]s/out/%[2]s.dat
cmp "$SLUICE_BB/input.dat" %[3]s && echo input-ok
head -c 2000000 /dev/urandom > "$SLUICE_BB/result.dat"
md5sum < "$SLUICE_BB/result.dat" > %[1]s/%[2]s.md5
touch %[1]s/%[2]s.started
sleep 4
`, out, name, input, c.mnt)
		if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("runuser", "-u", "sluicebb", "--", "sbatch", "--parsable", script)
		cmd.Env = env
		o, err := runCmd(time.Minute, cmd)
		if err != nil {
			t.Fatalf("sbatch %s: %v\n%s", name, err, o)
		}
		return strings.TrimSpace(o)
	}
	state := func(id string) string {
		o := slurm("scontrol", "show", "job", "-o", id)
		m := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(o)
		if m == nil {
			t.Fatalf("job %s: no state in %q", id, o)
		}
		return m[1]
	}
	a := submit("a")
	b := submit("b")
	eventually(t, 2*time.Minute, func() bool { return exists(filepath.Join(out, "a.started")) }, "job a running")
	if o, _ := c.sluice("file", "stat", input); !strings.Contains(o, "tier mem") {
		t.Fatalf("the stage-in file is not in the mem tier while the job runs:\n%s", o)
	}
	if s := state(b); s != "PENDING" {
		t.Fatalf("job b (40M beside job a's 40M in a 64M pool) is %s while job a runs; want PENDING", s)
	}
	if !exists(filepath.Join(c.mnt, ".bb", a)) {
		t.Fatal("job a has no buffer directory while it runs")
	}
	if o := slurm("scontrol", "show", "bbstat"); !strings.Contains(o, "grant: job "+a+" pool mem 40.0 MiB") || strings.Contains(o, "grant: job "+b) {
		t.Fatalf("scontrol show bbstat does not show job a's grant alone:\n%s", o)
	}
	for _, j := range []struct{ id, name string }{{a, "a"}, {b, "b"}} {
		eventually(t, 3*time.Minute, func() bool { return state(j.id) == "COMPLETED" }, "job "+j.name+" completed")
		log, _ := os.ReadFile(filepath.Join(out, j.name+".txt"))
		if !strings.Contains(string(log), "input-ok") {
			t.Fatalf("job %s did not read its staged-in input:\n%s", j.name, log)
		}
		// stage-out: a plain file on the PFS directory with the job's bytes
		want, _ := os.ReadFile(filepath.Join(out, j.name+".md5"))
		onPFS := filepath.Join(pfs, "out", j.name+".dat")
		got, err := runCmd(time.Minute, exec.Command("sh", "-c", "md5sum < "+onPFS))
		if err != nil || got != string(want) {
			t.Fatalf("job %s's output on the PFS (%s): %v %q, the job wrote %q", j.name, onPFS, err, got, want)
		}
		if o, _ := c.sluice("file", "stat", c.path("out/"+j.name+".dat")); !strings.Contains(o, "tier pfs") {
			t.Fatalf("job %s's output is not drained:\n%s", j.name, o)
		}
		eventually(t, time.Minute, func() bool { return !exists(filepath.Join(c.mnt, ".bb", j.id)) }, "job "+j.name+"'s buffer torn down")
	}
	if sa, sb := jobTime(t, slurm, a, "EndTime"), jobTime(t, slurm, b, "StartTime"); sb.Before(sa) {
		t.Fatalf("job b started at %v, before job a ended at %v", sb, sa)
	}
	if o := slurm("scontrol", "show", "bbstat"); strings.Contains(o, "grant:") {
		t.Fatalf("grants left after the jobs' teardown:\n%s", o)
	}
	// a job without a burst buffer: the prolog and epilog register it
	plain := filepath.Join(dir, "plain.sh")
	os.WriteFile(plain, []byte(fmt.Sprintf("#!/bin/bash\n#SBATCH -o %[1]s/plain.txt\ntouch %[1]s/plain.started\nsleep 3\n", out)), 0o644)
	cmd := exec.Command("runuser", "-u", "sluicebb", "--", "sbatch", "--parsable", plain)
	cmd.Env = env
	o, err := runCmd(time.Minute, cmd)
	if err != nil {
		t.Fatalf("sbatch plain: %v\n%s", err, o)
	}
	p := strings.TrimSpace(o)
	eventually(t, 2*time.Minute, func() bool { return exists(filepath.Join(out, "plain.started")) }, "the plain job running")
	if o, _ := c.sluice("job", "list"); !strings.Contains(o, "job "+p+":") {
		t.Fatalf("the prolog did not register job %s with sluice:\n%s", p, o)
	}
	eventually(t, 2*time.Minute, func() bool { return state(p) == "COMPLETED" }, "the plain job completed")
	eventually(t, 30*time.Second, func() bool {
		o, _ := c.sluice("job", "list")
		return !strings.Contains(o, "job "+p+":")
	}, "the epilog ending job "+p+" in sluice")
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func jobTime(t *testing.T, slurm func(string, ...string) string, id, field string) time.Time {
	o := slurm("scontrol", "show", "job", "-o", id)
	m := regexp.MustCompile(field + `=(\S+)`).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("job %s: no %s in %q", id, field, o)
	}
	tm, err := time.ParseInLocation("2006-01-02T15:04:05", m[1], time.Local)
	if err != nil {
		t.Fatalf("job %s %s: %v", id, field, err)
	}
	return tm
}

// jobUser makes the user jobs run as (Slurm's burst buffer refuses
// root's jobs) unless it exists.
func jobUser(t *testing.T, name string) {
	if _, err := user.Lookup(name); err == nil {
		return
	}
	if o, err := exec.Command("useradd", "-M", "-s", "/bin/bash", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v %s", err, o)
	}
}

// startMunge starts munged unless it runs, and stops it when the test
// ends if this test started it.
func startMunge(t *testing.T) {
	if exec.Command("sh", "-c", "munge -n | unmunge").Run() == nil {
		return
	}
	os.MkdirAll("/run/munge", 0o755)
	exec.Command("chown", "munge:munge", "/run/munge").Run()
	if o, err := exec.Command("runuser", "-u", "munge", "--", "munged").CombinedOutput(); err != nil {
		t.Fatalf("munged: %v %s", err, o)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile("/run/munge/munged.pid"); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
	})
	eventually(t, 10*time.Second, func() bool { return exec.Command("sh", "-c", "munge -n | unmunge").Run() == nil }, "munged answering")
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
