package vfs

import (
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// TestAtimeRules: relatime updates an access time not after the last
// modification or change, or a day old, once; strictatime at every read
// as the clock moves; noatime never, nor nodiratime a directory's, nor
// any rule on a read-only mount. A stat of this mount answers the access
// time not yet sent; one sent is forgotten unless read again meanwhile.
func TestAtimeRules(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	ns := func(d time.Duration) int64 { return time.Unix(1000, 0).Add(d).UnixNano() }
	step := func() { now = now.Add(time.Second) }
	ro := false
	readOnly := func() bool { return ro }

	rel := newAtimes(Relatime, false, readOnly, clock)
	// just written: atime == mtime
	rel.seen(&wire.Attr{Ino: 5, Atime: ns(-time.Second), Mtime: ns(-time.Second), Ctime: ns(-time.Second)})
	step()
	if !rel.read(5, false) {
		t.Fatal("relatime: first read after a write left the access time")
	}
	step()
	if rel.read(5, false) {
		t.Fatal("relatime: second read changed the access time again")
	}
	a := wire.Attr{Ino: 5, Atime: ns(-time.Second), Mtime: ns(-time.Second), Ctime: ns(-time.Second)}
	rel.seen(&a) // the service does not have it yet
	if a.Atime != ns(time.Second) {
		t.Fatalf("stat of this mount: atime %d, want the read's %d", a.Atime, ns(time.Second))
	}
	// a write through this mount: the next read updates it again
	rel.wrote(5)
	step()
	if !rel.read(5, false) {
		t.Fatal("relatime: read after this mount's write left the access time")
	}
	inos, at := rel.take()
	if len(inos) != 1 || inos[0] != 5 || at[0] != uint64(ns(3*time.Second)) {
		t.Fatalf("to send: %v %v", inos, at)
	}
	rel.sent(inos, at)
	if rel.pending() != 0 {
		t.Fatal("sent access times still pending")
	}
	// attributes this mount kept from before the read (its own close's)
	// answer with the read's access time, sent or not; the service's
	// replies are taken as they are (another node may have set it back)
	kept := wire.Attr{Ino: 5, Atime: ns(-time.Second), Mtime: ns(2 * time.Second), Ctime: ns(2 * time.Second)}
	rel.cached(&kept)
	if kept.Atime != ns(3*time.Second) {
		t.Fatalf("kept attributes: atime %d, want the read's %d", kept.Atime, ns(3*time.Second))
	}
	step()
	if rel.read(5, false) {
		t.Fatal("relatime: kept attributes made a second read change the access time")
	}
	rel.seen(&wire.Attr{Ino: 5, Atime: ns(-time.Hour), Mtime: ns(-2 * time.Hour), Ctime: ns(-2 * time.Hour)}) // touch -a -d
	if rel.read(5, false) {
		t.Fatal("relatime: an access time set back after the last change is not updated")
	}
	// a day-old access time is updated, a recent one after the change is not
	rel.seen(&wire.Attr{Ino: 6, Atime: ns(-25 * time.Hour), Mtime: ns(-48 * time.Hour), Ctime: ns(-48 * time.Hour)})
	rel.seen(&wire.Attr{Ino: 7, Atime: ns(-time.Hour), Mtime: ns(-48 * time.Hour), Ctime: ns(-48 * time.Hour)})
	if !rel.read(6, false) || rel.read(7, false) {
		t.Fatal("relatime: a day-old access time must change, an hour-old one after the change must not")
	}
	// an inode whose times are not known is sent, for the service to keep the latest
	if !rel.read(8, false) {
		t.Fatal("relatime: an inode of unknown times was not sent")
	}
	// read again before its time was sent: the later time is sent, and
	// a send of the earlier one does not forget it
	inos, at = rel.take()
	step()
	rel.read(6, false) // not due again (just updated), the pending time stays
	rel.known[6] = inoTimes{}
	rel.read(6, false)
	rel.sent(inos, at)
	if rel.pending() != 1 {
		t.Fatalf("pending after a read during the send: %d, want 1", rel.pending())
	}

	// a read-only mount changes nothing
	ro = true
	rel.seen(&wire.Attr{Ino: 9, Atime: 1, Mtime: 2})
	if rel.read(9, false) {
		t.Fatal("read-only mount: access time changed")
	}
	ro = false

	strict := newAtimes(Strictatime, true, nil, clock)
	strict.seen(&wire.Attr{Ino: 5, Atime: ns(-time.Hour), Mtime: ns(-48 * time.Hour), Ctime: ns(-48 * time.Hour)})
	step()
	if !strict.read(5, false) {
		t.Fatal("strictatime: read left the access time")
	}
	if strict.read(5, false) {
		t.Fatal("strictatime: a read at the same instant changed it again")
	}
	step()
	if !strict.read(5, false) {
		t.Fatal("strictatime: a later read left the access time")
	}
	if strict.read(10, true) {
		t.Fatal("nodiratime: a listing changed a directory's access time")
	}

	var none *atimes // noatime
	if none.read(5, false) || none.pending() != 0 {
		t.Fatal("noatime: access time changed")
	}
	none.seen(&a)
	none.wrote(5)
	if _, err := ParseAtimeRule("sometimes"); err == nil {
		t.Fatal("an unknown atime rule was taken")
	}
}
