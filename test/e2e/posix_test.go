package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// TestPOSIX checks the POSIX behaviour a user expects through a real mount.
func TestPOSIX(t *testing.T) {
	c := startCluster(t)

	t.Run("open flags", func(t *testing.T) {
		p := c.path("flags")
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("0123456789"))
		f.Close()
		_, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		wantErrno(t, err, syscall.EEXIST, "O_EXCL on existing file")
		f, err = os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("ab"))
		f.Close()
		if got := string(mustRead(t, p)); got != "0123456789ab" {
			t.Fatalf("append: %q", got)
		}
		f, err = os.OpenFile(p, os.O_TRUNC|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("x"))
		f.Close()
		if got := string(mustRead(t, p)); got != "x" {
			t.Fatalf("trunc: %q", got)
		}
		_, err = os.Open(c.path("missing"))
		wantErrno(t, err, syscall.ENOENT, "open missing")
	})

	t.Run("offsets sparse and past 4GiB", func(t *testing.T) {
		p := c.path("sparse")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		data := pattern(1, 3<<20)
		big := int64(5<<30 + 12345)
		for _, off := range []int64{0, 7<<20 + 3, big} {
			if _, err := f.WriteAt(data, off); err != nil {
				t.Fatal(err)
			}
		}
		st, _ := f.Stat()
		if st.Size() != big+int64(len(data)) {
			t.Fatalf("size %d", st.Size())
		}
		got := make([]byte, len(data))
		for _, off := range []int64{0, 7<<20 + 3, big} {
			if _, err := f.ReadAt(got, off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("data at %d differs", off)
			}
		}
		hole := make([]byte, 1<<20)
		if _, err := f.ReadAt(hole, 1<<30); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hole, make([]byte, len(hole))) {
			t.Fatal("hole not zero")
		}
		// a read across the end returns the short tail
		n, err := f.ReadAt(got, big+int64(len(data))-10)
		if n != 10 || err != io.EOF {
			t.Fatalf("read at EOF: %d %v", n, err)
		}
	})

	t.Run("truncate", func(t *testing.T) {
		p := c.path("trunc")
		data := pattern(2, 9<<20)
		mustWrite(t, p, data)
		if err := os.Truncate(p, 5<<20+7); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 10<<20); err != nil {
			t.Fatal(err)
		}
		got := mustRead(t, p)
		want := append(append([]byte(nil), data[:5<<20+7]...), make([]byte, 10<<20-(5<<20+7))...)
		if !bytes.Equal(got, want) {
			t.Fatal("truncate down then up did not zero the tail")
		}
		f, _ := os.OpenFile(p, os.O_RDWR, 0)
		if err := f.Truncate(3); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := mustRead(t, p); !bytes.Equal(got, data[:3]) {
			t.Fatalf("ftruncate: %q", got)
		}
	})

	t.Run("fsync", func(t *testing.T) {
		f, err := os.Create(c.path("synced"))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(pattern(3, 1<<20))
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
		f.Close()
	})

	t.Run("rename", func(t *testing.T) {
		os.MkdirAll(c.path("r/a"), 0o755)
		os.MkdirAll(c.path("r/b"), 0o755)
		mustWrite(t, c.path("r/a/f"), []byte("one"))
		mustWrite(t, c.path("r/b/g"), []byte("two"))
		if err := os.Rename(c.path("r/a/f"), c.path("r/b/g")); err != nil {
			t.Fatal(err)
		}
		if got := string(mustRead(t, c.path("r/b/g"))); got != "one" {
			t.Fatalf("rename over: %q", got)
		}
		if _, err := os.Stat(c.path("r/a/f")); !os.IsNotExist(err) {
			t.Fatal("source still there")
		}
		// directory rename, across parents, over an empty directory
		mustWrite(t, c.path("r/a/inner"), []byte("x"))
		os.Mkdir(c.path("r/b/empty"), 0o755)
		// (os.Rename refuses an existing directory target itself, so use
		// the system call)
		if err := unix.Rename(c.path("r/a"), c.path("r/b/empty")); err != nil {
			t.Fatal(err)
		}
		if got := string(mustRead(t, c.path("r/b/empty/inner"))); got != "x" {
			t.Fatal("moved directory lost its content")
		}
		// over a non-empty directory fails
		os.Mkdir(c.path("r/c"), 0o755)
		err := unix.Rename(c.path("r/c"), c.path("r/b/empty"))
		if !errorsIs(err, syscall.ENOTEMPTY) {
			t.Fatalf("rename over non-empty dir: %v", err)
		}
		// into its own subtree fails
		wantErrno(t, unix.Rename(c.path("r/b"), c.path("r/b/empty/sub")), syscall.EINVAL, "rename into itself")
		// a file over a directory and a directory over a file
		wantErrno(t, unix.Rename(c.path("r/b/g"), c.path("r/c")), syscall.EISDIR, "file over directory")
		wantErrno(t, unix.Rename(c.path("r/c"), c.path("r/b/g")), syscall.ENOTDIR, "directory over file")
		// RENAME_NOREPLACE and RENAME_EXCHANGE
		mustWrite(t, c.path("r/x"), []byte("X"))
		mustWrite(t, c.path("r/y"), []byte("Y"))
		err = unix.Renameat2(unix.AT_FDCWD, c.path("r/x"), unix.AT_FDCWD, c.path("r/y"), unix.RENAME_NOREPLACE)
		wantErrno(t, err, syscall.EEXIST, "RENAME_NOREPLACE")
		if err := unix.Renameat2(unix.AT_FDCWD, c.path("r/x"), unix.AT_FDCWD, c.path("r/y"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
		if string(mustRead(t, c.path("r/x"))) != "Y" || string(mustRead(t, c.path("r/y"))) != "X" {
			t.Fatal("exchange did not swap")
		}
	})

	t.Run("unlink open file", func(t *testing.T) {
		p := c.path("doomed")
		data := pattern(4, 5<<20)
		mustWrite(t, p, data)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatal("name still visible")
		}
		got, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("open handle after unlink: %v, %d bytes", err, len(got))
		}
		f.Close()
	})

	t.Run("open file or directory removed or replaced", func(t *testing.T) {
		// fstat of a handle whose inode lost its last name answers
		// nlink 0, as on Linux's own file systems (xfstests generic/035)
		fstat := func(what string, f *os.File) {
			t.Helper()
			var st syscall.Stat_t
			if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 {
				t.Errorf("fstat of %s: nlink %d, %v; want nlink 0", what, st.Nlink, err)
			}
			f.Close()
		}
		for _, d := range []string{"od-a", "od-b", "od-c"} {
			if err := os.Mkdir(c.path(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		mustWrite(t, c.path("of-a"), []byte("a"))
		mustWrite(t, c.path("of-b"), []byte("b"))
		open := func(name string) *os.File {
			t.Helper()
			f, err := os.Open(c.path(name))
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		fb, db, dc := open("of-b"), open("od-b"), open("od-c")
		if err := os.Rename(c.path("of-a"), c.path("of-b")); err != nil {
			t.Fatal(err)
		}
		fstat("a file replaced by a rename", fb)
		// (syscall.Rename: os.Rename refuses a directory as the target)
		if err := syscall.Rename(c.path("od-a"), c.path("od-b")); err != nil {
			t.Fatal(err)
		}
		fstat("a directory replaced by a rename", db)
		if err := syscall.Rmdir(c.path("od-c")); err != nil {
			t.Fatal(err)
		}
		fstat("a removed directory", dc)
		// the names live on: the new ones are what they were renamed from
		if st, err := os.Stat(c.path("od-b")); err != nil || !st.IsDir() {
			t.Fatalf("the directory renamed over another: %v %v", st, err)
		}
		if got := string(mustRead(t, c.path("of-b"))); got != "a" {
			t.Fatalf("the file renamed over another reads %q", got)
		}
	})

	t.Run("links", func(t *testing.T) {
		mustWrite(t, c.path("orig"), []byte("linked"))
		if err := os.Link(c.path("orig"), c.path("hard")); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		syscall.Stat(c.path("orig"), &st)
		if st.Nlink != 2 {
			t.Fatalf("nlink %d", st.Nlink)
		}
		os.Remove(c.path("orig"))
		if string(mustRead(t, c.path("hard"))) != "linked" {
			t.Fatal("hard link lost data")
		}
		if err := os.Symlink("hard", c.path("soft")); err != nil {
			t.Fatal(err)
		}
		if tgt, _ := os.Readlink(c.path("soft")); tgt != "hard" {
			t.Fatalf("readlink %q", tgt)
		}
		if string(mustRead(t, c.path("soft"))) != "linked" {
			t.Fatal("symlink does not resolve")
		}
		wantErrno(t, os.Link(c.path("r"), c.path("dirlink")), syscall.EPERM, "hard link to a directory")
	})

	t.Run("mkdir rmdir readdir", func(t *testing.T) {
		d := c.path("many")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		wantErrno(t, os.Mkdir(d, 0o755), syscall.EEXIST, "mkdir existing")
		const n = 10000
		for i := 0; i < n; i++ {
			f, err := os.Create(filepath.Join(d, fmt.Sprintf("f%05d", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		names, err := readdirnames(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != n || names[0] != "f00000" || names[n-1] != fmt.Sprintf("f%05d", n-1) {
			t.Fatalf("readdir returned %d entries", len(names))
		}
		wantErrno(t, syscall.Rmdir(d), syscall.ENOTEMPTY, "rmdir non-empty")
		os.Mkdir(c.path("gone"), 0o700)
		if err := syscall.Rmdir(c.path("gone")); err != nil {
			t.Fatal(err)
		}
		wantErrno(t, syscall.Rmdir(c.path("flags")), syscall.ENOTDIR, "rmdir a file")
		wantErrno(t, syscall.Unlink(d), syscall.EISDIR, "unlink a directory")
	})

	t.Run("chmod chown utimens and permissions", func(t *testing.T) {
		// the test's temporary directories are 0700: open the path to the
		// mount so that only the mount's own permissions decide
		for d := c.mnt; d != "/"; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && d != c.mnt && st.Mode().Perm()&0o005 != 0o005 {
				os.Chmod(d, st.Mode().Perm()|0o755)
			}
		}
		p := c.path("private")
		mustWrite(t, p, []byte("secret"))
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		if st.Mode().Perm() != 0o600 || !st.ModTime().Equal(mt) {
			t.Fatalf("mode %v mtime %v", st.Mode(), st.ModTime())
		}
		// another user cannot read it, nor write into a root-owned 0755 dir
		out, err := runAs(65534, "cat", p)
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Fatalf("uid 65534 read a 0600 root file: %v %s", err, out)
		}
		out, err = runAs(65534, "touch", c.path("r/intruder"))
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Fatalf("uid 65534 created a file in a 0755 root dir: %v %s", err, out)
		}
		// chown to that user lets them read; files they create are theirs
		os.Chown(p, 65534, 65534)
		if out, err := runAs(65534, "cat", p); err != nil || out != "secret" {
			t.Fatalf("owner cannot read: %v %s", err, out)
		}
		os.Mkdir(c.path("shared"), 0o777)
		os.Chmod(c.path("shared"), 0o777)
		if out, err := runAs(65534, "touch", c.path("shared/mine")); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		var sst syscall.Stat_t
		syscall.Stat(c.path("shared/mine"), &sst)
		if sst.Uid != 65534 {
			t.Fatalf("new file owned by %d", sst.Uid)
		}
		// a non-owner cannot chmod or chown
		out, err = runAs(65534, "chmod", "777", c.path("flags"))
		if err == nil {
			t.Fatalf("non-owner chmod succeeded: %s", out)
		}
	})

	t.Run("statfs", func(t *testing.T) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(c.mnt, &st); err != nil {
			t.Fatal(err)
		}
		total := st.Blocks * uint64(st.Bsize)
		if total < 1536<<20 {
			t.Fatalf("statfs reports %d bytes, want at least the mem+ssd budgets", total)
		}
	})

	t.Run("N-1 concurrent writers", func(t *testing.T) {
		p := c.path("shared-file")
		f, _ := os.Create(p)
		f.Close()
		const procs, block, blocks = 4, 256 << 10, 16
		var wg sync.WaitGroup
		errs := make(chan error, procs)
		for r := 0; r < procs; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				// each process writes its strided blocks with dd
				for b := 0; b < blocks; b++ {
					blk := b*procs + r
					cmd := exec.Command("dd", "of="+p, "bs=262144", "count=1", "iflag=fullblock", "conv=notrunc", "status=none",
						fmt.Sprintf("seek=%d", blk))
					cmd.Stdin = bytes.NewReader(pattern(blk, block))
					if out, err := runCmd(time.Minute, cmd); err != nil {
						errs <- fmt.Errorf("rank %d: %v %s", r, err, out)
						return
					}
				}
			}(r)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got := mustRead(t, p)
		if len(got) != procs*blocks*block {
			t.Fatalf("size %d", len(got))
		}
		for blk := 0; blk < procs*blocks; blk++ {
			if !bytes.Equal(got[blk*block:(blk+1)*block], pattern(blk, block)) {
				t.Fatalf("block %d differs", blk)
			}
		}
	})
}

func readdirnames(d string) ([]string, error) {
	f, err := os.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// runAs runs a command as another user.
func runAs(uid uint32, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return runCmd(time.Minute, cmd)
}

// TestJobIdentity: every request carries the caller's job id (from the
// configured variable), rank and node, end to end to the forwarding node.
func TestJobIdentity(t *testing.T) {
	c := startCluster(t, "--jobid-var", "MY_JOB")
	cmd := exec.Command("dd", "if=/dev/zero", "of="+c.path("ckpt"), "bs=1M", "count=3", "oflag=direct", "status=none")
	cmd.Env = append(os.Environ(), "MY_JOB=job-42", "SLURM_PROCID=7", "SLURM_JOB_ID=wrong")
	if out, err := runCmd(time.Minute, cmd); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cmd = exec.Command("cat", c.path("ckpt"))
	cmd.Env = append(os.Environ(), "MY_JOB=job-43", "OMPI_COMM_WORLD_RANK=2")
	if out, err := runCmd(time.Minute, cmd); err != nil || len(out) != 3<<20 {
		t.Fatalf("%v (%d bytes)", err, len(out))
	}
	out, err := c.sluice("job", "activity")
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	host, _ := os.Hostname()
	var w, r string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		switch f[0] {
		case "job-42":
			w = line
			if f[5]+" "+f[6] != "3.0 MiB" || f[7] != "1" || f[8] != host {
				t.Fatalf("job-42 should have written 3 MiB from 1 rank on %s:\n%s", host, out)
			}
		case "job-43":
			r = line
			if f[3]+" "+f[4] != "3.0 MiB" {
				t.Fatalf("job-43 should have read 3 MiB:\n%s", out)
			}
		case "wrong":
			t.Fatalf("the job id came from SLURM_JOB_ID, not the configured variable:\n%s", out)
		}
	}
	if w == "" || r == "" {
		t.Fatalf("jobs missing:\n%s", out)
	}
}

// TestMetricsEndpoint: a daemon started with --metrics serves Prometheus
// text at /metrics with its own series and the Go runtime's.
func TestMetricsEndpoint(t *testing.T) {
	c := startCluster(t)
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(sluiceBin, "fwd", "--meta", cl.MetaAddr, "--secret-file", cl.SecretFile(), "--metrics", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	record(t, leftover{Procs: []proc{procOf(cmd.Process.Pid)}})
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var body string
	eventually(t, 10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	}, "the metrics endpoint")
	for _, want := range []string{`sluice_fwd_queue_depth{class="bulk"} 0`, "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, tail(body, 20))
		}
	}

	// a second mount of the same cluster with --metrics: the client's
	// series count what the application did
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	maddr := ln.Addr().String()
	ln.Close()
	mnt2 := c.mount2(t, "--metrics", maddr)
	mustWrite(t, filepath.Join(mnt2, "m"), make([]byte, 3<<20))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + maddr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); strings.Contains(body, `sluice_client_requests_total{op="write"} 3`) {
			break
		}
	}
	if !strings.Contains(body, `sluice_client_requests_total{op="write"} 3`) {
		t.Fatalf("client /metrics:\n%s", body)
	}
	for _, want := range []string{"sluice_client_request_duration_seconds_bucket", "sluice_client_writebehind_bytes", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Fatalf("client /metrics lacks %q", want)
		}
	}
}

// TestAppendCloseToOpen: an O_APPEND open on one mount right after
// another mount grew the file and closed it appends at the grown end,
// even though its kernel still holds the old size (the change feed has
// not reached it yet, or it does not follow the feed and caches
// attributes for a second): the service's answer to the open gives the
// size (vfs.Appends). Both mounts write in turns, through O_APPEND and
// pwrite past the end, each round checked against the bytes expected.
func TestAppendCloseToOpen(t *testing.T) {
	// slow-feed: the second mount hears of the first's closes 30 ms late,
	// so its opens come before the feed's invalidations (the CI failure of
	// an open that counted the feed's position, not the invalidations
	// sent, and an fstat answered from attributes kept at its own close)
	for _, v := range []struct{ name, flags string }{{"feed", ""}, {"no-feed", "--meta-cache=0"}, {"slow-feed", "--fault-feed-delay=30ms"}} {
		t.Run(v.name, func(t *testing.T) {
			c := startCluster(t)
			mounts := []string{c.mnt, c.mount2(t, strings.Fields(v.flags)...)}
			var want []byte
			p := func(m int) string { return filepath.Join(mounts[m], "log") }
			mustWrite(t, p(0), nil)
			for i := 0; i < 40; i++ {
				m := i % 2
				rec := []byte(fmt.Sprintf("record %d from mount %d\n", i, m))
				flags := os.O_WRONLY | os.O_APPEND
				if i%3 == 2 {
					flags = os.O_WRONLY // pwrite at the end this mount was told
				}
				f, err := os.OpenFile(p(m), flags, 0)
				if err != nil {
					t.Fatal(err)
				}
				if flags&os.O_APPEND != 0 {
					_, err = f.Write(rec)
				} else {
					var st os.FileInfo
					if st, err = f.Stat(); err == nil {
						_, err = f.WriteAt(rec, st.Size())
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				want = append(want, rec...)
				// read back on the writing mount, whose kernel caches the
				// size it read (its own close's): the other mount's next
				// write makes that stale before this mount's next open
				got, err := os.ReadFile(p(m))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("after write %d (mount %d, flags %#o): it reads %q (%v), want %q", i, m, flags, got, err, want)
				}
				// (a read marks the atime stale, so the next stat would
				// ask anyway: this one leaves the attributes clean)
				if st, err := os.Stat(p(m)); err != nil || st.Size() != int64(len(want)) {
					t.Fatalf("after write %d: stat on the writing mount %v %v, want %d bytes", i, st, err, len(want))
				}
			}
			for m := range mounts {
				if got, err := os.ReadFile(p(m)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("mount %d reads %q (%v), want %q", m, got, err, want)
				}
			}
		})
	}
}

// TestMetaCacheCoherent: two mounts cache lookups and attributes for a
// minute (the default --meta-cache), yet each sees the other's creates,
// renames, removals, chmods and growth at once: the change feed
// invalidates their kernels' caches. Without the feed every check below
// would see the cached, stale answer for 60 s.
func TestMetaCacheCoherent(t *testing.T) {
	c := startCluster(t)
	a := c.mnt
	b := c.mount2(t)
	soon := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(500 * time.Millisecond)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("the other mount did not see %s within 0.5 s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	size := func(p string) int64 {
		st, err := os.Stat(p)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	mustWrite(t, filepath.Join(a, "f"), []byte("v1"))
	soon("a new file", func() bool { return size(filepath.Join(b, "f")) == 2 })
	// b has f cached now; a renames it
	if err := os.Rename(filepath.Join(a, "f"), filepath.Join(a, "g")); err != nil {
		t.Fatal(err)
	}
	soon("a rename", func() bool { return !exists(filepath.Join(b, "f")) && exists(filepath.Join(b, "g")) })
	if err := os.Chmod(filepath.Join(a, "g"), 0o600); err != nil {
		t.Fatal(err)
	}
	soon("a chmod", func() bool {
		st, err := os.Stat(filepath.Join(b, "g"))
		return err == nil && st.Mode().Perm() == 0o600
	})
	// growth: written and closed on a, seen by b (close-to-open)
	f, err := os.OpenFile(filepath.Join(a, "g"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 1<<20))
	f.Close()
	soon("a file's growth", func() bool { return size(filepath.Join(b, "g")) == 2+1<<20 })
	// and the other way round: b removes, a sees it gone
	if err := os.Remove(filepath.Join(b, "g")); err != nil {
		t.Fatal(err)
	}
	soon("a removal", func() bool { return !exists(filepath.Join(a, "g")) })
	if err := os.Mkdir(filepath.Join(b, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	soon("a new directory", func() bool { return exists(filepath.Join(a, "d")) })
	// a's own caching works: repeated stats do not reach the service
	// (checked by the benchmark's stat rate); the cached answers are right
	for i := 0; i < 100; i++ {
		if !exists(filepath.Join(a, "d")) {
			t.Fatal("cached directory vanished")
		}
	}

	// A file's attributes after a's own close are answered by a
	// (vfs.DirCache.NoteFileAttr): right on a at once, and dropped when
	// another mount changes the file (its size report reaches a's feed)
	// or a changes it again.
	p, pb := filepath.Join(a, "closed"), filepath.Join(b, "closed")
	mustWrite(t, p, make([]byte, 1000))
	for i := 0; i < 3; i++ {
		if size(p) != 1000 {
			t.Fatalf("size %d on the writing mount after its close, want 1000", size(p))
		}
	}
	soon("a closed file's size", func() bool { return size(pb) == 1000 })
	g, err := os.OpenFile(pb, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.Write(make([]byte, 500))
	g.Close()
	soon("growth by another mount of a file this one closed", func() bool { return size(p) == 1500 })
	if err := os.Truncate(pb, 10); err != nil {
		t.Fatal(err)
	}
	soon("a truncate by another mount", func() bool { return size(p) == 10 })
	h, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Write([]byte("abc"))
	if st, err := h.Stat(); err != nil || st.Size() != 13 {
		t.Fatalf("fstat after a write on the writing mount: %v %v, want 13 bytes", st, err)
	}
	h.Close()
	if size(p) != 13 {
		t.Fatalf("size %d after the writing mount's second close, want 13", size(p))
	}
	if err := os.Link(p, p+"2"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Fatalf("links after a link on the writing mount: %v %v", st, err)
	}
	os.Remove(p + "2")

	// The directory cache: a knows every name of a directory it made (or
	// listed) and the directory's attributes, and answers lookups of absent
	// names and the directory's getattrs itself. Another mount's changes
	// must reach it.
	own := filepath.Join(a, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	mtime := func(p string) time.Time {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	if exists(filepath.Join(own, "x")) { // answered by a's cache
		t.Fatal("own/x exists before it was made")
	}
	m0 := mtime(own)
	mustWrite(t, filepath.Join(a, "own", "mine"), nil)
	if m1 := mtime(own); !m1.After(m0) { // a's own change: new attributes came with the reply
		t.Fatalf("directory mtime %v after a create in it, was %v", m1, m0)
	}
	m1 := mtime(own)
	mustWrite(t, filepath.Join(b, "own", "x"), []byte("from b"))
	soon("a name another mount added to a directory this one made", func() bool { return exists(filepath.Join(own, "x")) })
	soon("the directory's attributes after another mount's change", func() bool { return mtime(own).After(m1) })
	// a listed d (made by b): its listing is complete on a now
	if _, err := os.ReadDir(filepath.Join(a, "d")); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(a, "d", "w")) {
		t.Fatal("d/w exists before it was made")
	}
	mustWrite(t, filepath.Join(b, "d", "w"), nil)
	soon("a name added to a directory this mount listed", func() bool { return exists(filepath.Join(a, "d", "w")) })
	// renames on a keep a's listings right
	if err := os.Rename(filepath.Join(own, "mine"), filepath.Join(a, "d", "moved")); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(own, "mine")) || !exists(filepath.Join(a, "d", "moved")) {
		t.Fatal("rename not reflected on the mount that made it")
	}
	soon("a rename by another mount", func() bool { return exists(filepath.Join(b, "d", "moved")) })
	if err := os.Remove(filepath.Join(b, "d", "moved")); err != nil {
		t.Fatal(err)
	}
	soon("a removal in a listed directory", func() bool { return !exists(filepath.Join(a, "d", "moved")) })
}
