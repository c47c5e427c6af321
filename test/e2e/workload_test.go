package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFioVerify runs fio with crc32c verification over the patterns HPC
// jobs use: sequential, random, N-N from several processes, and N-1
// strided into one shared file.
func TestFioVerify(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Fatal("fio is not installed (apt-get install fio)")
	}
	c := startCluster(t)
	common := []string{"--ioengine=psync", "--direct=1", "--iomem_align=4096", "--verify=crc32c",
		"--do_verify=1", "--verify_fatal=1", "--group_reporting", "--minimal"}
	cases := []struct {
		name string
		args []string
	}{
		{"sequential", []string{"--rw=write", "--bs=1m", "--size=64m", "--numjobs=1"}},
		{"random", []string{"--rw=randwrite", "--bs=4k", "--size=8m", "--numjobs=1"}},
		{"N-N", []string{"--rw=write", "--bs=256k", "--size=32m", "--numjobs=4"}},
		// N-1 strided: four processes interleave 64 KiB blocks of one file
		{"N-1 strided", []string{"--rw=write:192k", "--bs=64k", "--size=8m", "--numjobs=4",
			"--offset_increment=64k", "--filename=" + c.path("fio/shared")}},
	}
	os.MkdirAll(c.path("fio"), 0o755)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--name=" + strings.ReplaceAll(tc.name, " ", "_"), "--directory=" + c.path("fio")}, common...)
			args = append(args, tc.args...)
			out, err := run(5*time.Minute, "fio", args...)
			if err != nil {
				t.Fatalf("fio: %v\n%s", err, out)
			}
			// terse output field 5 is the error code
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Split(line, ";")
				if len(f) > 5 && f[4] != "0" {
					t.Fatalf("fio reported error %s:\n%s", f[4], out)
				}
			}
		})
	}
}

// TestRandomOpsAgainstModel applies a random sequence of create, write,
// truncate, rename, unlink and read through the mount and checks every file
// against an in-memory model after each step.
func TestRandomOpsAgainstModel(t *testing.T) {
	c := startCluster(t, "--mem-servers", "2")
	seed := time.Now().UnixNano()
	if s := os.Getenv("SLUICE_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (set SLUICE_SEED to replay)", seed)
	r := rand.New(rand.NewSource(seed))
	model := map[string][]byte{}
	names := []string{"a", "b", "c", "d/e", "d/f"}
	os.Mkdir(c.path("d"), 0o755)
	// small chunks so files span many chunks and stripes
	if out, err := c.sluice("file", "stripe", "--chunk-size", "64K", "--count", "2", "--unit", "16K", c.path("d")); err != nil {
		t.Fatalf("setstripe: %v %s", err, out)
	}
	const maxSize = 600 << 10
	for step := 0; step < 400; step++ {
		name := names[r.Intn(len(names))]
		p := c.path(name)
		cur, exists := model[name]
		var op string
		switch k := r.Intn(10); {
		case k < 4:
			op = "write"
			off := r.Intn(maxSize)
			n := 1 + r.Intn(200<<10)
			data := pattern(step, n)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatalf("step %d %s %s: %v", step, op, name, err)
			}
			if _, err := f.WriteAt(data, int64(off)); err != nil {
				t.Fatalf("step %d write: %v", step, err)
			}
			f.Close()
			if off+n > len(cur) {
				cur = append(cur, make([]byte, off+n-len(cur))...)
			}
			copy(cur[off:], data)
			model[name] = cur
		case k < 6:
			op = "truncate"
			n := r.Intn(maxSize)
			err := os.Truncate(p, int64(n))
			if !exists {
				if !os.IsNotExist(err) {
					t.Fatalf("step %d truncate of missing file: %v", step, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if n < len(cur) {
				cur = cur[:n]
			} else {
				cur = append(cur, make([]byte, n-len(cur))...)
			}
			model[name] = cur
		case k < 8:
			op = "rename"
			to := names[r.Intn(len(names))]
			err := syscall.Rename(p, c.path(to))
			if !exists {
				if err != syscall.ENOENT {
					t.Fatalf("step %d rename of missing: %v", step, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d rename %s→%s: %v", step, name, to, err)
			}
			if to != name {
				model[to] = cur
				delete(model, name)
			}
		default:
			op = "unlink"
			err := os.Remove(p)
			if exists != (err == nil) {
				t.Fatalf("step %d unlink %s (exists %v): %v", step, name, exists, err)
			}
			delete(model, name)
		}
		// check every file
		for _, n := range names {
			want, ok := model[n]
			got, err := os.ReadFile(c.path(n))
			if !ok {
				if !os.IsNotExist(err) {
					t.Fatalf("step %d (%s %s): %s should not exist (%v)", step, op, name, n, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d (%s %s): read %s: %v", step, op, name, n, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("step %d (%s %s): %s differs from the model (%d vs %d bytes)", step, op, name, n, len(got), len(want))
			}
		}
	}
	// the namespace lists exactly the model's files
	var listed []string
	filepath.Walk(c.mnt, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			rel, _ := filepath.Rel(c.mnt, p)
			listed = append(listed, rel)
		}
		return nil
	})
	var want []string
	for n := range model {
		want = append(want, n)
	}
	sort.Strings(listed)
	sort.Strings(want)
	if fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Fatalf("listing %v, model %v", listed, want)
	}
	// a file created under d/ is striped over both mem servers (files
	// renamed into d/ keep the layout they were created with)
	mustWrite(t, c.path("d/striped"), pattern(9, 200<<10))
	out, err := c.sluice("file", "stat", c.path("d/striped"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "count 2") || !regexp.MustCompile(`servers \[\d+ \d+\]`).MatchString(out) {
		t.Fatalf("not striped:\n%s", out)
	}
	if !bytes.Equal(mustRead(t, c.path("d/striped")), pattern(9, 200<<10)) {
		t.Fatal("striped file differs")
	}
}

// TestPFSTierPlainFiles: data that lands on the pfs tier is a plain file at
// its namespace path in the PFS directory, readable without sluice, and
// follows renames and unlinks.
func TestPFSTierPlainFiles(t *testing.T) {
	pfs := t.TempDir()
	c := startCluster(t, "--mem", "0", "--ssd", "0", "--pfs", pfs)
	os.MkdirAll(c.path("proj/run1"), 0o755)
	data := pattern(11, 9<<20+123)
	mustWrite(t, c.path("proj/run1/ckpt.0"), data)
	got, err := os.ReadFile(filepath.Join(pfs, "proj/run1/ckpt.0"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("plain file in the PFS: %v (%d bytes)", err, len(got))
	}
	if err := os.Rename(c.path("proj/run1"), c.path("proj/run2")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(pfs, "proj/run2/ckpt.0")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after directory rename: %v", err)
	}
	if err := os.Rename(c.path("proj/run2/ckpt.0"), c.path("proj/final")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pfs, "proj/final")); err != nil {
		t.Fatalf("after file rename: %v", err)
	}
	if err := os.Remove(c.path("proj/final")); err != nil {
		t.Fatal(err)
	}
	// (a removal in a directory the mount holds reaches the metadata
	// service in its next batch, within --create-flush)
	eventually(t, 2*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(pfs, "proj/final"))
		return os.IsNotExist(err)
	}, "the unlinked file gone from the PFS")
}
