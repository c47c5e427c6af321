package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFallocate: fallocate(2) against a model of the file. A hole punched
// (PUNCH_HOLE with KEEP_SIZE) and a range zeroed (ZERO_RANGE, with and
// without KEEP_SIZE, inside the file, across its end and past it) read
// back as zeros with the size Linux gives, on this mount and, after a
// close, on a second one; the modes sluice does not offer (allocation
// ahead: 0 and KEEP_SIZE alone; PUNCH_HOLE without KEEP_SIZE, as Linux;
// COLLAPSE_RANGE) answer EOPNOTSUPP, every time (the kernel does not
// turn fallocate off for the mount).
func TestFallocate(t *testing.T) {
	c := startCluster(t)
	b := c.mount2(t)
	p := c.path("f")
	model := pattern(5, 3<<20+777)
	mustWrite(t, p, model)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zero := func(off, n int64, keep bool) {
		if end := off + n; end > int64(len(model)) && !keep {
			model = append(model, make([]byte, end-int64(len(model)))...)
		}
		for i := off; i < off+n && i < int64(len(model)); i++ {
			model[i] = 0
		}
	}
	check := func(when string, path string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if !bytes.Equal(got, model) {
			i := 0
			for i < len(got) && i < len(model) && got[i] == model[i] {
				i++
			}
			t.Fatalf("%s: %d bytes, want %d; first difference at %d", when, len(got), len(model), i)
		}
	}
	for _, tc := range []struct {
		name    string
		mode    uint32
		off, n  int64
		keep    bool
		refused bool
	}{
		{"punch a hole across chunk pieces", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 1<<20 + 100, 3 << 19, true, false},
		{"zero a range, keeping the size, across the end", unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE, 3<<20 + 700, 1000, true, false},
		{"punch past the end", unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 4 << 20, 4096, true, false},
		{"zero a range past the end: the file grows", unix.FALLOC_FL_ZERO_RANGE, 3<<20 + 5000, 70000, false, false},
		{"allocate ahead", 0, 0, 8 << 20, false, true},
		{"allocate ahead, keeping the size", unix.FALLOC_FL_KEEP_SIZE, 0, 8 << 20, false, true},
		{"punch without keeping the size", unix.FALLOC_FL_PUNCH_HOLE, 0, 4096, false, true},
		{"collapse a range", unix.FALLOC_FL_COLLAPSE_RANGE, 0, 1 << 20, false, true},
		{"zero the first bytes", unix.FALLOC_FL_ZERO_RANGE, 0, 10, false, false},
	} {
		err := unix.Fallocate(int(f.Fd()), tc.mode, tc.off, tc.n)
		if tc.refused {
			if !errors.Is(err, unix.EOPNOTSUPP) {
				t.Fatalf("%s: %v, want EOPNOTSUPP", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		zero(tc.off, tc.n, tc.keep)
		if st, err := f.Stat(); err != nil || st.Size() != int64(len(model)) {
			t.Fatalf("%s: size %v (%v), want %d", tc.name, st.Size(), err, len(model))
		}
		check(tc.name, p)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	check("on the other mount after the close", filepath.Join(b, "f"))
}
