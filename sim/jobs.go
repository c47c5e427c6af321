package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/flow"
)

// A run's jobs: submission, the scheduler, their phases and flows.

func (s *Sim) submit(j *job) {
	s.queue = append(s.queue, j)
	s.schedule()
}

// schedule starts queued jobs in order while the first fits (FCFS, no
// backfilling).
func (s *Sim) schedule() {
	for len(s.queue) > 0 && s.nodes.Fits(s.queue[0].spec) {
		j := s.queue[0]
		s.queue[0] = nil // (the array behind the queue would keep it)
		s.queue = s.queue[1:]
		s.start(j)
	}
}

func nodeName(i int) string { return fmt.Sprintf("cn%05d", i) }

func (s *Sim) start(j *job) {
	now := s.e.Now()
	sp := j.spec
	s.started++
	j.num = s.started
	j.started = now
	j.nodes = s.nodes.Take(sp)
	if s.onStart != nil {
		s.onStart(j)
	}
	j.names = make([]string, len(j.nodes))
	for i, n := range j.nodes {
		j.names[i] = nodeName(n)
	}
	placed := make([]dfra.Assignment, 0, len(s.running))
	for _, r := range s.running {
		placed = append(placed, r.a)
	}
	dj := dfra.Job{ID: sp.ID, App: sp.App, Nodes: j.names}
	if s.cfg.Policy == "dfra" {
		dj.Profile = s.profile[sp.App]
		if sp.Profile != nil {
			dj.Profile = sp.Profile
		}
	}
	j.a = dfra.Decide(s.dcfg, s.fwds, placed, dj)
	j.nIO = ioNodes(sp.Pattern, sp.Nodes)
	j.perFwd = s.spread(j.a, j.names[:j.nIO])
	if sp.ReadBack {
		j.wrote = make([]float64, len(s.targets))
	}
	if s.mem != nil {
		j.onMem = make([]float64, len(s.mem))
	}
	j.phases = phasesOf(sp)
	j.res = JobResult{ID: sp.ID, App: sp.App, Nodes: sp.Nodes, IONodes: j.nIO, Pattern: sp.Pattern, Class: sp.Class,
		Bytes: sp.Read + sp.Write, Submit: sp.Submit, Start: now.Seconds(), Wait: now.Seconds() - sp.Submit,
		Fwds: len(j.a.Fwds), Policy: j.a.Policy, Warmup: sp.Warmup}
	if len(j.a.Reasons) > 0 {
		j.res.Reason = j.a.Reasons[len(j.a.Reasons)-1]
	}
	j.res.FwdIDs = append([]string(nil), j.a.Fwds...)
	j.res.IOAlone = s.alone(j, j.perFwd)
	if j.a.Policy == "ffm" {
		j.res.IOFFM = j.res.IOAlone
	} else {
		ffm := dfra.Decide(s.dcfg, s.fwds, nil, dfra.Job{ID: sp.ID, App: sp.App, Nodes: j.names})
		j.res.IOFFM = s.alone(j, s.spread(ffm, j.names[:j.nIO]))
	}
	s.running = append(s.running, j)
	s.nextPhase(j)
}

// phasesOf is job sp's phases: a setup phase, the read, then computation
// and a write, Phases times (the computation before each burst of
// BurstPhases), or the read at the end (ReadBack); Lead before the first.
func phasesOf(sp Job) []phase {
	var ph []phase
	if sp.SetupBytes > 0 || sp.SetupRequests > 0 {
		ph = append(ph, phase{bytes: sp.SetupBytes, reqs: sp.SetupRequests, setup: true})
	}
	per := sp.Compute / float64(sp.Phases)
	burst := 1
	if b := sp.BurstPhases; b > 1 {
		burst = b
		per = sp.Compute / math.Ceil(float64(sp.Phases)/float64(b))
	}
	parts := float64(sp.Phases)
	var read phase
	if sp.Read > 0 {
		parts++
		read = phase{bytes: sp.Read, ops: sp.MetaOps / parts, reqs: sp.Requests * sp.Read / (sp.Read + sp.Write), read: true}
		if !sp.ReadBack {
			ph = append(ph, read)
		}
	}
	for k := 0; k < sp.Phases; k++ {
		reqs := sp.Requests / float64(sp.Phases)
		if sp.Read > 0 {
			reqs = sp.Requests * sp.Write / (sp.Read + sp.Write) / float64(sp.Phases)
		}
		c := per
		if k%burst != 0 {
			c = 0 // within a burst
		}
		ph = append(ph, phase{compute: c, bytes: sp.Write / float64(sp.Phases), ops: sp.MetaOps / parts, reqs: reqs})
	}
	if sp.Read > 0 && sp.ReadBack {
		ph = append(ph, read)
	}
	if sp.Lead > 0 && len(ph) > 0 {
		ph[0].compute += sp.Lead
	}
	return ph
}

// spread is how many I/O nodes each forwarding node of a serves
// (dfra.ShareAll decides), in forwarding-node order.
func (s *Sim) spread(a dfra.Assignment, io []string) []fwdShare {
	share := dfra.ShareAll(s.dcfg, s.fwds, a, io)
	w := map[int]float64{}
	for _, n := range io {
		fs := share[n]
		for _, f := range fs {
			w[s.fwdIdx[f]] += 1 / float64(len(fs))
		}
	}
	out := make([]fwdShare, 0, len(w))
	for f, n := range w {
		out = append(out, fwdShare{fwd: f, nodes: n})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].fwd < out[k].fwd })
	return out
}

func (s *Sim) nextPhase(j *job) {
	if j.next == len(j.phases) {
		if h := j.spec.Hold; h > 0 && !j.held {
			j.held = true
			s.e.After(engine.FromSeconds(h), engine.Func(func(engine.Time) { s.finish(j) }))
			return
		}
		s.finish(j)
		return
	}
	ph := j.phases[j.next]
	j.next++
	s.e.After(engine.FromSeconds(ph.compute), engine.Func(func(now engine.Time) {
		j.phStart, j.inIO = now, true
		s.startFlows(j, ph)
	}))
}

// startFlows starts (or, after a remap, restarts) the flows of j's
// current I/O phase ph.
func (s *Sim) startFlows(j *job, ph phase) {
	var mv *memView
	if s.mem != nil {
		mv = &memView{onMem: j.onMem}
	}
	j.flows = s.flows(j, j.perFwd, ph, s.fm, func(r *flow.Resource) *flow.Resource { return r }, func(fwd int, nodes float64) *flow.Resource {
		if j.links == nil {
			j.links = map[int]*flow.Resource{}
		}
		if j.links[fwd] == nil {
			j.links[fwd] = s.fm.NewResource(fmt.Sprintf("%s.links%d", j.spec.ID, fwd), nodes*s.nodeBW(j))
		}
		return j.links[fwd]
	}, s.placed, j.wrote, mv, func(t int) float64 { return s.targets[t].Busy(s.e.Now()) }, func(_ *flow.Flow, now engine.Time) {
		s.flowDone(j, now)
	})
	j.pending = len(j.flows) + len(j.waiters)
	if j.pending == 0 {
		j.inIO = false
		s.memClose(j, s.e.Now())
		s.nextPhase(j)
	}
}

// flowDone is the end of one of the flows (or waits) of j's phase: the
// last ends the phase.
func (s *Sim) flowDone(j *job, now engine.Time) {
	if j.pending--; j.pending == 0 {
		if j.phases[j.next-1].setup {
			j.setup += now - j.phStart
		} else {
			j.ioTime += now - j.phStart
		}
		j.inIO, j.flows, j.memFlows = false, nil, nil
		s.memClose(j, now)
		s.nextPhase(j)
	}
}

func (s *Sim) finish(j *job) {
	now := s.e.Now()
	s.nodes.Release(j.nodes)
	for i, r := range s.running {
		if r == j {
			s.running = slices.Delete(s.running, i, i+1) // (which clears the slot left)
			break
		}
	}
	s.memForget(j)
	j.res.End = now.Seconds()
	j.res.IOTime = j.ioTime.Seconds()
	j.res.SetupTime = j.setup.Seconds()
	if j.res.IOAlone > 0 {
		j.res.Slowdown = j.res.IOTime / j.res.IOAlone
	}
	s.res.Jobs = append(s.res.Jobs, j.res)
	s.learn(j)
	s.done++
	s.schedule()
}

// learn records j's run in its application's profile as Beacon would
// (beacon.Profile: volume, I/O nodes, per-node bandwidth while active,
// the run's bandwidth and forwarding nodes, mode, classes, metadata
// rate); DFRA decides the application's next job from it.
func (s *Sim) learn(j *job) {
	sp := j.spec
	p := s.profile[sp.App]
	if p == nil {
		p = &beacon.Profile{Key: sp.App, Source: "sim"}
		s.profile[sp.App] = p
	}
	io := j.ioTime.Seconds()
	p.Runs++
	p.Updated = int64(j.res.End * 1e9)
	p.ReadBytes, p.WriteBytes = uint64(sp.Read), uint64(sp.Write)
	p.Volume = p.ReadBytes + p.WriteBytes
	p.IONodes, p.IORanks = j.nIO, j.nIO
	p.Mode = sp.Pattern
	p.MetaOps = uint64(sp.MetaOps)
	if io > 0 {
		p.RunBW = (sp.Read + sp.Write) / io
		p.NodeBW = p.RunBW / float64(j.nIO)
		p.MetaRate = sp.MetaOps / io
	}
	p.RunFwds = len(j.a.Fwds)
	switch sp.Class {
	case "meta":
		p.Classes = []string{beacon.ClassMetadata}
	case "iops":
		p.Classes = []string{beacon.ClassIOPS}
	default:
		p.Classes = []string{beacon.ClassBandwidth}
	}
}
