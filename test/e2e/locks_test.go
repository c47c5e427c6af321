package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// setlk takes (or with wait, waits for) a record lock through fd; cmd is
// unix.F_SETLK, F_SETLKW, F_OFD_SETLK or F_OFD_SETLKW.
func setlk(fd int, cmd int, typ int16, start, n int64) error {
	return unix.FcntlFlock(uintptr(fd), cmd, &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n})
}

func openRW(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestLocksAcrossNodes: POSIX record locks, OFD locks and flock taken
// through one mount conflict with those of another node's mount; F_GETLK
// names the other node's lock; a blocked waiter is woken the moment the
// lock is released on the other node; a wait interrupted by a signal
// leaves nothing held; two nodes waiting on each other get EDEADLK; and
// a dead mount's locks are released when its lease runs out.
func TestLocksAcrossNodes(t *testing.T) {
	c := startCluster(t)
	b, bproc := c.mount2Proc(t)
	pa := filepath.Join(c.mnt, "locked")
	mustWrite(t, pa, pattern(1, 4096))
	pb := filepath.Join(b, "locked")
	fa, fb := openRW(t, pa), openRW(t, pb)

	// record locks
	if err := setlk(fa, unix.F_SETLK, unix.F_WRLCK, 0, 100); err != nil {
		t.Fatalf("F_SETLK: %v", err)
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Start: 50, Len: 10}
	if err := unix.FcntlFlock(uintptr(fb), unix.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if lk.Type != unix.F_WRLCK || lk.Start != 0 || lk.Len != 100 || lk.Pid != 0 {
		t.Fatalf("F_GETLK on the other node: %+v, want the write lock 0+100 of a remote holder (pid 0)", lk)
	}
	if err := setlk(fb, unix.F_SETLK, unix.F_WRLCK, 50, 10); err != unix.EAGAIN && err != unix.EACCES {
		t.Fatalf("a conflicting F_SETLK on the other node: %v, want EAGAIN", err)
	}
	if err := setlk(fb, unix.F_SETLK, unix.F_RDLCK, 200, 100); err != nil {
		t.Fatalf("a lock beside it: %v", err)
	}

	// flock: held through a, tried through b by another process
	tryFlock := "import fcntl,sys\nf=open(sys.argv[1])\ntry:\n  fcntl.flock(f, fcntl.LOCK_EX|fcntl.LOCK_NB); print('got')\nexcept BlockingIOError: print('busy')\n"
	fl := openRW(t, pa)
	if err := unix.Flock(fl, unix.LOCK_EX); err != nil {
		t.Fatalf("flock: %v", err)
	}
	if out, _ := run(time.Minute, "/usr/bin/python3", "-c", tryFlock, pb); strings.TrimSpace(out) != "busy" {
		t.Fatalf("flock on the other node while held: %q", out)
	}
	unix.Close(fl) // its release gives the flock lock up
	if !within(5*time.Second, func() bool {
		out, _ := run(time.Minute, "/usr/bin/python3", "-c", tryFlock, pb)
		return strings.TrimSpace(out) == "got"
	}) {
		t.Fatal("flock on the other node after the holder closed its file: still busy")
	}

	// OFD locks go with their open file
	ofd := openRW(t, pa)
	if err := setlk(ofd, unix.F_OFD_SETLK, unix.F_WRLCK, 1000, 10); err != nil {
		t.Fatalf("F_OFD_SETLK: %v", err)
	}
	ofdB := openRW(t, pb)
	if err := setlk(ofdB, unix.F_OFD_SETLK, unix.F_WRLCK, 1005, 1); err != unix.EAGAIN && err != unix.EACCES {
		t.Fatalf("a conflicting OFD lock on the other node: %v", err)
	}
	unix.Close(ofd)
	if !within(5*time.Second, func() bool { return setlk(ofdB, unix.F_OFD_SETLK, unix.F_WRLCK, 1005, 1) == nil }) {
		t.Fatal("an OFD lock outlived its open file")
	}

	// a blocked waiter on b is woken the moment a releases
	var lat []time.Duration
	for range 5 {
		if err := setlk(fa, unix.F_SETLK, unix.F_WRLCK, 3000, 1); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			if err := setlk(fb, unix.F_SETLKW, unix.F_WRLCK, 3000, 1); err != nil {
				t.Errorf("F_SETLKW: %v", err)
			}
			got <- time.Now()
		}()
		time.Sleep(100 * time.Millisecond)
		at := time.Now()
		if err := setlk(fa, unix.F_SETLK, unix.F_UNLCK, 3000, 1); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(at))
		if err := setlk(fb, unix.F_SETLK, unix.F_UNLCK, 3000, 1); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(lat)
	t.Logf("waiters on the other node woken after %v", lat)
	if lat[2] > 10*time.Millisecond {
		t.Errorf("median wake-up %v across nodes, over 10 ms", lat[2])
	}

	// a wait interrupted by a signal holds nothing
	if err := setlk(fa, unix.F_SETLK, unix.F_WRLCK, 4000, 1); err != nil {
		t.Fatal(err)
	}
	waiter := exec.Command("/usr/bin/python3", "-c", `import fcntl,os,signal,sys,time
def alarm(*a): raise TimeoutError()
signal.signal(signal.SIGALRM, alarm)
f = open(sys.argv[1], 'r+')
signal.alarm(1)
try:
    fcntl.lockf(f, fcntl.LOCK_EX, 1, 4000)
    print('granted', flush=True)
except TimeoutError:
    print('interrupted', flush=True)
time.sleep(4)
`, pb)
	out, err := waiter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	defer waiter.Wait()
	line := make([]byte, 64)
	n, _ := out.Read(line)
	if strings.TrimSpace(string(line[:n])) != "interrupted" {
		t.Fatalf("the interrupted waiter: %q", line[:n])
	}
	if err := setlk(fa, unix.F_SETLK, unix.F_UNLCK, 4000, 1); err != nil {
		t.Fatal(err)
	}
	if err := setlk(fb, unix.F_SETLK, unix.F_WRLCK, 4000, 1); err != nil {
		t.Fatalf("after an interrupted wait on b, b's test process cannot lock: %v (the interrupted wait holds it)", err)
	}
	setlk(fb, unix.F_SETLK, unix.F_UNLCK, 4000, 1)

	// two nodes waiting on each other
	if err := setlk(fa, unix.F_SETLK, unix.F_WRLCK, 5000, 1); err != nil {
		t.Fatal(err)
	}
	if err := setlk(fb, unix.F_SETLK, unix.F_WRLCK, 5001, 1); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- setlk(fa, unix.F_SETLKW, unix.F_WRLCK, 5001, 1) }()
	time.Sleep(200 * time.Millisecond)
	if err := setlk(fb, unix.F_SETLKW, unix.F_WRLCK, 5000, 1); err != unix.EDEADLK {
		t.Fatalf("the second of two nodes waiting on each other: %v, want EDEADLK", err)
	}
	setlk(fb, unix.F_SETLK, unix.F_UNLCK, 5001, 1)
	if err := <-first; err != nil {
		t.Fatalf("the first waiter, once the other gave up: %v", err)
	}

	// a dead mount's locks go with its lease
	if err := setlk(fb, unix.F_SETLK, unix.F_WRLCK, 6000, 1); err != nil {
		t.Fatal(err)
	}
	if err := bproc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := setlk(fa, unix.F_SETLKW, unix.F_WRLCK, 6000, 1); err != nil {
		t.Fatalf("waiting for the dead mount's lock: %v", err)
	}
	t.Logf("the dead mount's lock was released after %v", time.Since(start))
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("the dead mount's lock held for %v (lease 15 s)", d)
	}
	os.Remove(pa)
}
