package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWritebackTreeModel: random mkdirs, rmdirs, creates, removals and
// renames (of files and of directories, across directories and over
// existing targets) in a tree mount b makes, so that its directories are
// made, filled and removed by the mount itself (write-back), checked
// against a model of the tree after every step on b, and every few steps
// on mount a, whose walk recalls every delegation. The model knows only
// POSIX: what exists, what each call must return (ENOENT, EEXIST,
// ENOTEMPTY, EISDIR, EINVAL) and what each file holds.
func TestWritebackTreeModel(t *testing.T) {
	a, b, maddr := wbCluster(t)
	mkBefore, rmBefore := wbCount(t, maddr, "creates"), wbCount(t, maddr, "unlinks")
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLUICE_TREE_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (SLUICE_TREE_SEED reruns it)", seed)
	r := rand.New(rand.NewSource(seed))
	const root = "wbt"
	if err := os.Mkdir(filepath.Join(b, root), 0o755); err != nil {
		t.Fatal(err)
	}
	// the model: relative path → nil for a directory, the data of a file;
	// names d* are only ever directories, f* only files, so every inner
	// component of a path is a directory or missing
	model := map[string][]byte{}
	isDir := func(p string) bool { d, ok := model[p]; return ok && d == nil }
	exists := func(p string) bool { _, ok := model[p]; return ok }
	parentOK := func(p string) bool { d := filepath.Dir(p); return d == "." || isDir(d) }
	empty := func(p string) bool {
		for q := range model {
			if strings.HasPrefix(q, p+"/") {
				return false
			}
		}
		return true
	}
	// a name in a directory that exists, mostly; else anywhere
	randPath := func(prefix string) string {
		parent := ""
		if r.Intn(8) > 0 {
			dirs := []string{""}
			for q, d := range model {
				if d == nil && strings.Count(q, "/") < 2 {
					dirs = append(dirs, q)
				}
			}
			sort.Strings(dirs)
			parent = dirs[r.Intn(len(dirs))]
		} else {
			for i := r.Intn(3); i > 0; i-- {
				parent = filepath.Join(parent, fmt.Sprintf("d%d", r.Intn(3)))
			}
		}
		return filepath.Join(parent, fmt.Sprintf("%s%d", prefix, r.Intn(3)))
	}
	abs := func(m, p string) string { return filepath.Join(m, root, p) }
	verify := func(m, who string, step int) {
		t.Helper()
		got := map[string][]byte{}
		err := filepath.Walk(filepath.Join(m, root), func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join(m, root), p)
			if rel == "." {
				return nil
			}
			if fi.IsDir() {
				got[rel] = nil
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = append([]byte{}, data...)
			return nil
		})
		if err != nil {
			t.Fatalf("step %d: walk on %s: %v", step, who, err)
		}
		var diffs []string
		for p, d := range model {
			g, ok := got[p]
			switch {
			case !ok:
				diffs = append(diffs, "missing "+p)
			case (d == nil) != (g == nil) || !bytes.Equal(d, g):
				diffs = append(diffs, fmt.Sprintf("%s: %d bytes (dir %v), model %d bytes (dir %v)", p, len(g), g == nil, len(d), d == nil))
			}
		}
		for p := range got {
			if !exists(p) {
				diffs = append(diffs, "extra "+p)
			}
		}
		if len(diffs) > 0 {
			sort.Strings(diffs)
			t.Fatalf("step %d: %s differs from the model: %v", step, who, diffs)
		}
	}
	ops := map[string]int{}
	for step := 0; step < 400; step++ {
		var err error
		var want syscall.Errno // 0: must succeed
		var what string
		var apply func()
		switch k := r.Intn(12); {
		case k < 3: // mkdir
			p := randPath("d")
			what = "mkdir " + p
			switch {
			case !parentOK(p):
				want = syscall.ENOENT
			case exists(p):
				want = syscall.EEXIST
			}
			err = os.Mkdir(abs(b, p), 0o755)
			apply = func() { model[p] = nil }
		case k < 5: // rmdir
			p := randPath("d")
			what = "rmdir " + p
			switch {
			case !exists(p):
				want = syscall.ENOENT
			case !empty(p):
				want = syscall.ENOTEMPTY
			}
			err = syscall.Rmdir(abs(b, p))
			apply = func() { delete(model, p) }
		case k < 8: // create with data
			p := randPath("f")
			what = "create " + p
			switch {
			case !parentOK(p):
				want = syscall.ENOENT
			case exists(p):
				want = syscall.EEXIST
			}
			data := pattern(step, r.Intn(3000))
			var f *os.File
			if f, err = os.OpenFile(abs(b, p), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				_, err = f.Write(data)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			apply = func() { model[p] = data }
		case k < 9: // unlink (of a file, or of a directory: EISDIR)
			p := randPath("f")
			if r.Intn(4) == 0 {
				p = randPath("d")
			}
			what = "unlink " + p
			switch {
			case !exists(p):
				want = syscall.ENOENT
			case isDir(p):
				want = syscall.EISDIR
			}
			err = syscall.Unlink(abs(b, p))
			apply = func() { delete(model, p) }
		default: // rename a file or a directory
			kind := "f"
			if r.Intn(2) == 0 {
				kind = "d"
			}
			src, dst := randPath(kind), randPath(kind)
			what = "rename " + src + " " + dst
			switch {
			case !exists(src) || !parentOK(dst):
				want = syscall.ENOENT
			case src == dst:
			case kind == "d" && strings.HasPrefix(dst+"/", src+"/"):
				want = syscall.EINVAL
			case kind == "d" && exists(dst) && !empty(dst):
				want = syscall.ENOTEMPTY
			}
			err = syscall.Rename(abs(b, src), abs(b, dst)) // (os.Rename refuses an existing directory as target)
			apply = func() {
				if src == dst {
					return
				}
				moved := map[string][]byte{}
				for q, d := range model {
					if q == src || strings.HasPrefix(q, src+"/") {
						moved[dst+strings.TrimPrefix(q, src)] = d
						delete(model, q)
					}
				}
				delete(model, dst)
				for q, d := range moved {
					model[q] = d
				}
			}
		}
		op := strings.Fields(what)[0]
		if want != 0 {
			wantErrno(t, err, want, fmt.Sprintf("step %d: %s", step, what))
			ops[op+" refused"]++
		} else {
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			apply()
			ops[op]++
		}
		verify(b, "the making node", step)
		if step%40 == 39 {
			verify(a, "the other node", step)
			time.Sleep(wbCooldown) // the directories may be delegated again
		}
	}
	verify(a, "the other node", 400)
	t.Logf("operations: %v; answered by the mount: %d creates and mkdirs, %d removals", ops,
		wbCount(t, maddr, "creates")-mkBefore, wbCount(t, maddr, "unlinks")-rmBefore)
}
