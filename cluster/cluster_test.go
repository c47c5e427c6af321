package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A mem tier left in /dev/shm by a cluster whose state directory is gone
// is freed by the next sweep; one whose cluster's state is still there
// stays.
func TestSweepOrphanMem(t *testing.T) {
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm")
	}
	live := t.TempDir()
	gone := filepath.Join(t.TempDir(), "removed-state")
	liveMem := memDir(live, []byte("s1"))
	goneMem := memDir(gone, []byte("s2"))
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(liveMem)); os.RemoveAll(filepath.Dir(goneMem)) })
	for _, c := range []struct{ mem, state string }{{liveMem, live}, {goneMem, gone}} {
		if err := claimMemDir(c.mem, c.state); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(c.mem, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.mem, "chunk"), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	swept := sweepOrphanMem()
	if !slices.Contains(swept, filepath.Dir(goneMem)) {
		t.Errorf("swept %v, not %s", swept, filepath.Dir(goneMem))
	}
	if _, err := os.Stat(goneMem); !os.IsNotExist(err) {
		t.Errorf("orphan %s still there (%v)", goneMem, err)
	}
	if _, err := os.Stat(filepath.Join(liveMem, "chunk")); err != nil {
		t.Errorf("live cluster's mem tier swept: %v", err)
	}
}

// Down with purge frees the mem tier's directory however the data
// server's arguments are laid out (with --pprof-base, --pprof comes
// first: the purge once looked for the tier by position and left the
// tmpfs directory behind).
func TestDownPurgesMem(t *testing.T) {
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm")
	}
	for _, pprof := range []bool{false, true} {
		state := t.TempDir()
		mem := memDir(state, []byte("secret"))
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(mem)) })
		if err := claimMemDir(mem, state); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(mem, "1"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mem, "1", "0"), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"data", "--tier", "mem", "--listen", "127.0.0.1:1", "--dir", mem}
		if pprof {
			args = append([]string{"data", "--pprof", "127.0.0.1:2"}, args[1:]...)
		}
		c := &Cluster{Dir: state, Mount: filepath.Join(state, "mnt"), Daemons: []Daemon{{Name: "data-mem", Args: args}}}
		if err := c.save(); err != nil {
			t.Fatal(err)
		}
		if err := Down(state, true); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Dir(mem)); !os.IsNotExist(err) {
			t.Errorf("pprof %v: %s still there after down --purge (%v)", pprof, filepath.Dir(mem), err)
		}
	}
}

// A daemon's Env (GOMAXPROCS from --procs) is in the environment it
// starts with, and survives cluster.json for a restart.
func TestDaemonEnv(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(state, "env")
	c := &Cluster{Dir: state, Exe: "/bin/sh", Daemons: []Daemon{{Name: "data-mem",
		Args: []string{"-c", `echo "$GOMAXPROCS" > ` + out}, Env: []string{"GOMAXPROCS=1"}}}}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	c, err := Load(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.start(&c.Daemons[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if strings.TrimSpace(string(b)) == "1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's GOMAXPROCS: %q, want 1", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
