package meta

import (
	"context"
	"fmt"
	"syscall"
	"testing"
)

// TestGCCursor: passes kicked by removals start after the previous one;
// a file removed later with a lower inode number waits for the full pass.
func TestGCCursor(t *testing.T) {
	s := delegService(t)
	ctx := context.Background()
	var inos []uint64
	for i := 0; i < 30; i++ {
		a, err := s.Create(RootIno, fmt.Sprintf("f%d", i), syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		inos = append(inos, a.Ino)
	}
	remove := func(from, to int) {
		for i := from; i < to; i++ {
			if err := s.Remove(RootIno, fmt.Sprintf("f%d", i), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	garbage := func(ino uint64) bool { _, err := s.e.Get(garbageKey(ino)); return err == nil }
	remove(5, 15)
	n, next := s.collect(ctx, 0)
	if n != 10 || next != inos[14]+1 {
		t.Fatalf("first pass: %d removed, next %d (want 10, %d)", n, next, inos[14]+1)
	}
	remove(0, 1)   // below the cursor
	remove(20, 25) // above it
	n, next2 := s.collect(ctx, next)
	if n != 5 || next2 != inos[24]+1 || !garbage(inos[0]) {
		t.Fatalf("kicked pass: %d removed, next %d, low file still garbage %v", n, next2, garbage(inos[0]))
	}
	if n, _ := s.collect(ctx, next2); n != 0 {
		t.Fatalf("a pass past the last file removed %d", n)
	}
	if n := s.CollectGarbage(ctx); n != 1 || garbage(inos[0]) {
		t.Fatalf("full pass removed %d", n)
	}
}
