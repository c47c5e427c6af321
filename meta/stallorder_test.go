package meta

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// TestStalledWritersInTurn: chunks waiting for room on a stalled tier get
// it in the order they stalled, across their writers' retries: room for
// one chunk goes to the first that stalled even when a later one asks
// first, and a newcomer waits behind both. Each stall is told at once
// (SetOnStall), counted already.
func TestStalledWritersInTurn(t *testing.T) {
	const mib = 1 << 20
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), ChunkSize: mib})
	if err != nil {
		t.Fatal(err)
	}
	mem := wire.ServerInfo{ID: 1, Role: "data", Tier: "mem", Addr: deadAddr(t), Capacity: 8 * mib, Used: 8 * mib}
	report := func(used uint64) {
		mem.Used = used
		if _, err := s.Register(mem); err != nil {
			t.Fatal(err)
		}
	}
	report(8 * mib)
	if _, err := s.Register(wire.ServerInfo{ID: 2, Role: "data", Tier: "pfs", Addr: deadAddr(t)}); err != nil {
		t.Fatal(err)
	}
	s.SetStallReserve(func(si wire.ServerInfo) uint64 {
		if si.Tier == "mem" {
			return mib
		}
		return 0
	})
	var kicked []string // the tiers writers began to wait for (SetOnStall)
	s.SetOnStall(func(tier string) {
		if s.StalledWriters(tier) == 0 {
			tier += " (not counted yet)"
		}
		kicked = append(kicked, tier)
	})
	ctx := context.Background()
	ino := func(name string) uint64 {
		a, err := s.Create(RootIno, name, syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	first, second, third := ino("first"), ino("second"), ino("third")
	ask := func(ino uint64) (string, error) {
		loc, _, _, err := s.AllocWait(ctx, ino, 0, 0, nil, 10*time.Millisecond, "")
		return loc.Tier, err
	}
	stalled := func(who string, ino uint64) {
		t.Helper()
		if tier, err := ask(ino); !errors.Is(err, ErrStall) {
			t.Fatalf("%s: placed on %q (%v), want it to wait for room", who, tier, err)
		}
	}
	stalled("first", first)
	stalled("second", second)
	if !slices.Equal(kicked, []string{"mem", "mem"}) {
		t.Fatalf("told of stalls on %q, want mem twice, each counted", kicked)
	}
	// room for one chunk above the reserve: the first's, though the
	// second asks before it
	report(6 * mib)
	stalled("second, with room for one chunk and the first waiting", second)
	if tier, err := ask(first); tier != "mem" || err != nil {
		t.Fatalf("first: %q (%v), want the room on mem", tier, err)
	}
	// a newcomer waits behind the second
	report(6 * mib)
	stalled("third, a newcomer", third)
	if tier, err := ask(second); tier != "mem" || err != nil {
		t.Fatalf("second: %q (%v), want the room on mem", tier, err)
	}
	report(6 * mib)
	if tier, err := ask(third); tier != "mem" || err != nil {
		t.Fatalf("third: %q (%v), want the room on mem", tier, err)
	}
	// a writer that stops asking loses its place once its ticket is old
	report(8 * mib)
	gone := ino("gone")
	stalled("gone", gone)
	s.reg.mu.Lock()
	tk := s.reg.stallQ[chunkKey{gone, 0}]
	if tk != nil {
		tk.seen = time.Now().Add(-2 * stallTicketTTL)
	}
	s.reg.mu.Unlock()
	if tk == nil {
		t.Fatal("a stalled chunk has no ticket")
	}
	report(6 * mib)
	if tier, err := ask(ino("late")); tier != "mem" || err != nil {
		t.Fatalf("a newcomer behind a writer gone: %q (%v), want the room on mem", tier, err)
	}
}
