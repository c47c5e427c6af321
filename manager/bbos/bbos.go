// Package bbos is the burst-buffer manager (BBOS, docs/bbos.md): it runs
// inside the metadata daemon and carries out the policy of policy/bbos on
// the data servers of each buffer pool (the mem or ssd tier) that jobs
// hold grants on.
//
// Every tick it learns from the pool's servers what jobs wrote (DWSF, and
// whether checkpoints are being written now), keeps the period (the
// grants' longest) and the DWPP of past periods, asks the policy for the
// period's plan and the rates it calls for now, and sets them on the
// servers' token buckets with the I/O scheduler (OpBBServer). It scans the
// grants' checkpoint files (their versions), demotes them to the PFS in
// the policy's cold order at the plan's demotion rate, keeping the buffer
// copy as a clean cache (the tiering manager's keep-cache copy), evicts
// demoted copies when the buffer needs room for new checkpoints, and sends
// a checkpoint the policy classifies cold on arrival straight to the pfs
// tier (placement's hint).
//
// It owns the pools' period state and the versions it scanned (soft state,
// rebuilt after a restart). It must not copy data (the data servers do) or
// decide anything the policy decides.
package bbos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/bbos"
)

// Namespace is what the manager needs of the metadata service.
type Namespace interface {
	Servers() []wire.ServerInfo
	Lookup(parent uint64, name string) (*wire.Attr, error)
	Getattr(ino uint64) (*wire.Attr, error)
	Readdir(ino uint64, after string, max int) ([]wire.DirEntry, error)
	Layout(ino uint64) ([]wire.ChunkLoc, error)
	Activity(ino uint64) (wire.Activity, error)
	BBServer(ctx context.Context, id uint64, set *api.BBControl) (*api.BBServerState, error)
}

// Stalls is a Namespace that counts the writers waiting for room on a
// tier (placement's write-stall); the deleters free room for all of them
// at once rather than a checkpoint at a time.
type Stalls interface {
	StalledWriters(tier string) int
	// StalledFile says whether a writer of file ino waits for room on
	// tier.
	StalledFile(tier string, ino uint64) bool
}

// Mover demotes and evicts files: the tiering manager.
type Mover interface {
	// Demote copies a file's chunks to the PFS, keeping the buffer's
	// copies as clean caches; the bytes copied.
	Demote(ctx context.Context, ino uint64) (uint64, error)
	// Evict drops the buffer's copies that have a clean copy on the PFS;
	// the chunks dropped.
	Evict(ctx context.Context, ino uint64) (int, error)
}

// DecisionLog keeps decisions by job (Beacon's store).
type DecisionLog interface {
	PutDecision(job string, at time.Time, v []byte) error
}

// Config configures the manager.
type Config struct {
	NS Namespace
	// QuietUntil is when demotions and evictions may start (zero: at
	// once): tiering.Config.QuietUntil.
	QuietUntil time.Time
	// Grants is the jobs' burst-buffer grants (meta/bbgrants).
	Grants interface {
		List() ([]api.Grant, error)
	}
	Mover  Mover
	Policy pol.Policy
	Rates  pol.Rates
	// NoVersions turns version awareness off: cold data by MTBF alone
	// (the paper's Figure 9 baseline).
	NoVersions bool
	// Bypass sends checkpoints the policy classifies cold on arrival to
	// the pfs tier (bbos only).
	Bypass bool
	// DefaultMTBF is a grant's MTBF when it names none (default 24 h).
	DefaultMTBF time.Duration
	// DefaultPeriod is the planning period when no grant names one
	// (default 1 h).
	DefaultPeriod time.Duration
	// Reserve is the free space placement keeps on a pool's server while
	// the manager can free space there (writers wait for it rather than
	// spill); default 4 MiB, a chunk.
	Reserve uint64
	// Idle is how long after the last job write a pool counts as idle in
	// the manager's figures (default 500 ms); ServerIdle is the servers'
	// own (0: theirs, 20 ms), by which they switch demotion rates.
	Idle, ServerIdle time.Duration
	// Gap and MaxWait configure the servers' I/O scheduler (0: the
	// servers' defaults).
	Gap, MaxWait time.Duration
	Log          *slog.Logger
	Now          func() time.Time
	Metrics      prometheus.Registerer
	Decisions    DecisionLog
}

// Manager runs the burst buffer.
type Manager struct {
	cfg Config

	tickMu sync.Mutex // one Tick at a time (the loop's, a grant's)

	mu       sync.Mutex           // guards the fields below
	pools    map[string]*pool     // by tier
	versions map[uint64]*version  // checkpoint files seen by the last scan
	dirs     map[uint64][]ckptSeq // checkpoint directories: their sequences
	hints    map[uint64]hint      // checkpoints placement asked about
	scans    uint64               // scans begun
	ticked   time.Time            // when the last Tick began
	bypassed map[uint64]uint64    // bypassed files and their sizes as last scanned
	busy     map[uint64]bool      // files being demoted or evicted
	streams  map[string]int       // demotions running, by pool
	totals   Totals
	kick     chan struct{} // a demotion or eviction ended, or a writer stalled (Kick); buffered, 1

	demotedC, evictedC, bypassedC prometheus.Counter
}

// ckptSeq is one grant's checkpoint sequence: the files of a directory
// whose names match a glob.
type ckptSeq struct {
	glob  string // the sequence's name: the grant's checkpoint path
	dir   uint64
	match string // the pattern of names
	grant api.Grant
	mtbf  float64
}

// version is a checkpoint file as the last scan saw it.
type version struct {
	pol.Version
	Name     string
	Pool     string
	JobID    string // the grant's job
	OnBuffer bool   // some chunk is on the pool's tier
	Demoted  bool   // every chunk on the buffer has a clean copy on the PFS (or none is on the buffer)
	Open     bool
	Servers  []uint64 // pool servers holding it
	// Chunks are its chunks with data, Buffered those on the buffer
	Chunks, Buffered int
}

// pool is one buffer pool's period state.
type pool struct {
	Name    string
	servers []uint64
	S       float64 // capacity
	Free    float64
	period  time.Duration
	start   time.Time
	base    map[uint64]uint64 // each server's JobWritten at the period's start
	last    map[uint64]api.BBServerState
	history []float64 // DWPP measured in past periods, oldest first
	loads   []float64 // past periods' checkpoint bytes, bypassed ones included, oldest first (pol.PeriodLoad)
	grants  []api.Grant

	declared, dwpp, dwsf float64
	plan                 pol.Plan
	write, demote        float64
	writing              bool
	ctl                  api.BBControl
	placed               float64            // checkpoints sent to the buffer this period, their grants' sizes
	bypassing            map[uint64]float64 // checkpoints sent to the PFS and still being written: their grants' sizes
	bypassed             float64            // checkpoints sent to the PFS this period, their grants' sizes
	canFree              bool               // room will come: versions it can free (demote, evict), or ones being written by writers not waiting for room
	freeing              float64            // bytes of evictions running
	freed                float64            // bytes of evictions ended, ever: an act tells those placement's view may not show yet
	demoteFailed         bool               // its last demotion failed (the PFS may be down)
}

// Totals counts what the manager did.
type Totals = api.BBTotals

// New returns a manager.
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultMTBF <= 0 {
		cfg.DefaultMTBF = 24 * time.Hour
	}
	if cfg.DefaultPeriod <= 0 {
		cfg.DefaultPeriod = time.Hour
	}
	if cfg.Reserve == 0 {
		cfg.Reserve = 4 << 20
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 500 * time.Millisecond
	}
	m := &Manager{cfg: cfg, pools: map[string]*pool{}, versions: map[uint64]*version{}, dirs: map[uint64][]ckptSeq{},
		hints: map[uint64]hint{}, bypassed: map[uint64]uint64{}, busy: map[uint64]bool{}, streams: map[string]int{},
		kick: make(chan struct{}, 1)}
	m.demotedC = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_bb_demoted_bytes_total",
		Help: "Checkpoint bytes demoted from the burst buffer to the PFS."})
	m.evictedC = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_bb_evicted_bytes_total",
		Help: "Bytes of demoted checkpoints' buffer copies dropped to make room."})
	m.bypassedC = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_bb_bypassed_bytes_total",
		Help: "Checkpoint bytes written straight to the PFS (classified cold on arrival)."})
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(m.demotedC, m.evictedC, m.bypassedC)
	}
	return m
}

// demoteStreams is how many files of a pool demote at once (the policy's:
// bypassed checkpoints share the PFS with them).
const demoteStreams = pol.DemoteStreams

// Run ticks until ctx ends; between ticks, a demotion or eviction that
// ends starts the next at once.
func (m *Manager) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if !m.cfg.Now().Before(m.cfg.QuietUntil) {
				m.Tick(ctx)
			}
		case <-m.kick:
			if !m.cfg.Now().Before(m.cfg.QuietUntil) {
				m.tickMu.Lock()
				m.act(ctx)
				m.tickMu.Unlock()
			}
		}
	}
}

// Kick makes the manager start the demotions and evictions the pools
// call for now, without waiting for its next tick: a writer began to wait
// for room (meta.Service.SetOnStall). It does not block.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Tick looks at every pool once: controls, versions, demotions, evictions.
func (m *Manager) Tick(ctx context.Context) {
	m.tickMu.Lock()
	defer m.tickMu.Unlock()
	now := m.cfg.Now()
	grants, err := m.cfg.Grants.List()
	if err != nil {
		m.cfg.Log.Warn("burst buffer: reading the grants failed", "err", err)
		return
	}
	byPool := map[string][]api.Grant{}
	for _, g := range grants {
		byPool[g.Pool] = append(byPool[g.Pool], g)
	}
	servers := m.cfg.NS.Servers()
	m.mu.Lock()
	m.ticked = now
	names := make([]string, 0, len(m.pools))
	for name := range m.pools {
		names = append(names, name)
	}
	m.mu.Unlock()
	for name := range byPool {
		names = append(names, name)
	}
	sort.Strings(names)
	done := map[string]bool{}
	for _, name := range names {
		if done[name] {
			continue
		}
		done[name] = true
		m.control(ctx, now, name, byPool[name], servers)
	}
	m.scan(grants)
	m.act(ctx)
}

// control updates pool name's period state from its servers and sets the
// rates the plan calls for on them; a pool without grants has its
// controls lifted and is forgotten.
func (m *Manager) control(ctx context.Context, now time.Time, name string, grants []api.Grant, servers []wire.ServerInfo) {
	var ids []uint64
	var capacity, used float64
	for _, si := range servers {
		if si.Role == "data" && si.Tier == name && si.Alive {
			ids = append(ids, si.ID)
			capacity += float64(si.Capacity)
			used += float64(min(si.Used, si.Capacity))
		}
	}
	m.mu.Lock()
	p := m.pools[name]
	if p == nil {
		p = &pool{Name: name, start: now, base: map[uint64]uint64{}, last: map[uint64]api.BBServerState{}}
		m.pools[name] = p
	}
	if len(grants) == 0 {
		delete(m.pools, name)
	}
	m.mu.Unlock()
	if len(grants) == 0 {
		m.send(ctx, p, ids, api.BBControl{}) // lift the controls
		return
	}
	// the period and what the grants declare
	pg := make([]pol.Grant, len(grants))
	for i, g := range grants {
		pg[i] = pol.Grant{Job: g.Job, Size: float64(g.Size), Period: g.Period}
	}
	declared, period := pol.Load(m.cfg.Policy, pg)
	T := m.cfg.DefaultPeriod
	if period > 0 {
		T = time.Duration(period * float64(time.Second))
	}
	m.mu.Lock()
	p.servers, p.S, p.Free, p.grants, p.declared, p.period = ids, capacity, capacity-used, grants, declared, T
	m.rollLocked(p, now)
	ctl := m.controlLocked(p, now)
	m.mu.Unlock()
	// the servers answer with what they wrote since the last look: if
	// that changes the controls, they get the new ones at once
	for try := 0; ; try++ {
		m.recordStates(p, m.send(ctx, p, ids, ctl))
		m.mu.Lock()
		next := m.controlLocked(p, now)
		m.mu.Unlock()
		if next == ctl || try == 1 {
			return
		}
		ctl = next
	}
}

// recordStates keeps what pool p's servers answered.
func (m *Manager) recordStates(p *pool, states map[uint64]api.BBServerState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var free float64
	for _, st := range states {
		free += float64(st.Capacity - min(st.Used, st.Capacity))
	}
	if len(states) > 0 {
		p.Free = free // fresher than the heartbeats
	}
	for id, st := range states {
		if b, ok := p.base[id]; !ok || st.JobWritten < b {
			p.base[id] = st.JobWritten // new server, or restarted: counts from here
			if prev, seen := p.last[id]; seen && st.JobWritten < b {
				p.base[id] = st.JobWritten - min(st.JobWritten, prev.JobWritten-b) // keep what it counted before
			}
		}
		p.last[id] = st
	}
}

// rollLocked starts the next period once this one is over, keeping what
// it wrote. Caller holds m.mu.
func (m *Manager) rollLocked(p *pool, now time.Time) {
	if now.Before(p.start.Add(p.period)) {
		return
	}
	keep := func(h []float64, x float64) []float64 {
		h = append(h, x)
		return h[max(0, len(h)-16):]
	}
	p.history, p.loads = keep(p.history, p.dwsf), keep(p.loads, p.dwsf+p.bypassed)
	p.start = p.start.Add(p.period)
	if now.Sub(p.start) >= p.period { // idle periods: none written
		p.history, p.loads = keep(p.history, 0), keep(p.loads, 0)
		p.start = now
	}
	for id, st := range p.last {
		p.base[id] = st.JobWritten
	}
	p.dwsf, p.placed, p.bypassed = 0, 0, 0
}

// controlLocked computes pool p's DWSF, DWPP, plan and rates now, and the
// controls for each of its servers. Caller holds m.mu.
func (m *Manager) controlLocked(p *pool, now time.Time) api.BBControl {
	var dwsf float64
	writing := false
	for id, st := range p.last {
		if !slices.Contains(p.servers, id) {
			continue
		}
		dwsf += float64(st.JobWritten - min(st.JobWritten, p.base[id]))
		writing = writing || st.LastJobWrite != 0 && now.Sub(time.Unix(0, st.LastJobWrite)) < m.cfg.Idle
	}
	p.dwsf, p.writing = dwsf, writing
	p.dwpp = max(pol.PredictDWPP(p.history, p.declared), dwsf)
	r := m.cfg.Rates
	// the servers switch demotion between the rate while jobs write and
	// the idle rate themselves, at the pace of their own writes
	ctl := api.BBControl{Sched: m.cfg.Policy != pol.Dedicated, Gap: m.cfg.Gap, MaxWait: m.cfg.MaxWait, Idle: m.cfg.ServerIdle}
	if r.Validate() != nil {
		// no rates (dedicated without --bb-rates): no caps; demotion
		// while idle
		p.plan = pol.Plan{Pattern: pol.IdleOnly, Start: p.S, Full: p.S}
		p.write, p.demote = 0, 0
		ctl.DemoteHold = true
		return ctl
	}
	pl, err := pol.PlanPeriod(m.cfg.Policy, p.dwpp, p.S, r)
	if err != nil {
		m.cfg.Log.Warn("burst buffer: no plan", "pool", p.Name, "err", err)
	}
	p.plan = pl
	p.write, p.demote = pol.Throttle(m.cfg.Policy, pl, dwsf, p.dwpp, writing, r)
	w, d := pol.Throttle(m.cfg.Policy, pl, dwsf, p.dwpp, true, r)
	_, idle := pol.Throttle(m.cfg.Policy, pl, dwsf, p.dwpp, false, r)
	n := float64(max(len(p.servers), 1))
	ctl.WriteCap = w / n
	ctl.IdleDemoteCap = idle / n
	// no demotion while jobs write: held until the server is idle; a
	// read held too long goes on at the slowest rate
	ctl.DemoteHold = d == 0
	ctl.DemoteCap = max(d, r.DemoteMin, r.DemoteMax/100) / n
	return ctl
}

// send sets ctl on the servers ids and returns their states.
func (m *Manager) send(ctx context.Context, p *pool, ids []uint64, ctl api.BBControl) map[uint64]api.BBServerState {
	out := map[uint64]api.BBServerState{}
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := m.cfg.NS.BBServer(cctx, id, &ctl)
		cancel()
		if err != nil {
			m.cfg.Log.Info("burst buffer: a pool server did not take its controls", "pool", p.Name, "server", id, "err", err)
			continue
		}
		out[id] = *st
	}
	m.mu.Lock()
	p.ctl = ctl
	m.mu.Unlock()
	return out
}

// planLocked describes pool p's plan now. Caller holds m.mu.
func (m *Manager) planLocked(p *pool) string {
	return fmt.Sprintf("%s, period %s: DWSF %s of DWPP %s (S %s), %s; checkpoints at %s/s, demotion at %s/s",
		m.cfg.Policy, p.period, size.Format(uint64(p.dwsf)), size.Format(uint64(p.dwpp)), size.Format(uint64(p.S)),
		p.plan.Pattern, size.Format(uint64(p.write)), size.Format(uint64(p.demote)))
}

func (m *Manager) logDecision(job, event, reason string) {
	m.cfg.Log.Info("burst buffer: "+event, "job", job, "why", reason)
	if m.cfg.Decisions == nil {
		return
	}
	now := m.cfg.Now()
	v, _ := json.Marshal(fwdmap.Decision{At: now.UnixNano(), Kind: "burst-buffer", Event: event, Reasons: []string{reason}})
	if err := m.cfg.Decisions.PutDecision(job, now, v); err != nil {
		m.cfg.Log.Warn("burst-buffer decision not kept", "job", job, "err", err)
	}
}

// Status is what `sluice bb status` and `scontrol show bbstat` show of the
// Status is the manager's state; PoolStatus a pool's period and plan,
// VersionStatus a checkpoint file (api carries them).
type (
	Status        = api.BBState
	PoolStatus    = api.BBPoolState
	VersionStatus = api.BBVersion
)

// Status returns the manager's state.
func (m *Manager) Status() Status {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Policy: string(m.cfg.Policy), Bypass: m.cfg.Bypass && m.cfg.Policy == pol.BBOS, NoVersions: m.cfg.NoVersions, Totals: m.totals}
	for _, p := range m.pools {
		ps := PoolStatus{Pool: p.Name, Servers: len(p.servers), Capacity: uint64(p.S), Free: uint64(max(p.Free, 0)),
			Period: p.period, Elapsed: now.Sub(p.start), Ticked: now.Sub(m.ticked), DWSF: uint64(p.dwsf), DWPP: uint64(p.dwpp), Declared: uint64(p.declared),
			Pattern: p.plan.Pattern.String(), Start: uint64(p.plan.Start), Full: uint64(p.plan.Full),
			Write: p.write, Demote: p.demote, Writing: p.writing, Demoting: m.streams[p.Name]}
		for _, h := range p.history {
			ps.History = append(ps.History, uint64(h))
		}
		for _, h := range p.loads {
			ps.Loads = append(ps.Loads, uint64(h))
		}
		ps.Bypassed = uint64(p.bypassed)
		for id, s := range p.last {
			if slices.Contains(p.servers, id) {
				ps.Phases += s.Phases
				ps.Preempted += s.Preempted
				ps.Waited += s.Waited
				ps.WaitedTotal += s.WaitedTotal
			}
		}
		st.Pools = append(st.Pools, ps)
	}
	sort.Slice(st.Pools, func(i, j int) bool { return st.Pools[i].Pool < st.Pools[j].Pool })
	for _, v := range m.versions {
		_, bypassed := m.bypassed[v.ID]
		st.Versions = append(st.Versions, VersionStatus{Ino: v.ID, Name: v.Name, Job: v.JobID, Sequence: v.Job, Seq: v.Seq,
			Bytes: v.Bytes, MTBF: v.MTBF, OnBuffer: v.OnBuffer, Demoted: v.Demoted, Open: v.Open, Bypassed: bypassed,
			Chunks: v.Chunks, Buffered: v.Buffered})
	}
	sort.Slice(st.Versions, func(i, j int) bool { return st.Versions[i].Ino < st.Versions[j].Ino })
	return st
}

// Serve adds the manager's operation (api.BBStatus) to t.
func (m *Manager) Serve(t *rpc.Table) {
	rpc.On(t, api.BBStatus, func(context.Context, *wire.Empty) (*api.BBState, error) {
		st := m.Status()
		return &st, nil
	})
}
