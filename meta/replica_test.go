package meta

import (
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// TestShortChunksInTurn: ShortChunks reads a bounded part of the chunk
// table per call and goes on from there, finding every chunk short of its
// second copy once per round of the table; with no tier keeping two
// copies it finds none.
func TestShortChunksInTurn(t *testing.T) {
	defer func(n int) { shortScan = n }(shortScan)
	shortScan = 10
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(Config{Engine: engine.NewMem(), Log: log, ChunkSize: 1 << 20, Copies: map[string]int{"mem": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(wire.ServerInfo{ID: 1, Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30, MaxPerf: 10e6}); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]bool{}
	for i := 0; i < 25; i++ {
		f, err := s.Create(RootIno, fmt.Sprint("f", i), syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		// a chunk with one copy (placed before a second domain came)
		var b engine.Batch
		b.Set(layoutKey(f.Ino, 0), encodeChunk(wire.ChunkLoc{Tier: "mem", Servers: []uint64{1}}))
		if err := s.e.Apply(&b, false); err != nil {
			t.Fatal(err)
		}
		want[f.Ino] = true
	}
	seen := map[uint64]int{}
	calls := 0
	for ; calls < 10; calls++ {
		out, err := s.ShortChunks(4)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 4 {
			t.Fatalf("call %d: %d chunks, want at most 4", calls, len(out))
		}
		for _, sc := range out {
			seen[sc.Ino]++
		}
		if len(seen) == len(want) {
			break
		}
	}
	for ino := range want {
		if seen[ino] != 1 {
			t.Fatalf("inode %d found %d times in %d calls (%d found in all)", ino, seen[ino], calls+1, len(seen))
		}
	}
	// a round of the table is over: the next call starts again
	if out, _ := s.ShortChunks(256); len(out) == 0 || len(out) > shortScan {
		t.Fatalf("a new round found %d chunks, want 1–%d", len(out), shortScan)
	}
	s1, err := New(Config{Engine: engine.NewMem(), Log: log, ChunkSize: 1 << 20, Copies: map[string]int{"mem": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s1.ShortChunks(256); out != nil || err != nil {
		t.Fatalf("one copy kept: %v, %v", out, err)
	}
}
