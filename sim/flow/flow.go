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
	"container/heap"
	"math"
	"sort"

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

// recompute gives the flows of the components of seeds their max-min
// fair rates.
func (m *Model) recompute(seeds []*Resource) {
	now := m.e.Now()
	m.epoch++
	ep := m.epoch
	res := m.resBuf[:0]
	flows := m.flowBuf[:0]
	for _, r := range seeds {
		if r.mark != ep {
			r.mark = ep
			res = append(res, r)
		}
	}
	for i := 0; i < len(res); i++ {
		for _, f := range res[i].users {
			if f.mark == ep {
				continue
			}
			f.mark = ep
			flows = append(flows, f)
			for _, u := range f.Path {
				if u.R.mark != ep {
					u.R.mark = ep
					res = append(res, u.R)
				}
			}
		}
	}
	m.Recomputes++
	m.FlowsTouched += uint64(len(flows))
	slowed := false
	for _, r := range res {
		r.account(now)
	}
	for _, f := range flows {
		f.k = 1
		for _, u := range f.Path {
			if u.R.Slow != nil {
				f.k = math.Max(f.k, u.R.Slow(f, u.R.users))
			}
		}
		f.limit = f.Cap
		slowed = slowed || f.k > 1
	}
	m.share(res, flows)
	if slowed {
		// a slowed flow moves at 1/k of its share; what it leaves goes
		// to the others
		for _, f := range flows {
			if f.k > 1 {
				f.limit = f.next / f.k
			}
		}
		m.share(res, flows)
	}
	for _, r := range res {
		r.used = 0
	}
	for _, f := range flows {
		x := f.next
		for _, u := range f.Path {
			u.R.used += u.W * x
		}
		m.setRate(f, x, now)
	}
	// the scratch let go of what it held: a finished flow left in a
	// buffer's backing array kept its done func, and through it the
	// simulator's job, alive as long as the model (93 % of the heap at
	// the peak of the 40,960-node run; sim TestFinishedJobsLetGo)
	clear(res)
	clear(flows)
	m.resBuf, m.flowBuf = res[:0], flows[:0]
}

// maxGroupRounds bounds the rounds of share on a component with Grouped
// resources.
const maxGroupRounds = 64

// share gives flows their rates (f.next) over res: max-min fair (fill),
// and on a Grouped resource weighted max-min between its groups first.
// Each group's part of a Grouped resource is a resource of its own that
// its flows use in the whole's stead. The parts start at the weighted
// shares of the whole; a round of fill finds the groups that use less
// than their part (held elsewhere: by their caps, other resources or
// their own flows' shares): their part becomes what they use and the
// others share the rest by weight; a group held at a part below the
// others' level by weight gets its share back. Rounds go on until no
// part changes (at most maxGroupRounds): exact when a flow crosses one
// Grouped resource, an approximation when it crosses several.
func (m *Model) share(res []*Resource, flows []*Flow) {
	var grouped []*Resource
	all := m.partBuf[:0]
	defer func() {
		clear(all) // no finished flow kept alive by the scratch
		m.partBuf = all[:0]
	}()
	for _, r := range res {
		all = append(all, r)
		if r.Grouped && len(r.users) > 0 {
			grouped = append(grouped, r)
		}
	}
	if len(grouped) == 0 {
		m.fill(res, flows)
		return
	}
	all = all[:0]
	for _, r := range res {
		if !r.Grouped || len(r.users) == 0 {
			all = append(all, r)
		}
	}
	k := 0
	for _, r := range grouped {
		r.whole = r.cap
		if r.Derate != nil {
			r.whole *= r.Derate(r.users)
		}
		if !r.regroup() {
			// a group per flow, all of one weight and one use per unit: plain max-min
			for _, f := range r.users {
				for i := range f.Path {
					if f.Path[i].R == r {
						f.Path[i].sub = nil
					}
				}
			}
			r.ungroup()
			all = append(all, r)
			continue
		}
		grouped[k] = r
		k++
		for _, g := range r.groups {
			all = append(all, &g.sub)
		}
	}
	grouped = grouped[:k]
	if len(grouped) == 0 {
		m.fill(all, flows)
		return
	}
	for round := 0; ; round++ {
		for _, r := range grouped {
			left, w := r.unlimited()
			for _, g := range r.groups {
				if !g.limited {
					g.sub.cap = left * g.w / w
				}
			}
		}
		m.fill(all, flows)
		m.GroupRounds++
		if round == maxGroupRounds-1 {
			// no fixed point: the groups' flows share the whole
			// resource plain max-min instead (feasible, and leaves
			// nothing idle that a flow could use)
			m.GroupFallbacks++
			for _, f := range flows {
				for i := range f.Path {
					f.Path[i].sub = nil
				}
			}
			m.fill(res, flows)
			break
		}
		changed := false
		for _, r := range grouped {
			left, w := r.unlimited()
			for _, g := range r.groups {
				used := 0.0
				for i, f := range g.sub.users {
					used += g.ws[i] * f.next
				}
				held := false // a flow of the group froze at its part
				for _, f := range g.sub.users {
					held = held || f.frozeAt == &g.sub
				}
				switch {
				case !g.limited && used < g.sub.cap*(1-1e-9)-1e-12,
					g.limited && used < g.sub.cap*(1-1e-6)-1e-12:
					// its part is what it uses, and a hair more: a
					// flow held both elsewhere and at its part at the
					// same level freezes elsewhere first (not held)
					g.limited, g.sub.cap, changed = true, used*(1+1e-7)+1e-12*r.whole, true
				case g.limited && held && (w == 0 && left > 1e-9*r.whole ||
					w > 0 && g.sub.cap < left/w*g.w*(1-1e-9)-1e-12):
					// at its part, which is below the others' level
					// by weight, or with the resource not full
					g.limited, changed = false, true
				}
			}
		}
		if !changed {
			break
		}
	}
	for _, f := range flows {
		for i := range f.Path {
			f.Path[i].sub = nil
		}
	}
	for _, r := range grouped {
		r.ungroup()
	}
}

// regroup sorts a Grouped resource's flows into its groups (r.groups,
// in the order of their first flow; each flow's use of r points at its
// group's part) and says whether grouping matters: false when there is
// one group, or every flow is a group of its own and all weigh the same
// (plain max-min then).
func (r *Resource) regroup() bool {
	if r.oneGroup() {
		return false
	}
	r.groups = r.groups[:0]
	if r.byKey == nil {
		r.byKey = map[any]*group{}
	}
	clear(r.byKey)
	matters := false
	for _, f := range r.users {
		for i := range f.Path {
			u := &f.Path[i]
			if u.R != r {
				continue
			}
			var key any = u.Group
			if u.Group == "" {
				key = f
			}
			g := r.byKey[key]
			if g == nil {
				if n := len(r.groups); n < len(r.pool) {
					g = r.pool[n]
				} else {
					g = &group{}
					r.pool = append(r.pool, g)
				}
				g.w, g.limited = u.weight(), false
				g.sub = Resource{Name: r.Name, users: g.sub.users[:0]}
				g.ws = g.ws[:0]
				r.byKey[key] = g
				r.groups = append(r.groups, g)
				// groups of their own of one weight are plain max-min
				// only if each flow uses as much of r per unit: groups
				// share r's units, plain max-min the flows' rates
				first := r.groups[0]
				matters = matters || g.w != first.w || len(first.ws) > 0 && u.W != first.ws[0]
			} else {
				matters = true // a group of several flows
			}
			g.sub.users = append(g.sub.users, f)
			g.ws = append(g.ws, u.W)
			u.sub = &g.sub
		}
	}
	return matters && len(r.groups) > 1
}

// ungroup forgets a recomputation's groups (and the flows they held).
func (r *Resource) ungroup() {
	for _, g := range r.groups {
		clear(g.sub.users)
		g.sub.users = g.sub.users[:0]
	}
	r.groups = r.groups[:0]
	clear(r.byKey)
}

// oneGroup says, without sorting them, whether a Grouped resource's flows
// are all of one group, or all groups of their own of one weight and
// one use per unit of flow (Use.W).
func (r *Resource) oneGroup() bool {
	var first *Use
	for _, f := range r.users {
		for i := range f.Path {
			u := &f.Path[i]
			if u.R != r {
				continue
			}
			if first == nil {
				first = u
				continue
			}
			if u.Group != first.Group || u.Group == "" && (u.weight() != first.weight() || u.W != first.W) {
				return false
			}
		}
	}
	return true
}

// unlimited is what a Grouped resource leaves to its groups not limited
// elsewhere, and their weight in all.
func (r *Resource) unlimited() (left, w float64) {
	left = r.whole
	for _, g := range r.groups {
		if g.limited {
			left -= g.sub.cap
		} else {
			w += g.w
		}
	}
	return math.Max(0, left), w
}

// fill gives flows their max-min fair rates (f.next) over res, each
// flow capped at its limit (0: none): progressive filling. Every
// unfrozen flow runs at the same level x; x rises until a resource fills
// (its unfrozen flows freeze at x) or a flow reaches its limit (it
// freezes there). Resources wait in a heap on the level at which they
// fill, limited flows in order of limit.
func (m *Model) fill(res []*Resource, flows []*Flow) {
	for _, r := range res {
		c := r.cap
		if r.Derate != nil && len(r.users) > 0 {
			c *= r.Derate(r.users)
		}
		r.avail, r.load, r.used = c, 0, 0
	}
	for _, f := range flows {
		for i := range f.Path {
			f.Path[i].at().load += f.Path[i].W
		}
	}
	capped := m.cappedBuf[:0]
	for _, f := range flows {
		f.frozen = false
		if f.limit > 0 {
			capped = append(capped, f)
		}
	}
	sort.Slice(capped, func(i, j int) bool { return capped[i].limit < capped[j].limit })
	h := m.heap[:0]
	for _, r := range res {
		if r.load > 1e-12 {
			h = append(h, level{r, r.avail / r.load})
		}
	}
	heap.Init(&h)
	freeze := func(f *Flow, x float64, at *Resource) {
		f.frozen, f.frozeAt = true, at
		f.next = x
		for i := range f.Path {
			u := &f.Path[i]
			r := u.at()
			r.avail = math.Max(0, r.avail-u.W*x)
			r.load -= u.W
			if r.load > 1e-12 {
				heap.Push(&h, level{r, r.avail / r.load})
			} else {
				r.load = 0
			}
		}
	}
	ci := 0
	for {
		for ci < len(capped) && capped[ci].frozen {
			ci++
		}
		// the lowest resource level still current
		for h.Len() > 0 {
			top := h[0]
			if top.r.load > 1e-12 && top.x == top.r.avail/top.r.load {
				break
			}
			heap.Pop(&h)
		}
		if h.Len() == 0 && ci == len(capped) {
			break
		}
		if ci < len(capped) && (h.Len() == 0 || capped[ci].limit <= h[0].x) {
			f := capped[ci]
			ci++
			freeze(f, f.limit, nil)
			continue
		}
		top := heap.Pop(&h).(level)
		for _, f := range top.r.users {
			if !f.frozen {
				freeze(f, math.Max(top.x, 0), top.r)
			}
		}
	}
	clear(capped)
	clear(h)
	m.cappedBuf, m.heap = capped[:0], h[:0]
}
