package meta

import (
	"context"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func truncService(t *testing.T) *Service {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ChunkSize: 1 << 20, StripeCnt: 2, StripeUnit: 256 << 10, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTruncateRecordsTrims: a truncate raises the generation and leaves a
// trim for every chunk past the new size on every server of its group
// when the servers cannot be reached; they stay until a server says it
// applied them.
func TestTruncateRecordsTrims(t *testing.T) {
	s := truncService(t)
	a, _ := s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30})
	b, _ := s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30})
	f, _ := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	ctx := context.Background()
	for idx := uint64(0); idx < 3; idx++ {
		if _, _, err := s.Alloc(ctx, f.Ino, idx, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	// 1.25 MiB: chunk 0 stays whole, chunk 1 keeps 256 KiB (all on its
	// first stripe member), chunk 2 goes
	attr, err := s.Setattr(ctx, &ns.SetattrReq{Ino: f.Ino, Mask: ns.SetSize, Size: 5 << 18})
	if err != nil {
		t.Fatalf("truncate with its servers unreachable: %v", err)
	}
	if attr.Trunc != 1 || attr.Size != 5<<18 {
		t.Fatalf("after truncate: generation %d size %d", attr.Trunc, attr.Size)
	}
	keeps := map[[2]uint64]uint64{} // server, idx -> keep
	for _, id := range []uint64{a, b} {
		ts, gen, err := s.PendingTrims(id, f.Ino)
		if err != nil || gen != 1 {
			t.Fatalf("pending trims of %d: %v, generation %d", id, err, gen)
		}
		for _, tr := range ts {
			if tr.Gen != 1 || tr.Ino != f.Ino {
				t.Fatalf("trim %+v", tr)
			}
			keeps[[2]uint64{id, tr.Idx}] = tr.Keep
		}
	}
	if len(keeps) != 4 {
		t.Fatalf("want trims of chunks 1 and 2 on both servers, got %v", keeps)
	}
	locs, _ := s.Layout(f.Ino)
	for _, l := range locs {
		if l.Idx == 1 {
			if keeps[[2]uint64{l.Servers[0], 1}] != 256<<10 || keeps[[2]uint64{l.Servers[1], 1}] != 0 {
				t.Fatalf("chunk 1 striped over %v: keeps %v", l.Servers, keeps)
			}
		}
	}
	// chunk 2, cut away whole, has no place any more
	if len(locs) != 2 || locs[0].Idx != 0 || locs[1].Idx != 1 {
		t.Fatalf("layout after the truncate: %+v", locs)
	}
	// another truncate adds its own generation's trims; nothing merges
	// (and the cut chunk 2 gets none)
	if _, err := s.Setattr(ctx, &ns.SetattrReq{Ino: f.Ino, Mask: ns.SetSize, Size: 1 << 18}); err != nil {
		t.Fatal(err)
	}
	ts, gen, _ := s.PendingTrims(a, f.Ino)
	if gen != 2 || len(ts) != 4 || ts[0].Gen != 1 || ts[len(ts)-1].Gen != 2 || ts[2].Idx != 0 || ts[3].Idx != 1 {
		t.Fatalf("after a second truncate: generation %d, trims %+v", gen, ts)
	}
	if !s.hasPendingTrims(a) {
		t.Fatal("hasPendingTrims")
	}
	// the server applied them
	if err := s.TrimsDone(a, ts); err != nil {
		t.Fatal(err)
	}
	if ts, _, _ := s.PendingTrims(a, f.Ino); len(ts) != 0 || s.hasPendingTrims(a) {
		t.Fatalf("trims left after TrimsDone: %+v", ts)
	}
	// a deleted file's trims go with it
	if err := s.Remove(RootIno, "f", false); err != nil {
		t.Fatal(err)
	}
	if n := s.CollectGarbage(ctx); n != 0 { // cannot reach the servers: the file stays garbage
		t.Fatalf("collected %d files whose servers are unreachable", n)
	}
	if ts, _, _ := s.PendingTrims(b, f.Ino); len(ts) == 0 {
		t.Fatal("trims dropped before the file's chunks were deleted")
	}
	// once the chunks are deleted (here: the engine says so), they go
	var batch engine.Batch
	s.dropTrimsLocked(&batch, f.Ino, map[uint64]bool{a: true, b: true})
	if err := s.e.Apply(&batch, false); err != nil {
		t.Fatal(err)
	}
	if s.hasPendingTrims(b) {
		t.Fatal("dropTrimsLocked left trims")
	}
}

// TestStaleGenerations: size reports and allocations of a generation
// older than the file's change nothing.
func TestStaleGenerations(t *testing.T) {
	s := truncService(t)
	s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30})
	f, _ := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	ctx := context.Background()
	if a, _ := s.Extend(f.Ino, 9<<20, 5, 0); a.Size != 9<<20 {
		t.Fatalf("extend: %d", a.Size)
	}
	if _, err := s.Setattr(ctx, &ns.SetattrReq{Ino: f.Ino, Mask: ns.SetSize, Size: 100}); err != nil {
		t.Fatal(err)
	}
	// growth reported under generation 0 came before the truncate
	if a, _ := s.Extend(f.Ino, 9<<20, 6, 0); a.Size != 100 || a.Trunc != 1 {
		t.Fatalf("stale extend applied: size %d generation %d", a.Size, a.Trunc)
	}
	if a, _ := s.Extend(f.Ino, 201, 7, 1); a.Size != 201 {
		t.Fatalf("current extend: %d", a.Size)
	}
	if _, _, err := s.Alloc(ctx, f.Ino, 3, 0, nil); !is(err, syscall.ESTALE) {
		t.Fatalf("allocation of a stale generation: %v", err)
	}
	if _, placed, err := s.Alloc(ctx, f.Ino, 3, 1, nil); err != nil || !placed {
		t.Fatalf("allocation: %v placed %v", err, placed)
	}
	// a truncate of a directory or a special file is refused
	d, _ := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if _, err := s.Setattr(ctx, &ns.SetattrReq{Ino: d.Ino, Mask: ns.SetSize}); !is(err, syscall.EISDIR) {
		t.Fatalf("truncate of a directory: %v", err)
	}
	p, _ := s.Create(RootIno, "p", syscall.S_IFIFO|0o644, 0, 0, "", true, 0)
	if _, err := s.Setattr(ctx, &ns.SetattrReq{Ino: p.Ino, Mask: ns.SetSize}); !is(err, syscall.EINVAL) {
		t.Fatalf("truncate of a FIFO: %v", err)
	}
}

// allocService is a service with three unreachable mem servers and one
// file of 1 MiB chunks, one server each.
func allocService(t *testing.T) (*Service, *wire.Attr) {
	s := truncService(t)
	for i := 0; i < 3; i++ {
		s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 1 << 30})
	}
	s.SetLayout(RootIno, 0, 1, 1<<20)
	f, _ := s.Create(RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	return s, f
}

// TestAllocMovesOnce: a chunk refused by its server moves once; a second
// writer refused by the same server gets the new place.
func TestAllocMovesOnce(t *testing.T) {
	s, f := allocService(t)
	ctx := context.Background()
	first, placed, _ := s.Alloc(ctx, f.Ino, 0, 0, nil)
	if !placed {
		t.Fatal("first allocation did not place")
	}
	if again, placed, _ := s.Alloc(ctx, f.Ino, 0, 0, nil); placed || again.Servers[0] != first.Servers[0] {
		t.Fatalf("second allocation: %v placed %v", again, placed)
	}
	moved, placed, err := s.Alloc(ctx, f.Ino, 0, 0, first.Servers)
	if err != nil || !placed || moved.Servers[0] == first.Servers[0] {
		t.Fatalf("move: %v placed %v %v", moved, placed, err)
	}
	if again, placed, _ := s.Alloc(ctx, f.Ino, 0, 0, first.Servers); placed || again.Servers[0] != moved.Servers[0] {
		t.Fatalf("a second refusal by the old server moved the chunk again: %v placed %v", again, placed)
	}
}

// TestCutChunkPlacedAgain: a chunk a truncate cut away whole loses its
// place; writing it again places it like a new chunk (where there is
// room: here not on the server that refused it before the truncate), with
// a layout generation above every one it had, and a request for its old
// place is answered as stale.
func TestCutChunkPlacedAgain(t *testing.T) {
	s, f := allocService(t)
	ctx := context.Background()
	first, _, _ := s.Alloc(ctx, f.Ino, 1, 0, nil)
	moved, placed, err := s.Alloc(ctx, f.Ino, 1, 0, first.Servers)
	if err != nil || !placed || moved.Gen != 1 {
		t.Fatalf("move: %v placed %v %v", moved, placed, err)
	}
	if _, err := s.Setattr(ctx, &ns.SetattrReq{Ino: f.Ino, Mask: ns.SetSize, Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if locs, _ := s.Layout(f.Ino); len(locs) != 0 {
		t.Fatalf("a chunk cut away whole keeps a place: %+v", locs)
	}
	if _, err := s.Dirty(ctx, f.Ino, 1, moved.Gen); !is(err, syscall.ESTALE) {
		t.Fatalf("a change of the cut chunk's old place: %v, want ESTALE", err)
	}
	if _, _, err := s.Alloc(ctx, f.Ino, 1, 0, nil); !is(err, syscall.ESTALE) {
		t.Fatalf("an allocation of the generation before the truncate: %v, want ESTALE", err)
	}
	again, placed, err := s.Alloc(ctx, f.Ino, 1, 1, nil)
	if err != nil || !placed || again.Gen != 2 || len(again.Servers) != 1 {
		t.Fatalf("placed again: %+v placed %v %v", again, placed, err)
	}
	if locs, _ := s.Layout(f.Ino); len(locs) != 1 || locs[0].Gen != 2 {
		t.Fatalf("layout after placing again: %+v", locs)
	}
	if again.Servers[0] == first.Servers[0] {
		t.Fatalf("placed again on server %d, which refused it and has not reported room since", again.Servers[0])
	}
}
