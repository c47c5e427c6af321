package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestACLs: POSIX ACLs set with setfacl through one mount are enforced by
// the kernel of another node's mount (a named user reads a 0640 file; the
// mask cuts it; taking the entry away is seen there at once); a default
// ACL is inherited by files and directories made in it, in place of the
// umask; chmod moves the mask; the umask applies where there is no
// default ACL; rsync -aAX and tar --acls --xattrs keep ACLs and extended
// attributes.
func TestACLs(t *testing.T) {
	c := startCluster(t)
	b := c.mount2(t)
	sh := func(line string) string {
		t.Helper()
		out, err := run(time.Minute, "sh", "-c", "umask 022; "+line)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return out
	}
	asNobody := func(line string) error {
		cmd := exec.Command("sh", "-c", line)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		_, err := runCmd(time.Minute, cmd)
		return err
	}
	a := c.mnt
	// nobody must reach the mounts: the test's directories are 0700
	for _, m := range []string{a, b} {
		for d := filepath.Dir(m); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := filepath.Join(a, "f")
	// nobodyReads: whether nobody can read f through the other mount once
	// the change made on this one has reached it through the change feed
	// (asynchronous: a few hundred microseconds, at most the short
	// attribute timeout, 1 s, for a reply that raced it); how long that
	// took is logged
	nobodyReads := func(want bool, what string) {
		t.Helper()
		t0 := time.Now()
		if !within(2*time.Second, func() bool { return (asNobody("cat "+filepath.Join(b, "f")) == nil) == want }) {
			t.Fatalf("%s: nobody reading through the other mount: %v after 2 s, want %v", what, !want, want)
		}
		t.Logf("%s: the other mount agreed %v after the change", what, time.Since(t0).Round(time.Millisecond))
	}
	sh("echo secret > " + f)
	nobodyReads(true, "a 0644 file")
	sh("chmod 640 " + f)
	nobodyReads(false, "a 0640 file before any ACL")
	sh("setfacl -m u:nobody:r " + f)
	nobodyReads(true, "nobody named in the ACL")
	if got := sh("getfacl -cp " + filepath.Join(b, "f")); !strings.Contains(got, "user:nobody:r--") || !strings.Contains(got, "mask::r--") {
		t.Fatalf("getfacl on the other mount:\n%s", got)
	}
	if err := asNobody("echo x >> " + filepath.Join(b, "f")); err == nil {
		t.Fatal("nobody wrote with an ACL entry r--")
	}
	sh("chmod 600 " + f) // the mask follows the group bits: ---
	if got := sh("getfacl -cp " + f); !strings.Contains(got, "mask::---") {
		t.Fatalf("getfacl after chmod 600:\n%s", got)
	}
	nobodyReads(false, "the mask ---")
	sh("setfacl -m m::r " + f)
	nobodyReads(true, "the mask r--")
	sh("setfacl -x u:nobody " + f)
	nobodyReads(false, "the entry removed")

	// a default ACL, and the umask where there is none
	sh("mkdir " + filepath.Join(a, "d") + " && setfacl -d -m u:nobody:rwx,m::rwx " + filepath.Join(a, "d"))
	sh("touch " + filepath.Join(a, "d", "g") + " && mkdir " + filepath.Join(a, "d", "sub") + " && touch " + filepath.Join(a, "plain"))
	for p, want := range map[string]os.FileMode{"d/g": 0o664, "d/sub": 0o775, "plain": 0o644} {
		st, err := os.Stat(filepath.Join(b, p))
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: mode %v (%v), want %o", p, st.Mode().Perm(), err, want)
		}
	}
	if got := sh("getfacl -cp " + filepath.Join(b, "d", "sub")); !strings.Contains(got, "default:user:nobody:rwx") || !strings.Contains(got, "\nuser:nobody:rwx") {
		t.Fatalf("a directory made under a default ACL:\n%s", got)
	}
	if err := asNobody("echo hi > " + filepath.Join(b, "d", "g")); err != nil {
		t.Fatalf("nobody writes an inherited rw file through the other mount: %v", err)
	}
	// an access ACL set on a directory changes its mode, on both mounts
	sh("chacl u::rwx,g::-w-,o::--x " + filepath.Join(a, "d", "sub"))
	for _, m := range []string{a, b} {
		// the other mount once the change feed has brought the change
		var st os.FileInfo
		var err error
		if !within(2*time.Second, func() bool {
			st, err = os.Stat(filepath.Join(m, "d", "sub"))
			return err == nil && st.Mode().Perm() == 0o721
		}) {
			mode := "none"
			if st != nil {
				mode = st.Mode().Perm().String()
			}
			t.Fatalf("a directory after chacl u::rwx,g::-w-,o::--x, through %s: %s (%v) after 2 s, want 721", m, mode, err)
		}
	}

	// copies that keep ACLs and attributes
	sh("setfattr -n user.sum -v abc " + filepath.Join(a, "d", "g"))
	sh("rsync -aAX " + filepath.Join(a, "d") + "/ " + filepath.Join(a, "r") + "/")
	got := sh("getfacl -Rcp " + filepath.Join(b, "r") + " && getfattr -n user.sum " + filepath.Join(b, "r", "g"))
	for _, want := range []string{"user:nobody:rwx", "default:user:nobody:rwx", `user.sum="abc"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("rsync -aAX copy lacks %q:\n%s", want, got)
		}
	}
	tarball := filepath.Join(t.TempDir(), "t.tar")
	sh("tar --acls --xattrs -cf " + tarball + " -C " + a + " d && mkdir " + filepath.Join(a, "x") + " && tar --acls --xattrs -xf " + tarball + " -C " + filepath.Join(a, "x"))
	got = sh("getfacl -Rcp " + filepath.Join(b, "x") + " && getfattr -n user.sum " + filepath.Join(b, "x", "d", "g"))
	for _, want := range []string{"user:nobody:rwx", "default:user:nobody:rwx", `user.sum="abc"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("tar --acls --xattrs round trip lacks %q:\n%s", want, got)
		}
	}
}
