package flow

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/sluice-hpc/sluice/sim/engine"
)

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-6*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// TestShareAndFinish: two flows on one resource share it equally; when
// the smaller ends the other gets everything.
func TestShareAndFinish(t *testing.T) {
	e := engine.New()
	m := New(e)
	r := m.NewResource("disk", 100)
	var ends []engine.Time
	done := func(f *Flow, now engine.Time) { ends = append(ends, now) }
	a := m.Start([]Use{{R: r}}, 100, 0, 1, 0, nil, done)
	b := m.Start([]Use{{R: r}}, 200, 0, 2, 0, nil, done)
	if !near(a.Rate(), 50) || !near(b.Rate(), 50) {
		t.Fatalf("rates %v %v", a.Rate(), b.Rate())
	}
	e.Run(-1)
	if len(ends) != 2 || !near(ends[0].Seconds(), 2) || !near(ends[1].Seconds(), 3) {
		t.Fatalf("ends %v", ends)
	}
	if !near(r.Busy(e.Now()), 300) {
		t.Fatalf("busy %v", r.Busy(e.Now()))
	}
}

// TestSlow: a flow slowed by k beside another job moves at 1/k of its
// share, the other takes what it leaves; a capped one at 1/k of its cap;
// alone again it runs at full speed.
func TestSlow(t *testing.T) {
	e := engine.New()
	m := New(e)
	r := m.NewResource("fwd", 40)
	r.Slow = func(f *Flow, users []*Flow) float64 {
		for _, u := range users {
			if f.Class == 1 && u.Job != f.Job {
				return 2
			}
		}
		return 1
	}
	var ends []engine.Time
	done := func(f *Flow, now engine.Time) { ends = append(ends, now) }
	a := m.Start([]Use{{R: r}}, 40, 0, 1, 1, nil, done)
	b := m.Start([]Use{{R: r}}, 20, 0, 2, 0, nil, done)
	if !near(a.Rate(), 10) || !near(b.Rate(), 30) || !near(r.Used(), 40) {
		t.Fatalf("shared: a %v b %v used %v", a.Rate(), b.Rate(), r.Used())
	}
	e.Run(-1)
	// b ends at 2/3 s (a moved 20/3), a moves the other 100/3 alone at 40
	if len(ends) != 2 || !near(ends[0].Seconds(), 2.0/3) || !near(ends[1].Seconds(), 1.5) {
		t.Fatalf("ends %v", ends)
	}
	c := m.Start([]Use{{R: r}}, 1e9, 5, 3, 1, nil, nil)
	d := m.Start([]Use{{R: r}}, 1e9, 0, 4, 0, nil, nil)
	if !near(c.Rate(), 2.5) || !near(d.Rate(), 37.5) {
		t.Fatalf("capped: c %v d %v", c.Rate(), d.Rate())
	}
}

// TestCapsWeightsAndCapacityChange: a capped flow leaves the rest to the
// others; an operation-weighted flow fills an operation resource first;
// a capacity change (a fail-slow device) re-shares at once.
func TestCapsWeightsAndCapacityChange(t *testing.T) {
	e := engine.New()
	m := New(e)
	bw := m.NewResource("bw", 100)
	ops := m.NewResource("ops", 10)
	a := m.Start([]Use{{R: bw}}, 1e9, 20, 1, 0, nil, nil)
	b := m.Start([]Use{{R: bw}}, 1e9, 0, 2, 0, nil, nil)
	if !near(a.Rate(), 20) || !near(b.Rate(), 80) {
		t.Fatalf("capped: %v %v", a.Rate(), b.Rate())
	}
	c := m.Start([]Use{{R: bw}, {R: ops, W: 0.5}}, 1e9, 0, 3, 0, nil, nil) // 0.5 op per byte: ≤ 20/s
	if !near(c.Rate(), 20) || !near(b.Rate(), 60) {
		t.Fatalf("weighted: a %v b %v c %v", a.Rate(), b.Rate(), c.Rate())
	}
	m.SetCapacity(bw, 30)
	if !near(a.Rate(), 10) || !near(b.Rate(), 10) || !near(c.Rate(), 10) {
		t.Fatalf("slowed: a %v b %v c %v", a.Rate(), b.Rate(), c.Rate())
	}
}

// TestMaxMinRandom: on random machines the rates are max-min fair
// (feasible, and every flow is at its cap or has a full resource on its
// path where no flow runs faster), and the incremental rates after a
// random history of starts and ends equal those of a fresh model given
// the surviving flows.
func TestMaxMinRandom(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		e := engine.New()
		m := New(e)
		nr := 1 + r.Intn(8)
		var rs []*Resource
		for i := 0; i < nr; i++ {
			rs = append(rs, m.NewResource(string(rune('a'+i)), float64(1+r.Intn(100))))
		}
		type spec struct {
			path []Use
			cap  float64
		}
		var live []*Flow
		var specs []spec
		for step := 0; step < 40; step++ {
			if len(live) > 0 && r.Intn(3) == 0 {
				k := r.Intn(len(live))
				m.Cancel(live[k])
				live = append(live[:k], live[k+1:]...)
				specs = append(specs[:k], specs[k+1:]...)
				continue
			}
			var path []Use
			for _, i := range r.Perm(nr)[:1+r.Intn(min(3, nr))] {
				w := 1.0
				if r.Intn(4) == 0 {
					w = 0.5 + r.Float64()*2
				}
				path = append(path, Use{R: rs[i], W: w})
			}
			c := 0.0
			if r.Intn(3) == 0 {
				c = float64(1 + r.Intn(50))
			}
			live = append(live, m.Start(append([]Use(nil), path...), 1e12, c, step, 0, nil, nil))
			specs = append(specs, spec{path, c})
		}
		checkMaxMin(t, seed, rs, live)
		// a fresh model with the surviving flows
		e2 := engine.New()
		m2 := New(e2)
		rs2 := map[*Resource]*Resource{}
		for _, x := range rs {
			rs2[x] = m2.NewResource(x.Name, x.cap)
		}
		for i, sp := range specs {
			var path []Use
			for _, u := range sp.path {
				path = append(path, Use{R: rs2[u.R], W: u.W})
			}
			m2.Start(path, 1e12, sp.cap, i, 0, nil, nil)
		}
		// the same flow (by its Job number) in both
		var fresh []*Flow
		seen := map[*Flow]bool{}
		for _, x := range rs {
			for _, f := range rs2[x].users {
				if !seen[f] {
					seen[f] = true
					fresh = append(fresh, f)
				}
			}
		}
		byJob := map[int]*Flow{}
		for _, f := range fresh {
			byJob[f.Job] = f
		}
		for i, f := range live {
			if g := byJob[i]; g == nil || !near(f.Rate(), g.Rate()) {
				t.Fatalf("seed %d: flow %d incremental rate %v, fresh %v", seed, i, f.Rate(), g)
			}
		}
	}
}

func checkMaxMin(t *testing.T, seed int64, rs []*Resource, flows []*Flow) {
	t.Helper()
	use := map[*Resource]float64{}
	for _, f := range flows {
		for _, u := range f.Path {
			use[u.R] += u.W * f.Rate()
		}
	}
	for _, r := range rs {
		if use[r] > r.cap*(1+1e-9)+1e-9 {
			t.Fatalf("seed %d: %s carries %v > %v", seed, r.Name, use[r], r.cap)
		}
	}
	for i, f := range flows {
		if f.Cap > 0 && near(f.Rate(), f.Cap) {
			continue
		}
		ok := false
		for _, u := range f.Path {
			if !near(use[u.R], u.R.cap) {
				continue
			}
			fastest := true
			for _, g := range u.R.users {
				if g.Rate() > f.Rate()*(1+1e-9)+1e-9 {
					fastest = false
				}
			}
			if fastest {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("seed %d: flow %d (rate %v, cap %v) has no bottleneck", seed, i, f.Rate(), f.Cap)
		}
	}
}

// TestLocality: a flow event recomputes only its component: flows on
// other resources are not visited.
func TestLocality(t *testing.T) {
	e := engine.New()
	m := New(e)
	for i := 0; i < 1000; i++ {
		r := m.NewResource("r", 10)
		m.Start([]Use{{R: r}}, 1e9, 0, i, 0, nil, nil)
	}
	before := m.FlowsTouched
	r := m.NewResource("x", 10)
	m.Start([]Use{{R: r}}, 1e9, 0, 0, 0, nil, nil)
	if d := m.FlowsTouched - before; d != 1 {
		t.Fatalf("a start on its own resource visited %d flows", d)
	}
}

// BenchmarkFlowEvent: the cost of one flow start and its end on a
// forwarding node shared with 8 other flows, with B flows elsewhere on
// the machine (each on resources of its own). It must not grow with B.
func BenchmarkFlowEvent(b *testing.B) {
	for _, bg := range []int{0, 1000, 100000} {
		b.Run(fmt.Sprintf("elsewhere=%d", bg), func(b *testing.B) {
			e := engine.New()
			m := New(e)
			for i := 0; i < bg; i++ {
				r := m.NewResource(fmt.Sprintf("bg%d", i), 1e9)
				m.Start([]Use{{R: r}}, 1e30, 0, i, 0, nil, nil)
			}
			fwd := m.NewResource("fwd", 2.5e9)
			st := m.NewResource("storage", 5e9)
			for i := 0; i < 8; i++ {
				m.Start([]Use{{R: fwd}, {R: st}}, 1e30, 1e8*float64(i+1), bg+i, 0, nil, nil)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f := m.Start([]Use{{R: fwd}, {R: st}}, 1e30, 0, -1, 0, nil, nil)
				m.Cancel(f)
			}
			b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "flow-events/s")
		})
	}
}
