package flow

import (
	"container/heap"
	"math"
	"sort"
)

// Max-min fair sharing: rates recomputed over the resources a change
// touches, with groups of flows capped together.

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
			changed = r.limitGroups() || changed
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

// limitGroups marks which of r's groups are limited by their own use
// (their part is what they use) after a round of filling, and frees
// those held at a part below the others' level; it says whether any
// changed.
func (r *Resource) limitGroups() bool {
	changed := false
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
	return changed
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
