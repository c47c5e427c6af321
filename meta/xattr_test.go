package meta

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// TestXattrs: setxattr(2)'s flags and errors, listing, removal, the
// namespaces, the per-inode bound, and the attributes going with their
// inode.
func TestXattrs(t *testing.T) {
	s, f := serviceWithFile(t)
	ctx := context.Background()
	do := func(d interface{}, q *ns.XattrReq) (*ns.XattrRep, error) {
		q.Ino = f.Ino
		switch d := d.(type) {
		case string:
			switch d {
			case "get":
				return rpc.Do(ctx, s, ns.Getxattr, q)
			case "set":
				return rpc.Do(ctx, s, ns.Setxattr, q)
			case "list":
				return rpc.Do(ctx, s, ns.Listxattr, q)
			case "remove":
				return rpc.Do(ctx, s, ns.Removexattr, q)
			}
		}
		panic("op")
	}
	errIs := func(err error, want syscall.Errno, what string) {
		t.Helper()
		if rpc.Errno(err) != want {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
	}
	_, err := do("get", &ns.XattrReq{Name: "user.a"})
	errIs(err, syscall.ENODATA, "get of a missing attribute")
	_, err = do("set", &ns.XattrReq{Name: "user.a", Value: []byte("1"), Flags: ns.XattrReplace})
	errIs(err, syscall.ENODATA, "XATTR_REPLACE of a missing attribute")
	if _, err := do("set", &ns.XattrReq{Name: "user.a", Value: []byte("1"), Flags: ns.XattrCreate}); err != nil {
		t.Fatal(err)
	}
	_, err = do("set", &ns.XattrReq{Name: "user.a", Value: []byte("2"), Flags: ns.XattrCreate})
	errIs(err, syscall.EEXIST, "XATTR_CREATE of an existing attribute")
	if _, err := do("set", &ns.XattrReq{Name: "user.a", Value: []byte("22"), Flags: ns.XattrReplace}); err != nil {
		t.Fatal(err)
	}
	if r, err := do("get", &ns.XattrReq{Name: "user.a"}); err != nil || string(r.Value) != "22" {
		t.Fatalf("get after replace: %q %v", r.Value, err)
	}
	if _, err := do("set", &ns.XattrReq{Name: "trusted.b", Value: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if r, err := do("get", &ns.XattrReq{Name: "trusted.b"}); err != nil || len(r.Value) != 0 {
		t.Fatalf("an empty value: %q %v", r.Value, err)
	}
	for _, bad := range []string{"system.foo", "os2.x", "user.", "nope"} {
		_, err = do("set", &ns.XattrReq{Name: bad, Value: []byte("x")})
		errIs(err, syscall.EOPNOTSUPP, "set of "+bad)
	}
	_, err = do("set", &ns.XattrReq{Name: "user." + strings.Repeat("n", 251), Value: []byte("x")})
	errIs(err, syscall.ERANGE, "a name of 256 bytes")
	if r, err := do("list", &ns.XattrReq{}); err != nil || strings.Join(r.Names, ",") != "trusted.b,user.a" {
		t.Fatalf("list: %v %v", r.Names, err)
	}
	_, err = do("remove", &ns.XattrReq{Name: "user.zz"})
	errIs(err, syscall.ENODATA, "removal of a missing attribute")
	if _, err := do("remove", &ns.XattrReq{Name: "user.a"}); err != nil {
		t.Fatal(err)
	}
	// the bound on an inode's attributes
	big := make([]byte, 64<<10)
	var last error
	for i := 0; i < 20 && last == nil; i++ {
		_, last = do("set", &ns.XattrReq{Name: "user.big" + string(rune('a'+i)), Value: big})
	}
	errIs(last, syscall.ENOSPC, "attributes past 1 MiB")
	// they go with the inode
	if err := s.Remove(RootIno, "f", false); err != nil {
		t.Fatal(err)
	}
	s.CollectGarbage(ctx)
	n := 0
	s.e.Scan([]byte{pXattr}, nil, func(_, _ []byte) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d attributes left after their inode went", n)
	}
}

// TestTouch: a mount's access times move an inode's atime forward only,
// leave its ctime and mtime, skip inodes gone, take the latest of an
// inode named twice, and go into the change feed for the other mounts.
func TestTouch(t *testing.T) {
	s, f := serviceWithFile(t)
	ctx := context.Background()
	before := *f
	start := s.feed.position()
	touch := func(inos, atimes []uint64) {
		t.Helper()
		if _, err := rpc.Do(ctx, s, ns.Touch, &ns.TouchReq{Head: ns.Head{Client: 7}, Inos: inos, Atimes: atimes}); err != nil {
			t.Fatal(err)
		}
	}
	touch([]uint64{f.Ino}, []uint64{uint64(before.Atime - 5)}) // older: no change
	touch([]uint64{f.Ino, 999, f.Ino}, []uint64{uint64(before.Atime + 20), 1, uint64(before.Atime + 10)})
	a, err := s.Getattr(f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	if a.Atime != before.Atime+20 || a.Mtime != before.Mtime || a.Ctime != before.Ctime {
		t.Fatalf("after touch: atime %d mtime %d ctime %d, want %d %d %d", a.Atime, a.Mtime, a.Ctime,
			before.Atime+20, before.Mtime, before.Ctime)
	}
	if es, _, _ := s.feed.since(start, 8); len(es) != 1 || es[0].Kind != ns.ChangeAtime || es[0].Ino != f.Ino {
		t.Fatalf("feed for another mount: %+v", es)
	}
	if es, _, _ := s.feed.since(start, 7); len(es) != 0 {
		t.Fatalf("feed echoed to the mount that touched: %+v", es)
	}
	if _, err := rpc.Do(ctx, s, ns.Touch, &ns.TouchReq{Inos: []uint64{f.Ino}}); rpc.Errno(err) != syscall.EINVAL {
		t.Fatalf("inodes without times: %v", err)
	}
}

// serviceWithFile is a metadata service on the in-memory engine with one
// regular file, "f" in the root.
func serviceWithFile(t *testing.T) (*Service, *wire.Attr) {
	t.Helper()
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}
