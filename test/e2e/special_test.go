package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSpecialFiles: FIFOs, UNIX sockets and device files are inodes like
// any other (created, listed, stat'ed with their type and device number,
// renamed, linked, chmod'ed, removed); their data is the kernel's.
func TestSpecialFiles(t *testing.T) {
	c := startCluster(t)
	d := c.path("dev")
	os.Mkdir(d, 0o755)
	fifo := filepath.Join(d, "fifo")
	if err := unix.Mkfifo(fifo, 0o640); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	// data through the FIFO never reaches sluice, but flows
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			w.Write([]byte("through the pipe"))
			w.Close()
		}
	}()
	r, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	r.Close()
	if string(buf[:n]) != "through the pipe" {
		t.Fatalf("read from the FIFO: %q", buf[:n])
	}
	sock := filepath.Join(d, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	go func() {
		if cn, err := ln.Accept(); err == nil {
			cn.Write([]byte("hello"))
			cn.Close()
		}
	}()
	cn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatalf("connect to a socket on the mount: %v", err)
	}
	n, _ = cn.Read(buf)
	cn.Close()
	ln.Close()
	if string(buf[:n]) != "hello" {
		t.Fatalf("socket: %q", buf[:n])
	}
	chr, blk := filepath.Join(d, "null"), filepath.Join(d, "blk")
	if err := unix.Mknod(chr, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod char: %v", err)
	}
	if err := unix.Mknod(blk, syscall.S_IFBLK|0o600, int(unix.Mkdev(7, 9))); err != nil {
		t.Fatalf("mknod block: %v", err)
	}
	for _, k := range []struct {
		p    string
		typ  uint32
		rdev uint64
	}{{fifo, syscall.S_IFIFO, 0}, {sock, syscall.S_IFSOCK, 0}, {chr, syscall.S_IFCHR, unix.Mkdev(1, 3)}, {blk, syscall.S_IFBLK, unix.Mkdev(7, 9)}} {
		var st syscall.Stat_t
		if err := syscall.Lstat(k.p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&syscall.S_IFMT != k.typ || st.Rdev != k.rdev {
			t.Fatalf("%s: mode %o rdev %#x, want type %o rdev %#x", k.p, st.Mode, st.Rdev, k.typ, k.rdev)
		}
	}
	// (the mount is nodev, as FUSE mounts are: the device files cannot be
	// opened through it)
	if err := os.Rename(chr, filepath.Join(d, "null2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(fifo, filepath.Join(d, "fifo2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(blk, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	names, _ := readdirnames(d)
	if strings.Join(names, " ") != "blk fifo fifo2 null2 sock" {
		t.Fatalf("listing %v", names)
	}
	var st syscall.Stat_t
	syscall.Lstat(filepath.Join(d, "fifo2"), &st)
	if st.Nlink != 2 || st.Mode&0o7777 != 0o600 {
		t.Fatalf("linked FIFO: nlink %d mode %o", st.Nlink, st.Mode)
	}
	for _, n := range names {
		if err := os.Remove(filepath.Join(d, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	// truncating a FIFO is the kernel's EINVAL
	unix.Mkfifo(fifo+"x", 0o644)
	if err := os.Truncate(fifo+"x", 0); err == nil {
		t.Fatal("truncate of a FIFO succeeded")
	}
}

// TestSetuidClearedOnWrite: a write by a process without CAP_FSETID
// (another user, or the owner itself) clears the setuid bit, and the
// setgid bit of a group-executable file, as Linux does (with direct I/O
// the kernel leaves it to the file system); a stat asking for the mode
// alone sees it at once (xfstests generic/355: the kernel answers such a
// stat from its cache).
func TestSetuidClearedOnWrite(t *testing.T) {
	c := startCluster(t)
	// the other user must reach the mount: open up the test's directories
	for d := filepath.Dir(c.mnt); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	for i, m := range []os.FileMode{0o4777, 0o2777, 0o6777, 0o2767, 0o6644, 0o6744} {
		p := c.path("suid")
		mustWrite(t, p, []byte("x"))
		if i >= 4 { // the writer owns the file
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		if err := syscall.Chmod(p, uint32(m)); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		syscall.Stat(p, &st) // the kernel caches the mode with the bits
		// a pwrite through O_RDWR after an fstat, as xfs_io's: the stat
		// has the kernel cache the mode with the bits for long
		if out, err := runAs(65534, "/usr/bin/python3", "-c",
			"import os,sys; os.stat(sys.argv[1]); fd=os.open(sys.argv[1], os.O_RDWR); os.fstat(fd); os.pwrite(fd, b'y'*4096, 0)", p); err != nil {
			t.Fatalf("write as nobody: %v %s", err, out)
		}
		want := uint32(m) &^ syscall.S_ISUID
		if m&0o010 != 0 {
			want &^= syscall.S_ISGID
		}
		var stx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MODE, &stx); err != nil {
			t.Fatal(err)
		}
		if uint32(stx.Mode)&0o7777 != want {
			t.Fatalf("mode %o after a write by nobody, the mode alone asked (statx STATX_MODE): %o, want %o", m, stx.Mode&0o7777, want)
		}
		syscall.Stat(p, &st)
		if st.Mode&0o7777 != want {
			t.Fatalf("mode %o after a write by another user: %o, want %o", m, st.Mode&0o7777, want)
		}
		// the owner's own writes (root here) keep the bits
		syscall.Chmod(p, uint32(m))
		f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		f.Write([]byte("z"))
		f.Close()
		syscall.Stat(p, &st)
		if st.Mode&0o7777 != uint32(m) {
			t.Fatalf("mode %o after root's write: %o", m, st.Mode&0o7777)
		}
		os.Remove(p)
	}
}

// TestRewinddir: a directory stream rewound (rewinddir(3), a seek to 0)
// lists the directory as it is then, names added since it was opened or
// first read included, also names another node added (xfstests
// generic/471); a stream read on without a rewind keeps its listing.
func TestRewinddir(t *testing.T) {
	c := startCluster(t)
	b := c.mount2(t)
	d := c.path("rd")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := func() []string {
		t.Helper()
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		ns, err := f.Readdirnames(-1)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(ns)
		return ns
	}
	for i := 0; i < 300; i++ { // after the open, before any read
		mustWrite(t, filepath.Join(d, fmt.Sprintf("a%03d", i)), nil)
	}
	if got := names(); len(got) != 300 || got[0] != "a000" || got[299] != "a299" {
		t.Fatalf("rewound after creates since the open: %d names (%v...)", len(got), got[:min(3, len(got))])
	}
	mustWrite(t, filepath.Join(d, "b"), nil)
	mustWrite(t, filepath.Join(b, "rd", "c"), nil) // another node's
	if got := names(); len(got) != 302 || got[300] != "b" || got[301] != "c" {
		t.Fatalf("rewound after creates since the last read, one by another node: %d names, last %v", len(got), got[max(0, len(got)-2):])
	}
}
