package e2e

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// What a test binary that dies before its cleanups leaves behind. A test's
// cleanups take its clusters down, but they do not run when the binary is
// killed (SIGKILL, the OOM killer) or panics at go test's -timeout: the
// daemons run on, their FUSE mounts stay (a dead mount answers ENOTCONN)
// and the mem tier's tmpfs under /dev/shm stays mounted, all of it in the
// way of the next run. So every cluster, second mount and long-lived
// process a test starts is recorded in a file under leftoversDir, named by
// the test binary's pid, and forgotten when the test's cleanup has taken
// it down. Two guards use the records:
//   - TestMain takes down whatever an earlier binary recorded and did not
//     forget, once that binary is gone (a live one is another run's);
//   - shortly before go test's -timeout panics, TestMain takes down this
//     binary's own (leftoversMargin before it) and refuses new clusters.

// leftoversDir holds the records, one JSON file each.
var leftoversDir = filepath.Join(os.TempDir(), "sluice-e2e-leftovers")

// leftover is one record.
type leftover struct {
	Owner  int      // the test binary's pid
	State  string   `json:",omitempty"` // a `sluice cluster up` state directory: `sluice cluster down --purge` it
	Mounts []string `json:",omitempty"` // FUSE mounts to abort and detach
	Procs  []proc   `json:",omitempty"` // processes to kill
	Dirs   []string `json:",omitempty"` // directories to remove, after the rest
}

// proc names a process by its pid and its start time, so that a pid
// reused by another process since is not killed.
type proc struct {
	Pid   int
	Start string // field 22 of /proc/PID/stat
}

func procOf(pid int) proc { return proc{Pid: pid, Start: procStart(pid)} }

// procStart is the start time of process pid in clock ticks since boot
// ("" if it is gone or a zombie: a daemon `sluice cluster up` started is a
// child of pid 1, which in a container may not reap it).
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// the command (field 2) is in parentheses and may hold spaces; the
	// state (field 3) and the start time (22) follow
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		if f := strings.Fields(s[i+1:]); len(f) > 19 && f[0] != "Z" && f[0] != "X" {
			return f[19]
		}
	}
	return ""
}

func (p proc) alive() bool { return p.Start != "" && procStart(p.Pid) == p.Start }

var leftovers struct {
	mu      sync.Mutex
	seq     int  // guarded by mu
	closing bool // guarded by mu: the -timeout is near, no new clusters
}

// record writes l (owned by this binary) and registers its removal as a
// cleanup of t: call it before registering the cleanup that takes l's
// things down, as cleanups run last registered first.
func record(t *testing.T, l leftover) {
	t.Helper()
	name, err := writeRecord(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forget(name) })
}

// writeRecord writes l as this binary's and returns its file; an error
// also when go test's -timeout is near.
func writeRecord(l leftover) (string, error) {
	l.Owner = os.Getpid()
	b, err := json.Marshal(l)
	if err != nil {
		return "", err
	}
	leftovers.mu.Lock()
	if leftovers.closing {
		leftovers.mu.Unlock()
		return "", errors.New("go test's -timeout is near: the clusters are being taken down")
	}
	leftovers.seq++
	name := filepath.Join(leftoversDir, fmt.Sprintf("%d-%d.json", l.Owner, leftovers.seq))
	leftovers.mu.Unlock()
	if err := os.MkdirAll(leftoversDir, 0o755); err != nil {
		return "", err
	}
	return name, os.WriteFile(name, b, 0o644)
}

// forget removes record name: what it names was taken down.
func forget(name string) { os.Remove(name) }

// readRecords reads every record, by file; unreadable ones are removed.
func readRecords() map[string]leftover {
	files, _ := filepath.Glob(filepath.Join(leftoversDir, "*.json"))
	recs := map[string]leftover{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		var l leftover
		if err != nil || json.Unmarshal(b, &l) != nil {
			os.Remove(f)
			continue
		}
		recs[f] = l
	}
	return recs
}

// takeDown kills l's processes, takes its cluster down and detaches its
// mounts; it says what it did.
func takeDown(l leftover) string {
	var did []string
	for _, p := range l.Procs {
		if p.alive() && syscall.Kill(p.Pid, syscall.SIGKILL) == nil {
			did = append(did, fmt.Sprintf("killed pid %d", p.Pid))
		}
	}
	if l.State != "" {
		if _, err := os.Stat(filepath.Join(l.State, "cluster.json")); err == nil {
			out, err := run(time.Minute, sluiceBin, "cluster", "down", "--dir", l.State, "--purge")
			if err != nil {
				did = append(did, fmt.Sprintf("sluice cluster down %s: %v %s", l.State, err, strings.TrimSpace(out)))
			} else {
				did = append(did, "took down "+l.State)
			}
		}
	}
	for _, m := range l.Mounts {
		if clusterpkg.Mounted(m) {
			clusterpkg.AbortFuse(m)
			did = append(did, "detached "+m)
		}
	}
	return strings.Join(did, "; ")
}

// removeDirs removes l's directories, but none with a mount inside (a
// live mount's files are not a leftover's); it says what it did.
func removeDirs(l leftover) string {
	var did []string
	for _, d := range l.Dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if m := mountUnder(d); m != "" {
			did = append(did, fmt.Sprintf("kept %s: %s is mounted", d, m))
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			did = append(did, fmt.Sprintf("removing %s: %v", d, err))
		} else {
			did = append(did, "removed "+d)
		}
	}
	return strings.Join(did, "; ")
}

// mountUnder is a mount point at or under dir ("" if none).
func mountUnder(dir string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return dir // cannot tell: keep it
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return f[4]
		}
	}
	return ""
}

// reapLeftovers takes down what earlier test binaries recorded and left
// behind, once they are gone: everything first, then their directories.
func reapLeftovers() {
	dead := map[string]leftover{}
	for f, l := range readRecords() {
		if l.Owner > 0 && syscall.Kill(l.Owner, 0) != syscall.ESRCH {
			continue // another run, still going
		}
		dead[f] = l
		if did := takeDown(l); did != "" {
			fmt.Fprintf(os.Stderr, "e2e: left behind by test binary %d: %s\n", l.Owner, did)
		}
	}
	for f, l := range dead {
		if did := removeDirs(l); did != "" {
			fmt.Fprintf(os.Stderr, "e2e: left behind by test binary %d: %s\n", l.Owner, did)
		}
		os.Remove(f)
	}
}

// leftoversMargin is how long before go test's -timeout this binary takes
// its own clusters down: long enough for a few `sluice cluster down`s, short
// enough that a run which would have passed rarely ends inside it.
func leftoversMargin(timeout time.Duration) time.Duration {
	return min(20*time.Second, timeout/4)
}

// guardTimeout takes this binary's clusters down leftoversMargin before
// go test's -timeout panics (the panic runs no cleanup). Call it after
// flag.Parse, just before m.Run (go test's alarm starts there).
func guardTimeout() {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	timeout, err := time.ParseDuration(f.Value.String())
	if err != nil || timeout <= 0 {
		return
	}
	time.AfterFunc(timeout-leftoversMargin(timeout), func() {
		// no record is written from here on (one written a moment ago,
		// after the read below, is the next run's to take down)
		leftovers.mu.Lock()
		leftovers.closing = true
		leftovers.mu.Unlock()
		live := map[string]leftover{}
		for name, l := range readRecords() {
			if l.Owner == os.Getpid() {
				live[name] = l
			}
		}
		fmt.Fprintf(os.Stderr, "e2e: go test's -timeout %v is %v away: taking down %d recorded clusters and processes\n",
			timeout, leftoversMargin(timeout), len(live))
		// the directories stay (the binary, a test's files in use): the
		// next run removes them by the records kept for them
		for name, l := range live {
			if did := takeDown(l); did != "" {
				fmt.Fprintf(os.Stderr, "e2e: %s\n", did)
			}
			if len(l.Dirs) == 0 {
				os.Remove(name)
			}
		}
	})
}

// TestLeftoversReaped: what a killed test binary recorded is taken down by
// the next run: a real cluster and a process of a binary that is gone.
func TestLeftoversReaped(t *testing.T) {
	base := t.TempDir()
	state, mnt := filepath.Join(base, "state"), filepath.Join(base, "mnt")
	if out, err := exec.Command(sluiceBin, "cluster", "up", "--dir", state, "--mount", mnt, "--mem", "64M", "--ssd", "0", "--timeout", "10s").CombinedOutput(); err != nil {
		t.Fatalf("sluice cluster up: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(sluiceBin, "cluster", "down", "--dir", state, "--purge").Run() })
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	// the owner: a process that has exited (its pid is not reused within
	// the test, as pids count up)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// a directory to remove, and one with a live mount inside, to keep
	junk, busy := filepath.Join(base, "junk"), filepath.Join(base, "busy")
	os.MkdirAll(filepath.Join(junk, "a"), 0o755)
	os.MkdirAll(filepath.Join(busy, "m"), 0o755)
	if err := syscall.Mount("tmpfs", filepath.Join(busy, "m"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(filepath.Join(busy, "m"), syscall.MNT_DETACH) })
	os.WriteFile(filepath.Join(busy, "m", "f"), []byte("x"), 0o644)
	l := leftover{Owner: gone.Process.Pid, State: state, Mounts: []string{mnt}, Procs: []proc{procOf(sleeper.Process.Pid)}, Dirs: []string{junk, busy}}
	b, _ := json.Marshal(l)
	os.MkdirAll(leftoversDir, 0o755)
	name := filepath.Join(leftoversDir, "test-reaped.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// and one of a binary still running (this one), which must stay
	mine := filepath.Join(leftoversDir, "test-mine.json")
	b, _ = json.Marshal(leftover{Owner: os.Getpid(), State: filepath.Join(base, "none")})
	os.WriteFile(mine, b, 0o644)
	defer os.Remove(mine)

	meta := procOf((&cluster{t: t, dir: state}).pid("meta"))
	if !meta.alive() || !clusterpkg.Mounted(mnt) {
		t.Fatalf("the cluster is not up: metadata service %v, mounted %v", meta.alive(), clusterpkg.Mounted(mnt))
	}

	reapLeftovers()
	if clusterpkg.Mounted(mnt) {
		t.Errorf("%s is still mounted", mnt)
	}
	eventually(t, 10*time.Second, func() bool { return !meta.alive() }, "the end of the cluster's metadata service")
	sleeper.Wait()
	if sleeper.ProcessState == nil || sleeper.ProcessState.Success() {
		t.Errorf("the recorded process was not killed: %v", sleeper.ProcessState)
	}
	if _, err := os.Stat(junk); !os.IsNotExist(err) {
		t.Errorf("the recorded directory %s is still there: %v", junk, err)
	}
	if _, err := os.Stat(filepath.Join(busy, "m", "f")); err != nil {
		t.Errorf("a file on a mount inside a recorded directory was removed: %v", err)
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("the record %s is still there: %v", name, err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the record of a running binary was taken: %v", err)
	}
	// a process whose pid was reused is not killed
	if (proc{Pid: os.Getpid(), Start: "1"}).alive() || !procOf(os.Getpid()).alive() {
		t.Error("proc.alive does not tell a reused pid from its process")
	}
}
