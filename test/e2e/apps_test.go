package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestApplications: real programs on a mount and a second mount of the
// same cluster standing for another node, on one cluster:
//   - mmap: shared writable mappings (testdata/mmap_apps.py): stores seen
//     by read() before msync and write()s by the mapping on one mount,
//     close to open across two mounts, SQLite in WAL mode, numpy.memmap
//     and LMDB with two processes each;
//   - locks: programs that share files between nodes through locks
//     (testdata/apps.py): SQLite with its rollback journal, writers on
//     both mounts at once; SQLite in WAL mode across them (exclusive
//     locking, busy waits); h5py with HDF5's file locking (a second
//     writer refused); git commit, gc, fsck and a clone on the other;
//   - mpiio: MPI-IO through ROMIO as IOR -a MPIIO does it, ranks split
//     over the two mounts (testdata/mpiio.py): strided blocks written with
//     collective buffering, then independently with data sieving (a
//     read-modify-write under an fcntl lock, safe only if locks and the
//     bytes they guard hold across nodes).
func TestApplications(t *testing.T) {
	c := startCluster(t)
	b := c.mount2(t)
	run := func(t *testing.T, cmd *exec.Cmd) {
		t.Helper()
		out, err := runCmd(5*time.Minute, cmd)
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
		}
	}
	t.Run("mmap", func(t *testing.T) { run(t, exec.Command("python3", "testdata/mmap_apps.py", c.mnt, b)) })
	t.Run("locks", func(t *testing.T) {
		requireApp(t, "python3", "-c", "import h5py")
		requireApp(t, "git", "--version")
		run(t, exec.Command("python3", "testdata/apps.py", c.mnt, b))
	})
	t.Run("mpiio", func(t *testing.T) {
		requireApp(t, "mpirun", "--version")
		requireApp(t, "/usr/bin/python3", "-c", "import mpi4py")
		run(t, exec.Command("mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4", "--mca", "io", "romio321",
			"/usr/bin/python3", "testdata/mpiio.py", c.mnt, b))
	})
}

// requireApp skips t if the program (with its arguments) does not run,
// or fails it if SLUICE_REQUIRE_APPS=1 (make test, which .ci/run
// provisions).
func requireApp(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		if os.Getenv("SLUICE_REQUIRE_APPS") == "1" {
			t.Fatalf("SLUICE_REQUIRE_APPS=1 and %s %s fails: %v %s", name, strings.Join(args, " "), err, out)
		}
		t.Skipf("%s %s fails (%v): apt-get install openmpi-bin python3-mpi4py; pip install h5py", name, strings.Join(args, " "), err)
	}
}
