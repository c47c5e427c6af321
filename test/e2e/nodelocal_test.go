package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// metaNamespaceOps sums the metadata service's namespace requests (its
// Prometheus counters at addr): what node-local mode must not cause.
func metaNamespaceOps(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	nsOps := map[string]bool{}
	for _, op := range []wire.Op{ns.OpLookup, ns.OpGetattr, ns.OpSetattr, ns.OpMknod, ns.OpMkdir, ns.OpUnlink,
		ns.OpRmdir, ns.OpRename, ns.OpLink, ns.OpSymlink, ns.OpReadlink, ns.OpReaddir, ns.OpOpen, ns.OpRelease,
		ns.OpLayout, ns.OpAlloc, ns.OpExtend, ns.OpCreateBatch, ns.OpDelegate} {
		nsOps[op.String()] = true
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sluice_meta_requests_total{") {
			continue
		}
		op := line[strings.Index(line, `op="`)+4:]
		op = op[:strings.IndexByte(op, '"')]
		if nsOps[op] {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// TestNodeLocal: a directory in node-local mode keeps each entry (a
// node's private directory) on the data server its name hashes to; a run
// of creates, writes, reads, stats, renames, links, truncates and
// removals inside the private directories asks the metadata service
// nothing; the directory lists every node's entry (and the entries it
// had before); renames out of a data server's namespace are EXDEV (mv
// copies); a restarted data server serves its files under the same inode
// numbers.
func TestNodeLocal(t *testing.T) {
	metrics := freeAddr(t)
	c := startCluster(t, "--mem-servers", "3", "--ssd", "0", "--meta-flags", "--metrics "+metrics)
	dir := c.path("L")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "before"), []byte("global"))
	if out, err := c.sluice("file", "stripe", "--local", dir); err != nil || !strings.Contains(out, "node-local") {
		t.Fatalf("setstripe --local: %v %s", err, out)
	}
	servers := map[uint64]int{}
	var ranks []string
	for r := 0; r < 8; r++ {
		p := filepath.Join(dir, fmt.Sprintf("rank%d", r))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if !wire.IsLocal(st.Ino) {
			t.Fatalf("%s has global inode %d", p, st.Ino)
		}
		servers[wire.LocalServer(st.Ino)]++
		ranks = append(ranks, p)
	}
	if len(servers) < 2 {
		t.Fatalf("8 private directories on %d data servers: %v", len(servers), servers)
	}
	t.Logf("private directories per data server: %v", servers)

	before := metaNamespaceOps(t, metrics)
	for i, p := range ranks {
		for f := 0; f < 20; f++ {
			mustWrite(t, filepath.Join(p, fmt.Sprintf("f%02d", f)), pattern(i*100+f, 3000+f))
		}
		for f := 0; f < 20; f++ {
			if got := mustRead(t, filepath.Join(p, fmt.Sprintf("f%02d", f))); !bytes.Equal(got, pattern(i*100+f, 3000+f)) {
				t.Fatalf("%s/f%02d: %d bytes read back wrong", p, f, len(got))
			}
		}
		ents, err := os.ReadDir(p)
		if err != nil || len(ents) != 20 {
			t.Fatalf("%s lists %d entries (%v)", p, len(ents), err)
		}
		// a subdirectory, a rename within, a hard link, a symlink, a truncate
		sub := filepath.Join(p, "sub")
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(p, "f00"), filepath.Join(sub, "moved")); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, filepath.Join(sub, "moved")); !bytes.Equal(got, pattern(i*100, 3000)) {
			t.Fatal("a renamed file's bytes changed")
		}
		if err := os.Link(filepath.Join(p, "f01"), filepath.Join(p, "hard")); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(p, "f01"), &st); err != nil || st.Nlink != 2 {
			t.Fatalf("a hard-linked file has %d links (%v)", st.Nlink, err)
		}
		if err := os.Symlink("f02", filepath.Join(p, "sym")); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, filepath.Join(p, "sym")); !bytes.Equal(got, pattern(i*100+2, 3002)) {
			t.Fatal("read through a symlink")
		}
		if err := os.Truncate(filepath.Join(p, "f03"), 100); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, filepath.Join(p, "f03")); !bytes.Equal(got, pattern(i*100+3, 3003)[:100]) {
			t.Fatalf("after a truncate to 100: %d bytes", len(got))
		}
		if err := os.Chmod(filepath.Join(p, "f04"), 0o600); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(p, "f04")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("chmod 600: %v %v", fi.Mode(), err)
		}
		for f := 10; f < 20; f++ {
			if err := os.Remove(filepath.Join(p, fmt.Sprintf("f%02d", f))); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Remove(filepath.Join(sub, "moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(sub); err != nil {
			t.Fatal(err)
		}
	}
	after := metaNamespaceOps(t, metrics)
	t.Logf("metadata-service namespace requests during the run in the private directories: %.0f", after-before)
	if after != before {
		t.Errorf("the run in private directories made %.0f requests of the metadata service", after-before)
	}

	// the directory lists the private directories and the entry it had
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !sort.StringsAreSorted(names) || len(names) != 9 || names[0] != "before" {
		t.Fatalf("the local-mode directory lists %v", names)
	}
	if got := mustRead(t, filepath.Join(dir, "before")); string(got) != "global" {
		t.Fatalf("the entry made before local mode: %q", got)
	}

	// renames that leave a server's namespace: EXDEV (mv copies instead)
	wantErrno(t, os.Rename(filepath.Join(ranks[0], "f05"), c.path("out")), syscall.EXDEV, "rename into the global namespace")
	wantErrno(t, os.Rename(ranks[0], filepath.Join(dir, "renamed")), syscall.EXDEV, "rename of a private directory")
	if out, err := run(time.Minute, "mv", filepath.Join(ranks[0], "f05"), c.path("out")); err != nil {
		t.Fatalf("mv out of a private directory: %v %s", err, out)
	}
	if got := mustRead(t, c.path("out")); !bytes.Equal(got, pattern(5, 3005)) {
		t.Fatal("mv copied wrong bytes")
	}

	// a data server restarted: the files it serves keep their inodes
	var st0 syscall.Stat_t
	f06 := filepath.Join(ranks[0], "f06")
	if err := syscall.Stat(f06, &st0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data-mem", "data-mem-1", "data-mem-2"} {
		c.restart(name)
	}
	eventually(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(f06)
		return err == nil && bytes.Equal(b, pattern(6, 3006))
	}, "reading a private file after its server restarted")
	var st1 syscall.Stat_t
	if err := syscall.Stat(f06, &st1); err != nil || st1.Ino != st0.Ino {
		t.Fatalf("after the restart: inode %d, was %d (%v)", st1.Ino, st0.Ino, err)
	}

	// out of local mode: the private directories leave the listing
	if out, err := c.sluice("file", "stripe", "--global", dir); err != nil {
		t.Fatalf("setstripe --global: %v %s", err, out)
	}
	eventually(t, 10*time.Second, func() bool {
		ents, err := os.ReadDir(dir)
		return err == nil && len(ents) == 1
	}, "the listing of a directory back in global mode")
}

// TestNodeLocalReadOnlyElsewhere: a private directory belongs to the job
// that made it, or outside a job to the node (the caller's SLURM_JOB_ID
// and SLURMD_NODENAME, as a Slurm job step has them); a process of the
// same user elsewhere lists and reads it but cannot create, write,
// truncate or rename anything in it (EROFS) — it may remove, to clean
// up; the job writes from any of its nodes.
func TestNodeLocalReadOnlyElsewhere(t *testing.T) {
	c := startCluster(t, "--mem-servers", "2", "--ssd", "0")
	dir := c.path("L")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// uid 1000 must reach it: the test's temporary directories are 0700
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		mode := os.FileMode(0o755)
		if p == dir {
			mode = 0o777
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.sluice("file", "stripe", "--local", dir); err != nil {
		t.Fatalf("setstripe --local: %v %s", err, out)
	}
	on := func(job, node, script string) (string, error) {
		cmd := exec.Command("setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "sh", "-c", script)
		cmd.Env = append(os.Environ(), "SLURMD_NODENAME="+node, "D="+dir)
		if job != "" {
			cmd.Env = append(cmd.Env, "SLURM_JOB_ID="+job)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	refused := func(job, node, script string) {
		t.Helper()
		out, err := on(job, node, script)
		if err == nil || !strings.Contains(out, "Read-only file system") {
			t.Errorf("job %q node %s: %s: %v %q, want Read-only file system", job, node, script, err, out)
		}
	}
	if out, err := on("", "node-a", `mkdir -m 777 "$D/a" && echo hello > "$D/a/out" && mkdir "$D/a/sub"`); err != nil {
		t.Fatalf("the owner: %v %s", err, out)
	}
	if out, err := on("", "node-b", `cat "$D/a/out" && ls "$D/a" && ls "$D"`); err != nil || !strings.Contains(out, "hello") || !strings.Contains(out, "sub") {
		t.Fatalf("reading from another node: %v %s", err, out)
	}
	for _, script := range []string{
		`echo x > "$D/a/new"`,
		`mkdir "$D/a/sub2"`,
		`truncate -s 0 "$D/a/out"`,
		`dd if=/dev/zero of="$D/a/out" bs=1 count=1 conv=notrunc,fsync 2>&1`,
		`mv "$D/a/out" "$D/a/moved"`,
	} {
		refused("", "node-b", script)
	}
	if out, err := on("", "node-a", `cat "$D/a/out"`); err != nil || out != "hello\n" {
		t.Fatalf("after node-b's tries the file reads %q (%v)", out, err)
	}
	// a job's directory: the job writes from any node, another job not
	if out, err := on("42", "node-c", `mkdir "$D/j" && echo one > "$D/j/f"`); err != nil {
		t.Fatalf("job 42: %v %s", err, out)
	}
	if out, err := on("42", "node-d", `echo two >> "$D/j/f" && mkdir "$D/j/more" && cat "$D/j/f"`); err != nil || out != "one\ntwo\n" {
		t.Fatalf("job 42 on another node: %v %q", err, out)
	}
	refused("43", "node-c", `echo x > "$D/j/g"`)
	// clean-up from elsewhere
	if out, err := on("", "login", `rm -r "$D/a" "$D/j" && ls "$D"`); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("cleaning up: %v %q", err, out)
	}
}
