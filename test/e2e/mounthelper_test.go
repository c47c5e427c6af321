package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clusterpkg "github.com/sluice-hpc/sluice/cluster"
)

// TestMountHelper: the binary run as mount(8)'s helper (mount.fuse.sluice
// SOURCE DIR -o OPTIONS) returns once DIR is mounted, with SOURCE as the
// mount's source and the kernel's options applied (ro: a write gets
// EROFS), the rest given to sluice mount as flags; remount,rw makes it
// writable; umount ends it; an
// unknown option is refused before anything starts.
func TestMountHelper(t *testing.T) {
	c := startCluster(t)
	cl, err := clusterpkg.Load(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(t.TempDir(), "mount.fuse.sluice")
	if err := os.Symlink(sluiceBin, helper); err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	src := "sluice://" + cl.MetaAddr
	logf := filepath.Join(c.dir, "logs", "helper-mount.log")
	out, err := run(time.Minute, helper, src, mnt, "-o", "rw,ro,nosuid,_netdev,secret-file="+cl.SecretFile()+",node=helper,timeout=10s,log="+logf)
	if err != nil {
		t.Fatalf("mount.fuse.sluice: %v\n%s", err, out)
	}
	record(t, leftover{Mounts: []string{mnt}})
	t.Cleanup(func() {
		if clusterpkg.Mounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	got, err := run(time.Minute, "findmnt", "-rn", "-o", "SOURCE,FSTYPE,OPTIONS", mnt)
	if err != nil || !strings.HasPrefix(got, src+" fuse.sluice ro,") {
		t.Fatalf("findmnt: %q %v, want %s mounted read-only", got, err, src)
	}
	mustWrite(t, c.path("seen"), []byte("x"))
	if b, err := os.ReadFile(filepath.Join(mnt, "seen")); err != nil || string(b) != "x" {
		t.Fatalf("read through the helper's mount: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), nil, 0o644); !errorsIs(err, syscall.EROFS) {
		t.Fatalf("a create on the ro mount: %v, want EROFS", err)
	}
	// mount -o remount,rw runs the helper with remount
	if out, err := run(time.Minute, helper, src, mnt, "-o", "remount,rw"); err != nil {
		t.Fatalf("remount,rw: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), nil, 0o644); err != nil {
		t.Fatalf("a create after remount,rw: %v", err)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if out, err := run(time.Minute, helper, src, mnt, "-o", "secret-file="+cl.SecretFile()+",bogus=1"); err == nil || !strings.Contains(out, `unknown mount option "bogus=1"`) {
		t.Fatalf("an unknown option: %v %s", err, out)
	}
	if clusterpkg.Mounted(mnt) {
		t.Fatal("mounted despite an unknown option")
	}
}
