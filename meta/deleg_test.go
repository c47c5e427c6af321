package meta

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

func delegService(t *testing.T) *Service {
	t.Helper()
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// holder plays a mount holding a delegation: it follows the feed from
// position seen and, when its delegation of dir is recalled, sends its
// creates and gives it back.
func holder(s *Service, seen, client, dir uint64, pending []ns.BatchEntry, uid uint32) chan error {
	done := make(chan error, 1)
	go func() {
		for {
			es, pos, _ := s.feed.watch(context.Background(), seen, client, 5*time.Second)
			seen = pos
			for _, e := range es {
				if e.Kind == ns.ChangeRecall && e.Ino == dir && e.Holder == client {
					_, err := rpc.Do(context.Background(), s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: client},
						Parent: dir, Entries: pending, Uid: uid, Gid: uid, Mtime: time.Now().UnixNano()})
					if err == nil {
						_, err = rpc.Do(context.Background(), s, ns.Undelegate, &ns.DelegateReq{Client: client, Dir: dir})
					}
					done <- err
					return
				}
			}
		}
	}()
	return done
}

// TestDelegationRecall: a mount holds a directory and has created files in
// it that the service has not seen; another client's lookup, listing and
// create there recall the delegation and see those files; the directory
// is then not delegated again at once.
func TestDelegationRecall(t *testing.T) {
	s := delegService(t)
	ctx := context.Background()
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 1000, 1000, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = 11, 22
	resp, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: a, Dir: d.Ino})
	if err != nil || resp.Count != DelegInos || resp.First <= d.Ino {
		t.Fatalf("delegate: %+v %v", resp, err)
	}
	if _, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: b, Dir: d.Ino}); rpc.Errno(err) != syscall.EBUSY {
		t.Fatalf("second holder: %v, want EBUSY", err)
	}
	// inode numbers handed out are not given to anyone else
	other, err := s.Create(RootIno, "x", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil || other.Ino < resp.First+DelegInos {
		t.Fatalf("ordinary create after a grant got inode %d (granted %d..%d): %v", other.Ino, resp.First, resp.First+DelegInos-1, err)
	}
	pending := []ns.BatchEntry{{Name: "f1", Ino: resp.First, Mode: 0o640, Open: true}, {Name: "f2", Ino: resp.First + 1, Mode: 0o600}}
	done := holder(s, s.feed.position(), a, d.Ino, pending, 1000)
	// the holder's own requests do not wait
	start := time.Now()
	if _, err := rpc.Do(ctx, s, ns.Getattr, &ns.InoReq{Head: ns.Head{Client: a}, Ino: d.Ino}); err != nil || time.Since(start) > time.Second {
		t.Fatalf("holder's getattr: %v after %v", err, time.Since(start))
	}
	// another client's lookup recalls and sees the file
	got, err := rpc.Do(ctx, s, ns.Lookup, &ns.NameReq{Head: ns.Head{Client: b}, Parent: d.Ino, Name: "f1"})
	if err != nil || got.Attr.Ino != resp.First || got.Attr.Mode != syscall.S_IFREG|0o640 || got.Attr.Uid != 1000 {
		t.Fatalf("lookup after recall: %+v %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.opens.total[resp.First] != 1 || s.opens.total[resp.First+1] != 0 {
		t.Fatalf("open counts %v", s.opens.total)
	}
	es, err := s.Readdir(d.Ino, "", 100)
	if err != nil || len(es) != 2 {
		t.Fatalf("listing: %+v %v", es, err)
	}
	if _, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: a, Dir: d.Ino}); rpc.Errno(err) != syscall.EBUSY {
		t.Fatalf("delegated again right after a recall: %v", err)
	}
	// a batch with a taken name, a duplicate and a bad name makes the rest
	resp, err = rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: b, Dir: RootIno})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: b}, Parent: RootIno, Entries: []ns.BatchEntry{
		{Name: "x", Ino: resp.First}, {Name: "y", Ino: resp.First + 1}, {Name: "y", Ino: resp.First + 2}, {Name: "a/b", Ino: resp.First + 3}}})
	if err != nil || len(r.Failed) != 3 || r.Failed[0].Name != "x" || syscall.Errno(r.Failed[0].Errno) != syscall.EEXIST ||
		syscall.Errno(r.Failed[2].Errno) != syscall.EINVAL {
		t.Fatalf("batch failures: %+v %v", r.Failed, err)
	}
	if a, err := s.Lookup(RootIno, "y"); err != nil || a.Ino != resp.First+1 {
		t.Fatalf("y: %+v %v", a, err)
	}
	// removals apply in order with the creates: y removed and made again
	// is the new file; removing a missing name comes back refused
	r, err = rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: b}, Parent: RootIno, Entries: []ns.BatchEntry{
		{Name: "y", Ino: resp.First + 1, Remove: true}, {Name: "y", Ino: resp.First + 4, Mode: 0o600},
		{Name: "nope", Remove: true}, {Name: "z", Ino: resp.First + 5, Mode: 0o644}}})
	if err != nil || len(r.Failed) != 1 || r.Failed[0].Name != "nope" || !r.Failed[0].Remove ||
		syscall.Errno(r.Failed[0].Errno) != syscall.ENOENT {
		t.Fatalf("batch with removals: %+v %v", r, err)
	}
	if a, err := s.Lookup(RootIno, "y"); err != nil || a.Ino != resp.First+4 || a.Mode&0o777 != 0o600 {
		t.Fatalf("y made again: %+v %v", a, err)
	}
	if _, err := s.Getattr(resp.First + 1); rpc.Errno(err) != syscall.ENOENT {
		t.Fatalf("the removed y's inode: %v", err)
	}
	if _, err := s.Lookup(RootIno, "z"); err != nil {
		t.Fatalf("z after a refused removal: %v", err)
	}
	// the same batch sent again (its answer lost in a failover): what it
	// made and removed is taken as made and removed, nothing fails
	r, err = rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: b}, Parent: RootIno, Entries: []ns.BatchEntry{
		{Name: "y", Ino: resp.First + 1, Remove: true}, {Name: "y", Ino: resp.First + 4, Mode: 0o600},
		{Name: "z", Ino: resp.First + 5, Mode: 0o644}}})
	if err != nil || len(r.Failed) != 0 {
		t.Fatalf("the batch sent again: %+v %v", r, err)
	}
	if a, err := s.Lookup(RootIno, "y"); err != nil || a.Ino != resp.First+4 {
		t.Fatalf("y after the batch sent again: %+v %v", a, err)
	}
	if _, err := s.Getattr(resp.First + 4); err != nil {
		t.Fatalf("the new y's inode after the batch sent again (the removal of the old y removed it): %v", err)
	}
	// but a create of a taken name with another number still fails
	r, err = rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: b}, Parent: RootIno, Entries: []ns.BatchEntry{
		{Name: "z", Ino: resp.First + 6, Mode: 0o644}}})
	if err != nil || len(r.Failed) != 1 || syscall.Errno(r.Failed[0].Errno) != syscall.EEXIST {
		t.Fatalf("z made again with another number: %+v %v", r, err)
	}
}

// TestDelegationLapses: a holder that does not answer a recall loses the
// delegation after RecallWait and the other client goes on.
func TestDelegationLapses(t *testing.T) {
	if testing.Short() {
		t.Skip("waits RecallWait")
	}
	s := delegService(t)
	ctx := context.Background()
	if _, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: 5, Dir: RootIno}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := rpc.Do(ctx, s, ns.Mknod, &ns.MknodReq{Head: ns.Head{Client: 6}, Parent: RootIno, Name: "f", Mode: 0o644})
	if err != nil || time.Since(start) < RecallWait || time.Since(start) > RecallWait+2*time.Second {
		t.Fatalf("create by another client: %v after %v", err, time.Since(start))
	}
	if s.deleg.n.Load() != 0 {
		t.Fatal("delegation still held")
	}
}

// TestDelegationGrantOrdered: creates by another client racing with a
// grant either come before it in the feed (at or below the grant's
// position) or after the recall they caused: never in between, where the
// holder would not know of them.
func TestDelegationGrantOrdered(t *testing.T) {
	s := delegService(t)
	ctx := context.Background()
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = 31, 32
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := rpc.Do(ctx, s, ns.Mknod, &ns.MknodReq{Head: ns.Head{Client: b}, Parent: d.Ino,
					Name: fmt.Sprintf("b%d-%d", g, i), Mode: 0o644}); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	time.Sleep(20 * time.Millisecond)
	before := s.feed.position() // the recall may come before the holder starts
	_, pos, err := s.Delegate(a, d.Ino)
	if err != nil {
		t.Fatal(err)
	}
	done := holder(s, before, a, d.Ino, nil, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(stop)
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	es, _, lost := s.feed.since(pos, a)
	if lost {
		t.Fatal("feed lost changes")
	}
	for _, e := range es {
		if e.Kind == ns.ChangeRecall {
			return // b's later changes come after the recall: fine
		}
		if e.Kind == ns.ChangeEntry && e.Ino == d.Ino {
			t.Fatalf("another client's create %q landed after the grant and before the recall", e.Name)
		}
	}
	t.Fatal("no recall in the feed although the other client kept creating")
}

// TestDelegationGrantPosition: a grant's position is that of the last
// change another client made to a name in the directory, so a mount that
// only made changes itself (a fresh directory) need not wait for its feed.
func TestDelegationGrantPosition(t *testing.T) {
	s := delegService(t)
	ctx := context.Background()
	const a, b = 41, 42
	mk := func(client, parent uint64, name string, mode uint32) uint64 {
		t.Helper()
		resp, err := rpc.Do(ctx, s, ns.Mknod, &ns.MknodReq{Head: ns.Head{Client: client}, Parent: parent, Name: name, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Feed
	}
	mk(b, RootIno, "other", 0o644) // elsewhere: does not count
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	mk(a, d.Ino, "mine", 0o644)
	if _, pos, err := s.Delegate(a, d.Ino); err != nil || pos != 0 {
		t.Fatalf("grant of a directory only its holder changed: position %d, %v; want 0", pos, err)
	}
	s.Undelegate(a, d.Ino)
	before := s.feed.position()
	mk(b, d.Ino, "theirs", 0o644)
	after := s.feed.position()
	mk(a, d.Ino, "mine2", 0o644)
	mk(b, RootIno, "other2", 0o644)
	if _, pos, err := s.Delegate(a, d.Ino); err != nil || pos <= before || pos > after {
		t.Fatalf("grant after another client's create: position %d, %v; want in (%d, %d]", pos, err, before, after)
	}
}

// TestBatchDirectories: a batch makes directories as Create does (link
// counts, setgid inheritance) and delegates each to its maker, so another
// client's request in it recalls it; the maker's batch removes an empty
// one (ending the delegation), a non-empty one is refused ENOTEMPTY.
func TestBatchDirectories(t *testing.T) {
	s := delegService(t)
	ctx := context.Background()
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o2775, 1000, 77, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = 11, 22
	g, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: a, Dir: d.Ino})
	if err != nil {
		t.Fatal(err)
	}
	sub, f := g.First, g.First+1
	r, err := rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino, Uid: 1000, Gid: 1000,
		Mtime: time.Now().UnixNano(), Entries: []ns.BatchEntry{{Name: "sub", Ino: sub, Mode: syscall.S_IFDIR | 0o750}}})
	if err != nil || len(r.Failed) != 0 {
		t.Fatalf("batch making a directory: %+v %v", r, err)
	}
	got, err := s.Getattr(sub)
	if err != nil || got.Mode != syscall.S_IFDIR|syscall.S_ISGID|0o750 || got.Nlink != 2 || got.Gid != 77 {
		t.Fatalf("made directory %+v %v: want mode %o, 2 links, the parent's group (setgid)", got, err, syscall.S_IFDIR|syscall.S_ISGID|0o750)
	}
	if pa, _ := s.Getattr(d.Ino); pa.Nlink != 3 {
		t.Fatalf("parent's link count %d, want 3", pa.Nlink)
	}
	// delegated to its maker: another client cannot have it, and its
	// create in it recalls it (the maker's pending file arrives first)
	if _, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: b, Dir: sub}); rpc.Errno(err) != syscall.EBUSY {
		t.Fatalf("another client's delegation of the new directory: %v, want EBUSY", err)
	}
	done := holder(s, s.feed.position(), a, sub, []ns.BatchEntry{{Name: "f", Ino: f, Mode: 0o644}}, 1000)
	if _, err := rpc.Do(ctx, s, ns.Mknod, &ns.MknodReq{Head: ns.Head{Client: b}, Parent: sub, Name: "f", Mode: 0o644, Excl: true}); rpc.Errno(err) != syscall.EEXIST {
		t.Fatalf("another client's create after the recall: %v, want EEXIST (the maker's file)", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// removals of directories in a batch: not empty is refused, empty goes
	rm := func(name string, ino uint64) []ns.BatchEntry {
		r, err := rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino,
			Entries: []ns.BatchEntry{{Name: name, Ino: ino, Mode: syscall.S_IFDIR, Remove: true}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Failed
	}
	if es := rm("sub", sub); len(es) != 1 || !es[0].Remove || syscall.Errno(es[0].Errno) != syscall.ENOTEMPTY {
		t.Fatalf("removal of a directory with a file: %+v, want ENOTEMPTY", es)
	}
	if err := s.Remove(sub, "f", false); err != nil {
		t.Fatal(err)
	}
	// a second directory, removed by its maker's batch: its delegation ends
	r, err = rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino,
		Entries: []ns.BatchEntry{{Name: "s2", Ino: g.First + 2, Mode: syscall.S_IFDIR | 0o700}}})
	if err != nil || len(r.Failed) != 0 {
		t.Fatalf("making s2: %+v %v", r, err)
	}
	held := s.deleg.n.Load()
	if es := rm("s2", g.First+2); len(es) != 0 {
		t.Fatalf("removal of an empty directory: %+v", es)
	}
	if _, err := s.Lookup(d.Ino, "s2"); rpc.Errno(err) != syscall.ENOENT {
		t.Fatalf("s2 after its removal: %v", err)
	}
	if s.deleg.n.Load() != held-1 {
		t.Fatalf("delegations held %d, want %d: a removed directory's delegation must end", s.deleg.n.Load(), held-1)
	}
	if pa, _ := s.Getattr(d.Ino); pa.Nlink != 3 {
		t.Fatalf("parent's link count %d after making and removing s2, want 3 (sub stays)", pa.Nlink)
	}
}

// TestOwnedFileRecall: a file created owned under a delegation may be read
// by another client without a recall, but an open for writing or
// truncating, or a size change, by another client recalls the delegation
// (the holder then gives the file up); the holder's own opens do not, and
// a file created not Owned never recalls by its inode.
func TestOwnedFileRecall(t *testing.T) {
	s := delegService(t)
	ctx := context.Background()
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o777, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = 11, 22
	grant := func() uint64 {
		t.Helper()
		resp, err := rpc.Do(ctx, s, ns.Delegate, &ns.DelegateReq{Client: a, Dir: d.Ino})
		if err != nil {
			t.Fatal(err)
		}
		return resp.First
	}
	ino := grant()
	if _, err := rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino, Entries: []ns.BatchEntry{
		{Name: "owned", Ino: ino, Mode: 0o666, Owned: true}, {Name: "plain", Ino: ino + 1, Mode: 0o666}}}); err != nil {
		t.Fatal(err)
	}
	held := func() bool {
		s.deleg.mu.Lock()
		defer s.deleg.mu.Unlock()
		return s.deleg.dir[d.Ino] != nil
	}
	// req is a request by a client of an inode
	type req struct {
		what string
		do   func(c context.Context, client, ino uint64) error
	}
	open := func(flags uint32) func(context.Context, uint64, uint64) error {
		return func(c context.Context, client, ino uint64) error {
			_, err := rpc.Do(c, s, ns.Open, &ns.OpenReq{Head: ns.Head{Client: client}, Ino: ino, Flags: flags})
			return err
		}
	}
	getattr := func(c context.Context, client, ino uint64) error {
		_, err := rpc.Do(c, s, ns.Getattr, &ns.InoReq{Head: ns.Head{Client: client}, Ino: ino})
		return err
	}
	truncate := func(c context.Context, client, ino uint64) error {
		_, err := rpc.Do(c, s, ns.Setattr, &ns.SetattrReq{Head: ns.Head{Client: client}, Ino: ino, Mask: ns.SetSize})
		return err
	}
	quick := func(what string, f func(context.Context, uint64, uint64) error, client, ino uint64) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := f(c, client, ino); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !held() {
			t.Fatalf("%s by client %d of inode %d ended the delegation", what, client, ino)
		}
	}
	// the holder's own opens and stats, and another client's of a file
	// not owned, leave the delegation alone
	quick("open rw", open(syscall.O_RDWR), a, ino)
	quick("getattr", getattr, a, ino)
	quick("open wo", open(syscall.O_WRONLY), b, ino+1)
	quick("open ro", open(syscall.O_RDONLY), b, ino+1)
	quick("getattr", getattr, b, ino+1)
	quick("getattr", getattr, 0, ino) // a forwarding daemon's own
	quick("truncate", truncate, b, ino+1)
	// another client's open or stat of an owned file recalls: the
	// holder may have closed it with its writes on their way
	for _, r := range []req{
		{"open ro", open(syscall.O_RDONLY)},
		{"getattr", getattr},
		{"open wo", open(syscall.O_WRONLY)},
		{"open trunc", open(syscall.O_RDONLY | syscall.O_TRUNC)},
		{"truncate", truncate},
	} {
		if !held() {
			time.Sleep(DelegCooldown + 50*time.Millisecond)
			next := grant()
			// a new delegation does not own the files of the last one
			if _, err := rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino, Entries: []ns.BatchEntry{
				{Name: fmt.Sprint("x", next), Ino: next, Mode: 0o666, Owned: true}}}); err != nil {
				t.Fatal(err)
			}
			s.deleg.mu.Lock()
			_, stale := s.deleg.file[ino]
			s.deleg.mu.Unlock()
			if stale {
				t.Fatalf("inode %d still owned by the new delegation", ino)
			}
			ino = next
		}
		done := holder(s, s.feed.position(), a, d.Ino, nil, 0)
		if err := r.do(ctx, b, ino); err != nil {
			t.Fatalf("%s: %v", r.what, err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s of an owned file by another client did not recall", r.what)
		}
		if held() {
			t.Fatalf("delegation still held after %s", r.what)
		}
	}
}

// TestDelegationsAfterTakeover: a server that starts on another's engine
// holds the delegations that one granted as recalled: another client's
// request naming a delegated directory, or opening a file made owned in
// it, waits until the holder has sent its creates and given the
// delegation back, or, for a holder that never does, RecallWait.
func TestDelegationsAfterTakeover(t *testing.T) {
	e := engine.NewMem()
	open := func() *Service {
		s, err := New(Config{Engine: e, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	const a, b = 11, 12
	old := open()
	d, err := old.Create(RootIno, "d", syscall.S_IFDIR|0o777, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := rpc.Do(ctx, old, ns.Delegate, &ns.DelegateReq{Client: a, Dir: d.Ino})
	if err != nil {
		t.Fatal(err)
	}
	sub, f := g.First, g.First+1
	if _, err := rpc.Do(ctx, old, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino, Mtime: time.Now().UnixNano(),
		Entries: []ns.BatchEntry{{Name: "sub", Ino: sub, Mode: syscall.S_IFDIR | 0o777}, {Name: "f", Ino: f, Mode: 0o644, Owned: true}}}); err != nil {
		t.Fatal(err)
	}
	s := open()
	if n := s.deleg.restored.Load(); n != 2 {
		t.Fatalf("the new server holds %d delegations from the engine, want 2 (d, and sub made delegated)", n)
	}
	// the holder learns of the new server, sends a create it held and
	// gives d back; sub it never gives back (as if it had died)
	go func() {
		time.Sleep(300 * time.Millisecond)
		rpc.Do(ctx, s, ns.CreateBatch, &ns.BatchReq{Head: ns.Head{Client: a}, Parent: d.Ino, Mtime: time.Now().UnixNano(),
			Entries: []ns.BatchEntry{{Name: "late", Ino: g.First + 2, Mode: 0o644}}})
		rpc.Do(ctx, s, ns.Undelegate, &ns.DelegateReq{Client: a, Dir: d.Ino})
	}()
	start := time.Now()
	if _, err := rpc.Do(ctx, s, ns.Open, &ns.OpenReq{Head: ns.Head{Client: b}, Ino: f, Flags: syscall.O_RDONLY}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("another client opened a file owned under a delegation of the old server after %v, without waiting for its holder", took)
	}
	if r, err := rpc.Do(ctx, s, ns.Lookup, &ns.NameReq{Head: ns.Head{Client: b}, Parent: d.Ino, Name: "late"}); err != nil || r.Attr.Ino != g.First+2 {
		t.Fatalf("the holder's last create is not seen by another client: %+v %v", r, err)
	}
	start = time.Now()
	if _, err := rpc.Do(ctx, s, ns.Lookup, &ns.NameReq{Head: ns.Head{Client: b}, Parent: sub, Name: "x"}); !is(err, syscall.ENOENT) {
		t.Fatalf("lookup in the directory whose holder is gone: %v", err)
	}
	if took := time.Since(start); took < RecallWait-100*time.Millisecond {
		t.Fatalf("a delegation whose holder is gone was revoked after %v, want RecallWait (%v)", took, RecallWait)
	}
	if n := open().deleg.n.Load(); n != 0 {
		t.Fatalf("%d delegations left in the engine after both ended", n)
	}
}
