package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

// TestFallocateKillsPriv: an fallocate by an unprivileged caller clears
// set-user-ID, and set-group-ID unless the file is not group-executable
// and the caller is in its group, as Linux's file_modified does
// (xfstests generic/684 and 685); root's keeps both.
func TestFallocateKillsPriv(t *testing.T) {
	c := startCluster(t)
	for d := filepath.Dir(c.mnt); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	p := c.path("f")
	for _, tc := range []struct {
		mode, want uint32
		gid        int
		uid        uint32
		mode2      string // fallocate(1)'s mode flag
	}{
		{0o6666, 0o666, 0, 65534, "-p"},      // outside the group: both go
		{0o6676, 0o676, 0, 65534, "-z"},      // group-executable: both go
		{0o2666, 0o2666, 65534, 65534, "-p"}, // in the group, not executable: kept
		{0o6766, 0o2766, 65534, 65534, "-z"}, // in the group: set-user-ID only
		{0o6777, 0o6777, 0, 0, "-p"},         // root: kept
	} {
		mustWrite(t, p, pattern(3, 64<<10))
		if err := os.Chown(p, 0, tc.gid); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); err != nil { // the mode with the bits, cached
			t.Fatal(err)
		}
		cmd := exec.Command("fallocate", tc.mode2, "-o", "0", "-l", "4096", p)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.uid}}
		if out, err := runCmd(time.Minute, cmd); err != nil {
			t.Fatalf("fallocate %s as %d: %v %s", tc.mode2, tc.uid, err, out)
		}
		var stx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MODE, &stx); err != nil {
			t.Fatal(err)
		}
		if got := uint32(stx.Mode) & 0o7777; got != tc.want {
			t.Fatalf("mode %o, group %d, fallocate %s as %d: %o, want %o", tc.mode, tc.gid, tc.mode2, tc.uid, got, tc.want)
		}
		os.Remove(p)
	}
}
