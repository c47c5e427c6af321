package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// wbCluster starts a cluster with a second mount whose write-back
// creates are sent on demand, not by the timer; it returns both mounts and
// the second one's metrics address.
func wbCluster(t *testing.T) (a, b, maddr string) {
	t.Helper()
	c := startCluster(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	maddr = ln.Addr().String()
	ln.Close()
	return c.mnt, c.mount2(t, "--metrics", maddr, "--create-flush", "5s"), maddr
}

// wbCount reads a mount's count of creates or unlinks it answered by
// itself.
func wbCount(t *testing.T, addr, what string) int {
	t.Helper()
	return metric(t, addr, "sluice_client_writeback_"+what+"_total")
}

// TestWritebackCreates: mount b creates files in a directory it made by
// itself (the delegation) — some written, some closed empty, some kept
// open — and mount a, touching the directory, recalls the delegation and
// sees every one with its size and data; renames, chmods, unlinks and
// fsyncs of files not yet sent are applied in order; a name created by
// the other node is refused with EEXIST; a directory with unsent files is
// not empty to the other node.
func TestWritebackCreates(t *testing.T) {
	a, b, maddr := wbCluster(t)
	if err := os.Mkdir(filepath.Join(b, "wb"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 600
	var open []*os.File
	for i := 0; i < n; i++ {
		f, err := os.OpenFile(filepath.Join(b, "wb", fmt.Sprintf("f%03d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := f.Write([]byte(fmt.Sprintf("data-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 == 0 {
			open = append(open, f)
		} else if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := wbCount(t, maddr, "creates"); got < n-3 {
		t.Fatalf("only %d of %d creates answered by the mount", got, n)
	}
	// the other node lists the directory: the delegation is recalled and
	// every file is there, written ones with their data
	start := time.Now()
	es, err := os.ReadDir(filepath.Join(a, "wb"))
	if err != nil || len(es) != n {
		t.Fatalf("listing on the other node: %d entries, %v", len(es), err)
	}
	t.Logf("recall and listing of %d files took %v", n, time.Since(start))
	check := func(i int) {
		t.Helper()
		p := filepath.Join(a, "wb", fmt.Sprintf("f%03d", i))
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := []byte{}
		if i%3 == 0 {
			want = []byte(fmt.Sprintf("data-%d", i))
		}
		if got := mustRead(t, p); !bytes.Equal(got, want) || st.Mode().Perm() != 0o640 {
			t.Fatalf("%s on the other node: %q mode %v, want %q 0640", p, got, st.Mode(), want)
		}
	}
	for i := 1; i < n; i += 7 {
		if i%5 != 0 { // closed: its data is visible (close-to-open)
			check(i)
		}
	}
	for _, f := range open {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 15 {
		check(i)
	}
	// a name the other node created first is refused
	mustWrite(t, filepath.Join(a, "wb", "froma"), []byte("a"))
	_, err = os.OpenFile(filepath.Join(b, "wb", "froma"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	wantErrno(t, err, syscall.EEXIST, "create of a name the other node made")

	// operations on files not yet sent, in a fresh directory
	d2 := filepath.Join(b, "wb2")
	if err := os.Mkdir(d2, 0o755); err != nil {
		t.Fatal(err)
	}
	before := wbCount(t, maddr, "creates")
	for _, name := range []string{"x", "gone", "synced", "kept"} {
		mustWrite(t, filepath.Join(d2, name), nil)
	}
	if got := wbCount(t, maddr, "creates") - before; got != 4 {
		t.Fatalf("%d of 4 creates in the second directory answered by the mount", got)
	}
	if err := os.Rename(filepath.Join(d2, "x"), filepath.Join(d2, "y")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(d2, "y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d2, "gone")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(d2, "synced"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(pattern(3, 100000))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mustWrite(t, filepath.Join(d2, "late"), []byte("late"))
	var names []string
	es, err = os.ReadDir(filepath.Join(a, "wb2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[kept late synced y]" {
		t.Fatalf("the other node sees %v", names)
	}
	if st, err := os.Stat(filepath.Join(a, "wb2", "y")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("y on the other node: %v %v", st, err)
	}
	if got := mustRead(t, filepath.Join(a, "wb2", "synced")); !bytes.Equal(got, pattern(3, 100000)) {
		t.Fatal("synced file's data differs on the other node")
	}
	// a directory whose files were not sent yet is not empty to the other node
	d3 := filepath.Join(b, "wb3")
	if err := os.Mkdir(d3, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(d3, "only"), nil)
	wantErrno(t, os.Remove(filepath.Join(a, "wb3")), syscall.ENOTEMPTY, "rmdir of a directory with a file not yet sent")
	// and everything can be removed from the other node
	for _, d := range []string{"wb", "wb2", "wb3"} {
		if err := os.RemoveAll(filepath.Join(a, d)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(b, "wb", "f001")); !os.IsNotExist(err) {
		t.Fatalf("removed file still seen on the creating node: %v", err)
	}

	before = wbCount(t, maddr, "creates")
	creates := randomOpsWriteback(t, a, b)
	local := wbCount(t, maddr, "creates") - before
	t.Logf("random operations: %d of %d creates answered by the mount", local, creates)
	if local < creates/4 {
		t.Fatalf("only %d of %d creates were write-back", local, creates)
	}
}

// randomOpsWriteback runs random creates, writes, renames, removals and
// chmods in a directory mount b made (so its creates are write-back),
// checked against a model after every step on b and every few steps on
// a, whose look recalls the delegation.
func randomOpsWriteback(t *testing.T, a, b string) (creates int) {
	seed := time.Now().UnixNano()
	t.Logf("random operations: seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	if err := os.Mkdir(filepath.Join(b, "wbr"), 0o755); err != nil {
		t.Fatal(err)
	}
	type file struct {
		data []byte
		perm os.FileMode
	}
	model := map[string]file{}
	names := []string{"p", "q", "r", "s", "t", "u"}
	verify := func(root, who string, step int) {
		t.Helper()
		es, err := os.ReadDir(filepath.Join(root, "wbr"))
		if err != nil {
			t.Fatalf("step %d: listing on %s: %v", step, who, err)
		}
		if len(es) != len(model) {
			t.Fatalf("step %d: %s lists %d files, the model %d", step, who, len(es), len(model))
		}
		for _, e := range es {
			m, ok := model[e.Name()]
			got, err := os.ReadFile(filepath.Join(root, "wbr", e.Name()))
			st, serr := os.Stat(filepath.Join(root, "wbr", e.Name()))
			if !ok || err != nil || serr != nil || !bytes.Equal(got, m.data) || st.Mode().Perm() != m.perm {
				t.Fatalf("step %d: %s on %s: %d bytes %v (%v %v), model %d bytes %v (%v)", step, e.Name(), who, len(got), st, err, serr, len(m.data), m.perm, ok)
			}
		}
	}
	for step := 0; step < 300; step++ {
		name := names[r.Intn(len(names))]
		p := filepath.Join(b, "wbr", name)
		cur, exists := model[name]
		// applies checks an operation on name against the model: ENOENT
		// if it does not exist (nothing changes), success if it does
		applies := func(err error, what string) bool {
			t.Helper()
			if !exists {
				wantErrno(t, err, syscall.ENOENT, what+" of a missing name")
				return false
			}
			if err != nil {
				t.Fatalf("step %d: %s of %s: %v", step, what, name, err)
			}
			return true
		}
		switch k := r.Intn(10); {
		case k < 4:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if exists {
				wantErrno(t, err, syscall.EEXIST, "create of an existing name")
				continue
			}
			if err != nil {
				t.Fatalf("step %d create %s: %v", step, name, err)
			}
			creates++
			cur = file{perm: 0o644}
			if r.Intn(2) == 0 {
				cur.data = pattern(step, 1+r.Intn(5000))
				f.Write(cur.data)
			}
			f.Close()
			model[name] = cur
		case k < 6:
			to := names[r.Intn(len(names))]
			if !applies(os.Rename(p, filepath.Join(b, "wbr", to)), "rename") {
				continue
			}
			delete(model, name)
			model[to] = cur
		case k < 8:
			if !applies(os.Remove(p), "removal") {
				continue
			}
			delete(model, name)
		default:
			if !applies(os.Chmod(p, 0o600), "chmod") {
				continue
			}
			cur.perm = 0o600
			model[name] = cur
		}
		verify(b, "the creating node", step)
		if step%25 == 24 {
			verify(a, "the other node", step)
			time.Sleep(wbCooldown) // the directory may be delegated again
		}
	}
	return creates
}

// wbCooldown is how long a recalled directory is not delegated again
// (meta.DelegCooldown).
const wbCooldown = time.Second

// TestWritebackHolderDies: a mount holding a delegation with creates not
// yet sent is killed; the other mount's listing of the directory waits for
// the recall's bound, not forever, then goes on without those files, and
// the directory is usable.
func TestWritebackHolderDies(t *testing.T) {
	c := startCluster(t)
	a := c.mnt
	b := c.mount2(t, "--create-flush", "1m")
	if err := os.Mkdir(filepath.Join(b, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		mustWrite(t, filepath.Join(b, "d", fmt.Sprintf("lost%d", i)), nil)
	}
	if out, err := exec.Command("pkill", "-9", "-f", "mount .* "+b+"$").CombinedOutput(); err != nil {
		t.Fatalf("killing the second mount: %v %s", err, out)
	}
	start := time.Now()
	es, err := os.ReadDir(filepath.Join(a, "d"))
	took := time.Since(start)
	t.Logf("listing after the holder died: %d entries in %v", len(es), took)
	if err != nil || took > 8*time.Second {
		t.Fatalf("listing after the holder died: %v after %v", err, took)
	}
	if len(es) != 0 {
		t.Fatalf("files the dead mount never sent are listed: %v", es)
	}
	mustWrite(t, filepath.Join(a, "d", "after"), []byte("ok"))
	if got := mustRead(t, filepath.Join(a, "d", "after")); string(got) != "ok" {
		t.Fatalf("read back %q", got)
	}
}

// TestWritebackUnlinks: in a directory it holds, mount b answers removals
// of files the service knows by itself and sends them with its creates, in
// order: an open file removed here has no links (its data stays readable),
// a name removed and created again is the new file, and mount a, listing
// the directory, recalls the delegation and sees exactly what b sees.
func TestWritebackUnlinks(t *testing.T) {
	a, b, maddr := wbCluster(t)
	d := filepath.Join(b, "wbu")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 0; i < n; i++ {
		mustWrite(t, filepath.Join(d, fmt.Sprintf("f%03d", i)), pattern(i, 100))
	}
	if es, err := os.ReadDir(d); err != nil || len(es) != n { // sends the creates
		t.Fatalf("listing: %d entries, %v", len(es), err)
	}
	held, err := os.OpenFile(filepath.Join(d, "f000"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before := wbCount(t, maddr, "unlinks")
	for i := 0; i < n; i += 2 {
		if err := os.Remove(filepath.Join(d, fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := wbCount(t, maddr, "unlinks") - before; got != n/2 {
		t.Fatalf("%d of %d removals answered by the mount", got, n/2)
	}
	// the open file removed here: no links, data still there
	st, err := held.Stat()
	if err != nil || st.Sys().(*syscall.Stat_t).Nlink != 0 {
		t.Fatalf("open removed file: %+v %v, want nlink 0", st, err)
	}
	if _, err := held.WriteAt([]byte("still"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := held.ReadAt(buf, 0); err != nil || string(buf) != "still" {
		t.Fatalf("read of the open removed file: %q %v", buf, err)
	}
	// removed and created again: the new file
	if err := os.Remove(filepath.Join(d, "f001")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(d, "f001"), []byte("new"))
	if _, err := os.Stat(filepath.Join(d, "f002")); !os.IsNotExist(err) {
		t.Fatalf("removed name on the removing node: %v", err)
	}
	es, err := os.ReadDir(filepath.Join(a, "wbu"))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != n/2 {
		t.Fatalf("the other node lists %d files, want %d", len(es), n/2)
	}
	for _, e := range es {
		var i int
		if _, err := fmt.Sscanf(e.Name(), "f%03d", &i); err != nil || i%2 == 0 {
			t.Fatalf("the other node lists %q", e.Name())
		}
	}
	if got := mustRead(t, filepath.Join(a, "wbu", "f001")); string(got) != "new" {
		t.Fatalf("re-created file on the other node: %q", got)
	}
	if got := mustRead(t, filepath.Join(a, "wbu", "f003")); !bytes.Equal(got, pattern(3, 100)) {
		t.Fatal("a kept file's data differs on the other node")
	}
	// the usual clean-up on one node: create, remove every file, rmdir
	time.Sleep(wbCooldown) // the directory may be delegated again
	d2 := filepath.Join(b, "wbu2")
	if err := os.Mkdir(d2, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		mustWrite(t, filepath.Join(d2, fmt.Sprintf("g%d", i)), nil)
	}
	if _, err := os.ReadDir(d2); err != nil { // sends the creates
		t.Fatal(err)
	}
	before = wbCount(t, maddr, "unlinks")
	for i := 0; i < 50; i++ {
		if err := os.Remove(filepath.Join(d2, fmt.Sprintf("g%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(d2); err != nil {
		t.Fatalf("rmdir after write-back removals: %v", err)
	}
	if got := wbCount(t, maddr, "unlinks") - before; got != 50 {
		t.Fatalf("%d of 50 removals answered by the mount", got)
	}
	if _, err := os.Stat(filepath.Join(a, "wbu2")); !os.IsNotExist(err) {
		t.Fatalf("removed directory on the other node: %v", err)
	}
}

// TestWritebackDirectories: mount b makes a tree of directories and files
// in a directory it holds, answering the mkdirs itself (the new
// directories are delegated to it from birth); it removes a subtree by
// itself too (rmdirs answered by the mount, sent after the removals that
// emptied them). Mount a, walking the tree, recalls the delegations and
// sees exactly what b left, with the right modes and link counts; a tree
// removed by b after that goes through the service and is gone for a.
func TestWritebackDirectories(t *testing.T) {
	a, b, maddr := wbCluster(t)
	top := filepath.Join(b, "wbd")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	before := wbCount(t, maddr, "creates")
	dirs := []string{"x", "x/y", "x/y/z", "x/w", "gone", "gone/g1", "gone/g1/g2", "gone/g3"}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(top, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"x/f", "x/y/z/f", "gone/g1/g2/f", "gone/g3/f"}
	for i, f := range files {
		mustWrite(t, filepath.Join(top, f), pattern(i, 1000))
	}
	if got := wbCount(t, maddr, "creates") - before; got != len(dirs)+len(files) {
		t.Fatalf("%d of %d mkdirs and creates answered by the mount", got, len(dirs)+len(files))
	}
	st, err := os.Stat(filepath.Join(top, "x"))
	if err != nil || st.Mode().Perm() != 0o750 || !st.IsDir() || st.Sys().(*syscall.Stat_t).Nlink != 4 {
		t.Fatalf("x on the making node: %v %v, want a 0750 directory with 4 links", st, err)
	}
	// remove the subtree "gone" bottom up on b: answered by the mount
	before = wbCount(t, maddr, "unlinks")
	for _, p := range []string{"gone/g1/g2/f", "gone/g1/g2", "gone/g1", "gone/g3/f", "gone/g3", "gone"} {
		if err := os.Remove(filepath.Join(top, p)); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
	}
	if got := wbCount(t, maddr, "unlinks") - before; got != 6 {
		t.Fatalf("%d of 6 removals answered by the mount", got)
	}
	// the other node sees exactly the rest
	var seen []string
	err = filepath.Walk(filepath.Join(a, "wbd"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(a, "wbd"), p)
		seen = append(seen, rel)
		if fi.IsDir() && rel != "." && fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: mode %v on the other node", rel, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(seen)
	want := []string{".", "x", "x/f", "x/w", "x/y", "x/y/z", "x/y/z/f"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("the other node sees %v, want %v", seen, want)
	}
	if st, err := os.Stat(filepath.Join(a, "wbd", "x")); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 4 {
		t.Fatalf("x on the other node: %v %v, want 4 links", st, err)
	}
	if got := mustRead(t, filepath.Join(a, "wbd", "x/y/z/f")); !bytes.Equal(got, pattern(1, 1000)) {
		t.Fatal("a file in a directory made by the mount reads back wrong on the other node")
	}
	// recalled now: b's removal of the rest goes through the service
	if out, err := exec.Command("rm", "-r", filepath.Join(top, "x")).CombinedOutput(); err != nil {
		t.Fatalf("rm -r: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(a, "wbd", "x")); !os.IsNotExist(err) {
		t.Fatalf("removed tree on the other node: %v", err)
	}
	if es, err := os.ReadDir(filepath.Join(a, "wbd")); err != nil || len(es) != 0 {
		t.Fatalf("the other node lists %v %v in the emptied directory", es, err)
	}
	if err := os.Remove(top); err != nil {
		t.Fatalf("rmdir of the emptied top directory: %v", err)
	}
}
