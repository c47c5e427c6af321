package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// chunkTiers returns the tier of each chunk `sluice file stat` lists for p.
func (c *cluster) chunkTiers(t *testing.T, p string) []string {
	t.Helper()
	out, err := c.sluice("file", "stat", p)
	if err != nil {
		t.Fatalf("stat %s: %v %s", p, err, out)
	}
	var tiers []string
	for _, m := range regexp.MustCompile(`chunk \d+\s+tier (\S+)`).FindAllStringSubmatch(out, -1) {
		tiers = append(tiers, m[1])
	}
	return tiers
}

// TestTieringNormalOut: a mem tier filled past Cn-m (but not Cf-m) moves
// closed files down to the ssd tier by itself, coolest (longest closed)
// first, until free space is back above Cn-m; every file reads back
// intact wherever it is, and `sluice cluster status` shows the decision.
func TestTieringNormalOut(t *testing.T) {
	c := startCluster(t, "--mem", "64M", "--meta-flags", "--tier-free 4M,12M,24M")
	const n, size = 12, 4 << 20
	want := make([][]byte, n)
	r := rand.New(rand.NewSource(1))
	for i := range want {
		want[i] = make([]byte, size)
		r.Read(want[i])
		// open for about the same time each (T_oc), closed 150 ms apart
		// (T_closed): f00 is the coolest, f11 the warmest
		f, err := os.Create(c.path(fmt.Sprintf("f%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(want[i]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	// 48 MiB of 64 MiB used: free 16 MiB is below Cn-m (24 MiB), above Cf-m
	var onSSD []int
	eventually(t, 30*time.Second, func() bool {
		onSSD = onSSD[:0]
		for i := 0; i < n; i++ {
			if ts := c.chunkTiers(t, c.path(fmt.Sprintf("f%02d", i))); len(ts) == 1 && ts[0] == "ssd" {
				onSSD = append(onSSD, i)
			}
		}
		// free must rise above 24 MiB: at least 2 of the 4 MiB files
		return len(onSSD) >= 2
	}, "closed files moving down to ssd")
	time.Sleep(3 * time.Second) // let the policy settle
	onSSD = onSSD[:0]
	for i := 0; i < n; i++ {
		if ts := c.chunkTiers(t, c.path(fmt.Sprintf("f%02d", i))); len(ts) == 1 && ts[0] == "ssd" {
			onSSD = append(onSSD, i)
		}
	}
	// coolest first: the moved files are among the longest closed (the
	// score also weighs how long each was open, so not strictly by age)
	for _, i := range onSSD {
		if i >= n/2 {
			t.Fatalf("files moved %v: want the longest-closed ones (f00, f01, ...) first", onSSD)
		}
	}
	if len(onSSD) == n {
		t.Fatalf("every file moved: the policy should stop once free space is above Cn-m")
	}
	for i := range want {
		got, err := os.ReadFile(c.path(fmt.Sprintf("f%02d", i)))
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("f%02d reads back wrong after tiering (err %v)", i, err)
		}
	}
	out, err := c.sluice("cluster", "status")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`TIERING\s+\d+ files, \d+ chunks`).MatchString(out) || !strings.Contains(out, "calm") {
		t.Fatalf("status shows no tiering decisions:\n%s", out)
	}
	t.Logf("moved down: %v\n%s", onSSD, out[strings.Index(out, "TIERING"):])
}

// TestMigrateWhileWriting: `sluice file migrate` moves a file between the mem
// and ssd tiers again and again while a process keeps writing it through
// the mount and fsyncing; every acknowledged write is in the file at the
// end, on the tier of the last move.
func TestMigrateWhileWriting(t *testing.T) {
	c := startCluster(t, "--meta-flags", "--tiering manual")
	p := c.path("busy")
	const size = 12 << 20 // 3 chunks
	model := make([]byte, size)
	r := rand.New(rand.NewSource(2))
	r.Read(model)
	mustWrite(t, p, model)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex // guards model
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			off := r.Intn(size - 1)
			b := make([]byte, 1+r.Intn(min(size-off, 256<<10)))
			r.Read(b)
			if _, err := f.WriteAt(b, int64(off)); err != nil {
				werr = err
				return
			}
			if i%8 == 0 {
				if err := f.Sync(); err != nil {
					werr = err
					return
				}
			}
			mu.Lock()
			copy(model[off:], b)
			mu.Unlock()
		}
	}()
	tiers := []string{"ssd", "mem", "ssd", "mem", "ssd"}
	for _, tier := range tiers {
		out, err := c.sluice("file", "migrate", "--tier", tier, p)
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("migrate to %s: %v %s", tier, err, out)
		}
		t.Logf("%s", strings.TrimSpace(out))
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("a write during the migrations failed: %v", werr)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		i := 0
		for i < len(got) && got[i] == model[i] {
			i++
		}
		t.Fatalf("file differs from what was written from byte %d (chunk %d)", i, i>>22)
	}
	for _, tier := range c.chunkTiers(t, p) {
		if tier != "ssd" {
			t.Fatalf("chunks on %v after the last move to ssd", c.chunkTiers(t, p))
		}
	}
}

// TestTieringWritesWait: a job writes three times the mem tier's budget,
// file after file, while migration to the ssd tier is slow (20 MB/s).
// Writes that need a new chunk while the mem tier is at Cs-w and files are
// moving off it wait for the space instead of failing or spilling: every
// file lands on mem first (each is either still there or was migrated
// from there, never placed on ssd); the wait shows in Beacon as the job's
// queue time; every file reads back.
func TestTieringWritesWait(t *testing.T) {
	c := startCluster(t, "--mem", "32M", "--ssd-max-mbps", "20", "--meta-flags", "--tier-free 4M,8M,16M")
	const n, size = 24, 4 << 20
	src := t.TempDir()
	for i := 0; i < n; i++ {
		if err := os.WriteFile(fmt.Sprintf("%s/f%02d", src, i), pattern(100+i, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-c", `for f in "$1"/*; do cp "$f" "$2"/ || exit 1; done`, "sh", src, c.mnt)
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=stall-job")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a write failed while the mem tier was full: %v\n%s", err, out)
	}
	took := time.Since(start)
	for i := 0; i < n; i++ {
		p := c.path(fmt.Sprintf("f%02d", i))
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, pattern(100+i, size)) {
			t.Fatalf("f%02d reads back wrong (err %v)", i, err)
		}
	}
	rep := c.job(t, "stall-job")
	if rep.Queued <= 0 {
		t.Fatalf("Beacon shows no queue time for the job: its writes never waited (%+v)", rep.JobReport)
	}
	// let the moves in flight end, then count: files migrated off mem plus
	// files still on mem must be all of them (a spilled file is neither)
	time.Sleep(2 * time.Second)
	out, err := c.sluice("cluster", "status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`TIERING\s+(\d+) files`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no tiering totals in status:\n%s", out)
	}
	onMem := 0
	var off []string // where the files off mem are (a spilled one among them)
	for i := 0; i < n; i++ {
		if ts := c.chunkTiers(t, c.path(fmt.Sprintf("f%02d", i))); len(ts) == 1 && ts[0] == "mem" {
			onMem++
		} else {
			off = append(off, fmt.Sprintf("f%02d:%v", i, ts))
		}
	}
	if moved, _ := strconv.Atoi(m[1]); moved+onMem != n {
		t.Fatalf("%d files migrated off mem and %d still there, of %d: the rest spilled to ssd instead of waiting (off mem: %v)\n%s", moved, onMem, n, off, out)
	}
	t.Logf("wrote %d MiB in %v; queued %v in all; %d files on mem at the end\n%s", n*size>>20, took, rep.Queued, onMem, out[strings.Index(out, "TIERING"):])
}

// TestMemoryBorrowing: a mem-tier server lends most of its budget to its
// node (`sluice tier budget`): its files move off until what it holds fits,
// they all read back, the smaller budget survives a restart of the server,
// and --release gives the budget back.
func TestMemoryBorrowing(t *testing.T) {
	c := startCluster(t, "--mem", "64M")
	const n, size = 10, 4 << 20
	for i := 0; i < n; i++ {
		mustWrite(t, c.path(fmt.Sprintf("b%02d", i)), pattern(300+i, size))
	}
	mem := c.serverID(t, "mem")
	capOf := func() (string, string) {
		out, err := c.sluice("cluster", "status")
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^` + mem + `\s+data\s+mem\s+\S+\s+\S+\s+(\S+ \S+)\s+(\S+ \S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no mem server %s in\n%s", mem, out)
		}
		return m[1], m[2]
	}
	out, err := c.sluice("tier", "budget", "--server", mem, "--wait", "60s", "8M")
	if err != nil {
		t.Fatalf("lending the budget: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(out))
	if capacity, _ := capOf(); capacity != "8.0 MiB" {
		t.Fatalf("mem server capacity %s after lending, want 8.0 MiB", capacity)
	}
	onMem := 0
	for i := 0; i < n; i++ {
		p := c.path(fmt.Sprintf("b%02d", i))
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, pattern(300+i, size)) {
			t.Fatalf("b%02d reads back wrong after lending (err %v)", i, err)
		}
		if ts := c.chunkTiers(t, p); len(ts) == 1 && ts[0] == "mem" {
			onMem++
		}
	}
	if onMem > 2 {
		t.Fatalf("%d files of 4 MiB still on an 8 MiB mem server", onMem)
	}
	// the lent budget outlives a restart of the server
	c.kill9("data-mem")
	c.restart("data-mem")
	eventually(t, 10*time.Second, func() bool { capacity, _ := capOf(); return capacity == "8.0 MiB" }, "the lent budget after a restart")
	if out, err := c.sluice("tier", "budget", "--server", mem, "--release"); err != nil {
		t.Fatalf("release: %v\n%s", err, out)
	}
	eventually(t, 10*time.Second, func() bool { capacity, _ := capOf(); return capacity == "64.0 MiB" }, "the budget back")
}

// TestPrefetch: a job's 16 input files (4 MiB each) sit on a slow hdd tier;
// `sluice file prefetch` hands their reading order to the tiering manager, which
// promotes them to the mem tier ahead of the reads within the mem tier's
// room above Cf-m (48 MiB here: not all 64 MiB at once), sliding on as the
// job reads. Every file is on mem before the job opens it, reads back
// intact, and status shows the prefetch done.
func TestPrefetch(t *testing.T) {
	c := startCluster(t, "--mem", "64M", "--hdd", "256M", "--hdd-max-mbps", "40", "--meta-flags", "--tier-free 4M,16M,24M")
	const n, size = 16, 4 << 20
	var paths []string
	for i := 0; i < n; i++ {
		p := c.path(fmt.Sprintf("in%02d", i))
		mustWrite(t, p, pattern(700+i, size))
		paths = append(paths, p)
	}
	if out, err := c.sluice(append([]string{"file", "migrate", "--tier", "hdd"}, paths...)...); err != nil {
		t.Fatalf("staging the inputs on hdd: %v %s", err, out)
	}
	if out, err := c.sluice(append([]string{"file", "prefetch", "--job", "pj"}, paths...)...); err != nil {
		t.Fatalf("prefetch: %v %s", err, out)
	}
	maxOnMem := 0
	for i, p := range paths {
		eventually(t, 20*time.Second, func() bool {
			ts := c.chunkTiers(t, p)
			return len(ts) == 1 && ts[0] == "mem"
		}, fmt.Sprintf("in%02d to be promoted before the job reads it", i))
		onMem := 0
		for _, q := range paths[i:] {
			if ts := c.chunkTiers(t, q); len(ts) == 1 && ts[0] == "mem" {
				onMem++
			}
		}
		maxOnMem = max(maxOnMem, onMem)
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, pattern(700+i, size)) {
			t.Fatalf("in%02d reads back wrong (err %v)", i, err)
		}
	}
	if maxOnMem > 13 {
		t.Fatalf("up to %d unread 4 MiB files on mem at once: the window should keep within the 48 MiB above Cf-m", maxOnMem)
	}
	eventually(t, 10*time.Second, func() bool {
		out, _ := c.sluice("cluster", "status")
		return regexp.MustCompile(`pj\s+16\s+16\s+16\s+0\s+0\s+0\s+64\.0 MiB\s+done`).MatchString(out)
	}, "status to show the prefetch done (16 files promoted and read)")
	t.Logf("at most %d unread files on mem at once", maxOnMem)
}

// TestPrefetchHistory: a periodic job's first run reads six input files
// from the hdd tier; Beacon's profile of its application records them as
// its inputs; when the next run is registered (`sluice job start --app`),
// its inputs are promoted to mem before it reads anything.
func TestPrefetchHistory(t *testing.T) {
	c := startCluster(t, "--mem", "64M", "--hdd", "256M", "--hdd-max-mbps", "40", "--meta-flags", "--tier-free 4M,16M,24M")
	var paths []string
	for i := 0; i < 6; i++ {
		p := c.path(fmt.Sprintf("input%d", i))
		mustWrite(t, p, pattern(900+i, 4<<20))
		paths = append(paths, p)
	}
	if out, err := c.sluice(append([]string{"file", "migrate", "--tier", "hdd"}, paths...)...); err != nil {
		t.Fatalf("staging the inputs on hdd: %v %s", err, out)
	}
	run := exec.Command("sh", append([]string{"-c", `cat "$@" > /dev/null`, "sh"}, paths...)...)
	run.Env = append(os.Environ(), "SLURM_JOB_ID=hist-1", "SLUICE_APP=periodic")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("first run: %v %s", err, out)
	}
	var prof string
	eventually(t, 30*time.Second, func() bool {
		prof, _ = c.sluice("profile", "build", "hist-1")
		return strings.Contains(prof, "inputs: 6 files")
	}, "the application's profile to record the six inputs")
	for _, p := range paths {
		if ts := c.chunkTiers(t, p); len(ts) != 1 || ts[0] != "hdd" {
			t.Fatalf("%s on %v after the first run: reading alone must not promote", p, ts)
		}
	}
	if out, err := c.sluice("job", "start", "--app", "periodic", "--nodes", "cn1", "hist-2"); err != nil {
		t.Fatalf("job start: %v %s", err, out)
	}
	eventually(t, 20*time.Second, func() bool {
		for _, p := range paths {
			if ts := c.chunkTiers(t, p); len(ts) != 1 || ts[0] != "mem" {
				return false
			}
		}
		return true
	}, "the second run's inputs to be promoted when it starts")
	out, _ := c.sluice("cluster", "status")
	if !regexp.MustCompile(`hist-2\s+6\s+6`).MatchString(out) {
		t.Fatalf("status shows no prefetch for hist-2:\n%s", out)
	}
	// the second run reads: every byte from mem, where the first run's
	// came from hdd; sluice job says so, and what was prefetched
	run2 := exec.Command("sh", append([]string{"-c", `cat "$@" > /dev/null`, "sh"}, paths...)...)
	run2.Env = append(os.Environ(), "SLURM_JOB_ID=hist-2", "SLUICE_APP=periodic")
	if out, err := run2.CombinedOutput(); err != nil {
		t.Fatalf("second run: %v %s", err, out)
	}
	const total = 6 * 4 << 20
	if r1 := c.job(t, "hist-1"); r1.ReadTiers["hdd"] != total {
		t.Fatalf("first run read %v by tier, want all %d bytes from hdd", r1.ReadTiers, total)
	}
	if r2 := c.job(t, "hist-2"); r2.ReadTiers["mem"] != total {
		t.Fatalf("second run read %v by tier, want all %d bytes from mem", r2.ReadTiers, total)
	}
	out, _ = c.sluice("job", "show", "hist-2")
	if !strings.Contains(out, "reads served by tier: mem 100%") || !strings.Contains(out, "prefetched 6 of 6 input files") {
		t.Fatalf("sluice job hist-2 does not show the mem hits and the prefetch:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(prof))
}

// TestDrainAndPin: a directory set to --drain on-close has its files moved
// to the PFS once closed, readable there as plain files at their namespace
// path with their mode and times, and through the mount; a directory set
// to --pin mem keeps its files on mem while the tier is short of space
// and the policy moves other files down.
func TestDrainAndPin(t *testing.T) {
	c := startCluster(t, "--mem", "64M", "--meta-flags", "--tier-free 4M,12M,24M")
	for _, d := range []string{"out", "hot"} {
		if err := os.Mkdir(c.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.sluice("tier", "set", c.path("out"), "--drain", "on-close"); err != nil || !strings.Contains(out, "drain on-close") {
		t.Fatalf("tier set --drain: %v %s", err, out)
	}
	if out, err := c.sluice("tier", "set", c.path("hot"), "--pin", "mem"); err != nil || !strings.Contains(out, "pin mem") {
		t.Fatalf("tier set --pin: %v %s", err, out)
	}
	data := pattern(1100, 6<<20)
	p := c.path("out/result")
	mustWrite(t, p, data)
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() bool {
		ts := c.chunkTiers(t, p)
		return len(ts) == 2 && ts[0] == "pfs" && ts[1] == "pfs"
	}, "the closed file to drain to the PFS")
	if !bytes.Equal(mustRead(t, p), data) {
		t.Fatal("drained file reads back wrong through the mount")
	}
	plain := filepath.Join(c.dir, "pfs", "out", "result")
	st, err := os.Stat(plain)
	if err != nil {
		t.Fatalf("no plain file on the PFS: %v", err)
	}
	mst, _ := os.Stat(p)
	if b, _ := os.ReadFile(plain); !bytes.Equal(b, data) || st.Mode().Perm() != 0o640 || !st.ModTime().Equal(mst.ModTime()) {
		t.Fatalf("PFS plain file: %d bytes (same %v), mode %v, mtime %v; want mode 0640, mtime %v",
			len(b), bytes.Equal(b, data), st.Mode().Perm(), st.ModTime(), mst.ModTime())
	}
	if out, _ := c.sluice("tier", "show", p); !strings.Contains(out, "drain on-close") {
		t.Fatalf("tier show: %s", out)
	}
	// 40 MiB pinned on a 64 MiB mem tier plus 8 MiB elsewhere: normal out
	// (free 16 MiB ≤ Cn-m) may move only the unpinned files
	for i := 0; i < 10; i++ {
		mustWrite(t, c.path(fmt.Sprintf("hot/h%d", i)), pattern(1200+i, 4<<20))
	}
	for i := 0; i < 2; i++ {
		mustWrite(t, c.path(fmt.Sprintf("cold%d", i)), pattern(1300+i, 4<<20))
	}
	eventually(t, 20*time.Second, func() bool {
		ts := c.chunkTiers(t, c.path("cold0"))
		return len(ts) == 1 && ts[0] != "mem"
	}, "an unpinned file to move down")
	time.Sleep(2 * time.Second)
	for i := 0; i < 10; i++ {
		if ts := c.chunkTiers(t, c.path(fmt.Sprintf("hot/h%d", i))); len(ts) != 1 || ts[0] != "mem" {
			t.Fatalf("pinned file hot/h%d moved to %v", i, ts)
		}
	}
}

// TestDrainKeepCache: a directory with --drain on-close --keep-cache
// copies its closed files to the PFS and keeps the fast copies as clean
// caches (reads still served from mem). A write gives the chunk's PFS
// copy up; the next drain copies it again. When the mem tier needs space,
// the caches are evicted to their PFS copies with nothing to copy, and
// every file reads back intact through the mount and on the PFS.
func TestDrainKeepCache(t *testing.T) {
	c := startCluster(t, "--mem", "64M", "--meta-flags", "--tier-free 4M,12M,24M")
	if err := os.Mkdir(c.path("ck"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := c.sluice("tier", "set", c.path("ck"), "--drain", "on-close", "--keep-cache"); err != nil ||
		!strings.Contains(out, "keeping the fast copy as a cache") {
		t.Fatalf("tier set --keep-cache: %v %s", err, out)
	}
	cached := func(p string, n int) bool {
		out, err := c.sluice("file", "stat", p)
		if err != nil {
			t.Fatalf("stat %s: %v %s", p, err, out)
		}
		return strings.Count(out, "tier mem") == n && strings.Count(out, "(a cache: clean copy on pfs") == n
	}
	data := pattern(1400, 8<<20)
	p := c.path("ck/v0")
	mustWrite(t, p, data)
	eventually(t, 20*time.Second, func() bool { return cached(p, 2) }, "the closed file to be copied to the PFS, its mem copy kept")
	plain := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(c.dir, "pfs", "ck", name))
		return b
	}
	if !bytes.Equal(plain("v0"), data) || !bytes.Equal(mustRead(t, p), data) {
		t.Fatal("the drained file differs on the PFS or through the mount")
	}
	// a write makes the chunk dirty: its PFS copy is given up, and the
	// drain on close copies it again
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := pattern(1401, 4096)
	if _, err := f.WriteAt(patch, 5<<20); err != nil {
		t.Fatal(err)
	}
	if out, _ := c.sluice("file", "stat", p); strings.Count(out, "(a cache: clean copy on pfs") != 1 {
		t.Fatalf("after a write to chunk 1, want only chunk 0 a clean cache:\n%s", out)
	}
	f.Close()
	copy(data[5<<20:], patch)
	eventually(t, 20*time.Second, func() bool { return cached(p, 2) && bytes.Equal(plain("v0"), data) },
		"the written chunk to be copied to the PFS again")
	// more files than the mem tier holds above Cn-m: the cool ones that
	// are caches by then are evicted to their PFS copies (a drain with
	// --keep-cache never moves a file to the pfs tier: only an eviction
	// does)
	want := map[string][]byte{"v0": data}
	for i := 1; i < 6; i++ {
		name := fmt.Sprintf("v%d", i)
		want[name] = pattern(1410+i, 8<<20)
		mustWrite(t, c.path("ck/"+name), want[name])
	}
	eventually(t, 30*time.Second, func() bool {
		for name := range want {
			ts := c.chunkTiers(t, c.path("ck/"+name))
			if len(ts) == 2 && ts[0] == "pfs" && ts[1] == "pfs" {
				return true
			}
		}
		return false
	}, "a cached file to be evicted to its PFS copy")
	for name, b := range want {
		if !bytes.Equal(mustRead(t, c.path("ck/"+name)), b) {
			t.Fatalf("%s reads back wrong through the mount", name)
		}
	}
	eventually(t, 20*time.Second, func() bool {
		for name, b := range want {
			if !bytes.Equal(plain(name), b) {
				return false
			}
		}
		return true
	}, "every file on the PFS")
	if out, _ := c.sluice("job", "show", "sluice-migration"); !strings.Contains(out, "tiering drain") {
		t.Fatalf("no drain decisions under sluice-migration:\n%s", out)
	}
}
