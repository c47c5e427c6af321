package tiering

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// noReplicas is a namespace whose tiers keep one copy and no drained
// chunk cached.
type noReplicas struct{}

func (noReplicas) ShortChunks(int) ([]api.ShortChunk, error) { return nil, nil }
func (noReplicas) Degrade(context.Context, uint64, uint64, uint64, uint64) (wire.ChunkLoc, error) {
	return wire.ChunkLoc{}, nil
}
func (noReplicas) Replicate(context.Context, uint64, uint64) (uint64, error) { return 0, nil }
func (noReplicas) DeliverDrops(context.Context) int                          { return 0 }
func (noReplicas) CopyChunk(context.Context, uint64, uint64, []uint64) (uint64, error) {
	return 0, fmt.Errorf("no copies here")
}
func (noReplicas) EvictChunk(context.Context, uint64, uint64) (uint64, error) {
	return 0, fmt.Errorf("no caches here")
}

// repairNS has chunks short of copies: calls are recorded, and chunk 0 of
// inode 9 cannot be copied (no room in another domain).
type repairNS struct {
	fakeNS
	mu    sync.Mutex
	short []api.ShortChunk
	calls []string
	wait  chan struct{} // Replicate blocks until closed
}

func (f *repairNS) ShortChunks(max int) ([]api.ShortChunk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.ShortChunk(nil), f.short...), nil
}

func (f *repairNS) Degrade(_ context.Context, ino, idx, gen, dead uint64) (wire.ChunkLoc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("degrade %d/%d gen %d server %d", ino, idx, gen, dead))
	return wire.ChunkLoc{}, nil
}

func (f *repairNS) Replicate(_ context.Context, ino, idx uint64) (uint64, error) {
	<-f.wait
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("replicate %d/%d", ino, idx))
	if ino == 9 {
		return 0, rpc.Errorf(syscall.ENOSPC, "no room")
	}
	return 4 << 20, nil
}

func TestRepairTick(t *testing.T) {
	ns := &repairNS{wait: make(chan struct{}), short: []api.ShortChunk{
		{Ino: 7, Loc: wire.ChunkLoc{Idx: 0, Tier: "mem", Servers: []uint64{1}, Replicas: []uint64{2}, Gen: 3}, Lost: 2},
		{Ino: 8, Loc: wire.ChunkLoc{Idx: 1, Tier: "mem", Servers: []uint64{1}}},
		{Ino: 9, Loc: wire.ChunkLoc{Idx: 0, Tier: "mem", Servers: []uint64{1}}},
		{Ino: 10, Loc: wire.ChunkLoc{Idx: 0, Tier: "mem", Servers: []uint64{1}}},
	}}
	now := time.Unix(1e9, 0)
	var clock sync.Mutex
	m := New(Config{NS: ns, Log: slog.New(slog.DiscardHandler), Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	ctx := context.Background()
	m.repairTick(ctx)
	m.mu.Lock()
	busy := len(m.repairing)
	m.mu.Unlock()
	if busy != maxRepairs {
		t.Fatalf("%d copies started, want %d at once", busy, maxRepairs)
	}
	m.repairTick(ctx) // nothing more while two run
	close(ns.wait)
	waitIdle(t, m)
	ns.mu.Lock()
	want := []string{"degrade 7/0 gen 3 server 2", "degrade 7/0 gen 3 server 2"}
	if len(ns.calls) != 4 || ns.calls[0] != want[0] || ns.calls[1] != want[1] {
		t.Fatalf("calls %q", ns.calls)
	}
	ns.short = ns.short[1:] // 7 was given up; 8 copied; 9 failed; 10 waits
	ns.short = []api.ShortChunk{ns.short[1], ns.short[2]}
	ns.calls = nil
	ns.mu.Unlock()
	m.repairTick(ctx) // 9 backs off: only 10
	waitIdle(t, m)
	if len(ns.calls) != 1 || ns.calls[0] != "replicate 10/0" {
		t.Fatalf("calls %q, want only 10 copied (9 backs off)", ns.calls)
	}
	clock.Lock()
	now = now.Add(repairBackoff + time.Second)
	clock.Unlock()
	ns.mu.Lock()
	ns.short, ns.calls = ns.short[:1], nil
	ns.mu.Unlock()
	m.repairTick(ctx)
	waitIdle(t, m)
	st := m.Status()
	if st.Totals.Replicated != 2 || st.Totals.ReplicaFailed != 2 || st.Totals.ReplicaBytes != 8<<20 {
		t.Fatalf("totals %+v", st.Totals)
	}
}

// waitIdle waits until no copy runs.
func waitIdle(t *testing.T, m *Manager) {
	t.Helper()
	waitNone(t, m, func() int { return len(m.repairing) }, "copies to end")
}
