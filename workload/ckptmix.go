package workload

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"time"
)

// A checkpoint mix is a burst-buffer workload (BBOS §VI, docs/bbos.md):
// applications that each write a checkpoint of Size bytes every Period,
// with a mean time between failures. The description is data, so the
// same mix drives the real daemons (`sluice bb replay`) and the simulator,
// and it is pure: its events and failures follow from the seed.

// CkptMix is a workload of checkpointing applications on a buffer.
type CkptMix struct {
	// Buffer is the capacity S the mix was sized for, Period the
	// planning period T, Periods how many are run.
	Buffer  int64
	Period  time.Duration
	Periods int
	// DWPP is the data written per period as a multiple of S; Congestion
	// how close the I/O jobs come ("low": spread evenly over the period,
	// "med": half the interval, "high": a tenth, the paper's scenarios).
	DWPP       float64
	Congestion string
	Apps       []CkptApp
	Seed       int64
}

// CkptApp is one checkpointing application.
type CkptApp struct {
	Name   string
	Size   int64         // bytes per checkpoint
	Period time.Duration // between its checkpoints
	Offset time.Duration // its first checkpoint's time
	MTBF   time.Duration
}

// CkptEvent is one I/O job: application App (index) writes its Version
// (counted from 1) at At.
type CkptEvent struct {
	App     int
	Version int
	At      time.Duration
}

// Failure is application App failing at At: it restarts from its newest
// checkpoint.
type Failure struct {
	App int
	At  time.Duration
}

// MixOptions shape a generated mix.
type MixOptions struct {
	Buffer  int64
	Size    int64 // bytes per checkpoint
	Period  time.Duration
	Periods int
	DWPP    float64 // × Buffer per period
	// Classes are the applications' checkpoint periods as divisors of
	// Period with their shares, e.g. {1: 1, 2: 1, 3: 1} (the paper's
	// 60, 30 and 20 minute periods at 1:1:1); nil: every application
	// checkpoints once per period.
	Classes    map[int]int
	Congestion string
	// MTBFMax bounds the applications' MTBF, drawn uniformly from
	// (MTBFMax/20, MTBFMax] (the paper draws from 0 to 20, 50 or 100
	// minutes).
	MTBFMax time.Duration
	Seed    int64
}

// congestion is the factor the paper applies to the even interval.
var congestion = map[string]float64{"low": 1, "med": 0.5, "high": 0.1}

// GenCkptMix builds a mix writing about DWPP·Buffer per period.
func GenCkptMix(o MixOptions) (CkptMix, error) {
	f, ok := congestion[o.Congestion]
	switch {
	case !ok:
		return CkptMix{}, fmt.Errorf("congestion %q: want low, med or high", o.Congestion)
	case o.Buffer <= 0 || o.Size <= 0 || o.Period <= 0 || o.Periods <= 0 || o.DWPP <= 0 || o.MTBFMax <= 0:
		return CkptMix{}, fmt.Errorf("a mix wants a buffer, a checkpoint size, a period, periods, a DWPP and an MTBF bound above 0")
	}
	classes := o.Classes
	if len(classes) == 0 {
		classes = map[int]int{1: 1}
	}
	var ks []int
	shares, perApp := 0, 0.0 // checkpoints per period of an average application
	for k, n := range classes {
		if k < 1 || n < 0 {
			return CkptMix{}, fmt.Errorf("class %d:%d: want a period divisor ≥ 1 and a share ≥ 0", k, n)
		}
		ks = append(ks, k)
		shares += n
	}
	sort.Ints(ks)
	for _, k := range ks {
		perApp += float64(k*classes[k]) / float64(shares)
	}
	apps := int(math.Round(o.DWPP * float64(o.Buffer) / (float64(o.Size) * perApp)))
	if apps < 1 {
		apps = 1
	}
	r := rand.New(rand.NewSource(o.Seed))
	m := CkptMix{Buffer: o.Buffer, Period: o.Period, Periods: o.Periods, DWPP: o.DWPP, Congestion: o.Congestion, Seed: o.Seed}
	// applications in classes by share (largest remainder), each class's
	// offsets evenly spread over its own period, compressed by congestion
	counts := map[int]int{}
	left := apps
	for _, k := range ks {
		counts[k] = apps * classes[k] / shares
		left -= counts[k]
	}
	for i := 0; left > 0; i, left = i+1, left-1 {
		counts[ks[i%len(ks)]]++
	}
	for _, k := range ks {
		every := o.Period / time.Duration(k)
		for i := 0; i < counts[k]; i++ {
			mtbf := time.Duration((0.05 + 0.95*r.Float64()) * float64(o.MTBFMax))
			m.Apps = append(m.Apps, CkptApp{Name: fmt.Sprintf("app%02d", len(m.Apps)), Size: o.Size, Period: every,
				Offset: time.Duration(f * float64(every) * float64(i) / float64(counts[k])), MTBF: mtbf.Round(time.Millisecond)})
		}
	}
	return m, nil
}

// Events are the mix's I/O jobs over its periods, in time order.
func (m CkptMix) Events() []CkptEvent {
	end := m.Period * time.Duration(m.Periods)
	var out []CkptEvent
	for i, a := range m.Apps {
		if a.Period <= 0 {
			continue
		}
		for v, t := 1, a.Offset; t < end; v, t = v+1, t+a.Period {
			out = append(out, CkptEvent{App: i, Version: v, At: t})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Failures draws each application's failures over the run, exponential
// with mean MTBF, from the mix's seed; a failure before the application's
// first checkpoint has nothing to restart from and is not drawn.
func (m CkptMix) Failures() []Failure {
	r := rand.New(rand.NewSource(m.Seed + 1))
	end := m.Period * time.Duration(m.Periods)
	var out []Failure
	for i, a := range m.Apps {
		if a.MTBF <= 0 {
			continue
		}
		for t := a.Offset + time.Duration(r.ExpFloat64()*float64(a.MTBF)); t < end; t += time.Duration(r.ExpFloat64() * float64(a.MTBF)) {
			out = append(out, Failure{App: i, At: t})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Restarts draws n applications to restart at the end of the run, each
// with a chance in proportion to its failure rate (1/MTBF), without
// repeats.
func (m CkptMix) Restarts(n int) []int {
	r := rand.New(rand.NewSource(m.Seed + 2))
	w := make([]float64, len(m.Apps))
	for i, a := range m.Apps {
		w[i] = 1 / max(a.MTBF.Seconds(), 1e-3)
	}
	var out []int
	for len(out) < min(n, len(m.Apps)) {
		var sum float64
		for _, x := range w {
			sum += x
		}
		x := r.Float64() * sum
		for i := range w {
			if x -= w[i]; x < 0 || i == len(w)-1 && w[i] > 0 {
				out = append(out, i)
				w[i] = 0
				break
			}
		}
	}
	return out
}
