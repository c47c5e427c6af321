package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An fsx-style test: random operations on a few files through several
// open handles on two mounts, each checked against an in-memory model of
// the files' bytes. It covers every way data and sizes reach sluice:
// pwrite, write at the file position, O_APPEND, write-behind or not,
// ftruncate and truncate down and up (also through O_TRUNC), reads of the
// whole file after every truncate, close and reopen with size checks,
// fsync, peeks from the other mount after a sync point, a change of the
// mount that writes (close-to-open), and kill -9 and restart of a
// daemon in the middle.
//
// Consistency the model holds sluice to: on the mount that writes a file,
// every read, fstat and stat sees every earlier operation at once; another
// mount sees them after an fsync or close (its reads at once, its cached
// attributes within fsxSettle).

// fsxSettle bounds how long the other mount's cached size may lag.
const fsxSettle = 3 * time.Second

type fsxFile struct {
	name  string // relative to the mount
	chunk int    // the file's chunk size
	max   int    // offsets the test uses
	data  []byte // the model
	owner int    // the mount allowed to change the file
	made  bool   // created (opened once)
	hs    []*fsxHandle
}

type fsxHandle struct {
	f      *os.File
	mount  int
	append bool
	wrote  bool // wrote since its last fsync
}

type fsxRun struct {
	t      *testing.T
	c      *cluster
	r      *rand.Rand
	seed   int64
	mounts []string
	files  []*fsxFile
	step   int
	ops    map[string]int
	trail  []string // the last operations, for a failure report
	// victims are the daemons a crash step may kill and restart.
	victims []string
	// pfsView: every chunk is on the pfs tier, whose plain files (in the
	// cluster's PFS directory) must match the model too.
	pfsView bool
}

// fsxVariant is one configuration the model runs under.
type fsxVariant struct {
	name   string
	up     []string // sluice cluster up flags
	mount2 bool     // a second mount takes part
	// flags2 are the second mount's flags
	flags2  []string
	victims []string
	steps   int
	pfsView bool
	// tier is a `sluice tier set` of the mount's root (flags), if any
	tier []string
}

func fsxVariants() []fsxVariant {
	return []fsxVariant{
		{name: "mem", up: []string{"--mem-servers", "2"}, mount2: true,
			victims: []string{"fwd-0", "fwd-1", "data-mem", "data-mem-1", "meta"}, steps: 1500},
		{name: "mem-sync-noreadahead", up: []string{"--mem-servers", "2", "--mount-flags", "--write-behind=0 --readahead=0"},
			mount2: true, victims: []string{"fwd-0", "data-mem"}, steps: 1000},
		// both mounts keep blocks for small reads in every other variant
		// (the block cache is on by default; the fsx reads through
		// io.ReadAll start small); here every read goes to the daemons
		{name: "mem-nocache", up: []string{"--mem-servers", "2", "--mount-flags", "--read-cache 0"}, mount2: true,
			flags2: []string{"--read-cache", "0"}, victims: []string{"fwd-0", "fwd-1", "data-mem", "data-mem-1", "meta"}, steps: 1500},
		{name: "mem-sync", up: []string{"--mem-servers", "2", "--mount-flags", "--write-behind=0"}, mount2: true, steps: 600},
		// reads copied through the daemons' buffers (zero-copy is the
		// default) and every hop over TCP, as between hosts
		{name: "mem-copy-tcp", up: []string{"--mem-servers", "2", "--zero-copy=false", "--local-sockets=false"}, mount2: true, steps: 800},
		{name: "ssd", up: []string{"--mem", "0"}, victims: []string{"data-ssd", "fwd-0", "fwd-1"}, steps: 800},
		{name: "pfs", up: []string{"--mem", "0", "--ssd", "0"}, victims: []string{"data-pfs", "fwd-0"}, steps: 800, pfsView: true},
		// two copies of every mem chunk; any mem server may be killed
		{name: "mem-replicas", up: []string{"--mem-servers", "4", "--mem-replicas", "2"}, mount2: true,
			victims: []string{"data-mem", "data-mem-1", "data-mem-2", "data-mem-3", "fwd-0"}, steps: 800},
		// every file drains to the PFS as soon as it can, keeping its
		// fast copy as a cache; a small mem tier makes the policy evict
		// the caches and move files while the operations go on.
		{name: "keep-cache", up: []string{"--mem", "12M", "--meta-flags", "--tier-free 1M,3M,6M"}, mount2: true,
			victims: []string{"data-mem", "data-pfs", "fwd-0"}, steps: 1200, tier: []string{"--drain", "now", "--keep-cache"}},
	}
}

// fsxRegressions are seeds that once failed, with the variant they failed
// under; each runs again every time (in the race build only those found
// under -race: make e2e runs the rest), but for a seed of a bug still open
// (open: what it is), which is skipped, saying so, unless
// SLUICE_FSX_OPEN=1 (it fails some runs and not others: a red CI would
// keep every other change from landing; issue 16's note tracks it).
var fsxRegressions = []struct {
	variant string
	seed    int64
	open    string
	race    bool // found under -race: runs in the race build too (the others in the plain one only)
}{
	{"mem", 1795423362901713860, "", false},        // a read behind a write in flight came back short
	{"mem", 1795424020036757671, "", false},        // a new chunk moved while other writes had landed in it
	{"mem", 1795424193690746950, "", false},        // close returned before the size reached a restarting metadata service
	{"pfs", 1795454983104768561, "", false},        // a truncate up before the file had data on the pfs tier left its plain file short
	{"keep-cache", 1795468755428461686, "", false}, // a write with an old layout of a cached chunk failed (EAGAIN) instead of giving up the home of the new one
	{"keep-cache", 1795469502721888489, "", false}, // a chunk cut away by a truncate and written again on a full tier got ENOSPC instead of a place with room
	{"pfs", 1795474797523829067, "", false},        // a truncate with every chunk on the pfs tier cut away before left the plain file longer than the file
	{"keep-cache", 1795527875571245944, "", false}, // every file ended truncated to holes: nothing to drain (the test waited for a drained chunk in vain)
	{"keep-cache", 1795526211665905911, "", false}, // a chunk cut away by an O_TRUNC during its migration kept its place, empty, on a mem tier that filled up: its next write got ENOSPC (meta/relocate.go moves it now)
	{"mem", 1795849635547469224, "", true},         // under -race: go-fuse's takeInput (WriteOwner) moved a write's header while an INTERRUPT read it (third_party/go-fuse: under interruptMu now)
}

// TestFsxModel runs the model under every variant, then every regression
// seed. SLUICE_SEED replays one seed; SLUICE_FSX picks variants by name;
// SLUICE_FSX_SLOW=1 logs every step that took over a second (a mem tier
// with too few failure domains for a striped chunk's copies once stalled
// each of its chunks 15 s: 229 of the variant's 230 s).
func TestFsxModel(t *testing.T) {
	only := os.Getenv("SLUICE_FSX")
	for _, v := range fsxVariants() {
		if only != "" && !strings.Contains(","+only+",", ","+v.name+",") {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			seed := time.Now().UnixNano()
			if s := os.Getenv("SLUICE_SEED"); s != "" {
				fmt.Sscan(s, &seed)
			}
			runFsx(t, v, seed)
		})
	}
	for _, rg := range fsxRegressions {
		for _, v := range fsxVariants() {
			if v.name == rg.variant && (only == "" || strings.Contains(only, v.name)) && (rg.race || !raceBuild) {
				t.Run(fmt.Sprintf("regression-%s-%d", v.name, rg.seed), func(t *testing.T) {
					if rg.open != "" && os.Getenv("SLUICE_FSX_OPEN") != "1" {
						t.Skipf("open bug (SLUICE_FSX_OPEN=1 runs it): %s", rg.open)
					}
					runFsx(t, v, rg.seed)
				})
			}
		}
	}
}

func runFsx(t *testing.T, v fsxVariant, seed int64) {
	t.Logf("variant %s, seed %d (replay: SLUICE_FSX=%s SLUICE_SEED=%d go test -run TestFsxModel ./test/e2e)", v.name, seed, v.name, seed)
	c := startCluster(t, v.up...)
	mounts := []string{c.mnt}
	if v.mount2 {
		mounts = append(mounts, c.mount2(t, v.flags2...))
	}
	fsxOn(t, c, mounts, v, seed)
}

// fsxOn runs the model of variant v (its steps, victims, tiering and PFS
// view; not its cluster flags) on c's mounts.
func fsxOn(t *testing.T, c *cluster, mounts []string, v fsxVariant, seed int64) {
	x := &fsxRun{t: t, c: c, r: rand.New(rand.NewSource(seed)), seed: seed, mounts: mounts,
		ops: map[string]int{}, victims: v.victims, pfsView: v.pfsView}
	if len(v.tier) > 0 {
		if out, err := c.sluice(append([]string{"tier", "set", c.mnt}, v.tier...)...); err != nil {
			t.Fatalf("tier set: %v %s", err, out)
		}
	}
	// small chunks, striped over two servers where there are two; one
	// file with the default 4 MiB chunks for large offsets
	for _, d := range []struct{ dir, flags string }{{"s", "--chunk-size 64K --count 2 --unit 16K"}, {"p", "--chunk-size 64K --unit 64K"}} {
		os.Mkdir(c.path(d.dir), 0o755)
		if out, err := c.sluice(append([]string{"file", "stripe"}, append(strings.Fields(d.flags), c.path(d.dir))...)...); err != nil {
			t.Fatalf("setstripe: %v %s", err, out)
		}
	}
	x.files = []*fsxFile{
		{name: "s/f0", chunk: 64 << 10, max: 700 << 10},
		{name: "p/f1", chunk: 64 << 10, max: 300 << 10},
		{name: "big", chunk: 4 << 20, max: 13 << 20},
	}
	defer func() {
		for _, f := range x.files {
			for _, h := range f.hs {
				h.f.Close()
			}
		}
	}()
	for x.step = 0; x.step < v.steps; x.step++ {
		opStart := time.Now()
		x.randomOp()
		if d := time.Since(opStart); d > time.Second && os.Getenv("SLUICE_FSX_SLOW") != "" {
			t.Logf("step %d took %v: %s", x.step, d, x.lastNote())
		}
		if x.step%50 == 49 {
			x.checkAll("periodic")
		}
	}
	x.checkAll("end")
	if len(v.tier) > 0 {
		// the policy did act: some chunk is a cache of its PFS copy,
		// or on the PFS (evicted)
		// (a run may end with every file truncated to holes, or to nothing
		// but chunks past its end that a truncate trimmed empty while they
		// were migrating: then there is nothing left to drain, and it says
		// so)
		sizeRe := regexp.MustCompile(`(?m)^size:\s+(\d+)`)
		chunkSizeRe := regexp.MustCompile(`(?m)^chunk size:\s+(\d+)`)
		chunkRe := regexp.MustCompile(`(?m)^\s+chunk (\d+)\s`)
		holdsData := func(out string) bool {
			size, cs := sizeRe.FindStringSubmatch(out), chunkSizeRe.FindStringSubmatch(out)
			if size == nil || cs == nil {
				return true // unknown: wait for it
			}
			n, _ := strconv.ParseInt(size[1], 10, 64)
			c, _ := strconv.ParseInt(cs[1], 10, 64)
			for _, m := range chunkRe.FindAllStringSubmatch(out, -1) {
				if i, _ := strconv.ParseInt(m[1], 10, 64); c > 0 && i*c < n {
					return true
				}
			}
			return false
		}
		drained := func() (bool, bool) {
			empty := true
			for _, f := range x.files {
				out, _ := c.sluice("file", "stat", c.path(f.name))
				if strings.Contains(out, "(a cache") || strings.Contains(out, "tier pfs") {
					return true, false
				}
				empty = empty && !holdsData(out)
			}
			return false, empty
		}
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			ok, empty := drained()
			if ok {
				break
			}
			if time.Now().After(end) {
				if empty {
					t.Logf("no file ended with a chunk below its size (truncated to holes): nothing left to drain")
					break
				}
				for _, f := range x.files {
					out, _ := c.sluice("file", "stat", c.path(f.name))
					t.Logf("%s: %s", f.name, out)
				}
				t.Fatal("timed out waiting for a chunk drained to the PFS")
			}
		}
		x.checkAll("after the drains")
	}
	var mix []string
	for k, n := range x.ops {
		mix = append(mix, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(mix)
	t.Logf("%d operations: %s", v.steps, strings.Join(mix, ", "))
}

func (x *fsxRun) fatalf(format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf("seed %d step %d: %s\nlast operations:\n  %s", x.seed, x.step, fmt.Sprintf(format, args...),
		strings.Join(x.trail, "\n  "))
}

func (x *fsxRun) note(format string, args ...any) {
	x.trail = append(x.trail, fmt.Sprintf("%d: ", x.step)+fmt.Sprintf(format, args...))
	if len(x.trail) > 30 {
		x.trail = x.trail[1:]
	}
}

func (x *fsxRun) path(f *fsxFile, mount int) string { return filepath.Join(x.mounts[mount], f.name) }

// offset picks an offset the way fsx does: anywhere, at or around chunk
// and stripe boundaries, at or past the end of the file.
func (x *fsxRun) offset(f *fsxFile) int {
	switch x.r.Intn(6) {
	case 0:
		b := x.r.Intn(f.max/f.chunk+1) * f.chunk
		return max(0, min(f.max, b+x.r.Intn(9)-4))
	case 1:
		return max(0, min(f.max, len(f.data)+x.r.Intn(3)-1+x.r.Intn(2)*x.r.Intn(f.chunk)))
	case 2:
		return x.r.Intn(f.max/4096+1) * 4096 % (f.max + 1)
	default:
		return x.r.Intn(f.max + 1)
	}
}

func (x *fsxRun) length(f *fsxFile) int {
	switch x.r.Intn(5) {
	case 0:
		return 1 + x.r.Intn(16)
	case 1:
		return f.chunk + x.r.Intn(3) - 1
	case 2:
		return 1 + x.r.Intn(min(f.max, 1<<20))
	default:
		return 1 + x.r.Intn(128<<10)
	}
}

func (x *fsxRun) bytes(n int) []byte {
	b := make([]byte, n)
	x.r.Read(b)
	for i := range b {
		if b[i] == 0 {
			b[i] = 1 // zeros are what holes and cut tails read as
		}
	}
	return b
}

func (f *fsxFile) write(off int, p []byte) {
	if end := off + len(p); end > len(f.data) {
		f.data = append(f.data, make([]byte, end-len(f.data))...)
	}
	copy(f.data[off:], p)
}

func (f *fsxFile) truncate(n int) {
	if n <= len(f.data) {
		f.data = f.data[:n]
	} else {
		f.data = append(f.data, make([]byte, n-len(f.data))...)
	}
}

// handle returns an open handle of f on mount m (a new one sometimes, or
// when there is none). Handles on the writing mount are read-write.
func (x *fsxRun) handle(f *fsxFile, m int, wantAppend bool) *fsxHandle {
	var cands []*fsxHandle
	for _, h := range f.hs {
		if h.mount == m && h.append == wantAppend {
			cands = append(cands, h)
		}
	}
	if len(cands) > 0 && (len(cands) >= 3 || x.r.Intn(4) > 0) {
		return cands[x.r.Intn(len(cands))]
	}
	return x.open(f, m, wantAppend, false)
}

func (x *fsxRun) open(f *fsxFile, m int, wantAppend, trunc bool) *fsxHandle {
	flags := os.O_RDWR | os.O_CREATE
	if wantAppend {
		flags |= os.O_APPEND
	}
	if trunc {
		flags |= os.O_TRUNC
	}
	fh, err := os.OpenFile(x.path(f, m), flags, 0o644)
	if err != nil {
		x.fatalf("open %s on mount %d (flags %#x): %v", f.name, m, flags, err)
	}
	if trunc {
		f.truncate(0)
	}
	f.made = true
	h := &fsxHandle{f: fh, mount: m, append: wantAppend}
	f.hs = append(f.hs, h)
	x.note("open %s mount %d append=%v trunc=%v -> fd %d", f.name, m, wantAppend, trunc, fh.Fd())
	return h
}

func (x *fsxRun) closeHandle(f *fsxFile, h *fsxHandle) {
	if err := h.f.Close(); err != nil {
		x.fatalf("close %s fd on mount %d: %v", f.name, h.mount, err)
	}
	for i, o := range f.hs {
		if o == h {
			f.hs = append(f.hs[:i], f.hs[i+1:]...)
			break
		}
	}
}

func (x *fsxRun) randomOp() {
	f := x.files[x.r.Intn(len(x.files))]
	own := f.owner
	k := x.r.Intn(100)
	var op string
	switch {
	case k < 22:
		op = "pwrite"
		h := x.handle(f, own, false)
		off, p := x.offset(f), x.bytes(x.length(f))
		x.note("pwrite %s [%d, +%d) fd %d", f.name, off, len(p), h.f.Fd())
		if _, err := h.f.WriteAt(p, int64(off)); err != nil {
			x.fatalf("pwrite %s at %d: %v", f.name, off, err)
		}
		f.write(off, p)
		h.wrote = true
	case k < 27:
		op = "write"
		h := x.handle(f, own, false)
		off, p := x.offset(f), x.bytes(x.length(f))
		x.note("lseek+write %s [%d, +%d)", f.name, off, len(p))
		if _, err := h.f.Seek(int64(off), io.SeekStart); err != nil {
			x.fatalf("seek: %v", err)
		}
		if _, err := h.f.Write(p); err != nil {
			x.fatalf("write %s at %d: %v", f.name, off, err)
		}
		f.write(off, p)
		h.wrote = true
	case k < 31:
		op = "append"
		h := x.handle(f, own, true)
		p := x.bytes(1 + x.r.Intn(40<<10))
		x.note("append %s +%d at %d", f.name, len(p), len(f.data))
		if _, err := h.f.Write(p); err != nil {
			x.fatalf("append %s: %v", f.name, err)
		}
		f.write(len(f.data), p)
		h.wrote = true
	case k < 45:
		op = "pread"
		h := x.handle(f, own, false)
		off, n := x.offset(f), x.length(f)
		x.checkRead(f, h, off, n, "pread")
	case k < 52:
		op = "ftruncate"
		h := x.handle(f, own, false)
		n := x.truncSize(f)
		x.note("ftruncate %s %d -> %d", f.name, len(f.data), n)
		if err := h.f.Truncate(int64(n)); err != nil {
			x.fatalf("ftruncate %s to %d: %v", f.name, n, err)
		}
		f.truncate(n)
		x.afterTruncate(f, h)
	case k < 56:
		op = "truncate"
		if !f.made {
			x.open(f, own, false, false)
		}
		n := x.truncSize(f)
		x.note("truncate(path) %s %d -> %d", f.name, len(f.data), n)
		if err := os.Truncate(x.path(f, own), int64(n)); err != nil {
			x.fatalf("truncate %s to %d: %v", f.name, n, err)
		}
		f.truncate(n)
		x.afterTruncate(f, x.handle(f, own, false))
	case k < 59:
		op = "open-trunc"
		h := x.open(f, own, false, true)
		x.afterTruncate(f, h)
	case k < 65:
		op = "fsync"
		for _, h := range f.hs {
			if h.wrote && x.r.Intn(2) == 0 {
				x.note("fsync %s fd %d", f.name, h.f.Fd())
				if err := h.f.Sync(); err != nil {
					x.fatalf("fsync %s: %v", f.name, err)
				}
				h.wrote = false
			}
		}
	case k < 72:
		op = "close-reopen"
		if len(f.hs) == 0 {
			x.open(f, own, false, false)
		}
		h := f.hs[x.r.Intn(len(f.hs))]
		m := h.mount
		x.note("close %s fd %d mount %d", f.name, h.f.Fd(), m)
		x.closeHandle(f, h)
		if m == own {
			x.checkStat(f, "stat after close")
			h = x.open(f, m, false, false)
			x.checkFstat(f, h, "fstat after reopen")
			x.checkRead(f, h, 0, len(f.data)+1, "read after reopen")
		}
	case k < 78:
		op = "fstat"
		x.checkFstat(f, x.handle(f, own, false), "fstat")
	case k >= 78 && k < 85 && len(x.mounts) > 1:
		op = "peek"
		x.peek(f)
	case k >= 85 && k < 89 && len(x.mounts) > 1:
		op = "switch"
		x.switchOwner(f)
	case k == 89 && len(x.victims) > 0:
		op = "crash"
		x.crash()
	default:
		op = "pread-all"
		h := x.handle(f, own, false)
		x.checkRead(f, h, 0, len(f.data)+x.r.Intn(3), "read of the whole file")
	}
	x.ops[op]++
}

// truncSize picks a new size: zero, shorter, longer, on and around chunk
// boundaries.
func (x *fsxRun) truncSize(f *fsxFile) int {
	switch x.r.Intn(6) {
	case 0:
		return 0
	case 1:
		if len(f.data) > 0 {
			return x.r.Intn(len(f.data))
		}
		return 0
	case 2:
		return min(f.max, len(f.data)+1+x.r.Intn(f.max/2))
	case 3:
		b := x.r.Intn(f.max/f.chunk+1) * f.chunk
		return max(0, min(f.max, b+x.r.Intn(3)-1))
	default:
		return x.r.Intn(f.max + 1)
	}
}

// afterTruncate reads every region of the file, through h and through
// another handle.
func (x *fsxRun) afterTruncate(f *fsxFile, h *fsxHandle) {
	x.checkFstat(f, h, "fstat after truncate")
	x.checkRead(f, h, 0, len(f.data)+4096, "read of every region after truncate")
	if o := x.handle(f, f.owner, false); o != h {
		x.checkRead(f, o, 0, len(f.data)+1, "read through another handle after truncate")
	}
}

func (x *fsxRun) checkRead(f *fsxFile, h *fsxHandle, off, n int, what string) {
	x.t.Helper()
	x.note("%s %s [%d, +%d) fd %d mount %d", what, f.name, off, n, h.f.Fd(), h.mount)
	buf := make([]byte, n)
	got, err := h.f.ReadAt(buf, int64(off))
	if err != nil && err != io.EOF {
		x.fatalf("%s of %s [%d, +%d): %v", what, f.name, off, n, err)
	}
	want := []byte{}
	if off < len(f.data) {
		want = f.data[off:min(len(f.data), off+n)]
	}
	if !bytes.Equal(buf[:got], want) {
		x.fatalf("%s of %s [%d, +%d) on mount %d: %s", what, f.name, off, n, h.mount, diff(buf[:got], want, off))
	}
}

// diff describes how got differs from want (both starting at base).
func diff(got, want []byte, base int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, model has %d", len(got), len(want))
	}
	first, bad := -1, 0
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	return fmt.Sprintf("%d bytes differ, the first at offset %d (got %#x, model %#x)", bad, base+first, got[first], want[first])
}

func (x *fsxRun) checkFstat(f *fsxFile, h *fsxHandle, what string) {
	st, err := h.f.Stat()
	if err != nil {
		x.fatalf("%s of %s: %v", what, f.name, err)
	}
	if st.Size() != int64(len(f.data)) {
		x.fatalf("%s of %s on mount %d: size %d, model %d", what, f.name, h.mount, st.Size(), len(f.data))
	}
}

func (x *fsxRun) checkStat(f *fsxFile, what string) {
	st, err := os.Stat(x.path(f, f.owner))
	if err != nil {
		x.fatalf("%s of %s: %v", what, f.name, err)
	}
	if st.Size() != int64(len(f.data)) {
		x.fatalf("%s of %s: size %d, model %d", what, f.name, st.Size(), len(f.data))
	}
}

// syncOwner fsyncs every handle of f that wrote: a sync point after which
// the other mount must see everything.
func (x *fsxRun) syncOwner(f *fsxFile) {
	for _, h := range f.hs {
		if h.wrote {
			if err := h.f.Sync(); err != nil {
				x.fatalf("fsync %s: %v", f.name, err)
			}
			h.wrote = false
		}
	}
}

// peek reads the file from the other mount through a fresh handle after
// a sync point.
func (x *fsxRun) peek(f *fsxFile) {
	other := 1 - f.owner
	x.syncOwner(f)
	if !f.made {
		return
	}
	x.note("peek %s from mount %d", f.name, other)
	h := x.open(f, other, false, false)
	x.checkRead(f, h, 0, len(f.data)+1, "read from the other mount after fsync")
	x.settledSize(f, other, "size on the other mount after fsync")
	x.closeHandle(f, h)
}

// settledSize waits until mount m's stat of f shows the model's size.
func (x *fsxRun) settledSize(f *fsxFile, m int, what string) {
	deadline := time.Now().Add(fsxSettle)
	for {
		st, err := os.Stat(x.path(f, m))
		if err != nil {
			x.fatalf("%s of %s: %v", what, f.name, err)
		}
		if st.Size() == int64(len(f.data)) {
			return
		}
		if time.Now().After(deadline) {
			x.fatalf("%s of %s on mount %d: size %d after %v, model %d", what, f.name, m, st.Size(), fsxSettle, len(f.data))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// switchOwner hands writing f to the other mount, close-to-open: the old
// one closes its handles, the new one's are reopened after it sees the
// file's size.
func (x *fsxRun) switchOwner(f *fsxFile) {
	old := f.owner
	f.owner = 1 - old
	x.note("switch %s to mount %d", f.name, f.owner)
	for _, h := range append([]*fsxHandle(nil), f.hs...) {
		x.closeHandle(f, h)
	}
	if !f.made {
		return
	}
	x.settledSize(f, f.owner, "size on the new writing mount")
	h := x.open(f, f.owner, false, false)
	x.checkRead(f, h, 0, len(f.data)+1, "read on the new writing mount")
}

// crash kills a daemon with SIGKILL and restarts it; then every handle
// that wrote is fsynced (what the configuration claims survives: every
// acknowledged write, and the sizes of files fsynced or closed) and every
// file is checked.
func (x *fsxRun) crash() {
	v := x.victims[x.r.Intn(len(x.victims))]
	x.note("kill -9 %s and restart", v)
	x.c.kill9(v)
	time.Sleep(200 * time.Millisecond)
	x.c.restart(v)
	for _, f := range x.files {
		x.syncOwner(f)
	}
	x.checkAll("after restarting " + v)
}

// checkAll reads every file whole through a fresh handle on every mount
// (after a sync point) and checks its size.
func (x *fsxRun) checkAll(what string) {
	for _, f := range x.files {
		x.syncOwner(f)
		for m := range x.mounts {
			fh, err := os.Open(x.path(f, m))
			if os.IsNotExist(err) && !f.made {
				continue // never created
			}
			if err != nil {
				x.fatalf("%s: open %s on mount %d: %v", what, f.name, m, err)
			}
			got, err := io.ReadAll(fh)
			fh.Close()
			if err != nil {
				x.fatalf("%s: read %s on mount %d: %v", what, f.name, m, err)
			}
			if !bytes.Equal(got, f.data) {
				st, _ := x.c.sluice("file", "stat", x.path(f, m))
				x.fatalf("%s: %s on mount %d: %s\nthe metadata service says:\n%s", what, f.name, m, diff(got, f.data, 0), st)
			}
			if m == f.owner {
				x.checkStat(f, what)
			} else {
				x.settledSize(f, m, what)
			}
		}
		if x.pfsView {
			x.checkPlainFile(f, what)
		}
	}
}

// checkPlainFile compares the file's plain file in the PFS directory (the
// pfs tier's namespace view) with the model. A file that never held data
// has none.
func (x *fsxRun) checkPlainFile(f *fsxFile, what string) {
	got, err := os.ReadFile(filepath.Join(x.c.dir, "pfs", f.name))
	if os.IsNotExist(err) && nonZero(f.data) == 0 {
		return
	}
	if err != nil {
		x.fatalf("%s: plain file of %s in the PFS: %v", what, f.name, err)
	}
	if !bytes.Equal(got, f.data) {
		x.fatalf("%s: plain file of %s in the PFS: %s", what, f.name, diff(got, f.data, 0))
	}
}

// lastNote is the last step noted (diagnostics).
func (x *fsxRun) lastNote() string {
	if len(x.trail) == 0 {
		return ""
	}
	return x.trail[len(x.trail)-1]
}
