package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// TestHosts runs sluice across hosts: `sluice cluster up --hosts` makes
// every role's host a network namespace of its own on a bridge, with an
// address of its own (three metadata hosts, each with an etcd member and
// a metadata daemon, one of them active, two of them with a monitor
// daemon keeping Beacon's records; a storage host with every data
// server; two forwarding hosts; two compute hosts, each with a mount),
// and every hop goes over TCP between them. On that cluster, in turn:
//
//   - failover: the active metadata daemon is killed -9 while both compute
//     hosts make files; a standby serves both mounts within 10 s, every
//     file whose write was acknowledged on either host reads back whole on
//     both, and a job recorded before is shown after;
//   - compute-cut-off: one compute host is cut off the network for 8 s
//     while both make files: the other goes on, unhindered; the one cut
//     off waits (or answers EIO), then carries on once reconnected, and
//     nothing acknowledged is lost;
//   - fwd-host-lost: a forwarding host is cut off, and later the other
//     one's daemon killed -9, each while fio writes and verifies a file on
//     both compute hosts: the mounts go on through the other forwarding
//     node and fio's checksums hold;
//   - fsx: the fsx model on the two compute hosts' mounts, with kill -9
//     and restart of any metadata daemon (the active one too), forwarding
//     daemon or the mem tier's data server as crash steps.
//
// pjdfstest runs on a compute host's mount of such a cluster in make's
// posix target (test/pjdfstest/run.sh with UP=--hosts…).
func TestHosts(t *testing.T) {
	requireEtcd(t)
	// a short time to reclaim (the quiet time after a takeover, in
	// which no data moves by policy): with the default 40 s, the data the
	// failovers' writers left moved all at once just as the cut-off
	// subtest measured compute-0, whose writes then waited 5 s
	c := startCluster(t, "--hosts", "--engine", "etcd", "--meta-standbys", "2", "--compute-hosts", "2", "--timeout", "30s",
		"--monitor-daemons", "2", "--meta-flags", "--reclaim-wait 12s")
	mounts := []string{c.mnt, c.mount2(t)}
	sub := func(name string, f func(t *testing.T, c *cluster)) {
		t.Run(name, func(t *testing.T) {
			cs := *c // Fatal from the subtest's own t
			cs.t = t
			f(t, &cs)
		})
	}
	sub("failover", func(t *testing.T, c *cluster) { hostsFailover(t, c, mounts) })
	sub("compute-cut-off", func(t *testing.T, c *cluster) { hostsComputeCut(t, c, mounts) })
	sub("fwd-host-lost", func(t *testing.T, c *cluster) { hostsFwdLost(t, c, mounts) })
	sub("fsx", func(t *testing.T, c *cluster) {
		seed := time.Now().UnixNano()
		if s := os.Getenv("SLUICE_SEED"); s != "" {
			fmt.Sscan(s, &seed)
		}
		t.Logf("seed %d (replay: SLUICE_SEED=%d go test -run TestHosts/fsx ./test/e2e)", seed, seed)
		fsxOn(t, c, mounts, fsxVariant{name: "hosts", steps: 600,
			victims: []string{"meta", "meta-1", "meta-2", "fwd-0", "fwd-1", "data-mem"}}, seed)
	})
}

// hostWriter makes files in dir on one mount until stopped, recording
// each acknowledged one and how long the longest write took.
type hostWriter struct {
	dir, prefix string
	mu          sync.Mutex // guards the fields below
	acked       map[string][]byte
	errs        []error
	worst       time.Duration
	writing     time.Time // when the write under way began (zero: none)
	stop, done  chan struct{}
}

func startWriter(dir, prefix string, from int) *hostWriter {
	w := &hostWriter{dir: dir, prefix: prefix, acked: map[string][]byte{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := from; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			name, data := fmt.Sprintf("%s%05d", prefix, i), pattern(i, 4096+i%5000)
			start := time.Now()
			w.mu.Lock()
			w.writing = start
			w.mu.Unlock()
			err := os.WriteFile(filepath.Join(dir, name), data, 0o644)
			took := time.Since(start)
			w.mu.Lock()
			w.writing = time.Time{}
			w.worst = max(w.worst, took)
			if err != nil {
				w.errs = append(w.errs, fmt.Errorf("%s: %v", name, err))
			} else {
				w.acked[name] = data
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return w
}

// mark returns the acknowledged count and the longest write so far (the
// one under way included, for as long as it has taken yet), and starts
// the longest write's count again.
func (w *hostWriter) mark() (int, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, worst := len(w.acked), w.worst
	if !w.writing.IsZero() {
		worst = max(worst, time.Since(w.writing))
	}
	w.worst = 0
	return n, worst
}

func (w *hostWriter) halt() {
	close(w.stop)
	<-w.done
}

// check reads every acknowledged file back through each of dirs (the
// same directory on every mount).
func (w *hostWriter) check(t *testing.T, c *cluster, when string, dirs ...string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range dirs {
		for name, data := range w.acked {
			p := filepath.Join(d, name)
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
				st, _ := c.sluice("file", "stat", p)
				// and what the data servers' directories hold of it
				// (a mem tier's chunks are in memory: not listed)
				if m := regexp.MustCompile(`inode:\s+(\d+)`).FindStringSubmatch(st); m != nil {
					filepath.Walk(c.dir, func(q string, _ os.FileInfo, err error) error {
						if err == nil && (strings.Contains(q, "/"+m[1]+"/") || strings.HasSuffix(q, "/"+m[1])) {
							b, _ := os.ReadFile(q)
							t.Logf("%s: %d bytes, %s", q, len(b), diffAt(b, data))
						}
						return nil
					})
				}
				t.Fatalf("%s: acknowledged %s reads back wrong: %d bytes (%v), want %d; %s\n%s", when, p, len(got), err, len(data), diffAt(got, data), st)
			}
		}
	}
}

// activeMeta names the metadata daemon that serves now.
func (c *cluster) activeMeta() string {
	c.t.Helper()
	out, err := c.sluice("cluster", "status")
	m := regexp.MustCompile(`metadata service: (\S+) active`).FindStringSubmatch(out)
	if err != nil || m == nil {
		c.t.Fatalf("cluster status: %v\n%s", err, out)
	}
	return c.listening(m[1])
}

// listening names the daemon listening on addr.
func (c *cluster) listening(addr string) string {
	c.t.Helper()
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, d := range cl.Daemons {
		for i, a := range d.Args {
			if a == "--listen" && i+1 < len(d.Args) && d.Args[i+1] == addr {
				return d.Name
			}
		}
	}
	c.t.Fatalf("no daemon listens on %s", addr)
	return ""
}

// answers waits until a statfs of mnt, which always asks the metadata
// service, succeeds, and returns how long that took.
func answers(t *testing.T, mnt string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err == nil {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: no answer within %v", mnt, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hostsFailover(t *testing.T, c *cluster, mounts []string) {
	for _, m := range mounts {
		if err := os.MkdirAll(filepath.Join(m, "fo"), 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	// a job's records, on the monitor daemons, outlive the active server
	writeAs(t, "4343", filepath.Join(mounts[0], "fo", "job"), pattern(9, 1<<20))
	eventually(t, 20*time.Second, func() bool {
		out, err := c.sluice("job", "show", "4343")
		return err == nil && strings.Contains(out, "wrote 1.0 MiB")
	}, "job 4343's records")
	ws := []*hostWriter{startWriter(filepath.Join(mounts[0], "fo"), "c0-", 0), startWriter(filepath.Join(mounts[1], "fo"), "c1-", 0)}
	time.Sleep(time.Second)
	active := c.activeMeta()
	c.kill9(active)
	for i, m := range mounts {
		took := answers(t, m, 60*time.Second)
		t.Logf("kill -9 of the active metadata daemon (%s): compute-%d's mount answered %v later", active, i, took.Round(time.Millisecond))
		if took > 10*time.Second {
			t.Errorf("compute-%d's mount answered %v after the kill, want within 10 s", i, took)
		}
	}
	time.Sleep(time.Second)
	for _, w := range ws {
		w.halt()
		if len(w.errs) > 0 {
			t.Errorf("writes failed during the failover: %v", w.errs)
		}
	}
	now := c.activeMeta()
	if now == active {
		t.Fatalf("%s, killed, still named active", active)
	}
	if out, err := c.sluice("job", "show", "4343"); err != nil || !strings.Contains(out, "wrote 1.0 MiB") {
		t.Fatalf("job 4343 after the takeover: %v\n%s", err, out)
	}
	for _, w := range ws {
		w.check(t, c, "after the failover", filepath.Join(mounts[0], "fo"), filepath.Join(mounts[1], "fo"))
	}
	c.restart(active) // it stands by again
	t.Logf("%d and %d files acknowledged on the two compute hosts; %s serves now", len(ws[0].acked), len(ws[1].acked), now)

	// fio writing and verifying on both compute hosts across a kill -9
	// of the active metadata daemon, then mdtest's phases across the loss
	// of its host: cut off, its etcd member with it; once reconnected, it
	// finds its term over and exits
	active = c.activeMeta()
	fioAlongside(t, mounts, "fio across a failover", func() { c.kill9(active) })
	if now := c.activeMeta(); now == active {
		t.Fatalf("%s, killed, still named active", active)
	}
	c.restart(active)
	active = c.activeMeta()
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := cl.HostOf(active)
	pid := c.pid(active)
	alongside(t, mounts, time.Second, "mdtest across the loss of the active metadata daemon's host", func(i int, mnt string) []string {
		return []string{mdtestBin(t), "-n", "600", "-bytes", "3000", "-phases", "create,stat,read,unlink,mkdir,rmdir",
			filepath.Join(mnt, fmt.Sprintf("md-%d", i))}
	}, func() {
		if out, err := c.sluice("cluster", "cut", h.Name); err != nil {
			t.Errorf("cut %s: %v %s", h.Name, err, out)
		}
	})
	if out, err := c.sluice("cluster", "reconnect", h.Name); err != nil {
		t.Fatalf("reconnect %s: %v %s", h.Name, err, out)
	}
	eventually(t, 20*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }, active+", reconnected after its term ended, to exit")
	if c.logCount(active, "term ended") == 0 {
		t.Fatalf("%s exited without saying its term ended", active)
	}
	// it stands by again once it has read every key (the mirror): the
	// reads slow the etcd members' commits for a second or two, which
	// the next subtest must not measure
	n := c.logCount(active, "standing by")
	c.restart(active)
	eventually(t, 30*time.Second, func() bool { return c.logCount(active, "standing by") > n }, active+" to stand by again")
}

var mdtestOnce struct {
	sync.Once
	bin string
	err error
}

// mdtestBin builds bench/mdtest once.
func mdtestBin(t *testing.T) string {
	mdtestOnce.Do(func() {
		mdtestOnce.bin = filepath.Join(filepath.Dir(sluiceBin), "mdtest")
		out, err := exec.Command("go", "build", "-o", mdtestOnce.bin, "../../bench/mdtest").CombinedOutput()
		if err != nil {
			mdtestOnce.err = fmt.Errorf("build bench/mdtest: %v\n%s", err, out)
		}
	})
	if mdtestOnce.err != nil {
		t.Fatal(mdtestOnce.err)
	}
	return mdtestOnce.bin
}

func hostsComputeCut(t *testing.T, c *cluster, mounts []string) {
	// the data the failovers' writers left moves by policy once the new
	// server's quiet time ends: compute-0 is measured after that, not
	// against it (at most 60 s; the tiering is settled when it logs no
	// move for 3 s)
	moves := func() int {
		return c.logCount("meta", "tiering: ") + c.logCount("meta-1", "tiering: ") + c.logCount("meta-2", "tiering: ")
	}
	for last, since, start := moves(), time.Now(), time.Now(); time.Since(since) < 3*time.Second && time.Since(start) < 60*time.Second; {
		time.Sleep(500 * time.Millisecond)
		if n := moves(); n != last {
			last, since = n, time.Now()
		}
	}
	dirs := []string{filepath.Join(mounts[0], "cut-a"), filepath.Join(mounts[1], "cut-b")}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a, b := startWriter(dirs[0], "a", 0), startWriter(dirs[1], "b", 0)
	defer func() {
		c.sluice("cluster", "reconnect", "compute-1") // (a failure on the way)
	}()
	// compute-0's slowest write over 8 s with both hosts connected is
	// the baseline: the cut must not make it much worse (on two cores,
	// writes of one host also wait for the CPU the others' daemons take)
	time.Sleep(time.Second)
	a.mark()
	time.Sleep(8 * time.Second)
	_, baseline := a.mark()
	if out, err := c.sluice("cluster", "cut", "compute-1"); err != nil {
		t.Fatalf("cut: %v %s", err, out)
	}
	na0, _ := a.mark()
	nb0, _ := b.mark()
	time.Sleep(8 * time.Second)
	na1, worstA := a.mark()
	nb1, _ := b.mark()
	t.Logf("compute-1 cut off for 8 s: compute-0 made %d files, the slowest in %v (%v over 8 s before the cut); compute-1 %d",
		na1-na0, worstA.Round(time.Millisecond), baseline.Round(time.Millisecond), nb1-nb0)
	if bar := max(3*time.Second, 2*baseline); na1-na0 < 50 || worstA > bar {
		t.Errorf("compute-0 made %d files while compute-1 was cut off, the slowest taking %v: want it unhindered (50 or more, none over %v: 3 s or twice the slowest before the cut)", na1-na0, worstA, bar)
	}
	if out, err := c.sluice("cluster", "reconnect", "compute-1"); err != nil {
		t.Fatalf("reconnect: %v %s", err, out)
	}
	start := time.Now()
	for {
		if n, _ := b.mark(); n >= nb1+20 {
			break
		}
		if time.Since(start) > 60*time.Second {
			b.mu.Lock()
			t.Fatalf("compute-1 made no progress within 60 s of its reconnection (errors: %v)", b.errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("compute-1 made 20 files again %v after its reconnection; its writes that failed meanwhile: %d", time.Since(start).Round(time.Millisecond), len(b.errs))
	for _, err := range b.errs {
		if !strings.Contains(err.Error(), "input/output error") && !strings.Contains(err.Error(), "timed out") {
			t.Errorf("a write of compute-1 cut off failed with neither EIO nor a timeout: %v", err)
		}
	}
	a.halt()
	b.halt()
	if len(a.errs) > 0 {
		t.Errorf("compute-0's writes failed while compute-1 was cut off: %v", a.errs)
	}
	a.check(t, c, "after compute-1's reconnection", dirs[0], filepath.Join(mounts[1], "cut-a"))
	b.check(t, c, "after compute-1's reconnection", dirs[1], filepath.Join(mounts[0], "cut-b"))
}

// alongside runs the command cmd gives for each mount on all of them at
// once, calls during after delay, and fails t if any of them fails.
func alongside(t *testing.T, mounts []string, delay time.Duration, what string, cmd func(i int, mnt string) []string, during func()) {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([]string, len(mounts))
	errs := make([]error, len(mounts))
	for i, mnt := range mounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := cmd(i, mnt)
			outs[i], errs[i] = run(3*time.Minute, args[0], args[1:]...)
		}()
	}
	start := time.Now()
	time.Sleep(delay)
	during()
	wg.Wait()
	for i := range mounts {
		if errs[i] != nil {
			t.Fatalf("%s: %s on compute-%d: %v\n%s", what, cmd(i, mounts[i])[0], i, errs[i], tail(outs[i], 20))
		}
	}
	t.Logf("%s: done on every compute host in %v (%s)", what, time.Since(start).Round(time.Millisecond), strings.TrimSpace(tail(outs[0], 1)))
}

// fioAlongside writes a file with fio on every mount and verifies its
// checksums, calling during 2 s in.
func fioAlongside(t *testing.T, mounts []string, what string, during func()) {
	t.Helper()
	alongside(t, mounts, 2*time.Second, what, func(i int, mnt string) []string {
		return []string{"fio", "--name=v", "--filename=" + filepath.Join(mnt, fmt.Sprintf("fio-%d", i)), "--rw=write", "--bs=1M", "--size=96M",
			"--rate=16M", "--verify=crc32c", "--iomem_align=4096", "--unlink=1"}
	}, during)
}

func hostsFwdLost(t *testing.T, c *cluster, mounts []string) {
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	// compute-0's home forwarding node: the first of the mount's list
	b, _ := os.ReadFile(filepath.Join(c.dir, "logs", "mount.log"))
	m := regexp.MustCompile(`home forwarding node chosen by fixed mapping.* addrs=([^, ]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the mount's log does not name its home forwarding node")
	}
	home := c.listening(string(m[1]))
	other := map[string]string{"fwd-0": "fwd-1", "fwd-1": "fwd-0"}[home]
	h, ok := cl.HostOf(home)
	if !ok {
		t.Fatalf("%s is on no emulated host", home)
	}
	fio := func(what string, during func()) { fioAlongside(t, mounts, what, during) }
	fio("a forwarding host cut off", func() {
		if out, err := c.sluice("cluster", "cut", h.Name); err != nil {
			t.Fatalf("cut %s: %v %s", h.Name, err, out)
		}
	})
	if out, err := c.sluice("cluster", "reconnect", h.Name); err != nil {
		t.Fatalf("reconnect %s: %v %s", h.Name, err, out)
	}
	eventually(t, 20*time.Second, func() bool {
		out, _ := c.sluice("cluster", "status")
		return strings.Count(out, " fwd ") == 2 && !regexp.MustCompile(`(?m) fwd .* DOWN$`).MatchString(out)
	}, h.Name+" back in the registry")
	fio("the other forwarding daemon killed -9", func() { c.kill9(other) })
	c.restart(other)
}

// diffAt says where got first differs from want, how long that lasts,
// and whether got is zeros from there on (a chunk lost, or never written).
func diffAt(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			j := i
			for j < min(len(got), len(want)) && got[j] != want[j] {
				j++
			}
			zeros := true
			for _, b := range got[i:] {
				if b != 0 {
					zeros = false
					break
				}
			}
			return fmt.Sprintf("first difference at %d (run to %d), the rest zeros: %v", i, j, zeros)
		}
	}
	return "same prefix"
}
