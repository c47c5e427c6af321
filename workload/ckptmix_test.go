package workload

import (
	"reflect"
	"testing"
	"time"
)

func TestGenCkptMix(t *testing.T) {
	o := MixOptions{Buffer: 128 << 20, Size: 8 << 20, Period: 10 * time.Second, Periods: 3, DWPP: 1.9,
		Congestion: "low", MTBFMax: 16 * time.Second, Seed: 7}
	m, err := GenCkptMix(o)
	if err != nil {
		t.Fatal(err)
	}
	// 1.9 × 128 MiB / 8 MiB = 30.4: 30 applications, one checkpoint each per period
	if len(m.Apps) != 30 {
		t.Fatalf("%d applications, want 30", len(m.Apps))
	}
	ev := m.Events()
	if len(ev) != 90 {
		t.Fatalf("%d I/O jobs over 3 periods, want 90", len(ev))
	}
	var perPeriod int64
	for _, e := range ev {
		if e.At < m.Period {
			perPeriod += m.Apps[e.App].Size
		}
		if e.At < 0 || e.At >= 3*m.Period {
			t.Fatalf("an I/O job at %v, outside the run", e.At)
		}
	}
	if x := float64(perPeriod) / float64(o.Buffer); x < 1.8 || x > 2 {
		t.Fatalf("DWPP %.2f S, want about 1.9", x)
	}
	for _, a := range m.Apps {
		if a.MTBF <= 0 || a.MTBF > o.MTBFMax {
			t.Fatalf("MTBF %v outside (0, %v]", a.MTBF, o.MTBFMax)
		}
	}
	// the last application starts near the end of the period when low,
	// within a tenth of it when high
	if last := m.Apps[29].Offset; last < 9*time.Second {
		t.Fatalf("low congestion: last offset %v", last)
	}
	o.Congestion = "high"
	h, _ := GenCkptMix(o)
	if last := h.Apps[29].Offset; last > time.Second {
		t.Fatalf("high congestion: last offset %v, want within a tenth of the period", last)
	}
	// the same seed, the same mix; its failures are in time order
	again, _ := GenCkptMix(MixOptions{Buffer: 128 << 20, Size: 8 << 20, Period: 10 * time.Second, Periods: 3, DWPP: 1.9,
		Congestion: "low", MTBFMax: 16 * time.Second, Seed: 7})
	if !reflect.DeepEqual(m, again) || !reflect.DeepEqual(m.Failures(), again.Failures()) {
		t.Fatal("a mix is not determined by its options")
	}
	fs := m.Failures()
	if len(fs) == 0 {
		t.Fatal("no failures drawn in 30 s with MTBFs up to 16 s")
	}
	for i := 1; i < len(fs); i++ {
		if fs[i].At < fs[i-1].At {
			t.Fatal("failures out of order")
		}
	}
	rs := m.Restarts(8)
	seen := map[int]bool{}
	for _, a := range rs {
		if seen[a] {
			t.Fatal("an application restarted twice")
		}
		seen[a] = true
	}
	if len(rs) != 8 {
		t.Fatalf("%d restarts, want 8", len(rs))
	}
	if _, err := GenCkptMix(MixOptions{Congestion: "extreme"}); err == nil {
		t.Fatal("an unknown congestion was taken")
	}
}

// TestGenCkptMixClasses: the paper's 60/30/20-minute periods at 1:1:1
// write 1, 2 and 3 versions per period.
func TestGenCkptMixClasses(t *testing.T) {
	m, err := GenCkptMix(MixOptions{Buffer: 120 << 20, Size: 8 << 20, Period: 12 * time.Second, Periods: 1, DWPP: 1.95,
		Classes: map[int]int{1: 1, 2: 1, 3: 1}, Congestion: "low", MTBFMax: 10 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	per := map[time.Duration]int{}
	for _, a := range m.Apps {
		per[a.Period]++
	}
	if len(per) != 3 || per[12*time.Second] == 0 || per[6*time.Second] == 0 || per[4*time.Second] == 0 {
		t.Fatalf("periods %v", per)
	}
	var bytes int64
	for _, e := range m.Events() {
		bytes += m.Apps[e.App].Size
	}
	if x := float64(bytes) / float64(120<<20); x < 1.8 || x > 2.1 {
		t.Fatalf("DWPP %.2f S, want about 1.95", x)
	}
}
