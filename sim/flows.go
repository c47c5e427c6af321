package sim

import (
	"fmt"
	"math"

	"github.com/sluice-hpc/sluice/policy/qos"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/flow"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// A phase's flows: each rank's I/O through its forwarding nodes, the
// metadata service and the storage targets, as flow.Model paths.

// targetBW is storage target t's bandwidth, aged: with Spread > 1 the
// targets' speeds are spread evenly from TargetBW/Spread to TargetBW, in
// an order that mixes groups (target t's rank is a fixed permutation).
func targetBW(m *machine.Machine, t int) float64 {
	if len(m.Storage.TargetBWs) > 0 {
		return m.Storage.TargetBWs[t]
	}
	n := m.Storage.Groups * m.Storage.Targets
	if m.Storage.Spread <= 1 || n <= 1 {
		return m.Storage.TargetBW
	}
	rank := (t * 7919) % n // 7919 is prime: a permutation unless n is a multiple
	if n%7919 == 0 {
		rank = t
	}
	lo := m.Storage.TargetBW / m.Storage.Spread
	return lo + (m.Storage.TargetBW-lo)*float64(rank)/float64(n-1)
}

// interference is a forwarding node's capacity factor for the flows it
// carries: the worst pair of classes of different jobs (machine's
// Interference).
func (s *Sim) interference(users []*flow.Flow) float64 {
	f := 1.0
	for i, a := range users {
		for _, b := range users[i+1:] {
			if a.Job != b.Job {
				ca, cb := s.m.Interference.Classes[a.Class], s.m.Interference.Classes[b.Class]
				f = math.Min(f, s.m.Interference.Factor(ca, cb))
			}
		}
	}
	return f
}

// slow is flow f's slowdown beyond its share of a forwarding node's
// resources: the machine's interference factor of f's class beside the
// classes of the other jobs there (the largest counts; 1 alone). A
// replayed run's setup traffic is not slowed (the factors are calibrated
// on jobs' own I/O); it slows the others as its job's class does.
func (s *Sim) slow(f *flow.Flow, users []*flow.Flow) float64 {
	if f.Tag == setupTag {
		return 1
	}
	k, seen := 1.0, false
	ca := s.m.Interference.Classes[f.Class]
	for _, u := range users {
		if u.Job == f.Job {
			continue
		}
		w := s.m.Interference.Slowdown(ca, s.m.Interference.Classes[u.Class])
		if !seen || w > k {
			k, seen = w, true
		}
	}
	return k
}

// flows starts the flows of phase ph of j over the forwarding nodes per:
// for each forwarding node, its I/O nodes' files are placed on the
// targets of its storage group by policy/place (in at most a few units
// per node: the policy is called per unit), and one flow per target
// carries their bytes over [the nodes' links, the forwarding node, the
// target]; the metadata operations go over [the forwarding node's
// operation rate, the metadata service]. res maps the machine's
// resources to the model's (the machine's own, or copies for a run
// alone); links gives the links resource of a forwarding node; placed
// is the placement charge of each target and written what each has
// written of it by now (nil: nothing, a run alone). wrote is what j has
// written to each target in this run: its writes add to it, and a read
// of what it wrote (Job.ReadBack) goes to those targets in those
// proportions, through the forwarding nodes it has now (a job moved by
// dfra.Remap after writing reads its data where it left it).
func (s *Sim) flows(j *job, per []fwdShare, ph phase, fm *flow.Model, res func(*flow.Resource) *flow.Resource,
	links func(fwd int, nodes float64) *flow.Resource, placed, wrote []float64, mv *memView, written func(t int) float64, done func(*flow.Flow, engine.Time)) []*flow.Flow {
	pf := &phaseFlows{s: s, j: j, ph: ph, fm: fm, res: res, placed: placed, wrote: wrote, mv: mv, written: written, done: done,
		class: s.classes[j.spec.Class]}
	if ph.setup {
		pf.tag = setupTag
	}
	var out []*flow.Flow
	for _, fs := range per {
		share := fs.nodes / float64(j.nIO)
		if b := ph.bytes * share; b > 0 {
			var head []flow.Use
			if !ph.setup { // a setup phase is held back by neither the links nor the job's own limits
				head = []flow.Use{{R: links(fs.fwd, fs.nodes)}}
			}
			out = append(out, pf.data(fs, head, b)...)
		}
		out = append(out, pf.ops(fs, share)...)
	}
	return out
}

// phaseFlows starts the flows of one phase of job j (Sim.flows).
type phaseFlows struct {
	s       *Sim
	j       *job
	ph      phase
	fm      *flow.Model
	res     func(*flow.Resource) *flow.Resource
	placed  []float64
	wrote   []float64
	mv      *memView
	written func(t int) float64
	done    func(*flow.Flow, engine.Time)
	class   int
	tag     any
}

// dataPath is where a forwarding node's share of the phase's bytes goes:
// the node, its links first (head), under the job's data rule as group
// key with weight w.
type dataPath struct {
	fs   fwdShare
	head []flow.Use
	rule int
	key  string
	w    float64
}

// data starts the flows of b bytes through forwarding node share fs.
func (pf *phaseFlows) data(fs fwdShare, head []flow.Use, b float64) []*flow.Flow {
	s, j, ph := pf.s, pf.j, pf.ph
	dp := dataPath{fs: fs, head: head, rule: s.rule(j, dataClass(ph))}
	dp.key, dp.w = s.group(j, dp.rule)
	g := fs.fwd % s.m.Storage.Groups
	var parts []targetBytes
	if ph.read && j.spec.ReadBack {
		var onMem []float64
		if pf.mv != nil {
			onMem = pf.mv.onMem
		}
		parts = readBack(pf.wrote, onMem, b)
		if s.res.Mem != nil && !pf.mv.alone {
			for _, p := range parts {
				if p.mem {
					s.res.Mem.ReadMem += p.bytes
				}
			}
		}
	}
	switch {
	case parts != nil:
		return pf.toParts(dp, parts, b)
	case pf.mv != nil && !ph.read && !ph.setup:
		return pf.toMemFirst(dp, g, b)
	}
	return pf.toPFS(dp, g, b)
}

// toMemFirst puts b bytes on the mem tier first (sim/memtier.go), the
// rest waiting for room there or spilling to the PFS.
func (pf *phaseFlows) toMemFirst(dp dataPath, g int, b float64) []*flow.Flow {
	s, j, mv := pf.s, pf.j, pf.mv
	var out []*flow.Flow
	onMem, file, wait := s.memPlace(j, mv, g, b, s.e.Now())
	toMem := func(x float64) *flow.Flow {
		f := pf.toParts(dp, []targetBytes{{t: g, bytes: x, mem: true}}, x)[0]
		if file != nil {
			if j.memFlows == nil {
				j.memFlows = map[*flow.Flow]*memFile{}
			}
			j.memFlows[f] = file
		}
		return f
	}
	if onMem > 0 {
		out = append(out, toMem(onMem))
	}
	switch rest := b - onMem; {
	case rest <= 0:
	case wait:
		s.memWait(j, s.mem[g], file, rest, s.e.Now(), toMem, func(x float64) []*flow.Flow { return pf.toPFS(dp, g, x) })
	default:
		if !mv.alone {
			s.res.Mem.Spilled += rest
		}
		out = append(out, pf.toPFS(dp, g, rest)...)
	}
	return out
}

// toPFS places x bytes on the targets of storage group g (the forwarding
// node's) and starts their flows.
func (pf *phaseFlows) toPFS(dp dataPath, g int, x float64) []*flow.Flow {
	s := pf.s
	T := s.m.Storage.Targets
	var parts []targetBytes
	for k, y := range s.place(pf.j, g, x, dp.fs.nodes, pf.placed, pf.written) {
		if y > 0 {
			parts = append(parts, targetBytes{t: g*T + k, bytes: y})
		}
	}
	if pf.wrote != nil && !pf.ph.read && !pf.ph.setup {
		for _, p := range parts {
			pf.wrote[p.t] += p.bytes
		}
	}
	return pf.toParts(dp, parts, x)
}

// toParts starts the flows of x bytes over parts (storage targets or mem
// servers).
func (pf *phaseFlows) toParts(dp dataPath, parts []targetBytes, x float64) []*flow.Flow {
	s, res, fwd := pf.s, pf.res, dp.fs.fwd
	var fl []*flow.Flow
	if s.m.Storage.ChunkSize > 0 {
		// files in chunks placed one by one: a writer (reader)
		// goes through its file's chunks in order, its window of
		// requests in flight spanning a few of them, so the
		// slowest of its targets holds it and the others wait
		// with it: one flow, each target used for its part
		path := append(append([]flow.Use(nil), dp.head...), flow.Use{R: res(s.fwdBW[fwd]), Group: dp.key, Share: dp.w})
		path = s.capped(path, res, dp.rule, qosBytes, "fwd", fwd)
		for _, p := range parts {
			part := p.bytes / x
			path = append(path, flow.Use{R: res(s.partRes(p)), W: part, Group: dp.key, Share: dp.w})
			path = s.capped(path, res, dp.rule, qosBytes, p.server(), p.t)
			path[len(path)-1].W = part // (its own target's cap, or the target)
		}
		return append(fl, pf.fm.Start(path, x, 0, pf.j.num, pf.class, pf.tag, pf.done))
	}
	for _, p := range parts {
		path := append(append([]flow.Use(nil), dp.head...), flow.Use{R: res(s.fwdBW[fwd]), Group: dp.key, Share: dp.w},
			flow.Use{R: res(s.partRes(p)), Group: dp.key, Share: dp.w})
		path = s.capped(path, res, dp.rule, qosBytes, "fwd", fwd)
		path = s.capped(path, res, dp.rule, qosBytes, p.server(), p.t)
		fl = append(fl, pf.fm.Start(path, p.bytes, 0, pf.j.num, pf.class, pf.tag, pf.done))
	}
	return fl
}

// ops starts the operations' flows through forwarding node share fs
// (share of the job's I/O nodes): metadata over [the node's rate, the
// metadata service], data requests over the node's rate; the job's own
// rate (OpsRate) shared between them as they are.
func (pf *phaseFlows) ops(fs fwdShare, share float64) []*flow.Flow {
	s, j, ph, res := pf.s, pf.j, pf.ph, pf.res
	var out []*flow.Flow
	ops, rate := ph.ops+ph.reqs, j.spec.OpsRate
	if ph.setup {
		rate = 0
	}
	if o := ph.ops * share; o > 0 {
		rule := s.rule(j, qos.Meta)
		key, w := s.group(j, rule)
		path := []flow.Use{{R: res(s.fwdOps[fs.fwd]), Group: key, Share: w}, {R: res(s.meta)}}
		path = s.capped(path, res, rule, qosOps, "fwd", fs.fwd)
		out = append(out, pf.fm.Start(path, o, metaCap(rate*share*ph.ops/ops, fs.nodes, s.m.MetaLatency), j.num, pf.class, pf.tag, pf.done))
	}
	if o := ph.reqs * share; o > 0 {
		rule := s.rule(j, dataClass(ph))
		key, w := s.group(j, rule)
		path := []flow.Use{{R: res(s.fwdOps[fs.fwd]), Group: key, Share: w}}
		path = s.capped(path, res, rule, qosOps, "fwd", fs.fwd)
		out = append(out, pf.fm.Start(path, o, rate*share*ph.reqs/ops, j.num, pf.class, pf.tag, pf.done))
	}
	return out
}

// metaCap is the cap of a metadata flow from nodes I/O nodes: the job's
// own share of rate if it has one (what it reached alone: its latency is
// in it), else at most one operation in flight per I/O node, each taking
// latency seconds (0: none).
func metaCap(rate, nodes, latency float64) float64 {
	if rate > 0 || latency <= 0 {
		return rate
	}
	return nodes / latency
}

// nodeBW is what one I/O node of j moves at most: its link, or less if
// the job itself does not go faster (Job.NodeBW).
func (s *Sim) nodeBW(j *job) float64 {
	if b := j.spec.NodeBW; b > 0 && b < s.m.NodeBW {
		return b
	}
	return s.m.NodeBW
}

// alone is j's I/O time alone on the machine over the forwarding nodes
// per: every phase on a copy of the resources with nothing else.
func (s *Sim) alone(j *job, per []fwdShare) float64 {
	e := engine.New()
	fm := flow.New(e)
	copies := map[*flow.Resource]*flow.Resource{}
	res := func(r *flow.Resource) *flow.Resource {
		c := copies[r]
		if c == nil {
			c = fm.NewResource(r.Name, s.capacityAlone(r))
			c.Derate, c.Slow, c.Grouped = r.Derate, r.Slow, r.Grouped
			copies[r] = c
		}
		return c
	}
	placed := make([]float64, len(s.targets))
	var wrote []float64 // (only a job that reads back what it wrote needs it)
	if j.spec.ReadBack {
		wrote = make([]float64, len(s.targets))
	}
	links := map[int]*flow.Resource{}
	var mv *memView
	if s.mem != nil {
		// an empty mem tier of its own that never drains
		mv = &memView{alone: true, used: make([]float64, len(s.mem))}
		if j.spec.ReadBack {
			mv.onMem = make([]float64, len(s.mem))
		}
	}
	var total engine.Time
	for _, ph := range j.phases {
		if ph.setup {
			continue
		}
		start := e.Now()
		s.flows(j, per, ph, fm, res, func(fwd int, nodes float64) *flow.Resource {
			if links[fwd] == nil {
				links[fwd] = fm.NewResource(fmt.Sprintf("links%d", fwd), nodes*s.nodeBW(j))
			}
			return links[fwd]
		}, placed, wrote, mv, nil, nil)
		e.Run(-1)
		total += e.Now() - start
		for i := range placed {
			placed[i] = 0 // each phase placed afresh, alone: nothing pending
		}
		if mv != nil {
			clear(mv.used)
		}
	}
	return total.Seconds()
}
