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
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta"
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

var _ Namespace = (*meta.Service)(nil)

// Stalls is a Namespace that counts the writers waiting for room on a
// tier (placement's write-stall); the deleters free room for all of them
// at once rather than a checkpoint at a time.
type Stalls interface {
	StalledWriters(tier string) int
	// StalledFile says whether a writer of file ino waits for room on
	// tier.
	StalledFile(tier string, ino uint64) bool
}

var _ Stalls = (*meta.Service)(nil)

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
			m.Tick(ctx)
		case <-m.kick:
			m.tickMu.Lock()
			m.act(ctx)
			m.tickMu.Unlock()
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

// scan reads the grants' checkpoint files: their sequences, sizes, where
// their chunks are and whether they are open.
func (m *Manager) scan(grants []api.Grant) {
	m.mu.Lock()
	m.scans++
	scan := m.scans
	m.mu.Unlock()
	dirs := map[uint64][]ckptSeq{}
	vs := map[uint64]*version{}
	for _, g := range grants {
		seq, err := m.resolve(g)
		if err != nil {
			continue // not made yet
		}
		dirs[seq.dir] = append(dirs[seq.dir], seq)
		var files []*version
		after := ""
		for {
			ents, err := m.cfg.NS.Readdir(seq.dir, after, 1024)
			if err != nil || len(ents) == 0 {
				break
			}
			for _, e := range ents {
				after = e.Name
				if e.Mode&syscall.S_IFMT != syscall.S_IFREG {
					continue
				}
				if ok, _ := path.Match(seq.match, e.Name); !ok || vs[e.Ino] != nil {
					continue
				}
				if v := m.look(e, seq); v != nil {
					files = append(files, v)
				}
			}
			if len(ents) < 1024 {
				break
			}
		}
		// the sequence in the order its files were made
		sort.Slice(files, func(i, j int) bool { return files[i].ID < files[j].ID })
		for i, v := range files {
			v.Seq = i
			vs[v.ID] = v
		}
	}
	m.mu.Lock()
	m.dirs, m.versions = dirs, vs
	for ino, v := range vs {
		if was, ok := m.bypassed[ino]; ok && v.Bytes > was {
			m.totals.Bypassed += v.Bytes - was
			m.bypassedC.Add(float64(v.Bytes - was))
			m.bypassed[ino] = v.Bytes
		}
	}
	// a hint given before the scan began is of a file that was there
	// to list (its entry is made before its first chunk): not listed, it
	// is gone; one given since may be of a file made after the listing,
	// seen by the next scan
	for ino := range m.hints {
		if _, ok := vs[ino]; !ok && !m.busy[ino] && m.hints[ino].scan < scan {
			delete(m.hints, ino)
		}
	}
	// a bypassed checkpoint closed (or gone) no longer holds the PFS
	for _, p := range m.pools {
		for ino := range p.bypassing {
			if v, ok := vs[ino]; !ok && m.hints[ino].tier == "" || ok && !v.Open {
				delete(p.bypassing, ino)
			}
		}
	}
	m.mu.Unlock()
}

// resolve finds grant g's checkpoint directory.
func (m *Manager) resolve(g api.Grant) (ckptSeq, error) {
	glob := g.Checkpoint
	if glob == "" {
		glob = "/.bb/" + g.Job + "/*"
	}
	dir, match := path.Split(glob)
	ino := uint64(meta.RootIno)
	for _, name := range strings.Split(strings.Trim(dir, "/"), "/") {
		if name == "" {
			continue
		}
		a, err := m.cfg.NS.Lookup(ino, name)
		if err != nil {
			return ckptSeq{}, err
		}
		ino = a.Ino
	}
	mtbf := g.MTBF
	if mtbf <= 0 {
		mtbf = m.cfg.DefaultMTBF.Seconds()
	}
	return ckptSeq{glob: glob, dir: ino, match: match, grant: g, mtbf: mtbf}, nil
}

// look reads one checkpoint file's state.
func (m *Manager) look(e wire.DirEntry, seq ckptSeq) *version {
	a, err := m.cfg.NS.Getattr(e.Ino)
	if err != nil {
		return nil
	}
	locs, err := m.cfg.NS.Layout(e.Ino)
	if err != nil {
		return nil
	}
	act, err := m.cfg.NS.Activity(e.Ino)
	if err != nil {
		return nil
	}
	v := &version{Version: pol.Version{ID: e.Ino, Job: seq.glob, MTBF: seq.mtbf, Bytes: a.Size, Written: a.Mtime,
		Used: max(a.Mtime, act.LastOpen, act.LastAccess)},
		Name: e.Name, Pool: seq.grant.Pool, JobID: seq.grant.Job, Open: act.Open > 0, Demoted: true}
	for _, l := range locs {
		if len(l.Servers) > 0 {
			v.Chunks++
		}
		if len(l.Servers) == 0 || l.Tier != seq.grant.Pool {
			continue // cut away, or not on the buffer
		}
		v.Buffered++
		v.OnBuffer = true
		v.Servers = append(v.Servers, l.All()...)
		if len(l.Home) == 0 {
			v.Demoted = false
		}
	}
	return v
}

// act starts the demotions and evictions the pools' states call for.
func (m *Manager) act(ctx context.Context) {
	type job struct {
		v     *version
		evict bool
		why   string
	}
	var jobs []job
	// placement's view of each server's room (its usage as last reported,
	// the chunks promised since counted whole, the evictions done since
	// taken off): what a writer waiting for room waits on. Read before
	// m.mu (placement calls Hint with its lock held).
	placeFree := map[uint64]float64{}
	for _, si := range m.cfg.NS.Servers() {
		if si.Role == "data" && si.Alive {
			placeFree[si.ID] = float64(si.Capacity - min(si.Used, si.Capacity))
		}
	}
	m.mu.Lock()
	for _, p := range m.pools {
		var resident, demotable []pol.Version
		freeable := false
		byID := map[uint64]*version{}
		st, _ := m.cfg.NS.(Stalls)
		for _, v := range m.versions {
			if v.Pool != p.Name || !v.OnBuffer {
				continue
			}
			byID[v.ID] = v
			resident = append(resident, v.Version)
			// writers wait for room only where it will come: a demoted
			// copy to evict (or being evicted), data to demote (or being
			// demoted) while demotion works, or a checkpoint being
			// written whose writer does not wait for room itself (it
			// closes, then demotes). At a burst's start the deleters may
			// have dropped every demoted copy, leaving open checkpoints
			// alone: writers wait then rather than spill to the PFS. If
			// every open checkpoint's writer waits, none can close:
			// placement spills.
			if v.Open {
				freeable = freeable || st != nil && !p.demoteFailed && !st.StalledFile(p.Name, v.ID)
				continue
			}
			freeable = freeable || v.Demoted || !p.demoteFailed
			if !m.busy[v.ID] && !v.Demoted {
				demotable = append(demotable, v.Version)
			}
		}
		p.canFree = freeable
		// the cold order of everything on the buffer (a version is old
		// whether or not its newer one may move now)
		var order []*version
		for _, o := range pol.Order(m.cfg.Policy, resident, !m.cfg.NoVersions) {
			order = append(order, byID[o.ID])
		}
		// demoters: demoteStreams files at a time per pool, the next as
		// soon as one ends, paced by the servers at the plan's rates
		// (held while jobs write where it demotes only while idle)
		for m.streams[p.Name] < demoteStreams {
			v := first(order, func(v *version) bool { return !m.busy[v.ID] && !v.Open && !v.Demoted })
			if v == nil {
				break
			}
			m.busy[v.ID] = true
			m.streams[p.Name]++
			jobs = append(jobs, job{v: v, why: fmt.Sprintf("demote %s (inode %d): coldest of %d on the buffer not on the PFS yet; %s", v.Name, v.ID,
				len(demotable), m.planLocked(p))})
		}
		// deleters: keep room for the largest checkpoint, and one more
		// for each writer waiting for room (a burst of checkpoints at a
		// full buffer), above the reserve placement keeps free for
		// writers to wait at; at most half the buffer
		var room float64
		for _, g := range p.grants {
			room = max(room, float64(g.Size))
		}
		if st != nil {
			room *= float64(1 + st.StalledWriters(p.Name))
		}
		room = min(room, p.S/2) + float64(m.cfg.Reserve)
		// the free space is the servers' at the last tick plus what was
		// evicted since, or placement's now if less: at a burst's start
		// the writes since the tick have taken what the tick saw, and
		// a kick (a writer stalled) between ticks evicted one
		// checkpoint per stalled writer while the rest waited
		free := p.Free
		if pf, ok := sumOf(placeFree, p.servers); ok {
			free = min(free, pf)
		}
		if free += p.freeing; free < room {
			need := room - free
			for _, v := range order {
				if need <= 0 {
					break
				}
				if m.busy[v.ID] || v.Open || !v.Demoted {
					continue
				}
				m.busy[v.ID] = true
				need -= float64(v.Bytes)
				p.freeing += float64(v.Bytes)
				jobs = append(jobs, job{v: v, evict: true, why: fmt.Sprintf("evict %s (inode %d): coldest demoted copy; %s free of %s, room kept for %s",
					v.Name, v.ID, size.Format(uint64(max(p.Free, 0))), size.Format(uint64(p.S)), size.Format(uint64(room)))})
			}
		}
	}
	m.mu.Unlock()
	for _, j := range jobs {
		m.logDecision(j.v.JobID, map[bool]string{false: "demote", true: "evict"}[j.evict], j.why)
		go m.run(ctx, j.v, j.evict)
	}
}

// sumOf is the sum of byID over ids; false if one is missing.
func sumOf(byID map[uint64]float64, ids []uint64) (float64, bool) {
	var sum float64
	for _, id := range ids {
		v, ok := byID[id]
		if !ok {
			return 0, false
		}
		sum += v
	}
	return sum, len(ids) > 0
}

// first is the first of vs that ok takes.
func first(vs []*version, ok func(*version) bool) *version {
	for _, v := range vs {
		if ok(v) {
			return v
		}
	}
	return nil
}

// planLocked describes pool p's plan now. Caller holds m.mu.
func (m *Manager) planLocked(p *pool) string {
	return fmt.Sprintf("%s, period %s: DWSF %s of DWPP %s (S %s), %s; checkpoints at %s/s, demotion at %s/s",
		m.cfg.Policy, p.period, size.Format(uint64(p.dwsf)), size.Format(uint64(p.dwpp)), size.Format(uint64(p.S)),
		p.plan.Pattern, size.Format(uint64(p.write)), size.Format(uint64(p.demote)))
}

// run demotes or evicts v.
func (m *Manager) run(ctx context.Context, v *version, evict bool) {
	began := m.cfg.Now()
	var n uint64
	var chunks int
	var err error
	if evict {
		chunks, err = m.cfg.Mover.Evict(ctx, v.ID)
	} else {
		n, err = m.cfg.Mover.Demote(ctx, v.ID)
	}
	m.mu.Lock()
	delete(m.busy, v.ID)
	p := m.pools[v.Pool]
	switch {
	case evict && p != nil:
		p.freeing -= float64(v.Bytes)
	case p != nil:
		m.streams[v.Pool]--
		// a file moving already (EBUSY) is on its way down: not a
		// demotion that fails
		p.demoteFailed = err != nil && !errors.Is(err, syscall.EBUSY)
	default:
		m.streams[v.Pool]--
	}
	switch {
	case err != nil:
		m.totals.Failed++
	case evict:
		// nothing is copied: the bytes freed are those of the chunks
		// dropped (a checkpoint that spilled while the buffer was full
		// has only some of its chunks there; none if a scan that began
		// before its eviction picked it again)
		if chunks > 0 {
			n = min(v.Bytes, v.Bytes*uint64(chunks)/uint64(max(v.Chunks, 1)))
			m.totals.Evicted += n
			m.totals.EvictedFiles++
		}
		v.OnBuffer, v.Buffered = false, 0
		if p != nil {
			p.Free += float64(n) // until the servers say again
		}
	default:
		if n > 0 {
			m.totals.Demoted += n
			m.totals.DemotedFiles++
		}
		v.Demoted = true
	}
	m.mu.Unlock()
	if err != nil {
		// at the next tick: kicked now, the same file would be picked
		// and fail again at once, round and round
		m.cfg.Log.Info("burst buffer: not done; tried again at the next tick", "ino", v.ID, "evict", evict, "err", err)
		return
	}
	m.cfg.Log.Debug("burst buffer: done", "ino", v.ID, "evict", evict, "chunks", chunks, "bytes", n, "took", m.cfg.Now().Sub(began))
	// the next demotion, or eviction, at once rather than at the tick
	m.Kick()
	if evict {
		m.evictedC.Add(float64(n))
	} else {
		m.demotedC.Add(float64(n))
	}
}

// Hint is placement's hint for a new chunk of file ino (parent, name: its
// entry): "pfs" for a checkpoint the policy classifies cold on arrival
// (bypass), decided once per file at its first chunk, in the period the
// chunk comes in (it rolls the period if the last tick did not). A checkpoint of a
// granted sequence is the manager's from that chunk on (Managed). It is
// called with the metadata service's registry lock held and calls nothing
// back.
func (m *Manager) Hint(ino, parent uint64, name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.hints[ino]; ok {
		return h.tier
	}
	for _, seq := range m.dirs[parent] {
		if ok, _ := path.Match(seq.match, name); !ok {
			continue
		}
		// a checkpoint from its first chunk on, under every policy: the
		// tiering manager leaves it to this one (Managed) before a scan
		// has seen it
		m.hints[ino] = hint{scan: m.scans}
		p := m.pools[seq.grant.Pool]
		if p == nil || !m.cfg.Bypass || m.cfg.Policy != pol.BBOS {
			return ""
		}
		// a checkpoint that begins past the period's end begins the next
		// one, whether or not a tick has rolled it yet (a tick comes up
		// to --bb-every late, or one more late when it runs a hair
		// earlier into its interval than the one that began the period)
		now := m.cfg.Now()
		m.rollLocked(p, now)
		// the pool's sequences: which newest versions the buffer keeps
		var seqs []pol.Sequence
		for _, ds := range m.dirs {
			for _, q := range ds {
				if q.grant.Pool == p.Name {
					seqs = append(seqs, pol.Sequence{Job: q.glob, MTBF: q.mtbf, Bytes: q.grant.Size})
				}
			}
		}
		// what the period has written, or will have once the
		// checkpoints placed on the buffer and waiting for their turn are
		// written
		in := pol.Sequence{Job: seq.glob, MTBF: seq.mtbf, Bytes: seq.grant.Size}
		var queued float64
		for _, b := range p.bypassing {
			queued += b
		}
		load := pol.PeriodLoad(p.loads, p.declared, p.dwsf, p.bypassed)
		at := pol.Period{DWPP: load, DWSF: max(p.dwsf, p.placed), Load: p.declared, S: p.S, T: p.period.Seconds(),
			Left: p.start.Add(p.period).Sub(now).Seconds(), PFS: m.cfg.Rates.DemoteMax, Queued: queued, Bypassing: len(p.bypassing)}
		d := ""
		if pol.Bypass(seqs, in, at) {
			d = "pfs"
			m.totals.BypassedFiles++
			m.bypassed[ino] = 0
			if p.bypassing == nil {
				p.bypassing = map[uint64]float64{}
			}
			p.bypassing[ino] = float64(seq.grant.Size)
			go m.logDecision(seq.grant.Job, "bypass", fmt.Sprintf("%s (inode %d) straight to the PFS: the period writes %s (%s so far) through a %s buffer and the buffer keeps the newest versions of %d applications likelier to restart (MTBF %s)",
				name, ino, size.Format(uint64(load)), size.Format(uint64(p.dwsf+p.bypassed)), size.Format(uint64(p.S)), hotter(seqs, in, p.S), time.Duration(seq.mtbf*float64(time.Second))))
			p.bypassed += float64(seq.grant.Size)
		}
		if d == "" {
			p.placed += float64(seq.grant.Size)
		}
		m.hints[ino] = hint{tier: d, scan: m.scans}
		return d
	}
	return ""
}

// hotter counts the hot sequences (pol.Hot) likelier to restart than in.
func hotter(seqs []pol.Sequence, in pol.Sequence, s float64) int {
	hot := pol.Hot(seqs, s)
	n := 0
	for _, q := range seqs {
		if hot[q.Job] && q.MTBF <= in.MTBF && q.Job != in.Job {
			n++
		}
	}
	return n
}

// hint is placement's hint for a checkpoint: its tier ("pfs": bypassed,
// "": none) and the scans begun when it was given (Manager.scans).
type hint struct {
	tier string
	scan uint64
}

// Managed says whether file ino is a checkpoint the manager moves (the
// tiering manager leaves it alone).
func (m *Manager) Managed(ino uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.versions[ino]
	_, hinted := m.hints[ino]
	return ok || hinted
}

// StallReserve is the free space placement keeps on data server si for
// writers to wait at: Reserve on a server of a pool where room will come
// (checkpoints the manager can demote or evict, or ones being written by
// writers that do not wait for room), so that a full buffer makes
// checkpoints wait for room (the paper's stop) instead of spilling; 0
// elsewhere.
func (m *Manager) StallReserve(si wire.ServerInfo) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[si.Tier]; p != nil && p.canFree && slices.Contains(p.servers, si.ID) {
		return m.cfg.Reserve
	}
	return 0
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
