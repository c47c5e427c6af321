package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// TestUpExitWith: a cluster tied to a process (`up --exit-with PID`) is
// taken down, mem tier purged, when that process is killed with SIGKILL
// (no trap of its can run), even with a file open on the mount, and with
// --exit-remove its state directory deleted; a plain `down` takes the
// watcher with it and leaves the state.
func TestUpExitWith(t *testing.T) {
	base := t.TempDir()
	up := func(name string, pid int, flags ...string) (state, mnt string, c *clusterpkg.Cluster) {
		state, mnt = filepath.Join(base, name, "state"), filepath.Join(base, name, "mnt")
		cmd := exec.Command(sluiceBin, append([]string{"cluster", "up", "--dir", state, "--mount", mnt, "--mem", "64M", "--ssd", "64M", "--timeout", "10s", "--exit-with", strconv.Itoa(pid)}, flags...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sluice cluster up: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command(sluiceBin, "cluster", "down", "--dir", state, "--purge").Run() })
		c, err := clusterpkg.Load(state)
		if err != nil {
			t.Fatal(err)
		}
		if c.Watcher == 0 || !procOf(c.Watcher).alive() {
			t.Fatalf("no watcher running (pid %d)", c.Watcher)
		}
		return state, mnt, c
	}
	sleeper := func() *exec.Cmd {
		s := exec.Command("sleep", "600")
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Process.Kill(); s.Wait() })
		return s
	}

	owner := sleeper()
	killedState, mnt, c := up("killed", owner.Process.Pid, "--exit-remove")
	var procs []proc
	memDir := ""
	for _, d := range c.Daemons {
		procs = append(procs, procOf(d.Pid))
		if len(d.Args) > 2 && d.Args[0] == "data" {
			for i, a := range d.Args {
				if a == "--tier" && d.Args[i+1] == "mem" {
					for j, b := range d.Args {
						if b == "--dir" {
							memDir = d.Args[j+1]
						}
					}
				}
			}
		}
	}
	procs = append(procs, procOf(c.Watcher))
	if memDir == "" {
		t.Fatalf("no mem data server in %+v", c.Daemons)
	}
	f, err := os.Create(filepath.Join(mnt, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(memDir); err != nil {
		t.Fatalf("the mem tier's directory: %v", err)
	}
	owner.Process.Kill()
	owner.Wait()
	eventually(t, 20*time.Second, func() bool {
		for _, p := range procs {
			if p.alive() {
				return false
			}
		}
		return !clusterpkg.Mounted(mnt)
	}, "the cluster down after its owner was killed")
	for _, d := range []string{memDir, killedState} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (--exit-remove): %v", d, err)
		}
	}

	// a plain down stops the watcher too; the owner lives on
	owner = sleeper()
	state, mnt, c := up("down", owner.Process.Pid)
	w := procOf(c.Watcher)
	if out, err := exec.Command(sluiceBin, "cluster", "down", "--dir", state, "--purge").CombinedOutput(); err != nil {
		t.Fatalf("sluice cluster down: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, func() bool { return !w.alive() }, "the watcher's end after down")
	if clusterpkg.Mounted(mnt) || !procOf(owner.Process.Pid).alive() {
		t.Errorf("after down: mounted %v, owner alive %v", clusterpkg.Mounted(mnt), procOf(owner.Process.Pid).alive())
	}
	if _, err := os.Stat(filepath.Join(state, "cluster.json")); err != nil {
		t.Errorf("down removed the state: %v", err)
	}

	// a pid that is not running is refused
	gone := exec.Command("true")
	gone.Run()
	state = filepath.Join(base, "none", "state")
	out, err := exec.Command(sluiceBin, "cluster", "up", "--dir", state, "--mount", filepath.Join(base, "none", "mnt"), "--mem", "64M", "--ssd", "0", "--exit-with", strconv.Itoa(gone.Process.Pid)).CombinedOutput()
	if err == nil {
		exec.Command(sluiceBin, "cluster", "down", "--dir", state, "--purge").Run()
		t.Fatalf("up --exit-with a process that has ended started a cluster:\n%s", out)
	}
}
