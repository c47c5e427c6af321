package meta

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

func TestFeed(t *testing.T) {
	var f feed
	f.init(time.Unix(100, 0))
	start := f.position()
	// a new follower is "lost" at once and learns the position
	if _, pos, lost := f.since(0, 7); !lost || pos != start {
		t.Fatalf("first call: pos %d lost %v", pos, lost)
	}
	f.add(7, entryChange(1, "mine"))
	f.add(8, entryChange(1, "theirs"), attrChange(1))
	f.add(0, attrChange(42)) // a forwarding node's size report: for everyone
	es, pos, lost := f.since(start, 7)
	if lost || pos != start+4 || len(es) != 3 || es[0].Name != "theirs" || es[2].Ino != 42 {
		t.Fatalf("since: %+v %d %v", es, pos, lost)
	}
	if es, _, _ := f.since(start, 8); len(es) != 2 || es[0].Name != "mine" {
		t.Fatalf("own changes echoed: %+v", es)
	}
	// a follower that fell behind the ring is told so
	for i := 0; i < feedCap+1; i++ {
		f.add(8, attrChange(uint64(i)))
	}
	if _, _, lost := f.since(start, 7); !lost {
		t.Fatal("lost changes not reported")
	}
	// watch waits for someone else's change, not its own
	seen := f.position()
	got := make(chan []ns.Change, 1)
	go func() {
		es, _, _ := f.watch(context.Background(), seen, 7, 5*time.Second)
		got <- es
	}()
	time.Sleep(20 * time.Millisecond)
	f.add(7, entryChange(1, "own"))
	select {
	case es := <-got:
		t.Fatalf("woke for its own change: %+v", es)
	case <-time.After(50 * time.Millisecond):
	}
	f.add(9, entryChange(2, "other"))
	select {
	case es := <-got:
		if len(es) != 1 || es[0].Name != "other" {
			t.Fatalf("watch: %+v", es)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("watch did not wake")
	}
	// and returns empty when nothing happens
	if es, _, lost := f.watch(context.Background(), f.position(), 7, 30*time.Millisecond); len(es) != 0 || lost {
		t.Fatalf("idle watch: %+v %v", es, lost)
	}
}

// BenchmarkFeedLastOther: a grant's scan of a full feed with no change by
// another client to the directory (its worst case).
func BenchmarkFeedLastOther(b *testing.B) {
	var f feed
	f.init(time.Unix(1, 0))
	for i := 0; i < feedCap; i++ {
		f.add(7, ns.Change{Kind: ns.ChangeEntry, Ino: uint64(100 + i%50), Name: "x"})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if f.lastOther(7, 100) != 0 {
			b.Fatal("found a change by another client")
		}
	}
}
