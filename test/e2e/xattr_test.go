package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestXattrs: extended attributes set through one mount are read, listed
// and removed through another (another node's), with Linux's errors;
// the kernel's permission checks apply (an unprivileged user may not set
// user. attributes on a file it cannot write, nor trusted. ones); and an
// attribute stays with its file when the file moves to another tier.
func TestXattrs(t *testing.T) {
	c := startCluster(t)
	a, b := c.mnt, c.mount2(t)
	p := filepath.Join(a, "f")
	mustWrite(t, p, pattern(1, 3<<20))
	if err := syscall.Setxattr(p, "user.sum", []byte("crc32c:1234"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	if err := syscall.Setxattr(filepath.Join(a, "."), "user.dir", []byte("d"), 0); err != nil {
		t.Fatalf("setxattr on a directory: %v", err)
	}
	q := filepath.Join(b, "f")
	get := func(path, name string) (string, error) {
		buf := make([]byte, 256)
		n, err := syscall.Getxattr(path, name, buf)
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	if v, err := get(q, "user.sum"); err != nil || v != "crc32c:1234" {
		t.Fatalf("the other mount reads %q (%v)", v, err)
	}
	if n, err := syscall.Getxattr(q, "user.sum", nil); err != nil || n != len("crc32c:1234") {
		t.Fatalf("size query: %d %v", n, err)
	}
	if _, err := syscall.Getxattr(q, "user.sum", make([]byte, 3)); err != syscall.ERANGE {
		t.Fatalf("a buffer too small: %v, want ERANGE", err)
	}
	if _, err := get(q, "user.none"); err != syscall.ENODATA {
		t.Fatalf("a missing attribute: %v, want ENODATA", err)
	}
	if err := syscall.Setxattr(q, "user.sum", []byte("x"), 1 /* XATTR_CREATE */); err != syscall.EEXIST {
		t.Fatalf("XATTR_CREATE of an existing attribute: %v, want EEXIST", err)
	}
	if err := syscall.Setxattr(q, "nope.x", []byte("x"), 0); err != syscall.EOPNOTSUPP {
		t.Fatalf("an unknown namespace: %v, want EOPNOTSUPP", err)
	}
	buf := make([]byte, 256)
	n, err := syscall.Listxattr(q, buf)
	if err != nil || string(buf[:n]) != "user.sum\x00" {
		t.Fatalf("list on the other mount: %q %v", buf[:n], err)
	}
	// the kernel's permission checks, for an unprivileged user
	for _, name := range []string{"user.x", "trusted.x"} {
		cmd := exec.Command("/usr/bin/python3", "-c", "import os,sys; os.setxattr(sys.argv[1], sys.argv[2], b'v')", p, name)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := runCmd(time.Minute, cmd); err == nil || !strings.Contains(out, "PermissionError") {
			t.Fatalf("nobody set %s on root's 0644 file: %v %s", name, err, out)
		}
	}
	// with its file on another tier
	if out, err := c.sluice("file", "migrate", "--tier", "ssd", p); err != nil {
		t.Fatalf("migrate: %v %s", err, out)
	}
	if tiers := c.chunkTiers(t, p); tiers[0] != "ssd" {
		t.Fatalf("chunks on %v after the migration", tiers)
	}
	if v, err := get(q, "user.sum"); err != nil || v != "crc32c:1234" {
		t.Fatalf("after a migration: %q (%v)", v, err)
	}
	if err := syscall.Removexattr(a, "user.sum"); err != nil && err != syscall.ENODATA {
		t.Fatal(err)
	}
	if err := syscall.Removexattr(p, "user.sum"); err != nil {
		t.Fatalf("removexattr: %v", err)
	}
	if _, err := get(q, "user.sum"); err != syscall.ENODATA {
		t.Fatalf("after its removal on the other mount: %v, want ENODATA", err)
	}
}
