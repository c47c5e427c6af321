// Package bbos is the burst-buffer policy of BBOS (CCGrid 2020, BRIEF §2;
// docs/bbos.md): how much checkpoint data a buffer of capacity S can take
// per period when it demotes to the PFS while jobs write, when demotion
// must start within a period and how fast checkpoints and demotion may go
// at each point (equations 1–3 of the paper), and which data is cold.
//
// Pure: the caller passes the buffer's figures, the period's data written
// so far and the data on the buffer; the policy returns thresholds, rates
// and orders, and keeps nothing. No clock, no I/O. The daemons (throttles
// in the data servers' token buckets, demotion by tier migration) and the
// simulator call the same code.
package bbos

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Policy names the buffer-management policies compared in the paper's
// evaluation, all selectable on the same daemons.
type Policy string

const (
	// Dedicated is DataWarp's allocation: a job's grant is its own for
	// its lifetime; the grants never exceed the buffer, nothing is
	// demoted while jobs write.
	Dedicated Policy = "dedicated"
	// MaxBW (Harmonia) never demotes while a checkpoint is written: full
	// write bandwidth, and writes stop when the buffer is full.
	MaxBW Policy = "maxbw"
	// MaxEff (Harmonia) always demotes at full speed, from the start of
	// the period.
	MaxEff Policy = "maxeff"
	// LRU and FIFO demote like BBOS but choose cold data by last use or
	// by age alone.
	LRU  Policy = "lru"
	FIFO Policy = "fifo"
	// BBOS adapts the demotion threshold and both rates to DWPP.
	BBOS Policy = "bbos"
)

// Policies lists the valid policies.
var Policies = []Policy{Dedicated, MaxBW, MaxEff, LRU, FIFO, BBOS}

// Rates are a buffer's bandwidth figures (bytes/s). Writing checkpoints
// and demoting (reading the buffer to write the PFS) compete: the write
// bandwidth falls linearly as demotion speeds up (equation 1), from
// WriteMax with demotion at DemoteMin to WriteMin with demotion at
// DemoteMax (the PFS's write bandwidth).
type Rates struct {
	WriteMax, WriteMin   float64
	DemoteMin, DemoteMax float64
}

// Validate checks the figures' order.
func (r Rates) Validate() error {
	if !(r.WriteMin > 0 && r.WriteMin <= r.WriteMax && r.DemoteMin >= 0 && r.DemoteMin <= r.DemoteMax && r.DemoteMax > 0) {
		return fmt.Errorf("bbos rates want 0 < WriteMin ≤ WriteMax and 0 ≤ DemoteMin ≤ DemoteMax, 0 < DemoteMax (got %+v)", r)
	}
	return nil
}

// WriteAt is equation 1: the checkpoint bandwidth left while demotion runs
// at demote (clamped to [DemoteMin, DemoteMax]).
func (r Rates) WriteAt(demote float64) float64 {
	if r.DemoteMax == r.DemoteMin {
		return r.WriteMin
	}
	d := min(max(demote, r.DemoteMin), r.DemoteMax)
	m := (r.WriteMin - r.WriteMax) / (r.DemoteMax - r.DemoteMin) // m < 0
	return r.WriteMax + m*(d-r.DemoteMin)
}

// Pattern is how demotion runs within a period (the paper's Figure 3).
type Pattern int

const (
	// IdleOnly: the period's data fits the buffer (C ≤ 0); demotion runs
	// only while no checkpoint is written.
	IdleOnly Pattern = 1
	// Partly: demotion starts once DWSF reaches a threshold and speeds up
	// from DemoteMin to DemoteMax by the end of the period's writes.
	Partly Pattern = 2
	// Always: demotion starts with the first write and reaches DemoteMax
	// at a second threshold, where it stays.
	Always Pattern = 3
	// Overflow: even demoting at DemoteMax from the first write, the
	// period's data does not fit: writes will stall (admission should
	// have refused some of it).
	Overflow Pattern = 4
)

func (p Pattern) String() string {
	switch p {
	case IdleOnly:
		return "idle-only"
	case Partly:
		return "partly"
	case Always:
		return "always"
	case Overflow:
		return "overflow"
	}
	return fmt.Sprintf("pattern(%d)", int(p))
}

// Plan is the demotion plan of one period.
type Plan struct {
	Pattern Pattern
	// C = DWPP − S: what must be demoted while checkpoints are written.
	C float64
	// Start is the DWSF at which demotion starts while writing; Full the
	// DWSF at which it reaches DemoteMax (= DWPP in Partly: never before
	// the end). Both S when nothing is demoted while writing (IdleOnly,
	// MaxBW), 0 for MaxEff.
	Start, Full float64
	// Ramp is how long demotion speeds up from DemoteMin to DemoteMax
	// (t_dd), Steady how long it then runs at DemoteMax (t_ds), Solo the
	// writing before demotion starts (t_c); seconds.
	Solo, Ramp, Steady float64
}

// ErrRates: the rates are not usable.
var ErrRates = errors.New("bbos: bad rates")

// PlanPeriod solves equation 2 for a buffer of capacity s (bytes) that
// takes dwpp bytes of checkpoints per period under policy p.
func PlanPeriod(p Policy, dwpp, s float64, r Rates) (Plan, error) {
	if err := r.Validate(); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrRates, err)
	}
	c := dwpp - s
	pl := Plan{C: c}
	switch p {
	case MaxBW, Dedicated:
		pl.Start, pl.Full = s, s
		pl.Pattern = IdleOnly
		if c > 0 {
			pl.Pattern = Overflow // writes stop when the buffer is full
		}
		pl.Solo = dwpp / r.WriteMax
		return pl, nil
	case MaxEff:
		pl.Start, pl.Full = 0, 0
		pl.Steady = dwpp / r.WriteMin
		pl.Pattern = Always
		if dwpp > MaxDWPP(s, r) {
			pl.Pattern = Overflow
		}
		return pl, nil
	}
	if c <= 0 {
		pl.Pattern, pl.Start, pl.Full = IdleOnly, s, s
		pl.Solo = dwpp / r.WriteMax
		return pl, nil
	}
	ww := (r.WriteMax + r.WriteMin) / 2   // mean write rate over the ramp
	dd := (r.DemoteMin + r.DemoteMax) / 2 // mean demotion rate over the ramp
	// Partly (t_ds = 0): demote C over the ramp, write the rest alone first
	tdd := c / dd
	if tc := (dwpp - ww*tdd) / r.WriteMax; tc >= 0 {
		pl.Pattern, pl.Solo, pl.Ramp = Partly, tc, tdd
		pl.Start, pl.Full = r.WriteMax*tc, dwpp
		return pl, nil
	}
	// Always (t_c = 0): ww·t_dd + WriteMin·t_ds = DWPP, dd·t_dd + DemoteMax·t_ds = C
	det := ww*r.DemoteMax - r.WriteMin*dd
	if det > 0 {
		tdd = (dwpp*r.DemoteMax - r.WriteMin*c) / det
		tds := (ww*c - dd*dwpp) / det
		if tdd >= 0 && tds >= 0 {
			pl.Pattern, pl.Ramp, pl.Steady = Always, tdd, tds
			pl.Start, pl.Full = 0, ww*tdd
			return pl, nil
		}
	}
	pl.Pattern, pl.Start, pl.Full = Overflow, 0, 0
	pl.Steady = dwpp / r.WriteMin
	return pl, nil
}

// MaxDWPP is the most a buffer of capacity s takes per period, demoting at
// DemoteMax from the first write (writes then go at WriteMin): unbounded
// (+Inf) when demotion keeps up with the writes.
func MaxDWPP(s float64, r Rates) float64 {
	if r.WriteMin <= r.DemoteMax {
		return math.Inf(1)
	}
	return s * r.WriteMin / (r.WriteMin - r.DemoteMax)
}

// PeriodOK is equation 3: after the period's writes, the rest of the
// period must be long enough to demote a full buffer at DemoteMax, so the
// next period starts empty.
func (pl Plan) PeriodOK(period, s float64, r Rates) bool {
	return (period-(pl.Solo+pl.Ramp+pl.Steady))*r.DemoteMax >= s
}

// At returns the checkpoint write rate allowed and the demotion rate to
// run when dwsf bytes of the period's dwpp have been written (the
// throttles the data servers apply). Before the threshold checkpoints go
// at WriteMax with no demotion; in the ramp demotion speeds up linearly in
// time; then it stays at DemoteMax with writes at WriteMin. After the
// period's writes, demotion runs at DemoteMax (the buffer is idle).
func (pl Plan) At(dwsf, dwpp float64, r Rates) (write, demote float64) {
	switch {
	case dwsf >= dwpp:
		return r.WriteMax, r.DemoteMax
	case pl.Pattern == IdleOnly:
		return r.WriteMax, 0
	case dwsf < pl.Start:
		return r.WriteMax, 0
	case dwsf >= pl.Full || pl.Ramp == 0:
		return r.WriteMin, r.DemoteMax
	}
	// in the ramp: written since its start is WriteMax·τ − k·τ²/2 with
	// k = (WriteMax − WriteMin)/Ramp; solve for τ
	x := dwsf - pl.Start
	k := (r.WriteMax - r.WriteMin) / pl.Ramp
	tau := x / r.WriteMax
	if k > 0 {
		disc := r.WriteMax*r.WriteMax - 2*k*x
		if disc < 0 {
			disc = 0
		}
		tau = (r.WriteMax - math.Sqrt(disc)) / k
	}
	f := min(tau/pl.Ramp, 1)
	demote = r.DemoteMin + f*(r.DemoteMax-r.DemoteMin)
	return r.WriteAt(demote), demote
}

// Version is one checkpoint file on the buffer.
type Version struct {
	ID    uint64 // the file
	Job   string // the checkpointing job (its version sequence)
	Seq   int    // its place in the job's sequence: higher is newer
	Bytes uint64
	// MTBF of the job's application in seconds: a low MTBF means a
	// restart is likely soon.
	MTBF float64
	// Written and Used are when it was written and last read or written
	// (unix ns; FIFO and LRU order by them).
	Written, Used int64
}

// Order returns files in the order policy p demotes them, coldest first.
// BBOS (and Dedicated, MaxBW, MaxEff, which the paper gives no rule of
// their own): a job's older versions first, oldest first, then newest
// versions of the applications least likely to restart (highest MTBF)
// first. versions false is BBOS without version awareness (the paper's
// Figure 9 baseline): MTBF alone, every file taken as its job's newest.
// LRU: least recently used first; FIFO: oldest written first.
func Order(p Policy, files []Version, versions bool) []Version {
	fs := append([]Version(nil), files...)
	newest := newestSeq(fs)
	switch p {
	case LRU:
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].Used < fs[j].Used })
	case FIFO:
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].Written < fs[j].Written })
	default:
		old := func(f Version) bool { return versions && f.Seq < newest[f.Job] }
		sort.SliceStable(fs, func(i, j int) bool {
			a, b := fs[i], fs[j]
			if old(a) != old(b) {
				return old(a)
			}
			if old(a) {
				return a.Written < b.Written
			}
			if a.MTBF != b.MTBF {
				return a.MTBF > b.MTBF
			}
			return a.Written < b.Written
		})
	}
	return fs
}

// Cold returns the files to demote first under policy p (Order, version
// aware), until need bytes are freed.
func Cold(p Policy, files []Version, need uint64) []uint64 {
	var out []uint64
	var freed uint64
	for _, f := range Order(p, files, true) {
		if freed >= need {
			break
		}
		out = append(out, f.ID)
		freed += f.Bytes
	}
	return out
}

func newestSeq(files []Version) map[string]int {
	newest := map[string]int{}
	for _, f := range files {
		if q, ok := newest[f.Job]; !ok || f.Seq > q {
			newest[f.Job] = f.Seq
		}
	}
	return newest
}

// Sequence is one application's checkpoint sequence on a buffer (a
// grant): the bytes of one checkpoint and the application's MTBF.
type Sequence struct {
	Job   string
	MTBF  float64 // seconds
	Bytes uint64
}

// Hot returns the sequences whose newest versions a buffer of capacity s
// keeps under BBOS's cold order: the applications most likely to restart
// (lowest MTBF; ties by name) first, each whose checkpoint still fits.
func Hot(seqs []Sequence, s float64) map[string]bool {
	ss := append([]Sequence(nil), seqs...)
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].MTBF != ss[j].MTBF {
			return ss[i].MTBF < ss[j].MTBF
		}
		return ss[i].Job < ss[j].Job
	})
	hot := map[string]bool{}
	var used float64
	for _, q := range ss {
		if hot[q.Job] || used+float64(q.Bytes) > s {
			continue
		}
		hot[q.Job] = true
		used += float64(q.Bytes)
	}
	return hot
}

// Period is where a buffer's planning period stands when a checkpoint
// arrives, for Bypass.
type Period struct {
	// DWPP is the period's predicted checkpoint bytes, bypassed ones
	// included (PeriodLoad); DWSF the buffer's written bytes of the
	// period; Load what the grants declare the jobs write per period,
	// buffer and PFS together; S the buffer's capacity.
	DWPP, DWSF, Load, S float64
	// T is the period and Left the time left in it (seconds).
	T, Left float64
	// PFS is the PFS's write bandwidth (Rates.DemoteMax); Queued the
	// bytes of the Bypassing checkpoints still writing there.
	PFS, Queued float64
	Bypassing   int
}

// BypassShare is the PFS bandwidth n checkpoints writing it get together
// beside demotion's streams: a share each of pfs.
func BypassShare(pfs float64, n, streams int) float64 {
	if n <= 0 {
		return 0
	}
	return pfs * float64(n) / float64(n+streams)
}

// DemoteStreams is how many files a pool demotes at once
// (manager/bbos): the servers pace them at the plan's rate together, two
// hide each one's migration round trips. Bypassed checkpoints share the
// PFS with them.
const DemoteStreams = 2

// Bypass says whether an incoming checkpoint of sequence in should go
// straight to the PFS (BBOS's direct checkpoint). seqs are the buffer's
// sequences (in among them or not). A checkpoint bypasses when
//   - the period writes more than the buffer holds (DWPP, or DWSF with
//     the incoming checkpoint, above S): cold data will have to leave;
//   - its application is not among the hot ones (Hot): on the buffer it
//     would only be demoted and evicted to make room for the newest
//     versions of the applications likelier to restart;
//   - the PFS has room for it: the period's whole load fits what the PFS
//     writes in a period (everything reaches the PFS in the end; a PFS
//     busy all period long has no time to take checkpoints early without
//     starving demotion, which the buffer then waits for), and beside the
//     bypassed checkpoints ahead of it and demotion's streams it ends
//     within the period.
//
// The paper bypasses where Br_max ≥ Bw_min, where a checkpoint is no
// slower on the PFS; where the PFS is slower the last two conditions keep
// the checkpoints in time.
func Bypass(seqs []Sequence, in Sequence, p Period) bool {
	if max(p.DWPP, p.DWSF+float64(in.Bytes)) <= p.S {
		return false
	}
	if p.PFS <= 0 || p.Load > p.PFS*p.T {
		return false
	}
	if (p.Queued+float64(in.Bytes))/BypassShare(p.PFS, p.Bypassing+1, DemoteStreams) > p.Left {
		return false
	}
	if !slices.ContainsFunc(seqs, func(q Sequence) bool { return q.Job == in.Job }) {
		seqs = append(seqs[:len(seqs):len(seqs)], in)
	}
	return !Hot(seqs, p.S)[in.Job]
}

// Throttle is what the buffer's token buckets apply now: the checkpoint
// write cap and the demotion rate, for the period plan pl when dwsf of
// dwpp bytes are written and checkpoints are being written (writing) or
// not. An idle buffer demotes at DemoteMax under every policy (the
// paper's "demotion when BB is idle"). While checkpoints are written,
// Dedicated and MaxBW never demote; the others follow the plan (Plan.At).
func Throttle(p Policy, pl Plan, dwsf, dwpp float64, writing bool, r Rates) (write, demote float64) {
	switch {
	case !writing:
		return r.WriteMax, r.DemoteMax
	case p == Dedicated || p == MaxBW:
		return r.WriteMax, 0
	}
	return pl.At(dwsf, dwpp, r)
}

// PeriodLoad is the period's predicted checkpoint bytes Bypass weighs
// against the buffer (Period.DWPP): the most of the last periods' bytes,
// the buffer's and the bypassed checkpoints' together (loads, oldest
// first; declared while none is measured, as PredictDWPP), or what this
// period has written to the buffer (dwsf) and sent straight to the PFS
// (bypassed) so far if more. The buffer's own history, what PlanPeriod
// plans its rates with, would not do: a period whose bypassing kept the
// buffer's share within S would predict a next period that fits, which
// then bypasses nothing until the buffer is full, its writers waiting for
// room, and bypasses again the period after.
func PeriodLoad(loads []float64, declared, dwsf, bypassed float64) float64 {
	return max(PredictDWPP(loads, declared), dwsf+bypassed)
}

// PredictDWPP predicts the next period's DWPP from the last periods'
// measured data written (oldest first): the largest of the last three,
// so that one light period does not leave the next to overflow. With no
// period measured yet, it is declared (what the grants announce).
func PredictDWPP(history []float64, declared float64) float64 {
	if len(history) == 0 {
		return declared
	}
	var m float64
	for _, h := range history[max(0, len(history)-3):] {
		m = max(m, h)
	}
	return m
}
