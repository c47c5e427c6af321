package localns

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

const dirIno = 77 // a local-mode directory of the global namespace

// TestLocalNamespace: entries made under a local-mode directory get local
// inodes of this server; data written reads back; listings are in name
// order after a cursor; names that leave the tree, inodes of other
// servers and unknown ones are refused; a new NS over the same tree (a
// restart) knows the same inodes.
func TestLocalNamespace(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ns")
	n, err := New(root, func() uint64 { return 9 })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unused namespace made its directory: %v", err)
	}
	r, _ := must(t, n, &tmsg{Op: ns.OpMkdir, Parent: dirIno, Name: "rank3", Mode: 0o750, Uid: 1000, Gid: 100, Local: true}, nil)
	d := r.Attr
	if !wire.IsLocal(d.Ino) || wire.LocalServer(d.Ino) != 9 || d.Mode != syscall.S_IFDIR|0o750 || d.Uid != 1000 || d.Gid != 100 {
		t.Fatalf("private directory %+v", d)
	}
	if !Handles((&tmsg{Op: ns.OpLookup, Parent: dirIno, Local: true}).req()) || Handles((&tmsg{Op: ns.OpWrite, Ino: 5, Local: true}).req()) {
		t.Fatal("Handles")
	}
	r, _ = must(t, n, &tmsg{Op: ns.OpMknod, Parent: d.Ino, Name: "f", Mode: 0o640, Excl: true}, nil)
	f := r.Attr
	if _, _, err := call(t, n, &tmsg{Op: ns.OpMknod, Parent: d.Ino, Name: "f", Mode: 0o640, Excl: true}, nil); rpc.Errno(err) != syscall.EEXIST {
		t.Fatalf("exclusive create of an existing file: %v", err)
	}
	data := bytes.Repeat([]byte("xyz"), 1000)
	if r, _ := must(t, n, &tmsg{Op: ns.OpWrite, Ino: f.Ino, Offset: 10, Size: uint64(len(data))}, data); r.Size != uint64(len(data)) {
		t.Fatalf("wrote %d", r.Size)
	}
	_, got := must(t, n, &tmsg{Op: ns.OpRead, Ino: f.Ino, Offset: 10, Size: 1 << 20}, nil)
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes", len(got))
	}
	if r, _ := must(t, n, &tmsg{Op: ns.OpGetattr, Ino: f.Ino}, nil); r.Attr.Size != 3010 || r.Attr.Ino != f.Ino {
		t.Fatalf("getattr %+v", r.Attr)
	}
	for _, name := range []string{"c", "a", "b"} {
		must(t, n, &tmsg{Op: ns.OpMknod, Parent: d.Ino, Name: name, Mode: 0o644}, nil)
	}
	r, _ = must(t, n, &tmsg{Op: ns.OpReaddir, Ino: d.Ino, Name: "a", Size: 2}, nil)
	if len(r.Entries) != 2 || r.Entries[0].Name != "b" || r.Entries[1].Name != "c" {
		t.Fatalf("listing after a: %+v", r.Entries)
	}
	r, _ = must(t, n, &tmsg{Op: ns.OpReaddir, Ino: dirIno, Local: true}, nil)
	if len(r.Entries) != 1 || r.Entries[0].Name != "rank3" || r.Entries[0].Ino != d.Ino {
		t.Fatalf("the local-mode directory's part: %+v", r.Entries)
	}
	for _, bad := range []string{"..", ".", "a/b", ""} {
		if _, _, err := call(t, n, &tmsg{Op: ns.OpLookup, Parent: d.Ino, Name: bad}, nil); rpc.Errno(err) != syscall.EINVAL {
			t.Errorf("lookup of %q: %v", bad, err)
		}
	}
	if _, _, err := call(t, n, &tmsg{Op: ns.OpGetattr, Ino: wire.LocalIno(8, 5)}, nil); rpc.Errno(err) != syscall.EXDEV {
		t.Fatalf("another server's inode: %v", err)
	}
	if _, _, err := call(t, n, &tmsg{Op: ns.OpGetattr, Ino: wire.LocalIno(9, 1<<40)}, nil); rpc.Errno(err) != syscall.ESTALE {
		t.Fatalf("an unknown inode: %v", err)
	}
	// setattr: truncate, mode, times
	r, _ = must(t, n, &tmsg{Op: ns.OpSetattr, Ino: f.Ino, Mask: ns.SetSize | ns.SetMode | ns.SetMtime, Size: 5, Mode: 0o600, Mtime: 1e18}, nil)
	if r.Attr.Size != 5 || r.Attr.Mode&0o7777 != 0o600 || r.Attr.Mtime != 1e18 {
		t.Fatalf("after setattr %+v", r.Attr)
	}
	// rename within, then the old name is gone and the inode follows
	must(t, n, &tmsg{Op: ns.OpRename, Parent: d.Ino, Name: "f", NewParent: d.Ino, NewName: "g"}, nil)
	if r, _ := must(t, n, &tmsg{Op: ns.OpGetattr, Ino: f.Ino}, nil); r.Attr.Size != 5 {
		t.Fatalf("the renamed file: %+v", r.Attr)
	}
	if _, _, err := call(t, n, &tmsg{Op: ns.OpRename, Parent: d.Ino, Name: "g", NewParent: dirIno, NewName: "x"}, nil); rpc.Errno(err) != syscall.EXDEV {
		t.Fatalf("rename into the global namespace: %v", err)
	}
	// a directory renamed: what is under it follows; a hard link's
	// removal leaves the other name's inode
	r, _ = must(t, n, &tmsg{Op: ns.OpMkdir, Parent: d.Ino, Name: "sub", Mode: 0o755}, nil)
	sub := r.Attr
	r, _ = must(t, n, &tmsg{Op: ns.OpMknod, Parent: sub.Ino, Name: "in", Mode: 0o644}, nil)
	in := r.Attr
	must(t, n, &tmsg{Op: ns.OpRename, Parent: d.Ino, Name: "sub", NewParent: d.Ino, NewName: "sub2"}, nil)
	must(t, n, &tmsg{Op: ns.OpWrite, Ino: in.Ino, Size: 3}, []byte("abc"))
	if _, got := must(t, n, &tmsg{Op: ns.OpRead, Ino: in.Ino, Size: 10}, nil); string(got) != "abc" {
		t.Fatalf("a file in a renamed directory: %q", got)
	}
	must(t, n, &tmsg{Op: ns.OpLink, Ino: in.Ino, NewParent: d.Ino, NewName: "hard"}, nil)
	must(t, n, &tmsg{Op: ns.OpUnlink, Parent: d.Ino, Name: "hard"}, nil)
	if r, _ := must(t, n, &tmsg{Op: ns.OpGetattr, Ino: in.Ino}, nil); r.Attr.Size != 3 || r.Attr.Nlink != 1 {
		t.Fatalf("after one of two links went: %+v", r.Attr)
	}
	// a restart: the same inodes
	n2, err := New(root, func() uint64 { return 9 })
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := must(t, n2, &tmsg{Op: ns.OpGetattr, Ino: f.Ino}, nil); r.Attr.Ino != f.Ino {
		t.Fatalf("after a restart: %+v", r.Attr)
	}
	must(t, n2, &tmsg{Op: ns.OpUnlink, Parent: d.Ino, Name: "g"}, nil)
	if _, _, err := call(t, n2, &tmsg{Op: ns.OpGetattr, Ino: f.Ino}, nil); rpc.Errno(err) != syscall.ESTALE {
		t.Fatalf("a removed file's inode: %v", err)
	}
	if _, _, err := call(t, n2, &tmsg{Op: ns.OpRmdir, Parent: dirIno, Name: "rank3", Local: true}, nil); rpc.Errno(err) != syscall.ENOTEMPTY {
		t.Fatalf("rmdir of a full private directory: %v", err)
	}
}

// TestPrivateDirectoriesReadOnlyElsewhere: a private directory belongs to
// the job that made it (or, outside a job, the node); to anyone else it
// and everything in it can be listed, stat'ed and read but not changed
// (EROFS), only removed as the permissions allow (clean-up); root may do
// anything; the owner is kept across a restart and forgotten with the
// directory.
func TestPrivateDirectoriesReadOnlyElsewhere(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ns")
	n, err := New(root, func() uint64 { return 9 })
	if err != nil {
		t.Fatal(err)
	}
	job := func(id, node string) wire.Who { return wire.Who{Job: id, Node: node, User: 1000} }
	owner := job("7", "n3")
	r, _ := must(t, n, &tmsg{Op: ns.OpMkdir, Parent: dirIno, Name: "3", Mode: 0o777, Uid: 1000, Local: true, Who: owner}, nil)
	d := r.Attr
	r, _ = must(t, n, &tmsg{Op: ns.OpMknod, Parent: d.Ino, Name: "out", Mode: 0o666, Uid: 1000, Who: owner}, nil)
	f := r.Attr
	must(t, n, &tmsg{Op: ns.OpWrite, Ino: f.Ino, Size: 5, Uid: 1000, Who: owner}, []byte("hello"))
	rofs := func(n *NS, m *tmsg, payload []byte) {
		t.Helper()
		if _, _, err := call(t, n, m, payload); rpc.Errno(err) != syscall.EROFS {
			t.Errorf("%s from %+v: %v, want EROFS", m.Op, m.Who, err)
		}
	}
	for _, other := range []wire.Who{job("8", "n3"), {Node: "login1", User: 1000}} {
		rofs(n, &tmsg{Op: ns.OpWrite, Ino: f.Ino, Size: 1, Uid: 1000, Who: other}, []byte("x"))
		rofs(n, &tmsg{Op: ns.OpSetattr, Ino: f.Ino, Mask: ns.SetSize, Uid: 1000, Who: other}, nil)
		rofs(n, &tmsg{Op: ns.OpMknod, Parent: d.Ino, Name: "new", Mode: 0o644, Uid: 1000, Who: other}, nil)
		rofs(n, &tmsg{Op: ns.OpMkdir, Parent: d.Ino, Name: "sub", Mode: 0o755, Uid: 1000, Who: other}, nil)
		rofs(n, &tmsg{Op: ns.OpLink, Ino: f.Ino, NewParent: d.Ino, NewName: "hard", Uid: 1000, Who: other}, nil)
		rofs(n, &tmsg{Op: ns.OpRename, Parent: d.Ino, Name: "out", NewParent: d.Ino, NewName: "moved", Uid: 1000, Who: other}, nil)
		// reading, looking up and listing are open to all
		if _, p := must(t, n, &tmsg{Op: ns.OpRead, Ino: f.Ino, Size: 5, Uid: 1000, Who: other}, nil); string(p) != "hello" {
			t.Fatalf("read by %+v: %q", other, p)
		}
		must(t, n, &tmsg{Op: ns.OpLookup, Parent: d.Ino, Name: "out", Uid: 1000, Who: other}, nil)
		if r, _ := must(t, n, &tmsg{Op: ns.OpReaddir, Ino: d.Ino, Uid: 1000, Who: other}, nil); len(r.Entries) != 1 {
			t.Fatalf("listing by %+v: %+v", other, r.Entries)
		}
	}
	// the job on another node (a replacement) writes; so does root
	must(t, n, &tmsg{Op: ns.OpWrite, Ino: f.Ino, Offset: 5, Size: 1, Uid: 1000, Who: job("7", "n9")}, []byte("!"))
	rootOther := wire.Who{Job: "8", Node: "n3"} // User 0
	must(t, n, &tmsg{Op: ns.OpMknod, Parent: d.Ino, Name: "by-root", Mode: 0o644, Uid: 0, Who: rootOther}, nil)
	// a setattr's Uid is the new owner, not the caller: a chown to root
	// by another job is still refused
	rofs(n, &tmsg{Op: ns.OpSetattr, Ino: f.Ino, Mask: ns.SetUid, Uid: 0, Who: job("8", "n3")}, nil)
	// outside a job the node owns
	r, _ = must(t, n, &tmsg{Op: ns.OpMkdir, Parent: dirIno, Name: "n5", Mode: 0o777, Uid: 1000, Local: true, Who: wire.Who{Node: "n5", User: 1000}}, nil)
	must(t, n, &tmsg{Op: ns.OpMkdir, Parent: r.Attr.Ino, Name: "sub", Mode: 0o755, Uid: 1000, Who: wire.Who{Node: "n5", User: 1000}}, nil)
	rofs(n, &tmsg{Op: ns.OpMkdir, Parent: r.Attr.Ino, Name: "sub2", Mode: 0o755, Uid: 1000, Who: wire.Who{Node: "n6", User: 1000}}, nil)
	// a restart keeps the owner
	n2, err := New(root, func() uint64 { return 9 })
	if err != nil {
		t.Fatal(err)
	}
	rofs(n2, &tmsg{Op: ns.OpWrite, Ino: f.Ino, Size: 1, Uid: 1000, Who: job("8", "n3")}, []byte("x"))
	// anyone the permissions allow cleans up; a directory of the same
	// name is then its new maker's
	for _, name := range []string{"out", "by-root"} {
		must(t, n2, &tmsg{Op: ns.OpUnlink, Parent: d.Ino, Name: name, Uid: 1000, Who: wire.Who{Node: "login1", User: 1000}}, nil)
	}
	must(t, n2, &tmsg{Op: ns.OpRmdir, Parent: dirIno, Name: "3", Uid: 1000, Local: true, Who: wire.Who{Node: "login1", User: 1000}}, nil)
	r, _ = must(t, n2, &tmsg{Op: ns.OpMkdir, Parent: dirIno, Name: "3", Mode: 0o777, Uid: 1000, Local: true, Who: job("8", "n3")}, nil)
	must(t, n2, &tmsg{Op: ns.OpMkdir, Parent: r.Attr.Ino, Name: "sub", Mode: 0o755, Uid: 1000, Who: job("8", "n4")}, nil)
	if r, _ := must(t, n2, &tmsg{Op: ns.OpReaddir, Ino: dirIno, Uid: 1000, Local: true}, nil); len(r.Entries) != 2 {
		t.Fatalf("the local-mode directory lists %+v (the owners' records must not show)", r.Entries)
	}
}
