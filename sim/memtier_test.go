package sim

import (
	"math"
	"testing"

	"github.com/sluice-hpc/sluice/sim/machine"
)

// memMachine is the tiny machine with forwarding nodes fast enough that
// a group's storage (two targets, 500 MB/s) is the bound, and (capacity
// > 0) a mem tier of a server per group.
func memMachine(t *testing.T, capacity float64, manual bool) *machine.Machine {
	m := tiny(t)
	m.FwdBW = 4e9
	if capacity > 0 {
		m.MemTier = &machine.MemTier{Capacity: capacity, BW: 2e9, Manual: manual}
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkpoint is a 16-node N-N job writing bytes in one phase after a
// second of computation (under FFM: one forwarding node, group 0).
func checkpoint(id string, submit, bytes float64) Job {
	return Job{ID: id, App: "ck", Submit: submit, Nodes: 16, Compute: 1, Pattern: "N-N", Class: "bw", Write: bytes, Phases: 1}
}

// TestMemTierAbsorbs: a 4 GB checkpoint takes 8 s onto the PFS (500 MB/s)
// and 2.5 s onto a mem tier with room (its nodes' links: 1.6 GB/s);
// policy/tiering moves it down once it is closed (free space at Cn-m),
// so the next checkpoint finds room too.
func TestMemTierAbsorbs(t *testing.T) {
	jobs := []Job{checkpoint("a", 0, 4e9), checkpoint("b", 200, 4e9)}
	for _, c := range []struct {
		capacity float64
		want     float64
	}{{0, 8}, {8e9, 2.5}} {
		r := run(t, Config{Machine: memMachine(t, c.capacity, false), Jobs: jobs, Policy: "ffm"})
		for _, j := range r.Jobs {
			if math.Abs(j.IOTime-c.want) > 1e-6 {
				t.Errorf("mem %.0g: %s took %.3f s, want %.1f", c.capacity, j.ID, j.IOTime, c.want)
			}
			if math.Abs(j.IOAlone-c.want) > 1e-6 {
				t.Errorf("mem %.0g: %s alone %.3f s, want %.1f", c.capacity, j.ID, j.IOAlone, c.want)
			}
		}
		if c.capacity == 0 {
			if r.Mem != nil {
				t.Errorf("no mem tier, stats %+v", r.Mem)
			}
			continue
		}
		m := r.Mem
		if m.Written != 8e9 || m.Spilled != 0 || m.Stalls != 0 {
			t.Errorf("written %.3g spilled %.3g stalls %d: want 8e9 on mem, nothing spilled or waiting", m.Written, m.Spilled, m.Stalls)
		}
		if m.Moves < 1 || m.Moved < 4e9 || m.Forced != 0 || m.Looks == 0 {
			t.Errorf("moves %d (forced %d) of %.3g bytes in %d looks: want the first checkpoint moved down once closed", m.Moves, m.Forced, m.Moved, m.Looks)
		}
		if r.Jobs[1].MemBytes != 4e9 {
			t.Errorf("second checkpoint put %.3g bytes on mem, want 4e9", r.Jobs[1].MemBytes)
		}
	}
}

// TestMemTierStall: a 4 GB checkpoint into a 1 GB mem tier. With
// tiering auto what does not fit waits at Cs-w while policy/tiering
// forces the open file out, and every byte goes through the mem tier;
// with a short StallMax the wait ends in a spill; with tiering manual
// the rest spills to the PFS at once and nothing moves.
func TestMemTierStall(t *testing.T) {
	jobs := []Job{checkpoint("a", 0, 4e9)}
	auto := run(t, Config{Machine: memMachine(t, 1e9, false), Jobs: jobs, Policy: "ffm"})
	m := auto.Mem
	if m.Stalls < 1 || m.StallSpills != 0 || m.Spilled != 0 || math.Abs(m.Written-4e9) > 1 {
		t.Errorf("auto: stalls %d (spilled after the wait %d), spilled %.3g, on mem %.4g: want waits, no spill, 4e9 on mem", m.Stalls, m.StallSpills, m.Spilled, m.Written)
	}
	if m.Forced < 1 || m.Peak > 1e9+1 {
		t.Errorf("auto: %d forced moves, peak %.4g of 1e9", m.Forced, m.Peak)
	}
	// the PFS drains it at 500 MB/s: the 3 GB beyond the tier wait for
	// at least 6 s
	if j := auto.Jobs[0]; j.IOTime < 6 || j.Stalled <= 0 {
		t.Errorf("auto: I/O %.2f s, stalled %.2f s: want ≥ 6 s and a wait", j.IOTime, j.Stalled)
	}

	short := memMachine(t, 1e9, false)
	short.MemTier.StallMax = 0.5
	sp := run(t, Config{Machine: short, Jobs: jobs, Policy: "ffm"}).Mem
	if sp.StallSpills != 1 || sp.Spilled <= 0 {
		t.Errorf("stall_max 0.5 s: %d waits spilled, %.3g bytes: want the wait to end in a spill", sp.StallSpills, sp.Spilled)
	}

	manual := run(t, Config{Machine: memMachine(t, 1e9, true), Jobs: jobs, Policy: "ffm"})
	mm := manual.Mem
	if mm.Stalls != 0 || mm.Moves != 0 || math.Abs(mm.Written-1e9) > 1 || math.Abs(mm.Spilled-3e9) > 1 {
		t.Errorf("manual: stalls %d, moves %d, on mem %.4g, spilled %.4g: want 1e9 on mem, 3e9 spilled, nothing moved", mm.Stalls, mm.Moves, mm.Written, mm.Spilled)
	}
	// 1 GB at the links' 1.6 GB/s beside 3 GB at the PFS's 500 MB/s
	if j := manual.Jobs[0]; math.Abs(j.IOTime-6) > 1e-6 {
		t.Errorf("manual: I/O %.3f s, want 6", j.IOTime)
	}
}

// TestMemTierReadBack: what a job reads back of its checkpoint comes
// from the mem tier while it is there (its links' 1.6 GB/s), not the
// PFS's 500 MB/s.
func TestMemTierReadBack(t *testing.T) {
	j := checkpoint("a", 0, 2e9)
	j.Read, j.ReadBack = 2e9, true
	for _, c := range []struct {
		capacity, want float64
	}{{0, 8}, {8e9, 2.5}} {
		r := run(t, Config{Machine: memMachine(t, c.capacity, false), Jobs: []Job{j}, Policy: "ffm"})
		if got := r.Jobs[0].IOTime; math.Abs(got-c.want) > 1e-6 {
			t.Errorf("mem %.0g: write and read back %.3f s, want %.2f", c.capacity, got, c.want)
		}
		if c.capacity > 0 && r.Mem.ReadMem != 2e9 {
			t.Errorf("read %.3g bytes from mem, want 2e9", r.Mem.ReadMem)
		}
	}
}

// TestMemTierChecked: a mem tier's description is validated.
func TestMemTierChecked(t *testing.T) {
	for _, mt := range []machine.MemTier{{Capacity: 0, BW: 1}, {Capacity: 1e9, BW: 0}, {Capacity: 1e9, BW: 1, Thresholds: [3]float64{3e8, 2e8, 5e8}},
		{Capacity: 1e9, BW: 1, Thresholds: [3]float64{1e8, 2e8, 1e9}}, {Capacity: 1e9, BW: 1, StallMax: -1}} {
		m := tiny(t)
		m.MemTier = &mt
		if err := m.Check(); err == nil {
			t.Errorf("%+v accepted", mt)
		}
	}
}
