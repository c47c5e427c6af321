package vfs

import (
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

func dirAttr(ino uint64) *wire.Attr {
	return &wire.Attr{Ino: ino, Mode: syscall.S_IFDIR | 0o755, Nlink: 2}
}

// Nothing is cached while the feed is not followed, and a disabled cache
// never holds anything.
func TestDirCacheNeedsFeed(t *testing.T) {
	c := NewDirCache(true)
	c.NoteAttr(dirAttr(5), 0)
	if _, ok := c.DirAttr(5); ok {
		t.Fatal("cached before the feed was followed")
	}
	if c.Fresh(0) {
		t.Fatal("fresh before the feed was followed")
	}
	if was := c.Advance(3, false, nil); was {
		t.Fatal("Advance says the feed was followed before")
	}
	c.NoteAttr(dirAttr(5), 3)
	if _, ok := c.DirAttr(5); !ok {
		t.Fatal("not cached with the feed followed")
	}
	c.NoteAttr(&wire.Attr{Ino: 6, Mode: syscall.S_IFREG | 0o644}, 3)
	if _, ok := c.DirAttr(6); ok {
		t.Fatal("a regular file's attributes were cached")
	}
	if !c.Unfollowed() {
		t.Fatal("Unfollowed says the feed was not followed")
	}
	if _, ok := c.DirAttr(5); ok {
		t.Fatal("kept after the feed was lost")
	}
	off := NewDirCache(false)
	off.Advance(1, false, nil)
	off.NoteAttr(dirAttr(5), 1)
	if _, ok := off.DirAttr(5); ok || off.Fresh(1) {
		t.Fatal("a disabled cache held something")
	}
}

// A reply older than an invalidation already sent is not cached, and an
// invalidation drops what it touches; lost changes drop everything.
func TestDirCacheInvalidation(t *testing.T) {
	c := NewDirCache(true)
	c.Advance(10, false, nil)
	c.NoteAttr(dirAttr(5), 10)
	c.NoteAttr(dirAttr(7), 10)
	c.Advance(11, false, []ns.Change{{Ino: 5, Kind: ns.ChangeAttr}})
	if _, ok := c.DirAttr(5); ok {
		t.Fatal("an invalidated directory stayed")
	}
	if _, ok := c.DirAttr(7); !ok {
		t.Fatal("an untouched directory was dropped")
	}
	c.NoteAttr(dirAttr(5), 10) // served before the invalidation at 11
	if _, ok := c.DirAttr(5); ok {
		t.Fatal("a reply older than an invalidation was cached")
	}
	if c.Fresh(10) || !c.Fresh(11) {
		t.Fatal("Fresh does not follow the feed position")
	}
	c.Advance(12, true, nil)
	if _, ok := c.DirAttr(7); ok {
		t.Fatal("lost changes did not empty the cache")
	}
}

// A directory made here starts with a complete, empty listing that this
// mount's own changes keep up to date; renames move names between
// listings; a listing read whole makes names absent or present.
func TestDirCacheListings(t *testing.T) {
	c := NewDirCache(true)
	c.Advance(1, false, nil)
	if c.Absent(1, "d") {
		t.Fatal("absent in a directory whose listing is unknown")
	}
	c.Listed(1, []wire.DirEntry{{Name: "x", Ino: 20}}, 1)
	if !c.Absent(1, "d") || c.Absent(1, "x") {
		t.Fatal("listing not used")
	}
	c.Changed(1, "d", 30, true, dirAttr(1), 1, dirAttr(30))
	if ino, ok := c.Present(1, "d"); !ok || ino != 30 {
		t.Fatalf("Present(d) = %d %v", ino, ok)
	}
	if !c.Absent(30, "anything") {
		t.Fatal("a new directory's listing is not known empty")
	}
	c.Changed(30, "f", 31, true, dirAttr(30), 1, nil)
	c.Renamed(30, "f", 1, "g", false)
	if !c.Absent(30, "f") {
		t.Fatal("renamed name still in its old directory")
	}
	if ino, ok := c.Present(1, "g"); !ok || ino != 31 {
		t.Fatalf("renamed name: %d %v", ino, ok)
	}
	if _, ok := c.DirAttr(1); ok {
		t.Fatal("a rename kept directories' attributes (their times changed)")
	}
	c.Renamed(1, "g", 1, "x", true) // exchange
	if a, _ := c.Present(1, "g"); a != 20 {
		t.Fatalf("exchange: g is %d, want 20", a)
	}
	if b, _ := c.Present(1, "x"); b != 31 {
		t.Fatalf("exchange: x is %d, want 31", b)
	}
	c.Changed(1, "x", 0, false, dirAttr(1), 1, nil)
	if !c.Absent(1, "x") {
		t.Fatal("removed name still present")
	}
	// another node's access time: the attributes go, the listing stays
	if _, ok := c.DirAttr(1); !ok {
		t.Fatal("no directory attributes after a change in it")
	}
	c.Advance(2, false, []ns.Change{{Kind: ns.ChangeAtime, Ino: 1}})
	if _, ok := c.DirAttr(1); ok || !c.Absent(1, "x") {
		t.Fatal("an access time change: attributes must go, the listing stay")
	}
	c.Advance(3, false, []ns.Change{{Kind: ns.ChangeAttr, Ino: 1}})
	if c.Absent(1, "x") {
		t.Fatal("an attribute change left the listing")
	}
	c.Listed(1, []wire.DirEntry{{Name: "g", Ino: 20}}, 3)
	c.ForgetDir(1)
	if c.Absent(1, "x") {
		t.Fatal("a forgotten directory still answers")
	}
	// a change answered before an invalidation went out drops the directory
	c.Advance(5, false, nil)
	c.Changed(30, "h", 32, true, dirAttr(30), 4, nil)
	if c.Absent(30, "zz") {
		t.Fatal("a stale change left the listing in place")
	}
}

// A file's attributes from this mount's size report at close are kept
// until the file changes: a change by this mount (write, truncate,
// setattr; a removal, rename or link of any name) drops them, and so
// does a change by another node (the feed); a report that such a change
// overtook (epoch), or served before an invalidation already out (gen),
// is not kept; nothing is kept while the feed is not followed.
func TestDirCacheFileAttrs(t *testing.T) {
	c := NewDirCache(true)
	f := &wire.Attr{Ino: 9, Mode: syscall.S_IFREG | 0o644, Size: 4096}
	c.NoteFileAttr(f, 0, c.FileEpoch())
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("kept before the feed was followed")
	}
	c.Advance(5, false, nil)
	c.NoteFileAttr(f, 5, c.FileEpoch())
	if a, ok := c.FileAttr(9); !ok || a.Size != 4096 {
		t.Fatalf("not kept: %+v %v", a, ok)
	}
	c.NoteFileAttr(&wire.Attr{Ino: 10, Mode: syscall.S_IFDIR | 0o755}, 5, c.FileEpoch())
	if _, ok := c.FileAttr(10); ok {
		t.Fatal("a directory kept as a file")
	}
	c.ForgetFile(9)
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("kept after this mount's write")
	}
	// a write between the report's start and its answer: not kept
	e := c.FileEpoch()
	c.ForgetFile(9)
	c.NoteFileAttr(f, 5, e)
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("a report overtaken by a write was kept")
	}
	// a write of another file meanwhile does not matter (write-back
	// closes report long after their epoch)
	e = c.FileEpoch()
	c.ForgetFile(10)
	c.NoteFileAttr(f, 5, e)
	if _, ok := c.FileAttr(9); !ok {
		t.Fatal("a report overtaken by another file's write was not kept")
	}
	c.ForgetFile(9)
	// served before an invalidation that is out already: not kept
	c.Advance(7, false, nil)
	c.NoteFileAttr(f, 6, c.FileEpoch())
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("a report older than the feed's position was kept")
	}
	c.NoteFileAttr(f, 7, c.FileEpoch())
	if _, ok := c.FileAttr(9); !ok {
		t.Fatal("a current report was not kept")
	}
	// another node's change to it
	c.Advance(8, false, []ns.Change{{Ino: 9}})
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("kept after another node changed the file")
	}
	c.NoteFileAttr(f, 8, c.FileEpoch())
	c.ForgetFiles()
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("kept after this mount removed or renamed a name")
	}
	c.NoteFileAttr(f, 8, c.FileEpoch())
	c.Unfollowed()
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("kept after the feed was lost")
	}
}

// An open answered at a feed position this mount has not yet applied (the
// feed has another node's close still to deliver) is behind: the file's
// attributes kept here go, and the caller marks the kernel's stale. The
// position the feed reached (Advance) is not enough: its invalidations
// are sent after it moves, so only Applied counts. The CI's
// TestAppendCloseToOpen failure: a pwrite at the size an fstat gave,
// answered from attributes kept at this mount's own close.
func TestDirCacheOpenedBehind(t *testing.T) {
	c := NewDirCache(true)
	f := &wire.Attr{Ino: 9, Mode: syscall.S_IFREG | 0o644, Size: 100}
	if !c.Opened(9, 0) {
		t.Fatal("an open before the feed was followed is not behind")
	}
	c.Advance(5, false, nil)
	c.Applied(5)
	c.NoteFileAttr(f, 5, c.FileEpoch())
	if c.Opened(9, 5) {
		t.Fatal("an open at the applied position is behind")
	}
	if _, ok := c.FileAttr(9); !ok {
		t.Fatal("an open that is not behind dropped the kept attributes")
	}
	// another node's close at 6: its invalidation not yet sent
	c.Advance(6, false, nil)
	if !c.Opened(9, 6) {
		t.Fatal("an open past the applied position (feed advanced, notifies not sent) is not behind")
	}
	if _, ok := c.FileAttr(9); ok {
		t.Fatal("an open behind the feed kept the attributes from before the other node's close")
	}
	c.Applied(6)
	c.Applied(4) // never backwards
	if c.Opened(9, 6) {
		t.Fatal("behind after Applied")
	}
	c.Unfollowed()
	if !c.Opened(9, 6) {
		t.Fatal("an open with the feed lost is not behind")
	}
}
