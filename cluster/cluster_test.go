package cluster

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// largeShmemFolios returns the kernel's count of large folios allocated
// for tmpfs files, over every size (each size's stats/shmem_alloc under
// /sys/kernel/mm/transparent_hugepage: a tmpfs with huge= takes folios of
// the size of the writes, up to 2 MiB).
func largeShmemFolios(t *testing.T) int64 {
	files, _ := filepath.Glob("/sys/kernel/mm/transparent_hugepage/hugepages-*/stats/shmem_alloc")
	if len(files) == 0 {
		t.Skip("the kernel counts no large folios for tmpfs")
	}
	var n int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// The mem tier's own tmpfs: mounted where the per-cluster directory is new,
// a chunk written into it held in large folios, never mounted over a tier
// already there, and unmounted and freed by the orphan sweep and by down
// --purge.
func TestMemFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mount := func(state string) string {
		mem := memDir(state, []byte("secret"))
		parent := filepath.Dir(mem)
		t.Cleanup(func() { removeMemDir(parent) })
		opts, err := mountMemFS(parent)
		if err != nil || opts == "" || !isMountPoint(parent) {
			t.Fatalf("mountMemFS(%s) = %q, %v; mounted %v", parent, opts, err, isMountPoint(parent))
		}
		if err := claimMemDir(mem, state); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(mem, "1"), 0o700); err != nil {
			t.Fatal(err)
		}
		return mem
	}

	// a 4 MiB chunk written 1 MiB at a time, as a data server writes one
	gone := filepath.Join(t.TempDir(), "removed-state")
	mem := mount(gone)
	before := largeShmemFolios(t)
	f, err := os.OpenFile(filepath.Join(mem, "1", "0"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < 4<<20; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if after := largeShmemFolios(t); after <= before {
		t.Errorf("a 4 MiB chunk on the tier's tmpfs took no large folio (large folios %d -> %d)", before, after)
	}
	// an up of the same cluster after a down without --purge finds it
	if opts, err := mountMemFS(filepath.Dir(mem)); err != nil || opts == "" {
		t.Errorf("second mountMemFS = %q, %v", opts, err)
	}
	if _, err := os.Stat(filepath.Join(mem, "1", "0")); err != nil {
		t.Errorf("the chunk is hidden: %v", err)
	}
	if swept := sweepOrphanMem(); !slices.Contains(swept, filepath.Dir(mem)) {
		t.Errorf("swept %v, not %s", swept, filepath.Dir(mem))
	}
	if _, err := os.Stat(filepath.Dir(mem)); !os.IsNotExist(err) {
		t.Errorf("orphan %s still there after the sweep (%v)", filepath.Dir(mem), err)
	}

	// a tier already in /dev/shm's own tmpfs is not mounted over
	plain := filepath.Dir(memDir(t.TempDir(), []byte("plain")))
	t.Cleanup(func() { os.RemoveAll(plain) })
	if err := os.MkdirAll(filepath.Join(plain, "mem"), 0o700); err != nil {
		t.Fatal(err)
	}
	if opts, err := mountMemFS(plain); opts != "" || err != nil || isMountPoint(plain) {
		t.Errorf("mountMemFS over a tier in use = %q, %v; mounted %v", opts, err, isMountPoint(plain))
	}

	// down --purge unmounts it
	state := t.TempDir()
	mem = mount(state)
	c := &Cluster{Dir: state, Mount: filepath.Join(state, "mnt"), Daemons: []Daemon{
		{Name: "data-mem", Args: []string{"data", "--tier", "mem", "--dir", mem}},
		{Name: "data-mem-1", Args: []string{"data", "--tier", "mem", "--dir", mem + "-1"}}}}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	if err := Down(state, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(mem)); !os.IsNotExist(err) {
		t.Errorf("%s still there after down --purge (%v; mounted %v)", filepath.Dir(mem), err, isMountPoint(filepath.Dir(mem)))
	}
}

// TestHosts: emulated hosts (as root) are namespaces on a bridge that the
// operator's namespace reaches; a daemon started on one runs there, on
// its address; a host cut off cannot be reached, and can again once
// reconnected; removeHosts leaves nothing behind.
func TestHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("emulated hosts need root")
	}
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := pickSubnet(0)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: state, Exe: "python3"}
	c.Net, c.Hosts = planHosts(n, 1, 1, 1)
	t.Cleanup(c.removeHosts)
	if err := c.makeHosts(); err != nil {
		t.Fatal(err)
	}
	h, err := c.host("fwd-0")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(h.Addr, strconv.Itoa(fwdPort))
	server := fmt.Sprintf(`import socket
s = socket.socket(); s.bind((%q, %d)); s.listen()
while True:
    c, _ = s.accept(); c.send(b"hi"); c.close()`, h.Addr, fwdPort)
	c.Daemons = []Daemon{{Name: "fwd-0", Host: "fwd-0", Args: []string{"-c", server}}}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	if err := c.start(&c.Daemons[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPid(c.Daemons[0].Pid) })
	greet := func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(time.Second))
		b := make([]byte, 2)
		if _, err := io.ReadFull(conn, b); err != nil || string(b) != "hi" {
			return fmt.Errorf("read %q: %v", b, err)
		}
		return nil
	}
	if err := waitListening(addr, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := greet(); err != nil {
		t.Fatalf("the daemon on fwd-0 (%s): %v", addr, err)
	}
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", fwdPort), time.Second); err == nil {
		t.Fatal("the daemon on fwd-0 answers on this host's loopback: it does not run in its host")
	}
	if err := SetLink(state, "fwd-0", false); err != nil {
		t.Fatal(err)
	}
	if err := greet(); err == nil {
		t.Fatal("fwd-0, cut off, still answers")
	}
	if err := SetLink(state, "fwd-0", true); err != nil {
		t.Fatal(err)
	}
	// the link comes up a moment after it is set up (the kernel's link
	// watch fires within a second): a reconnected host answers within
	// a few seconds, not at once
	err = greet()
	for end := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(end); err = greet() {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("fwd-0 reconnected, 10 s later: %v", err)
	}
	if err := SetLink(state, "nohost", false); err == nil || !strings.Contains(err.Error(), "have meta-0, storage, fwd-0, compute-0") {
		t.Fatalf("cut of an unknown host: %v", err)
	}
	stopPid(c.Daemons[0].Pid)
	c.removeHosts()
	for _, hh := range c.Hosts {
		if _, err := os.Stat("/run/netns/" + hh.Netns); err == nil {
			t.Errorf("%s left behind", hh.Netns)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + c.Net.Root); err == nil {
		t.Errorf("the operator's link %s left behind", c.Net.Root)
	}
}
