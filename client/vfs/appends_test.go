package vfs

import "testing"

func TestAppends(t *testing.T) {
	a := NewAppends()
	// a handle that does not append goes where the kernel says
	if got := a.Place(1, 10, 5); got != 5 {
		t.Fatalf("plain handle placed at %d, want 5", got)
	}
	// the kernel thinks the file is 100 bytes; the service said 150
	a.Opened(1, 11, 150)
	if got := a.Place(1, 11, 100); got != 150 {
		t.Fatalf("append placed at %d, want the size at open 150", got)
	}
	a.Wrote(1, 160)
	// the kernel's offset moved on from where it put the write
	if got := a.Place(1, 11, 110); got != 160 {
		t.Fatalf("second append at %d, want 160", got)
	}
	// a write through another handle of this mount further out counts
	a.Wrote(1, 300)
	if got := a.Place(1, 11, 170); got != 300 {
		t.Fatalf("append after another handle's write at %d, want 300", got)
	}
	// the kernel knowing more (a write this mount made before the open
	// and has not reported yet) wins
	if got := a.Place(1, 11, 400); got != 400 {
		t.Fatalf("append at %d, want the kernel's 400", got)
	}
	// the plain handle on the same inode is not moved
	if got := a.Place(1, 10, 5); got != 5 {
		t.Fatalf("plain handle placed at %d after appends, want 5", got)
	}
	// a truncate through this mount sets the end
	a.Truncated(1, 20)
	if got := a.Place(1, 11, 20); got != 20 {
		t.Fatalf("append after truncate at %d, want 20", got)
	}
	// a second append handle shares the inode's end; the size at its
	// open only raises it
	a.Opened(1, 12, 10)
	if got := a.Place(1, 12, 0); got != 20 {
		t.Fatalf("second handle's append at %d, want 20", got)
	}
	a.Released(11)
	if a.kept() != 1 {
		t.Fatalf("%d inodes kept with one append handle open, want 1", a.kept())
	}
	a.Released(12)
	a.Released(12) // twice: nothing
	if a.kept() != 0 {
		t.Fatalf("%d inodes kept after every append handle closed", a.kept())
	}
	if got := a.Place(1, 11, 7); got != 7 {
		t.Fatalf("released handle placed at %d, want 7", got)
	}
}
