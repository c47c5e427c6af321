package tiers

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/policy/tiering"
)

func tinyTiers(auto bool) Config {
	return Config{MemBytes: 16 << 20, MemRate: 600e6, SsdRate: 20e6, Auto: auto, WriterRate: 250e6,
		FileBytes: 1 << 20, Total: 64 << 20, Burst: 12 << 20, Pause: time.Second,
		Policy: tiering.Config{Thresholds: tiering.Thresholds{StallWrite: 2 << 20, ForcedOut: 4 << 20, NormalOut: 14 << 20}, ChunkSize: 1 << 20}}
}

// TestTiersModel: with tiering auto the mem tier never fills past its
// capacity less Cs-w, files move down and none spills; with tiering manual
// nothing moves and what does not fit spills; every file is somewhere; the
// same input gives the same result.
func TestTiersModel(t *testing.T) {
	auto, err := Simulate(tinyTiers(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range auto.Timeline {
		if s.Used > 14<<20 {
			t.Fatalf("at %.2f s the mem tier holds %d bytes, past its capacity less Cs-w", s.T, s.Used)
		}
	}
	if auto.Files != 64 || auto.FilesOnMem+auto.FilesMigrated+auto.Spilled != 64 || auto.Spilled != 0 || auto.FilesMigrated == 0 || auto.Stalls == 0 {
		t.Fatalf("auto: %d files, %d on mem, %d migrated, %d spilled, %d stalls", auto.Files, auto.FilesOnMem, auto.FilesMigrated, auto.Spilled, auto.Stalls)
	}
	manual, err := Simulate(tinyTiers(false))
	if err != nil {
		t.Fatal(err)
	}
	if manual.Moves != 0 || manual.FilesOnMem != 16 || manual.Spilled != 48 {
		t.Fatalf("manual: %d moves, %d on mem, %d spilled", manual.Moves, manual.FilesOnMem, manual.Spilled)
	}
	// bursts of 12 MiB, 1 s apart: a burst after the first lands on mem
	// under auto (Cn-m holds a burst: moved in the pause), on the ssd's 20 MB/s
	// under manual
	if a, m := auto.Bursts[2].MBps, manual.Bursts[2].MBps; a < 2*m || m > 25 {
		t.Fatalf("third burst: auto %.1f MB/s, manual %.1f", a, m)
	}
	again, _ := Simulate(tinyTiers(true))
	if !reflect.DeepEqual(auto, again) {
		t.Fatal("the same scenario gave two results")
	}
	if _, err := Simulate(Config{}); err == nil {
		t.Fatal("an empty scenario ran")
	}
}
