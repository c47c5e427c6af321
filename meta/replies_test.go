package meta

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// TestRequestsSentAgain: a mutation sent again with its number (its
// answer lost in a failover) is answered as made, not made twice nor
// refused: exclusive create, mkdir, symlink, link, rename, unlink, rmdir.
// The same requests with new numbers get their usual errors, and records
// older than replyKeep are swept.
func TestRequestsSentAgain(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const client = 77
	var req uint64
	head := func(again bool) ns.Head {
		if !again {
			req++
		}
		return ns.Head{Client: client, Req: req}
	}
	twice := func(what string, do func(h ns.Head) error) {
		t.Helper()
		if err := do(head(false)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := do(head(true)); err != nil {
			t.Fatalf("%s sent again with its number: %v", what, err)
		}
		if err := do(head(false)); err == nil {
			t.Fatalf("%s with a new number: no error, want its usual one", what)
		}
	}
	var file uint64
	twice("exclusive create", func(h ns.Head) error {
		r, err := rpc.Do(ctx, s, ns.Mknod, &ns.MknodReq{Head: h, Parent: RootIno, Name: "f", Mode: syscall.S_IFREG | 0o644, Excl: true})
		if err == nil {
			if file != 0 && r.Attr.Ino != file {
				t.Fatalf("sent again: inode %d, first %d", r.Attr.Ino, file)
			}
			file = r.Attr.Ino
		}
		return err
	})
	twice("mkdir", func(h ns.Head) error {
		_, err := rpc.Do(ctx, s, ns.Mkdir, &ns.MkdirReq{Head: h, Parent: RootIno, Name: "d", Mode: 0o755})
		return err
	})
	twice("symlink", func(h ns.Head) error {
		_, err := rpc.Do(ctx, s, ns.Symlink, &ns.SymlinkReq{Head: h, Parent: RootIno, Name: "l", Target: "f"})
		return err
	})
	twice("link", func(h ns.Head) error {
		_, err := rpc.Do(ctx, s, ns.Link, &ns.LinkReq{Head: h, Ino: file, NewParent: RootIno, NewName: "g"})
		return err
	})
	if a, err := s.Getattr(file); err != nil || a.Nlink != 2 {
		t.Fatalf("f after its link sent again: %+v %v, want 2 links", a, err)
	}
	// a truncate sent again after a write extended the file does not
	// cut the write
	trunc := head(false)
	cut, err := rpc.Do(ctx, s, ns.Setattr, &ns.SetattrReq{Head: trunc, Ino: file, Mask: ns.SetSize, Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Extend(file, 100, 1, cut.Attr.Trunc); err != nil {
		t.Fatal(err)
	}
	if a, err := rpc.Do(ctx, s, ns.Setattr, &ns.SetattrReq{Head: trunc, Ino: file, Mask: ns.SetSize, Size: 10}); err != nil || a.Attr.Size != 100 {
		t.Fatalf("truncate sent again: %+v %v, want the file as the write left it (100 bytes)", a, err)
	}
	twice("rename", func(h ns.Head) error {
		_, err := rpc.Do(ctx, s, ns.Rename, &ns.RenameReq{Head: h, Parent: RootIno, Name: "g", NewParent: RootIno, NewName: "h"})
		return err
	})
	twice("unlink", func(h ns.Head) error {
		_, err := rpc.Do(ctx, s, ns.Unlink, &ns.NameReq{Head: h, Parent: RootIno, Name: "h"})
		return err
	})
	if a, err := s.Getattr(file); err != nil || a.Nlink != 1 {
		t.Fatalf("f after its other name's unlink sent again: %+v %v, want 1 link", a, err)
	}
	twice("rmdir", func(h ns.Head) error {
		_, err := rpc.Do(ctx, s, ns.Rmdir, &ns.NameReq{Head: h, Parent: RootIno, Name: "d"})
		return err
	})
	// an unnumbered request is not recorded
	if _, err := rpc.Do(ctx, s, ns.Mkdir, &ns.MkdirReq{Head: ns.Head{Client: client}, Parent: RootIno, Name: "u", Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		s.e.Scan([]byte{pReply}, nil, func(_, _ []byte) bool { n++; return true })
		return n
	}
	if n := count(); n != 8 {
		t.Fatalf("%d records, want the 8 mutations made", n)
	}
	now = now.Add(replyKeep / 2)
	if err := s.sweepReplies(); err != nil || count() != 8 {
		t.Fatalf("swept before replyKeep: %v, %d left", err, count())
	}
	now = now.Add(replyKeep)
	if err := s.sweepReplies(); err != nil || count() != 0 {
		t.Fatalf("after replyKeep: %v, %d left", err, count())
	}
}
