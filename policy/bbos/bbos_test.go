package bbos

import (
	"fmt"
	"math"
	"testing"
)

// rates of a buffer whose demotion at full speed takes half its write
// bandwidth: WriteMin/(WriteMin − DemoteMax) = 2.1 as in the paper's
// MaxEff (210 % of the buffer per period).
var rt = Rates{WriteMax: 1000, WriteMin: 700, DemoteMin: 100, DemoteMax: 700 * (1 - 1/2.1)}

const s = 100e3

// simulate runs one period in small time steps with the rates the plan
// gives at each point and returns the most the buffer held and what was
// demoted while checkpoints were written: an independent check of
// equation 2's solution.
func simulate(pl Plan, dwpp float64) (peak, demoted float64) {
	const dt = 1e-3
	var dwsf, held float64
	for dwsf < dwpp {
		w, d := pl.At(dwsf, dwpp, rt)
		w = min(w, (dwpp-dwsf)/dt)
		d = min(d, (held+w*dt)/dt)
		dwsf += w * dt
		held += (w - d) * dt
		demoted += d * dt
		peak = max(peak, held)
	}
	return peak, demoted
}

func TestPlanKeepsTheBufferFromOverflowing(t *testing.T) {
	var last Pattern
	lastStart := math.Inf(1)
	for _, x := range []float64{0.5, 1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 1.9, 2.05} {
		dwpp := x * s
		pl, err := PlanPeriod(BBOS, dwpp, s, rt)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Pattern < last {
			t.Fatalf("DWPP %.2fS: pattern %v after %v (patterns must not go back as DWPP grows)", x, pl.Pattern, last)
		}
		if pl.Start > lastStart+1e-6 {
			t.Fatalf("DWPP %.2fS: demotion starts at %.0f, later than at a smaller DWPP (%.0f)", x, pl.Start, lastStart)
		}
		last, lastStart = pl.Pattern, pl.Start
		peak, demoted := simulate(pl, dwpp)
		if peak > s*1.001 {
			t.Fatalf("DWPP %.2fS (%v, start %.0f, full %.0f): the buffer held %.0f > S", x, pl.Pattern, pl.Start, pl.Full, peak)
		}
		if pl.C > 0 && math.Abs(demoted-pl.C) > 0.01*s {
			t.Fatalf("DWPP %.2fS (%v): demoted %.0f while writing, want C = %.0f", x, pl.Pattern, demoted, pl.C)
		}
		t.Logf("DWPP %.2fS: %v, demotion from DWSF %.2fS, full speed from %.2fS; peak %.2fS", x, pl.Pattern, pl.Start/s, pl.Full/s, peak/s)
	}
	if last != Always {
		t.Fatalf("at 2.05S the pattern is %v, want always (below the 2.1S maximum)", last)
	}
	if pl, _ := PlanPeriod(BBOS, 2.2*s, s, rt); pl.Pattern != Overflow {
		t.Fatalf("2.2S is past the maximum (%.2fS): pattern %v", MaxDWPP(s, rt)/s, pl.Pattern)
	}
}

func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		x    float64
		want Pattern
	}{
		{BBOS, 0.9, IdleOnly}, {BBOS, 1.1, Partly}, {BBOS, 2.0, Always}, {BBOS, 2.5, Overflow},
		{MaxBW, 0.9, IdleOnly}, {MaxBW, 1.1, Overflow}, {Dedicated, 1.0, IdleOnly},
		{MaxEff, 0.5, Always}, {MaxEff, 2.5, Overflow},
	} {
		pl, err := PlanPeriod(c.p, c.x*s, s, rt)
		if err != nil || pl.Pattern != c.want {
			t.Errorf("%s at %.1fS: %v %v, want %v", c.p, c.x, pl.Pattern, err, c.want)
		}
	}
	if pl, _ := PlanPeriod(MaxEff, s, s, rt); pl.Start != 0 {
		t.Errorf("MaxEff demotes from the first write, got start %.0f", pl.Start)
	}
	if pl, _ := PlanPeriod(MaxBW, s, s, rt); pl.Start != s {
		t.Errorf("MaxBW never demotes while writing, got start %.0f", pl.Start)
	}
	if _, err := PlanPeriod(BBOS, s, s, Rates{WriteMax: 1, WriteMin: 2, DemoteMax: 1}); err == nil {
		t.Error("WriteMin > WriteMax accepted")
	}
}

func TestRates(t *testing.T) {
	if w := rt.WriteAt(rt.DemoteMin); w != rt.WriteMax {
		t.Errorf("write at DemoteMin %.1f, want WriteMax", w)
	}
	if w := rt.WriteAt(rt.DemoteMax); math.Abs(w-rt.WriteMin) > 1e-9 {
		t.Errorf("write at DemoteMax %.1f, want WriteMin", w)
	}
	if m := MaxDWPP(s, rt); math.Abs(m/s-2.1) > 1e-9 {
		t.Errorf("max DWPP %.3fS, want 2.1S", m/s)
	}
	if m := MaxDWPP(s, Rates{WriteMax: 2, WriteMin: 1, DemoteMax: 1}); !math.IsInf(m, 1) {
		t.Errorf("demotion as fast as writes: max DWPP %v, want unbounded", m)
	}
	pl, _ := PlanPeriod(BBOS, 1.5*s, s, rt)
	busy := pl.Solo + pl.Ramp + pl.Steady
	if pl.PeriodOK(busy+s/rt.DemoteMax*0.99, s, rt) || !pl.PeriodOK(busy+s/rt.DemoteMax*1.01, s, rt) {
		t.Errorf("period check (equation 3) around %.1f s", busy+s/rt.DemoteMax)
	}
	w, d := pl.At(0, 1.5*s, rt)
	if pl.Pattern == Always && (d != rt.DemoteMin || w != rt.WriteMax) {
		t.Errorf("at the start of an always-demoting period: write %.1f demote %.1f", w, d)
	}
	if w, d := pl.At(1.5*s, 1.5*s, rt); w != rt.WriteMax || d != rt.DemoteMax {
		t.Errorf("after the period's writes: write %.1f demote %.1f, want WriteMax and DemoteMax", w, d)
	}
}

func TestCold(t *testing.T) {
	files := []Version{
		{ID: 1, Job: "a", Seq: 1, Bytes: 10, MTBF: 100, Written: 1, Used: 9},
		{ID: 2, Job: "a", Seq: 2, Bytes: 10, MTBF: 100, Written: 5, Used: 5},
		{ID: 3, Job: "b", Seq: 1, Bytes: 10, MTBF: 500, Written: 2, Used: 2},
		{ID: 4, Job: "c", Seq: 7, Bytes: 10, MTBF: 50, Written: 3, Used: 8},
		{ID: 5, Job: "c", Seq: 6, Bytes: 10, MTBF: 50, Written: 0, Used: 1},
	}
	for _, c := range []struct {
		p    Policy
		need uint64
		want string
	}{
		// older versions first (oldest first), then the highest MTBF
		{BBOS, 50, "[5 1 3 2 4]"},
		{BBOS, 15, "[5 1]"},
		{LRU, 50, "[5 3 2 4 1]"},
		{FIFO, 50, "[5 1 3 4 2]"},
	} {
		if got := fmt.Sprint(Cold(c.p, files, c.need)); got != c.want {
			t.Errorf("%s, %d bytes: %s, want %s", c.p, c.need, got, c.want)
		}
	}
	// without version awareness: MTBF alone, so b's only version goes
	// before a's and c's old ones
	var ids []uint64
	for _, f := range Order(BBOS, files, false) {
		ids = append(ids, f.ID)
	}
	if got := fmt.Sprint(ids); got != "[3 1 2 5 4]" {
		t.Errorf("bbos without versions: %s, want [3 1 2 5 4]", got)
	}
}

func TestThrottle(t *testing.T) {
	pl, _ := PlanPeriod(BBOS, 1.9*s, s, rt)
	for _, p := range Policies {
		pp, _ := PlanPeriod(p, 1.9*s, s, rt)
		if w, d := Throttle(p, pp, 0.5*s, 1.9*s, false, rt); w != rt.WriteMax || d != rt.DemoteMax {
			t.Errorf("%s idle: write %.0f demote %.0f, want full speed both", p, w, d)
		}
	}
	for _, p := range []Policy{Dedicated, MaxBW} {
		pp, _ := PlanPeriod(p, 1.9*s, s, rt)
		if w, d := Throttle(p, pp, 1.5*s, 1.9*s, true, rt); w != rt.WriteMax || d != 0 {
			t.Errorf("%s writing past S: write %.0f demote %.0f, want no demotion", p, w, d)
		}
	}
	w, d := Throttle(BBOS, pl, 1.5*s, 1.9*s, true, rt)
	if pw, pd := pl.At(1.5*s, 1.9*s, rt); w != pw || d != pd {
		t.Errorf("bbos writing follows the plan: %.0f/%.0f, plan %.0f/%.0f", w, d, pw, pd)
	}
	pm, _ := PlanPeriod(MaxEff, 1.3*s, s, rt)
	if w, d := Throttle(MaxEff, pm, 0, 1.3*s, true, rt); d != rt.DemoteMax || math.Abs(w-rt.WriteMin) > 1 {
		t.Errorf("maxeff writing: write %.0f demote %.0f, want WriteMin and DemoteMax", w, d)
	}
}

func TestPredictDWPP(t *testing.T) {
	if got := PredictDWPP(nil, 5); got != 5 {
		t.Errorf("no history: %v, want the declared 5", got)
	}
	if got := PredictDWPP([]float64{9, 1, 2, 3}, 5); got != 3 {
		t.Errorf("history: %v, want the largest of the last three, 3", got)
	}
}

// TestPeriodLoad: a period whose bypassed checkpoints kept the buffer's
// share within S still predicts a period that overflows it, so the next
// period bypasses from its start; the buffer's own history would not.
func TestPeriodLoad(t *testing.T) {
	seqs := []Sequence{{"a", 100, 30}, {"b", 300, 30}, {"c", 200, 30}, {"d", 1000, 30}}
	at := func(dwpp float64) Period {
		return Period{DWPP: dwpp, Load: 120, S: 90, T: 20, Left: 20, PFS: 30}
	}
	// the last period wrote 90 to the buffer and bypassed 30 (d's)
	if Bypass(seqs, seqs[3], at(max(PredictDWPP([]float64{90}, 120), 0))) {
		t.Fatal("the buffer's own history bypasses: the test shows nothing")
	}
	if got := PeriodLoad([]float64{120}, 120, 0, 0); got != 120 || !Bypass(seqs, seqs[3], at(got)) {
		t.Errorf("PeriodLoad %v: no bypass of the coldest application after a period that bypassed it", got)
	}
	if got := PeriodLoad(nil, 60, 50, 30); got != 80 {
		t.Errorf("PeriodLoad with 50 written and 30 bypassed so far = %v, want 80", got)
	}
	if got := PeriodLoad([]float64{100, 70}, 200, 10, 0); got != 100 {
		t.Errorf("PeriodLoad = %v, want the last periods' most, 100", got)
	}
}

func TestBypass(t *testing.T) {
	// a buffer of 100 holds the newest checkpoints of three of the four
	// applications: the three likeliest to restart
	seqs := []Sequence{{"a", 100, 30}, {"b", 300, 30}, {"c", 200, 30}, {"d", 1000, 30}}
	hot := Hot(seqs, 100)
	if !hot["a"] || !hot["b"] || !hot["c"] || hot["d"] {
		t.Errorf("hot %v, want a, b, c", hot)
	}
	// the PFS writes 30 bytes/s (10 for one bypassing checkpoint beside
	// demotion's two streams); 10 s of a 20 s period are left
	at := func(dwpp, dwsf, queued float64) Period {
		return Period{DWPP: dwpp, DWSF: dwsf, Load: 150, S: 100, T: 20, Left: 10, PFS: 30, Queued: queued}
	}
	if Bypass(seqs, seqs[3], at(90, 50, 0)) {
		t.Error("bypass while the period fits the buffer")
	}
	if !Bypass(seqs, seqs[3], at(150, 0, 0)) {
		t.Error("no bypass of the coldest application when the period is predicted to overflow the buffer")
	}
	if !Bypass(seqs, seqs[3], at(90, 80, 0)) {
		t.Error("no bypass of the coldest application once the period's writes overflow the buffer")
	}
	for _, q := range seqs[:3] {
		if Bypass(seqs, q, at(150, 90, 0)) {
			t.Errorf("bypass of %s, whose newest version the buffer keeps", q.Job)
		}
	}
	// a newcomer not yet among the sequences is ranked with them
	if Bypass(seqs, Sequence{"e", 50, 30}, at(150, 90, 0)) {
		t.Error("bypass of the application likeliest to restart")
	}
	if !Bypass(seqs, Sequence{"e", 5000, 30}, at(150, 90, 0)) {
		t.Error("no bypass of a cold newcomer")
	}
	// the PFS could not take it in time: 30 bytes at 10/s after 80
	// queued end 1 s past the period (one writer ahead: 15/s for the two)
	if p := at(150, 0, 80); Bypass(seqs, seqs[3], p) {
		t.Error("bypass of a checkpoint the PFS would finish after the period")
	}
	if p := at(150, 0, 120); !func() bool { p.Bypassing = 1; return Bypass(seqs, seqs[3], p) }() {
		t.Error("no bypass of a checkpoint the PFS finishes just in time beside the one ahead")
	}
	// the PFS writes 600 bytes a period: a load above it leaves it no
	// time to spare
	if p := at(150, 0, 0); func() bool { p.Load = 601; return Bypass(seqs, seqs[3], p) }() {
		t.Error("bypass with the PFS busy all period")
	}
	if p := at(150, 0, 0); func() bool { p.PFS = 0; return Bypass(seqs, seqs[3], p) }() {
		t.Error("bypass with the PFS's bandwidth unknown")
	}
	// a checkpoint too large for what is left of the buffer after the
	// hotter ones does not take the place of smaller, colder ones
	big := append(seqs[:3:3], Sequence{"f", 250, 50}, Sequence{"d", 1000, 10})
	if hot := Hot(big, 100); hot["f"] || !hot["d"] {
		t.Errorf("hot %v: f does not fit, d does", hot)
	}
}
