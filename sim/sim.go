// Package sim is sluice's simulator (`sluice sim`): it runs the very
// policy packages the daemons run (policy/dfra, policy/place,
// policy/failslow, policy/qos, policy/tiering and policy/bbos) against a
// model of a machine (sim/machine) and a workload of jobs (from an SWF
// job log or a JSON Lines file), on a deterministic discrete-event engine
// (sim/engine) with a flow-level max-min model of bandwidth and operation
// rates (sim/flow).
//
// It owns the scenario: compute-node allocation, jobs' I/O phases as
// flows over compute node → forwarding node → storage group (or its mem
// tier) paths, Beacon-like profiles built from simulated runs, and the
// results. It must not decide anything a policy decides: forwarding
// allocation is dfra.Decide's and the node spread dfra.ShareAll's, file
// placement place.Choose's, moves down a mem tier tiering.Plan's (a test
// fails if it defines its own). It does no I/O but writing the results it is given
// a writer for, and never reads the wall clock.
package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/policy/failslow"
	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/policy/qos"
	"github.com/sluice-hpc/sluice/policy/tiering"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/flow"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// Config is one simulation.
type Config struct {
	Machine *machine.Machine
	Jobs    []Job
	// PlaceSeed starts the placement's sequence numbers elsewhere, so that
	// weighted random placement draws differently (0 and 1: the same
	// start).
	PlaceSeed int64
	// Policy allocates forwarding nodes: "ffm" (the fixed mapping: DFRA
	// with no profile, as the daemons do for an application without
	// history) or "dfra" (with the profiles of the application's earlier
	// simulated runs, as Beacon records them).
	Policy string
	DFRA   dfra.Config // thresholds; Ratio defaults to the machine's
	// FwdNodes overrides the machine's number of forwarding nodes (the
	// what-if of experiment 4); the fixed mapping uses the same share of
	// them as on the machine (TaihuLight: a third), the rest are DFRA's
	// reserve.
	FwdNodes int
	// Placement ranks the storage targets of a forwarding node's group
	// for each file a job writes or reads (policy/place: perf, rr,
	// wrandom; "": perf, the daemons' default).
	Placement place.Policy
	// FailSlow makes forwarding nodes fail-slow during the run.
	FailSlow FailSlow
	// Changes are scheduled changes of capacity beyond the machine's own
	// (machine.Change: maintenance, degraded devices): both apply. A
	// forwarding node down (its factor 0) is not alive for policy/dfra
	// while it is: the running jobs on it are remapped (dfra.Remap: the
	// fixed mapping moves them to the node's stand-in, dfra.FFM) and new
	// jobs are kept off it. A storage target down
	// stops the flows that use it until it is back (clients wait for an
	// OST, as Lustre's do) and placement passes over it meanwhile; with
	// every target of its storage group down, a forwarding node is out of
	// service as if it were down itself.
	Changes []machine.Change
	// QoS is the rules every forwarding node and storage target enforces
	// (policy/qos, as `sluice qos set` hands them to every daemon): the
	// first rule a job's requests match (qos.Classify: by job id,
	// application and operation class) caps them at each server, its
	// Rate the bytes/s, its Ops the operations/s of the matched requests
	// there together, whichever jobs they come from; its Share is the
	// weight of the matched flows together at a saturated server, beside
	// each unmatched job's 1 (a forwarding node shares between jobs and
	// rules so with or without rules, a storage target with rules only,
	// as the daemons' gates do; sim/qos.go). Rules matching by node, uid
	// or gid are refused (the simulated jobs carry neither); make rules
	// with qos.ParseRule (a Rule literal's zero Uid matches uid 0).
	QoS []qos.Rule
	// Sample is the period of the utilisation timeline (0: 60 s).
	Sample engine.Time
	// Progress, if set, is called after every simulated hour.
	Progress func(now engine.Time, fired uint64, done, total int)
}

// FailSlow is a fail-slow scenario: Nodes forwarding nodes (spread evenly
// over the fixed mapping's) deliver 1/Factor of their bandwidth and
// operation rate from At on, and Targets storage targets (spread evenly
// over all of them) 1/Factor of their bandwidth. With Detect, Beacon-like
// records of every forwarding node and target (per Window: operations of
// 1 MiB and their service time) go through policy/failslow every Every,
// over the last Span; the forwarding nodes it names are flagged for
// policy/dfra, which remaps the running jobs that use them (dfra.Remap)
// and keeps new jobs off them. A target it names is reported, as the
// daemons' monitor reports a data server, and nothing more is done about
// it: placement's perf policy steers new files away from a slow target by
// itself (its backlog grows, and its max_perf is its present speed, as a
// busy data server's sustained rate or an idle one's probe measures it,
// data/perf.go).
type FailSlow struct {
	Nodes   int
	Targets int
	Factor  float64
	At      engine.Time
	Detect  bool
	Window  engine.Time // default 10 s
	Span    engine.Time // default 60 s
	Every   engine.Time // default 30 s
	// Lag is how long after a window closes its records reach the
	// detector (the daemons ship each closed window at their next tick,
	// once a window: up to a window later); 0: at once.
	Lag engine.Time
}

// JobResult is one job's outcome.
type JobResult struct {
	ID      string  `json:"id"`
	App     string  `json:"app"`
	Nodes   int     `json:"nodes"`
	IONodes int     `json:"io_nodes"`
	Pattern string  `json:"pattern"`
	Class   string  `json:"class"`
	Bytes   float64 `json:"bytes"`
	Submit  float64 `json:"submit"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Wait    float64 `json:"wait"`
	IOTime  float64 `json:"io_time"`
	// SetupTime is the time of its setup I/O (Job.SetupBytes), not in
	// IOTime.
	SetupTime float64 `json:"setup_time,omitempty"`
	IOAlone   float64 `json:"io_alone"` // its I/O alone on the machine, on the forwarding nodes it got
	IOFFM     float64 `json:"io_ffm"`   // its I/O alone on its fixed-mapping forwarding nodes
	Slowdown  float64 `json:"slowdown"` // IOTime / IOAlone
	Fwds      int     `json:"fwds"`
	// FwdIDs are the forwarding nodes it got.
	FwdIDs   []string `json:"fwd_ids,omitempty"`
	Policy   string   `json:"policy"` // what the allocation decided: ffm or dfra
	Reason   string   `json:"reason"`
	Warmup   bool     `json:"warmup,omitempty"`
	Remapped int      `json:"remapped,omitempty"` // times dfra.Remap moved it off fail-slow nodes
	// QoS is the rules (Config.QoS) its requests matched, in the order
	// first met.
	QoS []string `json:"qos,omitempty"`
	// MemBytes is what it wrote onto the mem tier (Machine.MemTier),
	// Stalled how long its writes waited there for room, seconds.
	MemBytes float64 `json:"mem_bytes,omitempty"`
	Stalled  float64 `json:"stalled_s,omitempty"`
}

// Sample is one point of the utilisation timeline.
type Sample struct {
	T          float64 `json:"t"`
	Running    int     `json:"running"`
	Queued     int     `json:"queued"`
	NodesBusy  int     `json:"nodes_busy"`
	FwdsBusy   int     `json:"fwds_busy"` // forwarding nodes carrying a flow
	FwdUse     float64 `json:"fwd_use"`   // their bandwidth used, share of all
	StorageUse float64 `json:"storage_use"`
	Flows      int     `json:"flows"`
	// FwdsDown and TargetsDown are out of service (Config.Changes).
	FwdsDown    int `json:"fwds_down,omitempty"`
	TargetsDown int `json:"targets_down,omitempty"`
	// MemUse is the mem tier's bytes in use, share of its capacity.
	MemUse float64 `json:"mem_use,omitempty"`
}

// Result is a simulation's outcome.
type Result struct {
	Jobs     []JobResult
	Timeline []Sample
	Events   uint64
	End      engine.Time
	// Recomputes and FlowsTouched are the flow model's work; GroupRounds
	// its rounds sharing servers between jobs and rules, GroupFallbacks
	// the recomputations where those found no fixed point (sim/flow).
	Recomputes, FlowsTouched    uint64
	GroupRounds, GroupFallbacks uint64
	// Slow is the forwarding nodes and storage targets made fail-slow
	// ("fwd0003", "ost00012"), Detected those the detector named (with
	// when), Remaps the jobs moved off forwarding nodes.
	Slow     []string
	Detected []Detection
	Remaps   int
	// Changes are the scheduled changes of capacity as they took effect.
	Changes []ChangeEvent
	// Mem is what the mem tier did (nil: the machine has none).
	Mem *MemStats
}

// ChangeEvent is a scheduled change of capacity taking effect (or ending).
type ChangeEvent struct {
	At      float64  `json:"at_s"`
	Fwds    []string `json:"fwds,omitempty"`
	Targets []string `json:"targets,omitempty"`
	Factor  float64  `json:"factor"`
	End     bool     `json:"end,omitempty"` // the change ended: Factor no longer applies
	Remaps  int      `json:"remaps,omitempty"`
	Note    string   `json:"note,omitempty"`
}

// Detection is a forwarding node or a storage target the fail-slow
// detector named.
type Detection struct {
	Fwd    string  `json:"fwd,omitempty"`
	Target string  `json:"target,omitempty"`
	At     float64 `json:"at_s"`
	Ratio  float64 `json:"ratio"`
}

type job struct {
	num     int // in start order: tells jobs apart to the flow model
	spec    Job
	nodes   []int
	names   []string
	a       dfra.Assignment
	perFwd  []fwdShare // I/O nodes per forwarding node
	nIO     int
	started engine.Time
	ioTime  engine.Time
	setup   engine.Time // of the setup phase
	held    bool        // Hold has passed
	phases  []phase
	next    int
	pending int // flows of the current phase not done
	flows   []*flow.Flow
	links   map[int]*flow.Resource // per forwarding node: the links of the I/O nodes it serves
	wrote   []float64              // bytes it has written to each target (Sim.flows; nil unless Job.ReadBack)
	inIO    bool
	phStart engine.Time
	res     JobResult

	// the mem tier (Machine.MemTier): the bytes it has on each group's
	// server, its files there (open: this phase's), its writes waiting
	// for room, and which of its flows write which file
	onMem    []float64
	memFiles []*memFile
	memOpen  []*memFile
	waiters  []*memWaiter
	memFlows map[*flow.Flow]*memFile
}

type fwdShare struct {
	fwd   int
	nodes float64 // I/O nodes on it (a node spread over k forwarding nodes counts 1/k on each)
}

type phase struct {
	compute float64 // seconds of computation before it
	bytes   float64
	ops     float64 // metadata operations
	reqs    float64 // data requests counted by the forwarding nodes
	setup   bool    // Job.SetupBytes: not the job's own I/O
	read    bool    // its bytes are read (else written)
}

// Sim is one simulation in progress.
type Sim struct {
	cfg  Config
	m    *machine.Machine
	e    *engine.Engine
	fm   *flow.Model
	dcfg dfra.Config

	fwds    []dfra.Fwd
	fwdIdx  map[string]int
	fwdBW   []*flow.Resource
	fwdOps  []*flow.Resource
	targets []*flow.Resource // group g's are [g×T, (g+1)×T)
	placed  []float64        // bytes placed on each target so far
	seq     uint64           // placement sequence number
	meta    *flow.Resource
	classes map[string]int

	nodes   *Nodes
	queue   []*job
	running []*job // in start order
	profile map[string]*beacon.Profile
	started int
	done    int
	res     Result

	// qosCaps are the rules' caps at each server, made when a flow first
	// needs one: a resource of the rule's rate that every matched flow
	// through the server also crosses
	qosCaps map[qosCapKey]*flow.Resource
	// isOps is the forwarding nodes' operation-rate resources: a flow
	// whose path starts at one counts operations, not bytes
	isOps map[*flow.Resource]bool
	// targetOf is each storage target's index in targets
	targetOf map[*flow.Resource]int

	// scaled are the resources whose capacity a change or the fail-slow
	// scenario multiplies: their capacity as described, and the factors
	// in force
	scaled      map[*flow.Resource]*scaling
	changes     []change
	changesLeft int // change starts and ends still to come

	// fail-slow detection
	recs     []beacon.Record
	lastBusy []float64 // per forwarding node, then per target: the work its records counted
	flagged  map[string]bool

	// the mem tier (Machine.MemTier; sim/memtier.go): a server per
	// storage group; the policy's configuration; how long a write waits
	// for room, the manager's period, its tick's timer and when it is
	// set for (-1: not), its last look; file numbers; an empty server's
	// reserve
	mem             []*memServer
	memCfg          tiering.Config
	memStall        engine.Time
	memEvery        engine.Time
	memPhase        engine.Time // the manager's ticks: memPhase + k × memEvery
	memTimer        engine.Timer
	memAt, memLast  engine.Time
	memIno          uint64
	memEmptyReserve float64

	onStart func(*job) // (tests: told of every job it starts)
}

// New prepares a simulation.
func New(cfg Config) (*Sim, error) {
	m := cfg.Machine
	if m == nil {
		return nil, fmt.Errorf("sim: no machine")
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	switch cfg.Policy {
	case "ffm", "dfra":
	default:
		return nil, fmt.Errorf("sim: policy %q: want ffm or dfra", cfg.Policy)
	}
	for _, r := range cfg.QoS {
		if r.Node != "" || r.Uid >= 0 || r.Gid >= 0 {
			return nil, fmt.Errorf("sim: QoS rule %s matches by node, uid or gid, which the simulated jobs do not carry", r)
		}
		if r.Rate <= 0 && r.Ops <= 0 && r.Share <= 0 {
			return nil, fmt.Errorf("sim: QoS rule %s has no rate, iops or share", r)
		}
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 60 * engine.Second
	}
	nf := m.FwdNodes
	if cfg.FwdNodes > 0 {
		nf = cfg.FwdNodes
	}
	e := engine.New()
	s := &Sim{cfg: cfg, m: m, e: e, fm: flow.New(e), dcfg: cfg.DFRA, fwdIdx: map[string]int{},
		classes: map[string]int{}, profile: map[string]*beacon.Profile{}, qosCaps: map[qosCapKey]*flow.Resource{}, isOps: map[*flow.Resource]bool{},
		targetOf: map[*flow.Resource]int{}}
	if cfg.PlaceSeed > 1 {
		s.seq = uint64(cfg.PlaceSeed-1) << 40
	}
	if s.dcfg.Ratio == 0 {
		// the fixed mapping spreads the machine over its static share
		// of forwarding nodes; FFM wraps around all of them
		s.dcfg.Ratio = m.FFMRatio
		if cfg.FwdNodes > 0 && cfg.FwdNodes != m.FwdNodes {
			// the static share of the forwarding nodes stays what it is
			// on the machine (TaihuLight: 80 of 240)
			static := max(1, int(math.Round(float64(nf*m.Static())/float64(m.FwdNodes))))
			s.dcfg.Ratio = max(1, (m.ComputeNodes+static-1)/static)
		}
	}
	for i, c := range m.Interference.Classes {
		s.classes[c] = i
	}
	if s.cfg.Placement == "" {
		s.cfg.Placement = place.Perf
	}
	for t := 0; t < m.Storage.Groups*m.Storage.Targets; t++ {
		r := s.fm.NewResource(fmt.Sprintf("ost%05d", t), targetBW(m, t))
		// a data server's gate schedules only while there are rules
		r.Grouped = len(cfg.QoS) > 0
		s.targets = append(s.targets, r)
		s.targetOf[r] = t
	}
	s.placed = make([]float64, len(s.targets))
	s.flagged = map[string]bool{}
	s.meta = s.fm.NewResource("meta", m.MetaOps)
	for i := 0; i < nf; i++ {
		id := fmt.Sprintf("fwd%04d", i)
		s.fwds = append(s.fwds, dfra.Fwd{ID: id, Capacity: m.FwdBW, Alive: true})
		s.fwdIdx[id] = i
		r, o := s.fm.NewResource(id, m.FwdBW), s.fm.NewResource(id+".ops", m.FwdOps)
		// a forwarding daemon's gates fair-queue by job (or by the QoS
		// rule a request matches) with or without rules
		r.Grouped, o.Grouped = true, true
		if len(m.Interference.Factors) > 0 {
			r.Slow, o.Slow = s.slow, s.slow
		} else {
			r.Derate = s.interference
		}
		s.fwdBW = append(s.fwdBW, r)
		s.fwdOps = append(s.fwdOps, o)
		s.isOps[o] = true
	}
	s.nodes = NewNodes(m.ComputeNodes)
	s.newMemTier()
	s.scaled = map[*flow.Resource]*scaling{}
	if err := s.prepareChanges(); err != nil {
		return nil, err
	}
	return s, nil
}

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

// setupTag marks the flows of a setup phase (Job.SetupBytes).
const setupTag = "setup"

// Run simulates every job to its end.
func (s *Sim) Run() (*Result, error) {
	// a change takes effect before the jobs submitted at its time start
	s.scheduleChanges()
	jobs := append([]Job(nil), s.cfg.Jobs...)
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].Submit < jobs[k].Submit })
	for i := range jobs {
		j := jobs[i]
		if j.Nodes > s.m.ComputeNodes {
			return nil, fmt.Errorf("job %s wants %d nodes of %d", j.ID, j.Nodes, s.m.ComputeNodes)
		}
		for _, n := range j.OnNodes {
			if n < 0 || n >= s.m.ComputeNodes {
				return nil, fmt.Errorf("job %s runs on node %d of %d", j.ID, n, s.m.ComputeNodes)
			}
		}
		if _, ok := s.classes[j.Class]; !ok {
			return nil, fmt.Errorf("job %s: class %q is not one of the machine's %v", j.ID, j.Class, s.m.Interference.Classes)
		}
		s.e.At(engine.FromSeconds(j.Submit), engine.Func(func(now engine.Time) { s.submit(&job{spec: j}) }))
	}
	s.e.At(0, engine.Func(s.sample))
	if fs := s.cfg.FailSlow; fs.Nodes > 0 || fs.Targets > 0 {
		s.e.At(fs.At, engine.Func(s.makeSlow))
		if fs.Detect {
			s.lastBusy = make([]float64, len(s.fwdBW)+len(s.targets))
			s.e.At(fs.At, engine.Func(s.window))
		}
	}
	// stuck: nothing left to happen, or jobs running and none starting or
	// ending for a month of simulated time with no change to come (their
	// flows stopped by a target down for good: the periodic samples would
	// go on for ever)
	lastDone, lastStarted, since := s.done, s.started, s.e.Now()
	for s.done < len(jobs) {
		stuck := s.e.Pending() == 0
		if s.done != lastDone || s.started != lastStarted || s.changesLeft > 0 {
			lastDone, lastStarted, since = s.done, s.started, s.e.Now()
		} else if len(s.running) > 0 && s.e.Now()-since > 30*24*3600*engine.Second {
			stuck = true
		}
		if stuck {
			hint := ""
			if down := s.targetsDown(); down > 0 {
				hint = fmt.Sprintf(" (%d storage targets are down for good and hold running jobs' files)", down)
			}
			return nil, fmt.Errorf("sim: stuck at %.0f s with %d jobs queued and %d running%s", s.e.Now().Seconds(), len(s.queue), len(s.running), hint)
		}
		s.e.Run(s.e.Now() + 3600*engine.Second)
		if s.cfg.Progress != nil {
			s.cfg.Progress(s.e.Now(), s.e.Fired(), s.done, len(jobs))
		}
	}
	s.res.Events = s.e.Fired()
	s.res.End = s.e.Now()
	s.res.Recomputes, s.res.FlowsTouched = s.fm.Recomputes, s.fm.FlowsTouched
	s.res.GroupRounds, s.res.GroupFallbacks = s.fm.GroupRounds, s.fm.GroupFallbacks
	sort.Slice(s.res.Detected, func(i, k int) bool {
		a, b := s.res.Detected[i], s.res.Detected[k]
		return a.Fwd < b.Fwd || a.Fwd == b.Fwd && a.Target < b.Target
	})
	sort.SliceStable(s.res.Jobs, func(i, k int) bool { return s.res.Jobs[i].Submit < s.res.Jobs[k].Submit })
	return &s.res, nil
}

func (s *Sim) sample(now engine.Time) {
	sm := Sample{T: now.Seconds(), Running: len(s.running), Queued: len(s.queue), NodesBusy: s.m.ComputeNodes - s.nodes.Free(), Flows: s.fm.Active()}
	if s.mem != nil {
		sm.MemUse = s.memSample()
	}
	var used, cap float64
	for _, r := range s.fwdBW {
		if r.Users() > 0 {
			sm.FwdsBusy++
		}
		used += r.Used()
		cap += r.Capacity()
	}
	if cap > 0 {
		sm.FwdUse = used / cap
	}
	used, cap = 0, 0
	for _, r := range s.targets {
		used += r.Used()
		cap += r.Capacity()
	}
	if cap > 0 {
		sm.StorageUse = used / cap
	}
	for i := range s.fwds {
		if !s.fwds[i].Alive {
			sm.FwdsDown++
		}
	}
	sm.TargetsDown = s.targetsDown()
	s.res.Timeline = append(s.res.Timeline, sm)
	if s.done < len(s.cfg.Jobs) {
		s.e.After(s.cfg.Sample, engine.Func(s.sample))
	}
}

// targetsDown is how many storage targets are out of service now.
func (s *Sim) targetsDown() int {
	n := 0
	for _, t := range s.targets {
		if t.Capacity() == 0 {
			n++
		}
	}
	return n
}

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
	var out []*flow.Flow
	class := s.classes[j.spec.Class]
	T := s.m.Storage.Targets
	var tag any
	if ph.setup {
		tag = setupTag
	}
	for _, fs := range per {
		share := fs.nodes / float64(j.nIO)
		if b := ph.bytes * share; b > 0 {
			var head []flow.Use
			if !ph.setup { // a setup phase is held back by neither the links nor the job's own limits
				head = []flow.Use{{R: links(fs.fwd, fs.nodes)}}
			}
			dataRule := s.rule(j, dataClass(ph))
			key, w := s.group(j, dataRule)
			g := fs.fwd % s.m.Storage.Groups
			// toParts starts the flows of x bytes over parts (storage
			// targets or mem servers)
			toParts := func(parts []targetBytes, x float64) []*flow.Flow {
				var fl []*flow.Flow
				if s.m.Storage.ChunkSize > 0 {
					// files in chunks placed one by one: a writer (reader)
					// goes through its file's chunks in order, its window of
					// requests in flight spanning a few of them, so the
					// slowest of its targets holds it and the others wait
					// with it: one flow, each target used for its part
					path := append(append([]flow.Use(nil), head...), flow.Use{R: res(s.fwdBW[fs.fwd]), Group: key, Share: w})
					path = s.capped(path, res, dataRule, qosBytes, "fwd", fs.fwd)
					for _, p := range parts {
						part := p.bytes / x
						path = append(path, flow.Use{R: res(s.partRes(p)), W: part, Group: key, Share: w})
						path = s.capped(path, res, dataRule, qosBytes, p.server(), p.t)
						path[len(path)-1].W = part // (its own target's cap, or the target)
					}
					return append(fl, fm.Start(path, x, 0, j.num, class, tag, done))
				}
				for _, p := range parts {
					path := append(append([]flow.Use(nil), head...), flow.Use{R: res(s.fwdBW[fs.fwd]), Group: key, Share: w},
						flow.Use{R: res(s.partRes(p)), Group: key, Share: w})
					path = s.capped(path, res, dataRule, qosBytes, "fwd", fs.fwd)
					path = s.capped(path, res, dataRule, qosBytes, p.server(), p.t)
					fl = append(fl, fm.Start(path, p.bytes, 0, j.num, class, tag, done))
				}
				return fl
			}
			// toPFS places x bytes on the targets of the forwarding
			// node's group and starts their flows
			toPFS := func(x float64) []*flow.Flow {
				var parts []targetBytes
				for k, y := range s.place(j, g, x, fs.nodes, placed, written) {
					if y > 0 {
						parts = append(parts, targetBytes{t: g*T + k, bytes: y})
					}
				}
				if wrote != nil && !ph.read && !ph.setup {
					for _, p := range parts {
						wrote[p.t] += p.bytes
					}
				}
				return toParts(parts, x)
			}
			var parts []targetBytes
			if ph.read && j.spec.ReadBack {
				var onMem []float64
				if mv != nil {
					onMem = mv.onMem
				}
				parts = readBack(wrote, onMem, b)
				if s.res.Mem != nil && !mv.alone {
					for _, p := range parts {
						if p.mem {
							s.res.Mem.ReadMem += p.bytes
						}
					}
				}
			}
			switch {
			case parts != nil:
				out = append(out, toParts(parts, b)...)
			case mv != nil && !ph.read && !ph.setup:
				// the mem tier first (sim/memtier.go)
				onMem, file, wait := s.memPlace(j, mv, g, b, s.e.Now())
				toMem := func(x float64) *flow.Flow {
					f := toParts([]targetBytes{{t: g, bytes: x, mem: true}}, x)[0]
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
					s.memWait(j, s.mem[g], file, rest, s.e.Now(), toMem, toPFS)
				default:
					if !mv.alone {
						s.res.Mem.Spilled += rest
					}
					out = append(out, toPFS(rest)...)
				}
			default:
				out = append(out, toPFS(b)...)
			}
		}
		// operations: metadata over [the node's rate, the metadata
		// service], data requests over the node's rate; the job's own
		// rate (OpsRate) shared between them as they are
		ops, rate := ph.ops+ph.reqs, j.spec.OpsRate
		if ph.setup {
			rate = 0
		}
		if o := ph.ops * share; o > 0 {
			rule := s.rule(j, qos.Meta)
			key, w := s.group(j, rule)
			path := []flow.Use{{R: res(s.fwdOps[fs.fwd]), Group: key, Share: w}, {R: res(s.meta)}}
			path = s.capped(path, res, rule, qosOps, "fwd", fs.fwd)
			out = append(out, fm.Start(path, o, metaCap(rate*share*ph.ops/ops, fs.nodes, s.m.MetaLatency), j.num, class, tag, done))
		}
		if o := ph.reqs * share; o > 0 {
			rule := s.rule(j, dataClass(ph))
			key, w := s.group(j, rule)
			path := []flow.Use{{R: res(s.fwdOps[fs.fwd]), Group: key, Share: w}}
			path = s.capped(path, res, rule, qosOps, "fwd", fs.fwd)
			out = append(out, fm.Start(path, o, rate*share*ph.reqs/ops, j.num, class, tag, done))
		}
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

// targetBytes is a flow's part on one storage target (an index of
// Sim.targets), or with mem on the mem server of group t.
type targetBytes struct {
	t     int
	bytes float64
	mem   bool
}

// server is the part's kind of server, for its QoS caps.
func (p targetBytes) server() string {
	if p.mem {
		return "mem"
	}
	return "ost"
}

// partRes is the resource of part p.
func (s *Sim) partRes(p targetBytes) *flow.Resource {
	if p.mem {
		return s.mem[p.t].r
	}
	return s.targets[p.t]
}

// readBack spreads b bytes over the targets and the mem servers in
// proportion to what wrote and onMem (nil: no mem tier) say is on each;
// nil if nothing is.
func readBack(wrote, onMem []float64, b float64) []targetBytes {
	var sum float64
	for _, x := range wrote {
		sum += x
	}
	for _, x := range onMem {
		sum += max(0, x)
	}
	if sum <= 0 {
		return nil
	}
	var out []targetBytes
	for g, x := range onMem {
		if x > 0 {
			out = append(out, targetBytes{t: g, bytes: b * x / sum, mem: true})
		}
	}
	for t, x := range wrote {
		if x > 0 {
			out = append(out, targetBytes{t: t, bytes: b * x / sum})
		}
	}
	return out
}

// place spreads bytes of files (one per I/O node: nodes of them) over
// the targets of group g, asking policy/place for each unit of them; it
// charges placed (the targets' placed bytes; a target's backlog is that
// less what it has written, written nil: nothing) and returns the bytes
// per target of the group.
func (s *Sim) place(j *job, g int, bytes, nodes float64, placed []float64, written func(t int) float64) []float64 {
	T := s.m.Storage.Targets
	units := int(math.Ceil(nodes))
	units = max(1, min(units, max(16, 16*T/max(1, len(j.perFwd)))))
	if c := s.m.Storage.ChunkSize; c > 0 {
		units = max(1, int(math.Ceil(bytes/c)))
	}
	return s.placeUnits(uint64(j.num)<<20, units, g, bytes, placed, written)
}

// placeUnits places bytes of file ino in units equal units over the
// targets of group g (policy/place for each), charging placed, and
// returns the bytes per target of the group.
func (s *Sim) placeUnits(ino uint64, units, g int, bytes float64, placed []float64, written func(t int) float64) []float64 {
	T := s.m.Storage.Targets
	out := make([]float64, T)
	unit := bytes / float64(units)
	servers := make([]place.Server, T)
	for u := 0; u < units; u++ {
		for k := 0; k < T; k++ {
			t := g*T + k
			pending := placed[t]
			if written != nil {
				pending -= written(t)
			}
			// a target down (Config.Changes) is passed over meanwhile
			servers[k] = place.Server{ID: uint64(k + 1), Tier: "pfs", Alive: s.targets[t].Capacity() > 0, MaxPerf: uint64(s.targets[t].Capacity()),
				Pending: uint64(math.Max(0, pending))}
		}
		s.seq++
		d, err := place.Choose(servers, place.Chunk{Ino: ino | uint64(u), ChunkSize: int64(unit), StripeCount: 1,
			Seq: s.seq, Policy: s.cfg.Placement})
		k := u % T // (every target down: it waits for its target)
		if err == nil && len(d.Servers) == 1 {
			k = int(d.Servers[0] - 1)
		}
		out[k] += unit
		placed[g*T+k] += unit
	}
	return out
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

// makeSlow makes the scenario's forwarding nodes fail-slow: spread evenly
// over the fixed mapping's nodes, so that they serve jobs under FFM.
func (s *Sim) makeSlow(now engine.Time) {
	fs := s.cfg.FailSlow
	static := min(len(s.fwds), max(1, (s.m.ComputeNodes+s.dcfg.Ratio-1)/s.dcfg.Ratio))
	for k := 0; k < fs.Nodes && k < len(s.fwds); k++ {
		i := k * static / min(fs.Nodes, static)
		if k >= static {
			i = k
		}
		s.scale(s.fwdBW[i], failSlowKey, 1/fs.Factor, true)
		s.scale(s.fwdOps[i], failSlowKey, 1/fs.Factor, true)
		s.res.Slow = append(s.res.Slow, s.fwds[i].ID)
	}
	n := len(s.targets)
	for k := 0; k < fs.Targets && k < n; k++ {
		t := s.targets[k*n/min(fs.Targets, n)]
		s.scale(t, failSlowKey, 1/fs.Factor, true)
		s.res.Slow = append(s.res.Slow, t.Name)
	}
}

// targetRecordName is a storage target's server name in Beacon's records
// ("data-ost-00012": failslow compares it with the other "data-ost-*").
func targetRecordName(t *flow.Resource) string {
	return "data-" + strings.Replace(t.Name, "ost", "ost-", 1)
}

// recordName is a forwarding node's server name in Beacon's records
// ("fwd-3": failslow compares it with the other "fwd-*").
func recordName(id string) string { return "fwd-" + id[3:] }

// window records what each forwarding node and storage target did in the
// last window, as its daemon's Beacon records would show it (operations
// of 1 MiB, each taking 1 MiB at its bandwidth to serve), and, every
// Every, runs the fail-slow detector over the last Span.
func (s *Sim) window(now engine.Time) {
	fs := s.cfg.FailSlow
	w := max(fs.Window, engine.Second)
	if fs.Window == 0 {
		w = 10 * engine.Second
	}
	span, every := fs.Span, fs.Every
	if span == 0 {
		span = 60 * engine.Second
	}
	if every == 0 {
		every = 30 * engine.Second
	}
	const req = 1 << 20
	start := now - w
	record := func(k int, r *flow.Resource, layer beacon.Layer, server string) {
		// whole operations, as a daemon counts them: what a window
		// moved beyond its last whole operation is the next window's
		b := r.Busy(now)
		moved := b - s.lastBusy[k]
		if moved < req {
			return
		}
		n := uint64(moved / req)
		s.lastBusy[k] += float64(n) * req
		if now == s.cfg.FailSlow.At {
			return
		}
		lat := int64(float64(req) / r.Capacity() * 1e9)
		s.recs = append(s.recs, beacon.Record{Window: int64(start), Layer: layer, Server: server,
			Op: beacon.OpWrite, Size: req, Count: n, Bytes: n * req, LatSum: lat * int64(n), LatMax: lat})
	}
	for i, r := range s.fwdBW {
		record(i, r, beacon.LayerFwd, recordName(s.fwds[i].ID))
	}
	if s.cfg.FailSlow.Targets > 0 {
		for t, r := range s.targets {
			record(len(s.fwdBW)+t, r, beacon.LayerData, targetRecordName(r))
		}
	}
	// forget what is older than the span
	k := 0
	for k < len(s.recs) && s.recs[k].Window < int64(now-span) {
		k++
	}
	s.recs = s.recs[k:]
	if (now-fs.At)%every < w {
		// the windows whose records have reached the detector by now
		seen := len(s.recs)
		for seen > 0 && s.recs[seen-1].Window > int64(now-w-fs.Lag) {
			seen--
		}
		s.detect(now, s.recs[:seen])
	}
	if s.done < len(s.cfg.Jobs) {
		s.e.After(w, engine.Func(s.window))
	}
}

// detect runs policy/failslow and has policy/dfra remap the jobs on the
// nodes it names.
func (s *Sim) detect(now engine.Time, recs []beacon.Record) {
	found := false
	for _, x := range failslow.Detect(recs, failslow.Options{}) {
		if x.Layer == beacon.LayerData {
			id := strings.Replace(strings.TrimPrefix(x.Server, "data-"), "ost-", "ost", 1)
			if !s.flagged[id] {
				s.flagged[id] = true
				s.res.Detected = append(s.res.Detected, Detection{Target: id, At: now.Seconds(), Ratio: x.Ratio})
			}
			continue
		}
		if !strings.HasPrefix(x.Server, "fwd-") {
			continue
		}
		id := "fwd" + x.Server[len("fwd-"):]
		i, ok := s.fwdIdx[id]
		if !ok || s.flagged[id] {
			continue
		}
		s.flagged[id] = true
		s.fwds[i].Slow = true
		s.res.Detected = append(s.res.Detected, Detection{Fwd: id, At: now.Seconds(), Ratio: x.Ratio})
		found = true
	}
	if found {
		s.remap(now)
	}
}

// remap has policy/dfra move the running jobs off forwarding nodes no
// longer usable (flagged fail-slow, or down) and returns how many moved.
func (s *Sim) remap(now engine.Time) int {
	placed := make([]dfra.Assignment, len(s.running))
	jobs := map[string]dfra.Job{}
	for i, r := range s.running {
		placed[i] = r.a
		dj := dfra.Job{ID: r.spec.ID, App: r.spec.App, Nodes: r.names}
		if s.cfg.Policy == "dfra" {
			dj.Profile = s.profile[r.spec.App]
		}
		jobs[r.spec.ID] = dj
	}
	out, moved := dfra.Remap(s.dcfg, s.fwds, placed, jobs)
	for _, i := range moved {
		j := s.running[i]
		j.a = out[i]
		j.res.Remapped++
		j.res.Fwds = max(j.res.Fwds, len(j.a.Fwds))
		s.res.Remaps++
		j.perFwd = s.spread(j.a, j.names[:j.nIO])
		if !j.inIO {
			continue
		}
		// the rest of the phase goes over the new forwarding nodes
		cur := j.phases[j.next-1]
		var bytes, ops float64
		for _, w := range slices.Clone(j.waiters) {
			// a write waiting for room is placed anew below
			bytes += w.rest
			s.memUnwait(w, now, false)
		}
		for _, f := range j.flows {
			left := f.Remaining(now)
			if s.isOps[f.Path[0].R] {
				ops += left
			} else {
				bytes += left
				if mf := j.memFlows[f]; mf != nil && !cur.read && left > 0 {
					s.memUnplace(mf, left)
				}
				if j.wrote != nil && !cur.read && !cur.setup {
					// not written where it was to go: placed anew below
					for _, u := range f.Path {
						if t, ok := s.targetOf[u.R]; ok {
							w := u.W
							if w == 0 {
								w = 1
							}
							j.wrote[t] = max(0, j.wrote[t]-left*w)
						}
					}
				}
			}
			s.fm.Cancel(f)
		}
		j.flows, j.links, j.memFlows = nil, nil, nil
		s.startFlows(j, phase{bytes: bytes, ops: ops, read: cur.read, setup: cur.setup})
	}
	return len(moved)
}
