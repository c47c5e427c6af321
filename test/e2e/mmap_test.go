package e2e

import (
	"os/exec"
	"testing"
	"time"
)

// TestMmap: shared writable mappings (testdata/mmap_apps.py): stores seen
// by read() before msync and write()s by the mapping on one mount, close
// to open across two mounts (two nodes), SQLite in WAL mode, numpy.memmap
// and LMDB with two processes each.
func TestMmap(t *testing.T) {
	c := startCluster(t)
	b := c.mount2(t)
	cmd := exec.Command("python3", "testdata/mmap_apps.py", c.mnt, b)
	out, err := runCmd(5*time.Minute, cmd)
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("mmap_apps.py: %v", err)
	}
}
