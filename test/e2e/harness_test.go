// Package e2e tests sluice as users run it: the real binary, every role a
// separate process on loopback, a real FUSE mount, real tools (fio). It needs
// root and /dev/fuse; set SLUICE_E2E_SKIP=1 to skip it where neither exists.
package e2e

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

var sluiceBin string

func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_E2E_SKIP") == "1" {
		fmt.Println("e2e: skipped by SLUICE_E2E_SKIP=1")
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: must run as root (FUSE mounts with allow_other); set SLUICE_E2E_SKIP=1 to skip")
		os.Exit(1)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: /dev/fuse missing; set SLUICE_E2E_SKIP=1 to skip")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-bin")
	if err != nil {
		panic(err)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	build := []string{"build", "-o", sluiceBin}
	if raceBuild {
		build = append(build, "-race")
	}
	out, err := exec.Command("go", append(build, "../../cmd/sluice")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	flag.Parse()
	reapLeftovers()
	binRecord, err := writeRecord(leftover{Dirs: []string{dir}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	guardTimeout()
	code := m.Run()
	os.RemoveAll(dir)
	forget(binRecord)
	os.Exit(code)
}

// raceBuild (SLUICE_E2E_RACE=1) builds the binary with the race detector;
// a cluster whose daemon logs report a data race fails its test.
var raceBuild = os.Getenv("SLUICE_E2E_RACE") == "1"

// cluster is a running local cluster.
type cluster struct {
	t      *testing.T
	dir    string
	mnt    string
	helper *shell
}

// startCluster runs `sluice cluster up` with extra flags and tears it down (and
// unmounts) when the test ends, pass or fail.
func startCluster(t *testing.T, flags ...string) *cluster {
	t.Helper()
	base := t.TempDir()
	c := &cluster{t: t, dir: filepath.Join(base, "state"), mnt: filepath.Join(base, "mnt"), helper: newShell(t)}
	// tied to this binary: a kill -9 of it leaves nothing mounted or running
	args := append([]string{"cluster", "up", "--dir", c.dir, "--mount", c.mnt, "--mem", "512M", "--ssd", "1G", "--timeout", "10s", "--exit-with", strconv.Itoa(os.Getpid())}, flags...)
	record(t, leftover{State: c.dir, Mounts: []string{c.mnt}, Dirs: []string{filepath.Dir(base)}})
	t.Cleanup(func() {
		out, err := exec.Command(sluiceBin, "cluster", "down", "--dir", c.dir, "--purge").CombinedOutput()
		if err != nil {
			t.Logf("down: %v %s", err, out)
			clusterpkg.AbortFuse(c.mnt)
		}
		if clusterpkg.Mounted(c.mnt) {
			clusterpkg.AbortFuse(c.mnt)
			syscall.Unmount(c.mnt, syscall.MNT_DETACH)
			t.Errorf("%s is still mounted after `sluice cluster down`", c.mnt)
		}
		if raceBuild {
			logs, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
			for _, l := range logs {
				if b, err := os.ReadFile(l); err == nil && bytes.Contains(b, []byte("DATA RACE")) {
					t.Errorf("data race reported in %s:\n%s", filepath.Base(l), tail(string(b), 60))
				}
			}
		}
		if t.Failed() {
			keep := filepath.Join(os.TempDir(), "sluice-e2e-logs", strings.ReplaceAll(t.Name(), "/", "_"))
			os.RemoveAll(keep)
			os.MkdirAll(keep, 0o755)
			exec.Command("cp", "-r", filepath.Join(c.dir, "logs"), keep).Run()
			t.Logf("daemon logs kept in %s", keep)
			for _, n := range []string{"meta", "fwd-0", "fwd-1", "data-mem", "mount"} {
				if b, err := os.ReadFile(filepath.Join(c.dir, "logs", n+".log")); err == nil {
					t.Logf("---- %s log (tail) ----\n%s", n, tail(string(b), 15))
				}
			}
		}
	})
	out, err := exec.Command(sluiceBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice cluster up: %v\n%s", err, out)
	}
	return c
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (c *cluster) path(p string) string { return filepath.Join(c.mnt, p) }

// mount2 mounts the cluster a second time (another client node) with
// extra flags, and unmounts it when the test ends.
func (c *cluster) mount2(t *testing.T, flags ...string) string {
	t.Helper()
	mnt, _ := c.mount2Proc(t, flags...)
	return mnt
}

// mount2Proc is mount2, also returning the mount's process.
func (c *cluster) mount2Proc(t *testing.T, flags ...string) (string, *os.Process) {
	t.Helper()
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	logf, err := os.Create(filepath.Join(c.dir, "logs", "mount2.log"))
	if err != nil {
		t.Fatal(err)
	}
	node, timeout := "node2", "10s"
	var host []string // on a cluster of emulated hosts: the second compute host
	if h, err := clusterpkg.HostByName(c.dir, "compute-1"); err == nil {
		node, timeout = h.Name, "30s"
		host = []string{"nsenter", "--net=/run/netns/" + h.Netns, "--"}
	}
	args := append([]string{"mount", "--meta", cl.MetaAddr, "--secret-file", cl.SecretFile(), "--timeout", timeout, "--node", node}, flags...)
	cmdline := slices.Concat(host, []string{sluiceBin}, args, []string{mnt})
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	record(t, leftover{Mounts: []string{mnt}, Procs: []proc{procOf(cmd.Process.Pid)}, Dirs: []string{filepath.Dir(mnt)}})
	t.Cleanup(func() {
		err := syscall.Unmount(mnt, 0)
		for i := 0; err != nil && clusterpkg.Mounted(mnt) && i < 20; i++ { // busy for a moment
			time.Sleep(100 * time.Millisecond)
			err = syscall.Unmount(mnt, 0)
		}
		if err != nil && clusterpkg.Mounted(mnt) {
			t.Logf("unmounting the second mount: %v; aborting its FUSE connection", err)
			clusterpkg.AbortFuse(mnt)
		}
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if clusterpkg.Mounted(mnt) {
			t.Errorf("%s is still mounted after the test", mnt)
		}
	})
	eventually(t, 10*time.Second, func() bool { return clusterpkg.Mounted(mnt) }, "the second mount")
	return mnt, cmd.Process
}

// sluice runs a sluice subcommand against this cluster.
func (c *cluster) sluice(args ...string) (string, error) {
	n := 1 // the command's path: a noun and its verb, or a role
	if len(args) > 1 && slices.Contains([]string{"cluster", "file", "tier", "job", "monitor", "profile", "qos", "pool", "bb", "sim"}, args[0]) {
		n = 2
	}
	full := slices.Concat(args[:n], []string{"--dir", c.dir}, args[n:])
	return run(2*time.Minute, sluiceBin, full...)
}

// run runs a command with a time limit, so a hang fails the test instead
// of stalling it.
func run(limit time.Duration, name string, args ...string) (string, error) {
	return runCmd(limit, exec.Command(name, args...))
}

func runCmd(limit time.Duration, cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(limit):
		cmd.Process.Kill()
		return out.String(), fmt.Errorf("%s: no exit within %v", cmd.Path, limit)
	}
}

func (c *cluster) pid(name string) int {
	b, err := os.ReadFile(filepath.Join(c.dir, "cluster.json"))
	if err != nil {
		c.t.Fatal(err)
	}
	// tiny parse: "Name": "x", ... "Pid": N
	s := string(b)
	i := strings.Index(s, `"Name": "`+name+`"`)
	if i < 0 {
		c.t.Fatalf("no daemon %s", name)
	}
	j := strings.Index(s[i:], `"Pid": `)
	var pid int
	fmt.Sscanf(s[i+j+len(`"Pid": `):], "%d", &pid)
	return pid
}

func (c *cluster) kill9(name string) {
	c.t.Helper()
	if err := syscall.Kill(c.pid(name), syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill %s: %v", name, err)
	}
}

// restart restarts a daemon through a helper shell started before the test
// opened any file on the mount: forking from the test process itself would
// make the kernel flush the test's open mount files in the child, which
// blocks while the daemon behind them is down.
func (c *cluster) restart(name string) {
	c.t.Helper()
	out, err := c.helper.run(fmt.Sprintf("%q restart --dir %q %q", sluiceBin, c.dir, name))
	if err != nil {
		c.t.Fatalf("restart %s: %v %s", name, err, out)
	}
}

// shell is a long-lived sh that runs commands for the test.
type shell struct {
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
}

func newShell(t *testing.T) *shell {
	cmd := exec.Command("sh")
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &shell{in: in, out: bufio.NewReader(outp), cmd: cmd}
}

func (s *shell) run(line string) (string, error) {
	fmt.Fprintf(s.in, "%s 2>&1; echo \"__sluice_done $?\"\n", line)
	var out strings.Builder
	for {
		l, err := s.out.ReadString('\n')
		if err != nil {
			return out.String(), err
		}
		if strings.HasPrefix(l, "__sluice_done ") {
			if code := strings.TrimSpace(strings.TrimPrefix(l, "__sluice_done ")); code != "0" {
				return out.String(), fmt.Errorf("exit status %s", code)
			}
			return out.String(), nil
		}
		out.WriteString(l)
	}
}

func mustWrite(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantErrno(t *testing.T, err error, want syscall.Errno, what string) {
	t.Helper()
	if !errorsIs(err, want) {
		t.Fatalf("%s: want %v, got %v", what, want, err)
	}
}

func errorsIs(err error, e syscall.Errno) bool {
	for err != nil {
		if en, ok := err.(syscall.Errno); ok {
			return en == e
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed*2654435761 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func eventually(t *testing.T, d time.Duration, f func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// within reports whether f holds within d (polled as eventually does).
func within(d time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
