package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metric reads one unlabelled series of a mount's /metrics.
func metric(t *testing.T, addr, name string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOwnedFiles: small files mount b wrote in a directory it made are
// read back by b without the service (its counter of answers moves), and
// stay right through everything that ends that: the other mount writing
// one (a read-only handle b opened before sees the new bytes), b
// unlinking one it holds open (the handle still reads it), truncating,
// renaming (then written by the other mount), and a second writer on b.
func TestOwnedFiles(t *testing.T) {
	c := startCluster(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	maddr := ln.Addr().String()
	ln.Close()
	a, b := c.mnt, c.mount2(t, "--metrics", maddr)
	dir := filepath.Join(b, "own")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	content := func(i int) string { return fmt.Sprintf("file %d: %s", i, bytes.Repeat([]byte{byte('a' + i)}, 100*i)) }
	for i := 0; i < 8; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), []byte(content(i)), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	before := metric(t, maddr, "sluice_client_owned_answers_total")
	for i := 0; i < 8; i++ {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprint("f", i)))
		if err != nil || string(got) != content(i) {
			t.Fatalf("f%d read back on b: %q %v", i, got, err)
		}
	}
	if n := metric(t, maddr, "sluice_client_owned_answers_total") - before; n < 8*2 {
		t.Fatalf("%d opens and reads answered by the mount for 8 files read back, want at least 16", n)
	}
	if metric(t, maddr, "sluice_client_owned_files") != 8 {
		t.Fatalf("owned files %d, want 8", metric(t, maddr, "sluice_client_owned_files"))
	}

	// b holds f0 open read-only; b unlinks f1 while holding it open
	h0, err := os.Open(filepath.Join(dir, "f0"))
	if err != nil {
		t.Fatal(err)
	}
	defer h0.Close()
	h1, err := os.Open(filepath.Join(dir, "f1"))
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	if err := os.Remove(filepath.Join(dir, "f1")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, h1); got != content(1) {
		t.Fatalf("f1 unlinked while open, read through the open handle: %q", got)
	}
	// truncate and a second writer on b
	if err := os.Truncate(filepath.Join(dir, "f2"), 4); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "f2")); string(got) != content(2)[:4] {
		t.Fatalf("f2 after truncate: %q", got)
	}
	w, err := os.OpenFile(filepath.Join(dir, "f3"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := os.Open(filepath.Join(dir, "f3"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("FILE"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r3); got != "FILE"+content(3)[4:] {
		t.Fatalf("f3 read while a second writer is open: %q", got)
	}
	w.Close()
	if got := readAll(t, r3); got != "FILE"+content(3)[4:] {
		t.Fatalf("f3 read after the second writer closed: %q", got)
	}
	r3.Close()
	if err := os.Rename(filepath.Join(dir, "f4"), filepath.Join(dir, "f4b")); err != nil {
		t.Fatal(err)
	}

	// the other mount writes f0 and f4b: b's old handle and new opens
	// see the new bytes
	for _, n := range []string{"f0", "f4b"} {
		f, err := os.OpenFile(filepath.Join(a, "own", n), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("OTHER"), 2); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want0 := content(0)[:2] + "OTHER" + content(0)[7:]
	if got := readAll(t, h0); got != want0 {
		t.Fatalf("f0 through b's handle opened before the other mount's write: %q, want %q", got, want0)
	}
	for n, i := range map[string]int{"f0": 0, "f4b": 4} {
		want := content(i)[:2] + "OTHER" + content(i)[7:]
		if got, _ := os.ReadFile(filepath.Join(dir, n)); string(got) != want {
			t.Fatalf("%s reopened on b after the other mount's write: %q, want %q", n, got, want)
		}
	}
	if n := metric(t, maddr, "sluice_client_owned_files"); n != 0 {
		t.Fatalf("%d files still owned after the other mount used the directory", n)
	}
	// the rest read the same from both mounts
	for _, n := range []string{"f5", "f6", "f7"} {
		x, _ := os.ReadFile(filepath.Join(a, "own", n))
		y, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(x, y) || len(x) == 0 {
			t.Fatalf("%s: %q on a, %q on b", n, x, y)
		}
	}
}

// ownedModelFile is one file of TestOwnedModel: its bytes as the model
// has them (shared by the handles open on it, also after an unlink).
type ownedModelFile struct {
	name string // "" once unlinked
	data []byte
}

type ownedModelHandle struct {
	f    *os.File
	file *ownedModelFile
}

// TestOwnedModel: random operations on small files mount b made in
// directories of its own — created through every write path (write,
// pwrite past the end, O_APPEND, O_TRUNC reopen), read whole and in parts
// through handles kept open, rewritten, truncated, renamed, unlinked while
// open, and written and read by the other mount — checked against a model
// of the bytes at every read. b answers many of them itself (owned
// files); the test checks that it did, and that a file b makes afterwards
// is answered by b, so it cannot pass by never taking that path. It runs with b's write paths as configured by default,
// without write-behind and without readahead. SLUICE_OWNED_SEED replays
// a seed; SLUICE_OWNED_FLAGS gives b's flags instead of the three sets.
func TestOwnedModel(t *testing.T) {
	// owned-cache-8K: b's owned files let go all the time (the oldest
	// idle ones, to make room for a birth or a write)
	variants := map[string]string{"default": "", "write-behind-0": "--write-behind=0", "readahead-0": "--readahead=0", "owned-cache-8K": "--owned-cache=8K"}
	if f, ok := os.LookupEnv("SLUICE_OWNED_FLAGS"); ok {
		variants = map[string]string{"given": f}
	}
	seed := time.Now().UnixNano()
	s, replay := os.LookupEnv("SLUICE_OWNED_SEED")
	if replay {
		fmt.Sscan(s, &seed)
	}
	for _, name := range []string{"default", "write-behind-0", "readahead-0", "owned-cache-8K", "given"} {
		if flags, ok := variants[name]; ok {
			t.Run(name, func(t *testing.T) { runOwnedModel(t, seed, strings.Fields(flags)) })
		}
	}
	if replay {
		return
	}
	// seeds that failed once, replayed every time
	for _, rg := range []struct {
		seed  int64
		flags string
	}{
		{1796216300751394369, ""}, // an O_APPEND right after the other mount's close wrote over its last bytes (vfs.Appends)
	} {
		t.Run(fmt.Sprint("regression-", rg.seed), func(t *testing.T) { runOwnedModel(t, rg.seed, strings.Fields(rg.flags)) })
	}
}

func runOwnedModel(t *testing.T, seed int64, flags []string) {
	t.Logf("seed %d, b's flags %q (replay: SLUICE_OWNED_SEED=%d SLUICE_OWNED_FLAGS=%q go test -run TestOwnedModel ./test/e2e)", seed, flags, seed, strings.Join(flags, " "))
	r := rand.New(rand.NewSource(seed))
	c := startCluster(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	maddr := ln.Addr().String()
	ln.Close()
	mounts := []string{c.mnt, c.mount2(t, append([]string{"--metrics", maddr}, flags...)...)}
	const a, b = 0, 1
	var trail []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\nlast operations:\n  %s", seed, fmt.Sprintf(format, args...), strings.Join(trail, "\n  "))
	}
	note := func(format string, args ...any) {
		trail = append(trail, fmt.Sprintf(format, args...))
		if len(trail) > 30 {
			trail = trail[1:]
		}
	}
	randBytes := func(n int) []byte {
		p := make([]byte, n)
		r.Read(p)
		return p
	}
	apply := func(f *ownedModelFile, off int, p []byte) {
		if len(p) == 0 {
			return // a write of nothing never moves the size (os.File.WriteAt does not even call pwrite)
		}
		if end := off + len(p); end > len(f.data) {
			f.data = append(f.data, make([]byte, end-len(f.data))...)
		}
		copy(f.data[off:], p)
	}
	var handles []*ownedModelHandle
	defer func() {
		for _, h := range handles {
			h.f.Close()
		}
	}()
	check := func(h *ownedModelHandle, what string) {
		t.Helper()
		want := h.file.data
		if r.Intn(2) == 0 { // a part
			off := r.Intn(len(want) + 10)
			n := r.Intn(5000) + 1
			buf := make([]byte, n)
			got, err := h.f.ReadAt(buf, int64(off))
			if err != nil && err != io.EOF {
				fail("%s: read %d@%d: %v", what, n, off, err)
			}
			var w []byte
			if off < len(want) {
				w = want[off:min(len(want), off+n)]
			}
			if !bytes.Equal(buf[:got], w) {
				whole := []byte(readAll(t, h.f))
				fail("%s: read %d@%d of %s: %d bytes differ from the model's %d at %d (the whole file through the handle: %d bytes, first difference at %d; the model %d bytes)",
					what, n, off, h.file.name, got, len(w), firstDiff(buf[:got], w), len(whole), firstDiff(whole, want), len(want))
			}
			return
		}
		if got := readAll(t, h.f); got != string(want) {
			fail("%s: %s reads %d bytes, the model has %d (first difference at %d)", what, h.file.name, len(got), len(want), firstDiff([]byte(got), want))
		}
	}
	before := metric(t, maddr, "sluice_client_owned_answers_total")
	for round := 0; round < 4; round++ {
		dir := fmt.Sprint("r", round)
		if err := os.Mkdir(filepath.Join(mounts[b], dir), 0o777); err != nil {
			t.Fatal(err)
		}
		var files []*ownedModelFile
		path := func(m int, f *ownedModelFile) string { return filepath.Join(mounts[m], dir, f.name) }
		for i := 0; i < 16; i++ {
			f := &ownedModelFile{name: fmt.Sprint("f", i)}
			files = append(files, f)
			w, err := os.OpenFile(path(b, f), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
			if err != nil {
				t.Fatal(err)
			}
			for k := r.Intn(4); k >= 0; k-- {
				p := randBytes(r.Intn(6000))
				switch r.Intn(3) {
				case 0:
					w.Write(p)
					pos, _ := w.Seek(0, io.SeekCurrent)
					apply(f, int(pos)-len(p), p)
				default:
					off := r.Intn(8000)
					w.WriteAt(p, int64(off))
					apply(f, off, p)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			note("b made %s/%s, %d bytes", dir, f.name, len(f.data))
		}
		live := func() *ownedModelFile {
			for {
				if f := files[r.Intn(len(files))]; f.name != "" {
					return f
				}
			}
		}
		for step := 0; step < 60; step++ {
			f := live()
			op := r.Intn(12)
			if step < 15 && op >= 10 {
				op = r.Intn(10) // b alone at first: the other mount's first request recalls the directory
			}
			switch {
			case op < 4: // b opens read-only and reads (kept open)
				h, err := os.Open(path(b, f))
				if err != nil {
					fail("open %s on b: %v", f.name, err)
				}
				mh := &ownedModelHandle{f: h, file: f}
				handles = append(handles, mh)
				note("b opens %s", f.name)
				check(mh, "b's new handle")
			case op < 6 && len(handles) > 0: // b reads through an old handle
				h := handles[r.Intn(len(handles))]
				note("b reads %s through an old handle", h.file.name)
				check(h, "b's old handle")
			case op == 6: // b rewrites: pwrite, O_APPEND or O_TRUNC
				flags := os.O_WRONLY
				switch r.Intn(3) {
				case 1:
					flags |= os.O_APPEND
				case 2:
					flags |= os.O_TRUNC
				}
				w, err := os.OpenFile(path(b, f), flags, 0)
				if err != nil {
					fail("open %s for writing on b: %v", f.name, err)
				}
				if flags&os.O_TRUNC != 0 {
					f.data = f.data[:0]
				}
				p := randBytes(r.Intn(3000) + 1)
				off := r.Intn(len(f.data) + 100)
				if flags&os.O_APPEND != 0 {
					_, err = w.Write(p)
					off = len(f.data)
				} else {
					_, err = w.WriteAt(p, int64(off))
				}
				if err != nil {
					fail("write %s on b: %v", f.name, err)
				}
				apply(f, off, p)
				if err := w.Close(); err != nil {
					fail("close %s on b: %v", f.name, err)
				}
				note("b writes %d bytes at %d of %s (flags %#o)", len(p), off, f.name, flags)
			case op == 7: // b truncates
				n := r.Intn(len(f.data) + 2000)
				if err := os.Truncate(path(b, f), int64(n)); err != nil {
					fail("truncate %s: %v", f.name, err)
				}
				if n > len(f.data) {
					f.data = append(f.data, make([]byte, n-len(f.data))...)
				}
				f.data = f.data[:n]
				note("b truncates %s to %d", f.name, n)
			case op == 8: // b renames
				old := path(b, f)
				f.name += "r"
				if err := os.Rename(old, path(b, f)); err != nil {
					fail("rename to %s: %v", f.name, err)
				}
				note("b renames to %s", f.name)
			case op == 9: // b unlinks (its handles keep the bytes)
				if err := os.Remove(path(b, f)); err != nil {
					fail("unlink %s: %v", f.name, err)
				}
				note("b unlinks %s", f.name)
				f.name = ""
				live() // (16 files, at most 60 steps: some stay)
			case op == 10: // the other mount writes
				w, err := os.OpenFile(path(a, f), os.O_WRONLY, 0)
				if err != nil {
					fail("open %s on a: %v", f.name, err)
				}
				p := randBytes(r.Intn(3000) + 1)
				off := r.Intn(len(f.data) + 100)
				if _, err := w.WriteAt(p, int64(off)); err != nil {
					fail("write %s on a: %v", f.name, err)
				}
				if err := w.Close(); err != nil {
					fail("close %s on a: %v", f.name, err)
				}
				apply(f, off, p)
				note("a writes %d bytes at %d of %s", len(p), off, f.name)
				// a handle b holds open sees the write once the close's
				// report reached b through the change feed (its
				// readahead is dropped then); new opens see it at once
				for _, h := range handles {
					if h.file == f {
						time.Sleep(feedSettle())
						break
					}
				}
			default: // the other mount reads
				got, err := os.ReadFile(path(a, f))
				if err != nil || !bytes.Equal(got, f.data) {
					fail("%s read on a: %d bytes (%v), the model has %d", f.name, len(got), err, len(f.data))
				}
				note("a reads %s", f.name)
			}
		}
		for _, h := range handles {
			check(h, "end of round")
			h.f.Close()
		}
		handles = nil
		for _, f := range files {
			if f.name == "" {
				continue
			}
			for m := range mounts {
				if got, err := os.ReadFile(path(m, f)); err != nil || !bytes.Equal(got, f.data) {
					fail("end of round: %s on mount %d: %d bytes (%v), the model has %d", f.name, m, len(got), err, len(f.data))
				}
			}
		}
	}
	// how often the random operations took the owned path depends on the
	// seed (none with some, over a hundred with others: what they checked
	// holds either way); a file made afterwards in a directory of b's own
	// must take it for sure
	n := metric(t, maddr, "sluice_client_owned_answers_total") - before
	t.Logf("%d opens and reads answered by the mount", n)
	probe := filepath.Join(mounts[b], "probe")
	if err := os.Mkdir(probe, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(probe, "f"), []byte("owned"), 0o666); err != nil {
		t.Fatal(err)
	}
	before = metric(t, maddr, "sluice_client_owned_answers_total")
	if got, err := os.ReadFile(filepath.Join(probe, "f")); err != nil || string(got) != "owned" {
		t.Fatalf("a file b made, read back on b: %q %v", got, err)
	}
	if n := metric(t, maddr, "sluice_client_owned_answers_total") - before; n < 2 {
		t.Fatalf("%d of the open and read of a file b just made answered by b: want both", n)
	}
}

// feedSettle bounds how long a change takes to reach the other mount
// through the metadata change feed (milliseconds on an idle machine; the
// race detector slows every daemon down).
func feedSettle() time.Duration {
	if raceBuild {
		return time.Second
	}
	return 300 * time.Millisecond
}

func firstDiff(x, y []byte) int {
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return i
		}
	}
	return min(len(x), len(y))
}

// TestWritebackCloses: mount b closes small files it owns before their
// writes and sizes reach the forwarding node (its background writes held
// back 300 ms by a fault), and yet the other mount, whose lookup of a new
// name recalls b's delegation, reads every file whole at once: b sends
// the closes' writes and reports before it gives the delegation back.
// b's own stat right after such a close sees the size, and an fsync
// through a new handle after one finds the bytes there. Fails if a recall
// does not wait for the reports (checked).
func TestWritebackCloses(t *testing.T) {
	c := startCluster(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	maddr := ln.Addr().String()
	ln.Close()
	a, b := c.mnt, c.mount2(t, "--metrics", maddr, "--fault-writeback-delay", "300ms")
	if err := os.Mkdir(filepath.Join(b, "wbc"), 0o777); err != nil {
		t.Fatal(err)
	}
	// a holds the directory's complete (empty) listing; its recall of
	// b's delegation, if any, cools down
	if es, err := os.ReadDir(filepath.Join(a, "wbc")); err != nil || len(es) != 0 {
		t.Fatalf("listing on a: %v %v", es, err)
	}
	time.Sleep(1200 * time.Millisecond)
	content := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 1000+i*700) }
	// the first create asks for the delegation
	if err := os.WriteFile(filepath.Join(b, "wbc", "first"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() bool {
		return metric(t, maddr, "sluice_client_writeback_creates_total") > 0
	}, "b holds the delegation")
	before := metric(t, maddr, "sluice_client_writeback_closes_total")
	start := time.Now()
	const n = 8
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(b, "wbc", fmt.Sprint("f", i)), content(i), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("%d closes took %v: they waited for their reports", n, d)
	}
	if got := metric(t, maddr, "sluice_client_writeback_closes_total") - before; got < n {
		t.Fatalf("%d closes returned before their reports, want %d (creates answered by b %d, files owned %d)", got, n,
			metric(t, maddr, "sluice_client_writeback_creates_total"), metric(t, maddr, "sluice_client_owned_files"))
	}
	// a opens names it learnt from the feed (ENOENT until then)
	for i := n - 1; i >= 0; i-- {
		var got []byte
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			got, err = os.ReadFile(filepath.Join(a, "wbc", fmt.Sprint("f", i)))
			if !os.IsNotExist(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("f%d read on a right after b's close: %d bytes, want %d (%v)", i, len(got), len(content(i)), err)
		}
	}
	// b's own stat right after its close waits for the report (once the
	// directory is b's again)
	time.Sleep(1200 * time.Millisecond)
	if _, err := os.ReadDir(filepath.Join(b, "wbc")); err != nil { // its complete listing
		t.Fatal(err)
	}
	before = metric(t, maddr, "sluice_client_writeback_closes_total")
	if err := os.WriteFile(filepath.Join(b, "wbc", "s"), content(5), 0o666); err != nil {
		t.Fatal(err)
	}
	if metric(t, maddr, "sluice_client_writeback_closes_total") == before {
		t.Fatal("the close of s waited for its report")
	}
	if st, err := os.Stat(filepath.Join(b, "wbc", "s")); err != nil || st.Size() != int64(len(content(5))) {
		t.Fatalf("stat on b after its close: %v %v", st, err)
	}
	// a write-back close on b, then an fsync through a new handle
	p := filepath.Join(b, "wbc", "g")
	if err := os.WriteFile(p, content(3), 0o666); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := os.ReadFile(filepath.Join(a, "wbc", "g")); err != nil || !bytes.Equal(got, content(3)) {
		t.Fatalf("g on a after b's fsync: %d bytes (%v)", len(got), err)
	}
	// `sluice file stat` through b right after a write-back close finds
	// the file at the service, its size too (the command's fsync sends
	// the create and the held-back write first)
	p = filepath.Join(b, "wbc", "h")
	if err := os.WriteFile(p, content(4), 0o666); err != nil {
		t.Fatal(err)
	}
	out, err := c.sluice("file", "stat", p)
	if err != nil || !strings.Contains(out, fmt.Sprintf("size:        %d\n", len(content(4)))) {
		t.Fatalf("sluice file stat right after b's close: %v\n%s", err, out)
	}
}
