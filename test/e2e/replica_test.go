package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// downServers returns the ids `sluice cluster status` shows DOWN.
func (c *cluster) downServers(t *testing.T) map[string]bool {
	t.Helper()
	out, err := c.sluice("cluster", "status")
	if err != nil {
		t.Fatalf("status: %v %s", err, out)
	}
	down := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\s+data\s+.*\sDOWN`).FindAllStringSubmatch(out, -1) {
		down[m[1]] = true
	}
	return down
}

// copiesWhole says whether every chunk of p that `sluice file stat` lists has
// two copies, none on a server in down.
func (c *cluster) copiesWhole(t *testing.T, p string, down map[string]bool) bool {
	t.Helper()
	out, err := c.sluice("file", "stat", p)
	if err != nil {
		t.Fatalf("stat %s: %v %s", p, err, out)
	}
	chunks := regexp.MustCompile(`chunk \d+\s+tier mem\s+servers \[(\d+)\](?: replicas \[(\d+)\])?`).FindAllStringSubmatch(out, -1)
	if len(chunks) == 0 {
		t.Fatalf("no mem-tier chunks in\n%s", out)
	}
	for _, m := range chunks {
		if m[2] == "" || down[m[1]] || down[m[2]] {
			return false
		}
	}
	return true
}

// TestReplicaKill: with --mem-replicas 2 every mem-tier chunk has a copy on
// a second mem server (another failure domain). fio writes files, then
// writes more with crc32c verification while one mem server is killed
// with kill -9 and not restarted: no write fails and the verification
// passes (reads go to the copy left). The lost copies (of the files
// written before, at least) are made again on the third server, so a
// second kill -9 loses nothing either: fio verifies every file again
// from the last server.
func TestReplicaKill(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Fatal("fio is not installed (apt-get install fio)")
	}
	c := startCluster(t, "--mem-servers", "3", "--mem-replicas", "2", "--mem", "256M")
	dir := c.path("fio")
	os.MkdirAll(dir, 0o755)
	job := func(name string) []string {
		return []string{"--name=" + name, "--directory=" + dir, "--ioengine=psync", "--direct=1", "--iomem_align=4096",
			"--rw=write", "--bs=1m", "--size=48m", "--numjobs=2", "--verify=crc32c", "--verify_fatal=1",
			"--group_reporting", "--minimal"}
	}
	fio := func(name string, extra ...string) (string, error) {
		return run(5*time.Minute, "fio", append(job(name), extra...)...)
	}
	// files written before the kill: their chunks have copies on every
	// mem server, so some must be copied again after it
	out, err := fio("before", "--do_verify=1")
	if err != nil {
		t.Fatalf("fio before the kill: %v\n%s", err, out)
	}
	checkFioTerse(t, out)
	// the write phase takes ~5 s at 10 MB/s per job; the kill comes in it
	done := make(chan error, 1)
	go func() {
		var err error
		out, err = fio("ckpt", "--do_verify=1", "--rate=10m")
		done <- err
	}()
	time.Sleep(2 * time.Second)
	c.kill9("data-mem")
	t.Log("killed data-mem during fio's write phase")
	if err := <-done; err != nil {
		t.Fatalf("fio across the kill: %v\n%s", err, out)
	}
	checkFioTerse(t, out)
	files, _ := filepath.Glob(filepath.Join(dir, "*.*.*"))
	if len(files) != 4 {
		t.Fatalf("fio files %v", files)
	}

	// the copies lost with data-mem are made again on the third server
	var down map[string]bool
	eventually(t, 30*time.Second, func() bool {
		down = c.downServers(t)
		return len(down) == 1
	}, "the killed server to show DOWN")
	eventually(t, 60*time.Second, func() bool {
		for _, f := range files {
			if !c.copiesWhole(t, f, down) {
				return false
			}
		}
		return true
	}, "every chunk to have two copies on live servers again")
	st, _ := c.sluice("cluster", "status")
	if !strings.Contains(st, "REPLICAS ") {
		t.Fatalf("status does not report re-replication:\n%s", st)
	}
	// and Beacon's decision log has the copies, under the migration job
	if out, _ := c.sluice("job", "show", "sluice-migration"); !strings.Contains(out, "tiering copied") {
		t.Fatalf("sluice job sluice-migration shows no copies made again:\n%s", out)
	}

	// a second server dies: every chunk still has a copy
	c.kill9("data-mem-1")
	t.Log("killed data-mem-1")
	for _, name := range []string{"before", "ckpt"} {
		out, err := fio(name, "--verify_only")
		if err != nil {
			t.Fatalf("fio verify of %s after the second kill: %v\n%s", name, err, out)
		}
		checkFioTerse(t, out)
	}
}

// checkFioTerse fails the test if fio's terse output reports an error.
func checkFioTerse(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, ";")
		if len(f) > 5 && f[4] != "0" {
			t.Fatalf("fio reported error %s:\n%s", f[4], out)
		}
	}
}
