package fwd_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

// TestWriteWaitsAtStall: while the mem tier is at its write-stall
// threshold (ONFS Cs-w) a write that needs a new chunk waits instead of
// spilling to ssd, and lands on mem once space is free; a write that
// would wait longer than StallMax goes to ssd instead of failing. Each
// wait is counted, and the metadata service counts the writers waiting
// for room on a tier while they wait, and knows their files
// (StalledWriters, StalledFile).
func TestWriteWaitsAtStall(t *testing.T) {
	reg := prometheus.NewRegistry()
	svc, c, _ := tierStackWith(t, 1, 1, fwd.Config{StallMax: 700 * time.Millisecond, Metrics: reg})
	ctx := context.Background()
	mem := serversOf(svc, "mem")[0]
	var reserve atomic.Uint64 // the mem server's, as the tiering manager would give it
	svc.SetStallReserve(func(si wire.ServerInfo) uint64 {
		if si.ID == mem {
			return reserve.Load()
		}
		return 0
	})
	write := func(name string) (time.Duration, string) {
		ino := create(t, c, name)
		start := time.Now()
		if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096), nil); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		took := time.Since(start)
		locs, err := svc.Layout(ino)
		if err != nil || len(locs) != 1 {
			t.Fatalf("layout of %s: %v %v", name, locs, err)
		}
		return took, locs[0].Tier
	}
	if took, tier := write("calm"); tier != "mem" || took > 300*time.Millisecond {
		t.Fatalf("calm tier: chunk on %s after %v, want mem at once", tier, took)
	}
	// the whole mem server is reserve: stalled; freed after 300 ms
	reserve.Store(1 << 40)
	counted := make(chan int, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		// the burst-buffer manager's view: one writer waits for mem,
		// the writer of "waits" and of no other file
		n := svc.StalledWriters("mem")
		if a, err := svc.Lookup(meta.RootIno, "waits"); err != nil || !svc.StalledFile("mem", a.Ino) || svc.StalledFile("mem", a.Ino-1) || svc.StalledFile("ssd", a.Ino) {
			n = -1
		}
		counted <- n
		reserve.Store(0)
		svc.WakeStalled()
	}()
	if took, tier := write("waits"); tier != "mem" || took < 250*time.Millisecond || took > 650*time.Millisecond {
		t.Fatalf("stalled tier freed after 300 ms: chunk on %s after %v, want mem after ~300 ms", tier, took)
	}
	if n := <-counted; n != 1 {
		t.Fatalf("%d writers counted waiting for room on mem, want 1 (-1: not as the writer of \"waits\")", n)
	}
	if n := svc.StalledWriters("mem"); n != 0 {
		t.Fatalf("%d writers counted waiting after the wait", n)
	}
	// never freed: after StallMax the chunk goes to ssd
	reserve.Store(1 << 40)
	if took, tier := write("spills"); tier != "ssd" || took < 650*time.Millisecond || took > 2*time.Second {
		t.Fatalf("tier never freed: chunk on %s after %v, want ssd after StallMax (700 ms)", tier, took)
	}
	if n := value(t, reg, "sluice_fwd_write_stalls_total"); n != 2 {
		t.Fatalf("%v stalls counted, want 2", n)
	}
}

// value reads the first sample of counter name from reg.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}
