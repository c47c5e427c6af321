// Package flow is the simulator's flow-level resource model (after
// SimGrid's): a transfer is a flow of some amount (bytes, or operations)
// over a path of resources, each with a capacity per second; the rates
// of the flows sharing resources are their max-min fair shares
// (progressive filling, each flow possibly capped on its own, e.g. by a
// QoS rule or its compute nodes' links). A flow may weigh on a resource
// more or less than one unit per unit moved (Use.W: operations per byte
// on an operation-rate resource, say). A Grouped resource shares between
// groups of flows first (weighted max-min, Use.Group and Use.Share: a
// server that fair-queues by job or by QoS rule), then max-min within a
// group.
//
// Rates are recomputed incrementally: a flow that starts or ends, or a
// resource whose capacity changes, recomputes only the connected component
// of resources and flows it belongs to, never the whole machine. A
// resource's capacity may change over time (fail-slow devices, aging
// storage targets, maintenance) and may depend on the flows it carries
// (Derate: interference between request classes).
//
// It owns flows, resources and their rates. It schedules its own
// completion events on the engine it is given; it knows nothing of jobs,
// machines or policies, and does no I/O.
package flow

import (
	"math"

	"github.com/sluice-hpc/sluice/sim/engine"
)

// Resource is a shared capacity: a link, a forwarding node's bandwidth
// or operation rate, a storage target.
type Resource struct {
	Name string
	// Derate, if set, scales the capacity by a factor in (0, 1] that
	// depends on the flows using the resource (interference that costs
	// every flow alike).
	Derate func(users []*Flow) float64
	// Slow, if set, gives flow f a factor k ≥ 1 that depends on the
	// flows using the resource (interference that costs one flow more
	// than another): f moves at 1/k of its max-min share and the others
	// share what it leaves (max-min again with f capped there). A flow's
	// factor is the largest of its path's.
	Slow func(f *Flow, users []*Flow) float64
	// Grouped makes the resource share between groups of flows before
	// flows (a server that fair-queues its requests by job or by QoS
	// rule, as policy/qos's scheduler does): the groups get weighted
	// max-min shares of the capacity (weight Use.Share; shares of its
	// units: a flow using W units per unit of its own counts W) and a
	// group's flows share its part max-min. A flow without a Use.Group
	// is a group of its own of weight 1.
	Grouped bool

	cap   float64 // units per second
	users []*Flow

	// utilisation: used is the sum of w×rate of its flows since last,
	// busy the integral of used up to last
	used float64
	busy float64
	last engine.Time

	// scratch of one recomputation
	mark  uint64
	avail float64 // capacity left for the unfrozen flows
	load  float64 // weight of the unfrozen flows
	// a Grouped resource's groups in a recomputation, in the order their
	// first flow uses it, and its capacity (Derate applied)
	groups []*group
	byKey  map[any]*group
	pool   []*group // groups to reuse
	whole  float64
}

// group is one group of flows on a Grouped resource in a recomputation:
// its part of the resource is a resource of its own (sub), which its
// flows use in the resource's stead.
type group struct {
	sub     Resource
	ws      []float64 // the weight on the resource of each of sub.users
	w       float64
	limited bool // held below its weighted share elsewhere: its part is what it uses
}

// Capacity is the resource's capacity per second (before Derate).
func (r *Resource) Capacity() float64 { return r.cap }

// Used is the resource's use per second now (≤ its capacity).
func (r *Resource) Used() float64 { return r.used }

// Users is how many flows use the resource now.
func (r *Resource) Users() int { return len(r.users) }

// Busy is the integral of the resource's use up to now (units moved).
func (r *Resource) Busy(now engine.Time) float64 {
	return r.busy + r.used*(now-r.last).Seconds()
}

func (r *Resource) account(now engine.Time) {
	r.busy += r.used * (now - r.last).Seconds()
	r.last = now
}

// Use is one resource of a flow's path and the flow's weight on it.
type Use struct {
	R *Resource
	W float64 // units of the resource per unit of the flow (0 means 1)
	// Group and Share are the flow's group on a Grouped resource and the
	// group's weight there (0 means 1; the first flow's counts). A flow
	// with Group "" is a group of its own.
	Group string
	Share float64

	sub *Resource // the group's part of R in a recomputation (Grouped R)
}

// weight is u's group's weight (Share; 0 means 1).
func (u *Use) weight() float64 {
	if u.Share > 0 {
		return u.Share
	}
	return 1
}

// at is the resource u stands for in a recomputation: R, or its group's
// part of R.
func (u *Use) at() *Resource {
	if u.sub != nil {
		return u.sub
	}
	return u.R
}

// Flow is one transfer.
type Flow struct {
	Path []Use
	Cap  float64 // the flow's own rate limit (0: none)
	// Job and Class describe the flow to Derate functions.
	Job   int
	Class int
	// Tag is the caller's.
	Tag any

	amount    float64
	remaining float64
	rate      float64
	last      engine.Time
	version   uint64
	timer     engine.Timer // its completion's slot in the queue (0: none yet)
	done      func(f *Flow, now engine.Time)
	pos       []int // index in each resource's users
	mark      uint64
	frozen    bool
	next      float64   // the rate of a recomputation
	k         float64   // Slow's factor in the last recomputation (≥ 1)
	limit     float64   // the cap of a recomputation's pass
	frozeAt   *Resource // where a fill froze it (nil: at its limit)
	finished  bool
	m         *Model
}

// Rate is the flow's rate now.
func (f *Flow) Rate() float64 { return f.rate }

// Amount is what the flow was started with.
func (f *Flow) Amount() float64 { return f.amount }

// Remaining is what is left to move, as of now.
func (f *Flow) Remaining(now engine.Time) float64 {
	return math.Max(0, f.remaining-f.rate*(now-f.last).Seconds())
}

// Model holds the resources and flows of one simulation.
type Model struct {
	e     *engine.Engine
	epoch uint64

	// statistics
	Recomputes   uint64 // component recomputations
	FlowsTouched uint64 // flows visited by them, in all
	// GroupRounds counts the rounds of fill on components with Grouped
	// resources; GroupFallbacks the recomputations whose groups found no
	// fixed point (shared plain max-min instead; see share).
	GroupRounds, GroupFallbacks uint64
	active                      int

	// scratch
	resBuf    []*Resource
	flowBuf   []*Flow
	cappedBuf []*Flow
	partBuf   []*Resource
	heap      levels
}

// level is the level at which a resource fills.
type level struct {
	r *Resource
	x float64
}

type levels []level

func (h levels) Len() int { return len(h) }
func (h levels) Less(i, j int) bool {
	return h[i].x < h[j].x || h[i].x == h[j].x && h[i].r.Name < h[j].r.Name
}
func (h levels) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *levels) Push(x any)   { *h = append(*h, x.(level)) }
func (h *levels) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// New returns a model that schedules on e.
func New(e *engine.Engine) *Model { return &Model{e: e} }

// Active is how many flows are in progress.
func (m *Model) Active() int { return m.active }

// NewResource returns a resource of capacity c per second.
func (m *Model) NewResource(name string, c float64) *Resource {
	return &Resource{Name: name, cap: c, last: m.e.Now()}
}

// SetCapacity changes r's capacity from now on.
func (m *Model) SetCapacity(r *Resource, c float64) {
	r.cap = c
	m.recompute([]*Resource{r})
}

// Start starts a flow of amount over path, capped at cap per second (0:
// none); done is called when it has moved everything. A flow of nothing
// completes at once (done is called from an event at the current time).
func (m *Model) Start(path []Use, amount, cap float64, job, class int, tag any, done func(f *Flow, now engine.Time)) *Flow {
	now := m.e.Now()
	f := &Flow{Path: path, Cap: cap, Job: job, Class: class, Tag: tag, amount: amount, remaining: amount, last: now, done: done, m: m, k: 1}
	for i := range f.Path {
		if f.Path[i].W == 0 {
			f.Path[i].W = 1
		}
	}
	m.active++
	if amount <= 0 || len(path) == 0 && cap <= 0 {
		// nothing to move, or nothing limits it: done at once
		f.version++
		m.e.At(now, completion{f, f.version})
		return f
	}
	f.pos = make([]int, len(path))
	seeds := make([]*Resource, 0, len(path))
	for i, u := range f.Path {
		f.pos[i] = len(u.R.users)
		u.R.users = append(u.R.users, f)
		seeds = append(seeds, u.R)
	}
	if len(path) == 0 {
		m.setRate(f, cap, now)
		return f
	}
	m.recompute(seeds)
	return f
}

// Cancel ends f now without calling its done function.
func (m *Model) Cancel(f *Flow) {
	if f.finished {
		return
	}
	m.remove(f)
}

type completion struct {
	f *Flow
	v uint64
}

func (c completion) Fire(now engine.Time) {
	f := c.f
	if f.finished || c.v != f.version {
		return // superseded by a newer rate
	}
	m := f.m
	left := f.Remaining(now)
	if left > 1e-6*math.Max(1, f.amount) && f.rate > 0 {
		// rounding: not quite there yet
		f.remaining, f.last = left, now
		m.schedule(f, now)
		return
	}
	if left > 1e-6*math.Max(1, f.amount) {
		return // stalled meanwhile (rate 0): a later recomputation reschedules
	}
	m.remove(f)
	if f.done != nil {
		f.done(f, now)
	}
}

// remove takes f off its resources and recomputes what it shared.
func (m *Model) remove(f *Flow) {
	now := m.e.Now()
	f.finished = true
	f.version++
	if f.timer != 0 {
		m.e.Release(f.timer)
		f.timer = 0
	}
	m.active--
	f.remaining = f.Remaining(now)
	f.last = now
	seeds := make([]*Resource, 0, len(f.Path))
	for i, u := range f.Path {
		r := u.R
		r.account(now)
		r.used -= u.W * f.rate
		if r.used < 0 || len(r.users) == 1 {
			r.used = 0
		}
		// swap-remove
		k := f.pos[i]
		last := r.users[len(r.users)-1]
		r.users[k] = last
		for j, lu := range last.Path {
			if lu.R == r && last.pos[j] == len(r.users)-1 {
				last.pos[j] = k
				break
			}
		}
		r.users[len(r.users)-1] = nil // (let go, as the scratch below)
		r.users = r.users[:len(r.users)-1]
		seeds = append(seeds, r)
	}
	f.rate = 0
	if len(seeds) > 0 {
		m.recompute(seeds)
	}
}

func (m *Model) setRate(f *Flow, rate float64, now engine.Time) {
	f.remaining = f.Remaining(now)
	f.last = now
	if rate == f.rate && f.version > 0 {
		return // its completion event stands
	}
	f.rate = rate
	m.schedule(f, now)
}

// schedule puts f's completion at the time its rate gives, in place of
// the one it had (engine.Timer: a flow keeps one event in the queue
// however often its rate changes).
func (m *Model) schedule(f *Flow, now engine.Time) {
	f.version++
	d := math.Inf(1)
	if f.rate > 0 {
		d = math.Ceil(f.remaining / f.rate * float64(engine.Second))
	}
	if d > math.MaxInt64/4 {
		// stalled, or never in any run: a later rate reschedules it
		if f.timer != 0 {
			m.e.Clear(f.timer)
		}
		return
	}
	if f.timer == 0 {
		f.timer = m.e.NewTimer()
	}
	m.e.Set(f.timer, now+engine.Time(d), completion{f, f.version})
}
