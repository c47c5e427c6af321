// Package sim is sluice's simulator (`sluice sim day`): it runs the very
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
	"sort"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/dfra"
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
