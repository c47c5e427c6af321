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

// TestGrouped: a Grouped resource shares between groups by weight, then
// within a group max-min; what a group's flow leaves goes to its group
// first; a flow without a group is a group of its own.
func TestGrouped(t *testing.T) {
	e := engine.New()
	m := New(e)
	r := m.NewResource("fwd", 100)
	r.Grouped = true
	p := m.NewResource("slow-target", 10)
	a := m.Start([]Use{{R: r, Group: "job:1"}, {R: p}}, 1e9, 0, 1, 0, nil, nil)
	b := m.Start([]Use{{R: r, Group: "job:1"}}, 1e9, 0, 1, 0, nil, nil)
	c := m.Start([]Use{{R: r, Group: "job:2"}}, 1e9, 0, 2, 0, nil, nil)
	if !near(a.Rate(), 10) || !near(b.Rate(), 40) || !near(c.Rate(), 50) {
		t.Fatalf("by job: a %v b %v c %v (want 10 40 50)", a.Rate(), b.Rate(), c.Rate())
	}
	d := m.Start([]Use{{R: r, Group: "rule:gold", Share: 3}}, 1e9, 0, 3, 0, nil, nil)
	// weights 1, 1, 3: job 1 and job 2 20 each, gold 60
	if !near(a.Rate()+b.Rate(), 20) || !near(c.Rate(), 20) || !near(d.Rate(), 60) {
		t.Fatalf("with a share of 3: a %v b %v c %v d %v", a.Rate(), b.Rate(), c.Rate(), d.Rate())
	}
	m.Cancel(c)
	x := m.Start([]Use{{R: r}}, 1e9, 10, 4, 0, nil, nil) // its own group, capped at 10
	// job 1 and gold share the 90 x leaves 1:3
	if !near(x.Rate(), 10) || !near(a.Rate()+b.Rate(), 22.5) || !near(d.Rate(), 67.5) {
		t.Fatalf("a capped group of its own: x %v job 1 %v gold %v", x.Rate(), a.Rate()+b.Rate(), d.Rate())
	}
	if !near(r.Used(), 100) {
		t.Fatalf("used %v", r.Used())
	}
	// groups share the resource's units: a flow using a quarter of a
	// unit per unit of its own (a striped job's part of a target) gets
	// half the target as the other job does, at four times the rate
	// (plain max-min, which the one-weight groups of their own once
	// fell back to, gave both 80: the striped job a fifth of the target)
	tgt := m.NewResource("target", 100)
	tgt.Grouped = true
	s := m.Start([]Use{{R: tgt, W: 0.25}}, 1e9, 0, 5, 0, nil, nil)
	o := m.Start([]Use{{R: tgt}}, 1e9, 0, 6, 0, nil, nil)
	if !near(s.Rate(), 200) || !near(o.Rate(), 50) {
		t.Fatalf("a quarter unit per unit: striped %v, other %v (want 200 and 50)", s.Rate(), o.Rate())
	}
}

// TestGroupedRandom: random flows over plain and Grouped resources (at
// most one Grouped resource per flow; a part of a unit per unit of flow
// now and then) get a weighted max-min allocation
// by groups: no resource carries more than its capacity, and every flow
// has a bottleneck — its cap; a full plain resource where no flow is
// faster; or a full Grouped resource where no group is ahead of its
// group by weight and no flow of its group is faster. An incremental
// model and a fresh one agree.
func TestGroupedRandom(t *testing.T) {
	fallbacks, recomputes := 0, uint64(0)
	for seed := int64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		e := engine.New()
		m := New(e)
		var plain, grouped []*Resource
		for i := 0; i < 1+r.Intn(4); i++ {
			plain = append(plain, m.NewResource(fmt.Sprintf("p%d", i), float64(1+r.Intn(100))))
		}
		for i := 0; i < 1+r.Intn(3); i++ {
			g := m.NewResource(fmt.Sprintf("g%d", i), float64(1+r.Intn(100)))
			g.Grouped = true
			grouped = append(grouped, g)
		}
		shares := map[string]float64{"": 1, "a": 1, "b": 2, "c": 0.5, "d": 4}
		keys := []string{"", "a", "b", "c", "d"}
		var live []*Flow
		for step := 0; step < 30; step++ {
			if len(live) > 0 && r.Intn(4) == 0 {
				k := r.Intn(len(live))
				m.Cancel(live[k])
				live = append(live[:k], live[k+1:]...)
				continue
			}
			var path []Use
			// a part of a unit per unit of the flow, now and then: a
			// striped flow's target (sim's chunked lockstep)
			w := func() float64 {
				if r.Intn(3) == 0 {
					return []float64{0.25, 0.5, 0.75}[r.Intn(3)]
				}
				return 0
			}
			if r.Intn(5) > 0 {
				k := keys[r.Intn(len(keys))]
				path = append(path, Use{R: grouped[r.Intn(len(grouped))], W: w(), Group: k, Share: shares[k]})
			}
			for _, i := range r.Perm(len(plain))[:r.Intn(min(3, len(plain))+1)] {
				path = append(path, Use{R: plain[i], W: w()})
			}
			if len(path) == 0 {
				path = append(path, Use{R: plain[0]})
			}
			c := 0.0
			if r.Intn(4) == 0 {
				c = float64(1 + r.Intn(40))
			}
			live = append(live, m.Start(path, 1e12, c, step, 0, nil, nil))
		}
		recomputes += m.Recomputes
		if m.GroupFallbacks > 0 {
			fallbacks += int(m.GroupFallbacks) // the allocation may be a fallback's
			continue
		}
		checkGrouped(t, seed, append(plain, grouped...), live)
		// a fresh model with the same flows
		e2 := engine.New()
		m2 := New(e2)
		rs2 := map[*Resource]*Resource{}
		for _, x := range append(plain, grouped...) {
			rs2[x] = m2.NewResource(x.Name, x.cap)
			rs2[x].Grouped = x.Grouped
		}
		var fresh []*Flow
		for _, f := range live {
			var path []Use
			for _, u := range f.Path {
				path = append(path, Use{R: rs2[u.R], W: u.W, Group: u.Group, Share: u.Share})
			}
			fresh = append(fresh, m2.Start(path, 1e12, f.Cap, f.Job, 0, nil, nil))
		}
		if m2.GroupFallbacks > 0 {
			fallbacks++
			continue
		}
		for i, f := range live {
			if g := fresh[i]; !near(f.Rate(), g.Rate()) {
				t.Fatalf("seed %d: flow %d incremental rate %v, fresh %v", seed, f.Job, f.Rate(), g.Rate())
			}
		}
	}
	// a fallback is rare: a group held both at its part and elsewhere,
	// the others' parts and its hold moving it back and forth
	if t.Logf("%d fallbacks in %d recomputations", fallbacks, recomputes); fallbacks*100 > int(recomputes) {
		t.Fatalf("%d of %d recomputations fell back to plain max-min", fallbacks, recomputes)
	}
}

func checkGrouped(t *testing.T, seed int64, rs []*Resource, flows []*Flow) {
	t.Helper()
	use := map[*Resource]float64{}
	type gk struct {
		r   *Resource
		key any
	}
	groupUse, groupW := map[gk]float64{}, map[gk]float64{}
	key := func(f *Flow, u Use) gk {
		if u.Group == "" {
			return gk{u.R, f}
		}
		return gk{u.R, u.Group}
	}
	for _, f := range flows {
		for _, u := range f.Path {
			use[u.R] += u.W * f.Rate()
			if u.R.Grouped {
				k := key(f, u)
				groupUse[k] += u.W * f.Rate()
				groupW[k] = max(u.Share, 1e-300)
				if u.Share == 0 {
					groupW[k] = 1
				}
			}
		}
	}
	for _, r := range rs {
		if use[r] > r.cap*(1+1e-9)+1e-9 {
			t.Fatalf("seed %d: %s carries %v > %v", seed, r.Name, use[r], r.cap)
		}
	}
	const tol = 1e-6
	for _, f := range flows {
		if f.Cap > 0 && near(f.Rate(), f.Cap) {
			continue
		}
		ok := false
		for _, u := range f.Path {
			if math.Abs(use[u.R]-u.R.cap) > tol*u.R.cap {
				continue
			}
			fastest := true
			k := key(f, u)
			for _, g := range u.R.users {
				var gu Use
				for _, x := range g.Path {
					if x.R == u.R {
						gu = x
					}
				}
				if u.R.Grouped && key(g, gu) != k {
					if groupUse[key(g, gu)]/groupW[key(g, gu)] > groupUse[k]/groupW[k]*(1+tol)+tol {
						fastest = false // a group ahead of f's by weight
					}
					continue
				}
				if g.Rate() > f.Rate()*(1+tol)+tol {
					fastest = false
				}
			}
			ok = ok || fastest
		}
		if !ok {
			for _, r := range rs {
				t.Logf("%s cap %v use %v grouped %v", r.Name, r.cap, use[r], r.Grouped)
			}
			for _, g := range flows {
				var p []string
				for _, u := range g.Path {
					p = append(p, fmt.Sprintf("%s/%s/%v/w%v", u.R.Name, u.Group, u.Share, u.W))
				}
				t.Logf("flow %d rate %v cap %v %v", g.Job, g.Rate(), g.Cap, p)
			}
			t.Fatalf("seed %d: flow %d (rate %v, cap %v) has no bottleneck", seed, f.Job, f.Rate(), f.Cap)
		}
	}
}
