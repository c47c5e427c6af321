package fwd

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta"
)

// TestGrowthOfAGoneFileIsDropped: growth the daemon holds for a file the
// metadata service no longer has (deleted, its last handle closed) is
// dropped at its report, as a report of a file that exists clears it; it
// was kept as unreported, and sent again and logged every SizeFlush for
// as long as the daemon ran. Growth of a file that exists is reported.
func TestGrowthOfAGoneFileIsDropped(t *testing.T) {
	svc, addr := testrig.Meta(t, meta.Config{})
	a, err := svc.Create(meta.RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Meta: addr, Secret: testrig.Secret, Timeout: 5 * time.Second, Log: testrig.Quiet()})
	defer s.meta.Close()
	gone := a.Ino + 1000
	for _, ino := range []uint64{a.Ino, gone} {
		s.opened(&wire.Attr{Ino: ino, Size: 0})
		f := s.holdExisting(ino)
		f.mu.Lock()
		f.size, f.mtime, f.pending = 4096, 77, true
		f.mu.Unlock()
		s.letGo(ino, f)
	}
	if err := s.flushSizes(context.Background(), 0, false); err != nil {
		t.Fatalf("report with a gone file among them: %v", err)
	}
	for _, ino := range []uint64{a.Ino, gone} {
		f := s.lookupFile(ino)
		if f == nil {
			t.Fatalf("inode %d: no state", ino)
		}
		f.mu.Lock()
		pending := f.pending
		f.mu.Unlock()
		if pending {
			t.Errorf("inode %d: growth still unreported after the report", ino)
		}
	}
	if got, err := svc.Getattr(a.Ino); err != nil || got.Size != 4096 {
		t.Fatalf("the existing file's size after the report: %+v %v, want 4096", got, err)
	}
}

// TestRetiredStateRaisesLateReplies: attributes the metadata service
// served before a file's last report reached it, on their way back
// through the daemon after the file's state went (a stat racing the
// close's release), are raised to the size the state knew, as the state
// would have raised them, for two Timeouts; a newer generation (a
// truncate) is not raised, nor is the mtime. A new state starts from
// what the old one knew.
func TestRetiredStateRaisesLateReplies(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New(Config{Meta: "127.0.0.1:1", Timeout: time.Second, Now: func() time.Time { return now }})
	s.opened(&wire.Attr{Ino: 9, Trunc: 3, Size: 100})
	f := s.holdExisting(9)
	f.mu.Lock()
	f.size, f.mtime = 500, 77 // a write's growth, reported since
	f.mu.Unlock()
	s.release(9)
	if s.lookupFile(9) == nil {
		t.Fatal("the state went while a request held it")
	}
	s.letGo(9, f)
	if s.lookupFile(9) != nil {
		t.Fatal("the state of a closed file stayed after its last hold")
	}

	a := &wire.Attr{Ino: 9, Trunc: 3, Size: 100, Mtime: 5}
	s.mergeAttr(a)
	// not the mtime: a setattr after the report may have set it back
	// (an mtime set to 2020 after a write was raised to the write's)
	if a.Size != 500 || a.Mtime != 5 {
		t.Fatalf("a late reply of the same generation: size %d mtime %d, want 500 and the reply's 5", a.Size, a.Mtime)
	}
	b := &wire.Attr{Ino: 9, Trunc: 4, Size: 50}
	s.mergeAttr(b)
	if b.Size != 50 {
		t.Fatalf("a reply after a truncate: size %d, want 50", b.Size)
	}

	s.opened(&wire.Attr{Ino: 9, Trunc: 3, Size: 100})
	if g := s.lookupFile(9); g == nil || g.size != 500 {
		t.Fatalf("a new state from a late open reply: %+v, want size 500", g)
	}
	s.release(9)

	now = now.Add(2*time.Second + time.Millisecond)
	s.forgetRecent()
	c := &wire.Attr{Ino: 9, Trunc: 3, Size: 100}
	s.mergeAttr(c)
	if c.Size != 100 {
		t.Fatalf("two Timeouts after: size %d, want the reply's 100", c.Size)
	}
	s.fmu.Lock()
	n, m := len(s.recent), len(s.recentAge)
	s.fmu.Unlock()
	if n != 0 || m != 0 {
		t.Fatalf("recent kept %d entries (%d in line) after two Timeouts", n, m)
	}
}

// TestSyncLaterFullQueue: a file let go of unsynced when the background
// sync queue is full is synced by the caller (a request ending, letGo),
// which returns once that sync is done or failed; it waited for the queue
// before 2026-12-05, for as long as the background took.
func TestSyncLaterFullQueue(t *testing.T) {
	s := New(Config{Meta: "127.0.0.1:1", Timeout: 200 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.ctx = ctx
	s.syncs = make(chan unsyncedFile) // nobody takes from it: always full
	done := make(chan struct{})
	go func() {
		s.syncLater(&unsyncedFile{ino: 9, ids: []uint64{5}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("syncLater waited for a full queue")
	}
}
