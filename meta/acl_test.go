package meta

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

func acl(es ...aclEntry) []byte { return encodeACL(es) }

// TestACLs: an access ACL sets the mode and is dropped when it says no
// more; chmod moves the mask; a default ACL is for directories, is
// inherited by files and directories made in it (cut to the mode asked
// for, the umask not applied), and keeps the directory from being
// delegated; malformed ACLs are refused.
func TestACLs(t *testing.T) {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mode := func(ino uint64) uint32 {
		t.Helper()
		a, err := s.Getattr(ino)
		if err != nil {
			t.Fatal(err)
		}
		return a.Mode & 0o7777
	}
	set := func(ino uint64, name string, v []byte) error {
		_, err := rpc.Do(ctx, s, ns.Setxattr, &ns.XattrReq{Ino: ino, Name: name, Value: v})
		return err
	}
	get := func(ino uint64, name string) ([]byte, error) {
		r, err := rpc.Do(ctx, s, ns.Getxattr, &ns.XattrReq{Ino: ino, Name: name})
		if err != nil {
			return nil, err
		}
		return r.Value, nil
	}
	f, err := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 1000, 1000, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	named := acl(aclEntry{aclUserObj, 6, 0}, aclEntry{aclUser, 4, 2000}, aclEntry{aclGroupObj, 4, 0},
		aclEntry{aclMask, 5, 0}, aclEntry{aclOther, 0, 0})
	if err := set(f.Ino, aclAccess, named); err != nil {
		t.Fatal(err)
	}
	if m := mode(f.Ino); m != 0o650 {
		t.Fatalf("mode after an access ACL with mask r-x: %o, want 650", m)
	}
	// chmod: the mask follows the group bits
	if _, err := s.Setattr(ctx, &ns.SetattrReq{Ino: f.Ino, Mask: ns.SetMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	v, err := get(f.Ino, aclAccess)
	if err != nil {
		t.Fatal(err)
	}
	es, _ := parseACL(v)
	if es[3].tag != aclMask || es[3].perm != 0 || es[1].perm != 4 || es[4].perm != 0 {
		t.Fatalf("ACL after chmod 600: %+v, want the mask ---, the named user's r kept", es)
	}
	// an ACL that says no more than the mode sets it and is not kept
	if err := set(f.Ino, aclAccess, acl(aclEntry{aclUserObj, 7, 0}, aclEntry{aclGroupObj, 5, 0}, aclEntry{aclOther, 1, 0})); err != nil {
		t.Fatal(err)
	}
	if m := mode(f.Ino); m != 0o751 {
		t.Fatalf("mode after a minimal ACL: %o", m)
	}
	if _, err := get(f.Ino, aclAccess); !is(err, syscall.ENODATA) {
		t.Fatalf("a minimal ACL kept: %v", err)
	}
	if err := set(f.Ino, aclDefault, named); !is(err, syscall.EACCES) {
		t.Fatalf("a default ACL on a file: %v, want EACCES", err)
	}
	for _, bad := range [][]byte{{1, 2, 3}, acl(aclEntry{aclUserObj, 7, 0}, aclEntry{aclOther, 0, 0}),
		acl(aclEntry{aclUserObj, 7, 0}, aclEntry{aclUser, 7, 5}, aclEntry{aclGroupObj, 7, 0}, aclEntry{aclOther, 0, 0}),
		acl(aclEntry{aclGroupObj, 7, 0}, aclEntry{aclUserObj, 7, 0}, aclEntry{aclOther, 0, 0}),
		acl(aclEntry{aclUserObj, 9, 0}, aclEntry{aclGroupObj, 7, 0}, aclEntry{aclOther, 0, 0})} {
		if err := set(f.Ino, aclAccess, bad); !is(err, syscall.EINVAL) {
			t.Fatalf("malformed ACL %x: %v, want EINVAL", bad, err)
		}
	}

	// inheritance
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 1000, 1000, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	def := acl(aclEntry{aclUserObj, 7, 0}, aclEntry{aclUser, 7, 2000}, aclEntry{aclGroupObj, 5, 0},
		aclEntry{aclMask, 7, 0}, aclEntry{aclOther, 0, 0})
	if err := set(d.Ino, aclDefault, def); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delegate(7, d.Ino); err != nil {
		t.Fatal(err) // (the service's method; the protocol's handler refuses, below)
	}
	s.Undelegate(7, d.Ino)
	if _, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: 7, Dir: d.Ino}); !is(err, syscall.EBUSY) {
		t.Fatalf("delegation of a directory with a default ACL: %v, want EBUSY", err)
	}
	// open(O_CREAT, 0666) with umask 022: the ACL, not the umask
	g, err := s.CreateUnmasked(d.Ino, "g", syscall.S_IFREG|0o644, 0o666, 1000, 1000, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := g.Mode & 0o777; m != 0o660 {
		t.Fatalf("a file made in it: mode %o, want 660 (mask rw- from 0666)", m)
	}
	v, err = get(g.Ino, aclAccess)
	if err != nil {
		t.Fatalf("a file made in it has no access ACL: %v", err)
	}
	es, _ = parseACL(v)
	if es[1].tag != aclUser || es[1].id != 2000 || es[3].perm != 6 || es[0].perm != 6 || es[4].perm != 0 {
		t.Fatalf("inherited access ACL %+v", es)
	}
	if _, err := get(g.Ino, aclDefault); !is(err, syscall.ENODATA) {
		t.Fatalf("a file got a default ACL: %v", err)
	}
	sub, err := s.CreateUnmasked(d.Ino, "sub", syscall.S_IFDIR|0o755, 0o777, 1000, 1000, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := sub.Mode & 0o777; m != 0o770 {
		t.Fatalf("a directory made in it: mode %o, want 770", m)
	}
	if v, err := get(sub.Ino, aclDefault); err != nil || !bytes.Equal(v, def) {
		t.Fatalf("a directory made in it: default ACL %x (%v), want its parent's", v, err)
	}
	// without a default ACL the umasked mode stands
	h, err := s.CreateUnmasked(RootIno, "h", syscall.S_IFREG|0o644, 0o666, 0, 0, "", true, 0)
	if err != nil || h.Mode&0o777 != 0o644 {
		t.Fatalf("a file made without a default ACL: %v %o", err, h.Mode)
	}
}
