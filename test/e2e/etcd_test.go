package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
	"github.com/sluice-hpc/sluice/meta/engine/etcdserver"
)

// TestEtcdEngine: a local cluster whose metadata lives in a three-member
// etcd cluster (`sluice cluster up --engine etcd`, every member a process
// of its own). Files and directories made, renamed and removed read back
// right; a member killed -9 does not stop the namespace (two of three
// keep the quorum), and neither does its return; the metadata service
// killed -9 and restarted finds every file on etcd.
func TestEtcdEngine(t *testing.T) {
	requireEtcd(t)
	c := startCluster(t, "--engine", "etcd")
	want := map[string][]byte{}
	write := func(name string, data []byte) {
		t.Helper()
		mustWrite(t, c.path(name), data)
		want[name] = data
	}
	check := func(when string) {
		t.Helper()
		for name, data := range want {
			if got, err := os.ReadFile(c.path(name)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: %s reads back wrong (%d bytes, %v)", when, name, len(got), err)
			}
		}
		ents, err := os.ReadDir(c.path("small"))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		n := 0
		for name := range want {
			if strings.HasPrefix(name, "small/") {
				n++
			}
		}
		if len(ents) != n {
			t.Fatalf("%s: small/ lists %d entries, want %d", when, len(ents), n)
		}
	}
	if err := os.Mkdir(c.path("small"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		write(fmt.Sprintf("small/f%03d", i), pattern(i, 4096))
	}
	write("big", pattern(7, 16<<20))
	for i := 0; i < 300; i += 3 { // renames and removals
		old, nw := fmt.Sprintf("small/f%03d", i), fmt.Sprintf("small/r%03d", i)
		if err := os.Rename(c.path(old), c.path(nw)); err != nil {
			t.Fatal(err)
		}
		want[nw] = want[old]
		delete(want, old)
		if i%2 == 0 {
			if err := os.Remove(c.path(nw)); err != nil {
				t.Fatal(err)
			}
			delete(want, nw)
		}
	}
	check("before any failure")

	// the member dies while creates are in flight: the transactions on
	// its connection go to the others, and no acknowledged create is lost
	done := make(chan struct{})
	var mu sync.Mutex // guards want while the writer runs
	go func() {
		defer close(done)
		for i := 300; i < 400; i++ {
			name, data := fmt.Sprintf("small/f%03d", i), pattern(i, 4096)
			if err := os.WriteFile(c.path(name), data, 0o644); err != nil {
				t.Errorf("%s while a member dies: %v", name, err)
				return
			}
			mu.Lock()
			want[name] = data
			mu.Unlock()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	c.kill9("etcd0")
	<-done
	check("with one etcd member killed while creates ran")
	c.restart("etcd0")

	c.kill9("meta")
	c.restart("meta")
	check("after the metadata service's kill -9 and restart")
	write("after", pattern(9, 1<<20))
	check("written after the restart")
	if out, err := c.sluice("cluster", "status"); err != nil || !strings.Contains(out, "fwd") {
		t.Fatalf("status: %v\n%s", err, out)
	}
}

// TestMetaFailover: two metadata daemons share the etcd cluster
// (`sluice cluster up --engine etcd --meta-standbys 1`); meta is active,
// meta-1 stands by. meta is killed -9 while a writer makes files: meta-1
// takes over within 10 s (the mount's statfs, which always reaches the
// service, answers again), the mount finds it by itself, and every file
// whose create and write were acknowledged reads back whole. Then meta,
// restarted, stands by; meta-1 is stopped (SIGSTOP) past its lease: meta
// takes over, and meta-1, continued, commits nothing and stops serving
// (fenced) while the namespace goes on.
func TestMetaFailover(t *testing.T) {
	requireEtcd(t)
	// a request waits out a failover: its timeout is longer than the
	// lease (5 s) and the takeover
	c := startCluster(t, "--engine", "etcd", "--meta-standbys", "1", "--timeout", "30s", "--meta-flags", "--reclaim-wait 12s",
		"--monitor-daemons", "1")
	if err := os.Mkdir(c.path("fo"), 0o755); err != nil {
		t.Fatal(err)
	}
	// writers, one for each failover, and what they were acknowledged
	var ws []*hostWriter
	check := func(when string) {
		t.Helper()
		listed := 0
		for _, w := range ws {
			if len(w.errs) > 0 {
				t.Fatalf("%s: writes failed: %v", when, w.errs)
			}
			w.check(t, c, when, c.path("fo"))
			listed += len(w.acked)
		}
		if ents, err := os.ReadDir(c.path("fo")); err != nil || len(ents) != listed {
			t.Fatalf("%s: fo/ lists %d entries (%v), want %d", when, len(ents), err, listed)
		}
	}
	// takeover is how long from now until the mount's statfs, which every
	// time asks the metadata service, answers
	takeover := func() time.Duration {
		start := time.Now()
		for {
			var st syscall.Statfs_t
			if err := syscall.Statfs(c.mnt, &st); err == nil {
				return time.Since(start)
			}
			if time.Since(start) > 60*time.Second {
				t.Fatal("no metadata server answered within 60 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// a file open here and unlinked: the new server must not remove it
	// while it is open (the mount reclaims its handles)
	held := openUnlinked(t, c.path("held"), pattern(7, 1<<20))
	defer held.Close()
	// a record lock held here: the new server has it once the mount
	// reclaims it, and another process is refused it
	mustWrite(t, c.path("locked"), []byte("x"))
	lfd := openRW(t, c.path("locked"))
	if err := setlk(lfd, unix.F_SETLK, unix.F_WRLCK, 0, 10); err != nil {
		t.Fatal(err)
	}
	// a job's records, kept by the monitor daemon, outlive the server
	writeAs(t, "4242", c.path("job-file"), pattern(8, 1<<20))
	eventually(t, 20*time.Second, func() bool {
		out, err := c.sluice("job", "show", "4242")
		return err == nil && strings.Contains(out, "job 4242")
	}, "job 4242's records")
	ws = append(ws, startWriter(c.path("fo"), "f", 0))
	time.Sleep(500 * time.Millisecond)
	c.kill9("meta")
	// the statfs sent right after the kill: it may meet the dead server's
	// connection first, then waits for the standby
	took := takeover()
	t.Logf("kill -9 of the active metadata server: the standby answered %v later", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("takeover took %v, want at most 10 s", took)
	}
	time.Sleep(500 * time.Millisecond)
	ws[0].halt()
	check("after the active metadata server's kill -9")
	if c.logCount("meta-1", "active: this metadata server now serves") != 1 {
		t.Fatal("meta-1 does not say it became active")
	}
	// past the time to reclaim (12 s) and a pass of the garbage
	// collector, the open file is whole
	eventually(t, 30*time.Second, func() bool { return c.logCount("meta-1", "time to reclaim open handles is over") == 1 }, "meta-1's time for reclaims to end")
	time.Sleep(3 * time.Second)
	checkOpenUnlinked(t, held, pattern(7, 1<<20))
	try := "import fcntl,sys\nf=open(sys.argv[1],'r+')\ntry:\n  fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 1, 5); print('got')\nexcept BlockingIOError: print('busy')\n"
	if out, err := run(time.Minute, "/usr/bin/python3", "-c", try, c.path("locked")); strings.TrimSpace(out) != "busy" {
		t.Fatalf("a lock held across the takeover was granted to another process: %q %v", out, err)
	}
	if out, err := c.sluice("job", "show", "4242"); err != nil || !strings.Contains(out, "wrote 1.0 MiB") {
		t.Fatalf("job 4242 after the takeover: %v\n%s", err, out)
	}
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	addrs := strings.Split(cl.MetaAddr, ",")
	if out, err := c.sluice("cluster", "status"); err != nil || !strings.Contains(out, "metadata service: "+addrs[1]+" active; standing by: "+addrs[0]) {
		t.Fatalf("status after the takeover (%v), want meta-1 (%s) active:\n%s", err, addrs[1], out)
	}

	// meta comes back as the standby; meta-1 stalls past its lease
	c.restart("meta")
	ws = append(ws, startWriter(c.path("fo"), "f", 100000))
	time.Sleep(300 * time.Millisecond)
	stalled := c.pid("meta-1")
	was := c.logCount("meta", "active: this metadata server now serves") // its first term's line
	if err := syscall.Kill(stalled, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// (a call on the stopped server's connection waits out its timeout:
	// its kernel keeps the connection open)
	start := time.Now()
	for c.logCount("meta", "active: this metadata server now serves") == was {
		if time.Since(start) > 30*time.Second {
			t.Fatal("meta did not take over from the stopped meta-1 within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("SIGSTOP of the active metadata server: the standby took over %v later; the mount answered %v later",
		time.Since(start).Round(time.Millisecond), (time.Since(start) + takeover()).Round(time.Millisecond))
	if err := syscall.Kill(stalled, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(stalled, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("meta-1, continued after its term ended, still runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c.logCount("meta-1", "term ended") == 0 {
		t.Fatal("meta-1 stopped without saying its term ended")
	}
	time.Sleep(500 * time.Millisecond)
	ws[1].halt()
	check("after the active metadata server stalled past its lease")
	mustWrite(t, c.path("after"), pattern(3, 1<<20))
	if got, err := os.ReadFile(c.path("after")); err != nil || !bytes.Equal(got, pattern(3, 1<<20)) {
		t.Fatalf("a file written after both failovers: %d bytes, %v", len(got), err)
	}
}

// requireEtcd skips t without an etcd on PATH, or fails it if
// SLUICE_REQUIRE_ETCD=1 (make test).
func requireEtcd(t *testing.T) {
	t.Helper()
	if !etcdserver.Available("") {
		if os.Getenv("SLUICE_REQUIRE_ETCD") == "1" {
			t.Fatal("SLUICE_REQUIRE_ETCD=1 and no etcd on PATH (apt-get install etcd-server)")
		}
		t.Skip("no etcd on PATH (apt-get install etcd-server)")
	}
}

// openUnlinked makes file p with data, fsynced, and unlinks it; the
// returned handle stays open.
func openUnlinked(t *testing.T, p string, data []byte) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkOpenUnlinked opens f's file again through /proc (an open the
// metadata service answers: the inode must still exist) and reads it
// with direct I/O (from the data servers, not the page cache).
func checkOpenUnlinked(t *testing.T, f *os.File, data []byte) {
	t.Helper()
	g, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("the file open and unlinked is gone: %v", err)
	}
	defer g.Close()
	buf := alignedBuf(len(data))
	n, err := io.ReadFull(g, buf)
	if err != nil || !bytes.Equal(buf[:n], data) {
		t.Fatalf("the file open and unlinked reads back %d bytes (%v), not what was written", n, err)
	}
}

// alignedBuf is n bytes aligned to 4 KiB, as direct I/O wants.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&b[0]))&4095)
	return b[off%4096:][:n]
}
