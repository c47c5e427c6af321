// Package forwarding is the forwarding-map manager: it runs inside the
// metadata daemon or in a manager daemon of its own (daemon/managerd),
// keeps the running jobs (registered at start with their
// compute nodes, unregistered at end), asks the DFRA policy (policy/dfra)
// where each job's I/O should go, and answers clients asking which
// forwarding nodes serve a job on a node. It re-decides jobs whose
// forwarding nodes turn fail-slow or die.
//
// It owns the job table and the current assignments, kept where a
// successor finds them (Config.Jobs: the metadata daemon's engine), so a
// restarted or new metadata daemon resumes with the running jobs. It must
// not move data or talk to clients on its own: clients poll it.
package forwarding

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/store"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/dfra"
)

// DecisionLog keeps decisions beyond a job's end and a restart of the
// manager (Beacon's store in the metadata daemon).
type DecisionLog interface {
	PutDecision(job string, at time.Time, v []byte) error
	Decisions(job string) ([][]byte, error)
}

var _ DecisionLog = (*store.Store)(nil)

// JobStore keeps the registered jobs beyond the manager's process
// (meta/fwdjobs on the metadata daemon's engine).
type JobStore interface {
	SaveJob(job string, v []byte) error
	DeleteJob(job string) error
	Jobs() (map[string][]byte, error)
}

// Config configures the manager.
type Config struct {
	// Jobs keeps the registered jobs (nil: in memory only, lost with the
	// process).
	Jobs   JobStore
	Policy dfra.Config
	// Mode is "dfra" (default) or "ffm": the fixed mapping for every job,
	// blind to fail-slow nodes, for comparisons.
	Mode string
	// FwdCapacity is B_f, a forwarding node's bandwidth (bytes/s), when
	// the node does not say (default 1 GB/s).
	FwdCapacity float64
	Servers     func() []wire.ServerInfo
	Health      func() []beacon.SlowServer
	Profile     func(key string) (beacon.Profile, bool)
	// OnStart is called when a job starts, with its application's profile
	// (nil: none); the daemon hands the profile's inputs to pre-migration.
	// It must not block.
	OnStart func(spec fwdmap.JobSpec, p *beacon.Profile)
	// OnEnd is called when a job ends (it must not block).
	OnEnd func(id string)
	// Decisions keeps every decision (nil: the last ones in memory).
	Decisions DecisionLog
	Log       *slog.Logger
	Now       func() time.Time
}

type job struct {
	spec fwdmap.JobSpec
	a    dfra.Assignment
	ver  uint64
	at   time.Time
}

// stored is a job as JobStore keeps it.
type stored struct {
	Spec       fwdmap.JobSpec
	Assignment dfra.Assignment
	Version    uint64
	Since      int64 // unix ns
}

// Manager keeps jobs and their forwarding nodes.
type Manager struct {
	cfg Config

	mu   sync.Mutex // guards jobs, ver, mem
	jobs map[string]*job
	ver  uint64
	mem  map[string][]fwdmap.Decision // decisions when Config.Decisions is nil
}

// New returns a manager.
func New(cfg Config) *Manager {
	if cfg.FwdCapacity <= 0 {
		cfg.FwdCapacity = 1e9
	}
	if cfg.Mode == "" {
		cfg.Mode = "dfra"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, jobs: map[string]*job{}, mem: map[string][]fwdmap.Decision{}}
	m.load()
	return m
}

// load takes the jobs Config.Jobs kept (a predecessor's).
func (m *Manager) load() {
	if m.cfg.Jobs == nil {
		return
	}
	kept, err := m.cfg.Jobs.Jobs()
	if err != nil {
		m.cfg.Log.Warn("reading the registered jobs: they fall back to the fixed mapping", "err", err)
		return
	}
	for id, v := range kept {
		var st stored
		if err := json.Unmarshal(v, &st); err != nil {
			m.cfg.Log.Warn("a registered job's record does not decode: left out", "job", id, "err", err)
			continue
		}
		m.jobs[id] = &job{spec: st.Spec, a: st.Assignment, ver: st.Version, at: time.Unix(0, st.Since)}
		m.ver = max(m.ver, st.Version)
	}
	if len(m.jobs) > 0 {
		m.cfg.Log.Info("registered jobs resumed from the engine", "jobs", len(m.jobs))
	}
}

// saveLocked keeps j where a successor finds it. Caller holds mu.
func (m *Manager) saveLocked(j *job) error {
	if m.cfg.Jobs == nil {
		return nil
	}
	v, _ := json.Marshal(stored{Spec: j.spec, Assignment: j.a, Version: j.ver, Since: j.at.UnixNano()})
	return m.cfg.Jobs.SaveJob(j.spec.ID, v)
}

// recordLocked logs a decision about job j.
func (m *Manager) recordLocked(id, event string, a dfra.Assignment) {
	d := fwdmap.Decision{At: m.cfg.Now().UnixNano(), Event: event, Fwds: a.Fwds, Policy: a.Policy, Dedicated: a.Dedicated, Reasons: a.Reasons}
	if m.cfg.Decisions == nil {
		if len(m.mem) > 4096 {
			clear(m.mem)
		}
		m.mem[id] = append(m.mem[id], d)
		return
	}
	v, _ := json.Marshal(d)
	if err := m.cfg.Decisions.PutDecision(id, time.Unix(0, d.At), v); err != nil {
		m.cfg.Log.Warn("decision not kept", "job", id, "err", err)
	}
}

// History returns the decisions about a job, oldest first.
func (m *Manager) History(id string) ([]fwdmap.Decision, error) {
	if m.cfg.Decisions == nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		return append([]fwdmap.Decision(nil), m.mem[id]...), nil
	}
	vs, err := m.cfg.Decisions.Decisions(id)
	if err != nil {
		return nil, err
	}
	out := make([]fwdmap.Decision, 0, len(vs))
	for _, v := range vs {
		var d fwdmap.Decision
		if json.Unmarshal(v, &d) == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// fwds returns the forwarding layer as the policy sees it, and addresses.
func (m *Manager) fwds() ([]dfra.Fwd, map[string]string) {
	slow := map[string]bool{}
	// the static mapping (FFM mode) does not know about fail-slow nodes,
	// as on TaihuLight before DFRA; it only skips dead ones
	if m.cfg.Health != nil && m.cfg.Mode == "dfra" {
		for _, h := range m.cfg.Health() {
			slow[h.Server] = true
		}
	}
	var out []dfra.Fwd
	addr := map[string]string{}
	for _, s := range m.cfg.Servers() {
		if s.Role != "fwd" {
			continue
		}
		id := fmt.Sprintf("fwd-%d", s.ID)
		out = append(out, dfra.Fwd{ID: id, Capacity: m.cfg.FwdCapacity, Alive: s.Alive, Slow: slow[id]})
		addr[id] = s.Addr
	}
	return out, addr
}

func (m *Manager) profileOf(spec fwdmap.JobSpec) *beacon.Profile {
	if m.cfg.Profile == nil || spec.App == "" {
		return nil
	}
	key := beacon.AppKey(spec.App, spec.User)
	if p, ok := m.cfg.Profile(key); ok {
		return &p
	}
	return nil
}

// policyJobLocked is a job as the policy sees it: in FFM mode without its
// profile, so the policy keeps the fixed mapping.
func (m *Manager) policyJobLocked(spec fwdmap.JobSpec) dfra.Job {
	dj := dfra.Job{ID: spec.ID, App: spec.App, Nodes: spec.Nodes}
	if m.cfg.Mode == "dfra" {
		dj.Profile = m.profileOf(spec)
	}
	return dj
}

func (m *Manager) placedLocked(except string) []dfra.Assignment {
	var out []dfra.Assignment
	for id, j := range m.jobs {
		if id != except {
			out = append(out, j.a)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Job < out[k].Job })
	return out
}

// Start registers a job and places it.
func (m *Manager) Start(spec fwdmap.JobSpec) (fwdmap.Placement, error) {
	if spec.ID == "" || len(spec.Nodes) == 0 {
		return fwdmap.Placement{}, rpc.Errorf(syscall.EINVAL, "a job needs an id and compute nodes")
	}
	fwds, addr := m.fwds()
	if m.cfg.OnStart != nil {
		defer m.cfg.OnStart(spec, m.profileOf(spec)) // after the lock below is released
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a := dfra.Decide(m.cfg.Policy, fwds, m.placedLocked(spec.ID), m.policyJobLocked(spec))
	if m.cfg.Mode != "dfra" {
		a.Reasons = append([]string{"manager in FFM mode"}, a.Reasons...)
	}
	m.ver++
	j := &job{spec: spec, a: a, ver: m.ver, at: m.cfg.Now()}
	if err := m.saveLocked(j); err != nil {
		return fwdmap.Placement{}, fmt.Errorf("keeping job %s: %w", spec.ID, err)
	}
	m.jobs[spec.ID] = j
	m.recordLocked(spec.ID, "start", a)
	m.cfg.Log.Info("job placed", "job", spec.ID, "app", spec.App, "nodes", len(spec.Nodes), "fwds", strings.Join(a.Fwds, ","),
		"policy", a.Policy, "dedicated", a.Dedicated, "why", strings.Join(a.Reasons, "; "))
	return m.placement(j, addr), nil
}

// End unregisters a job: its nodes revert to the fixed mapping.
func (m *Manager) End(id string) {
	if m.cfg.OnEnd != nil {
		defer m.cfg.OnEnd(id) // after the lock below is released
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.jobs[id]; ok {
		if m.cfg.Jobs != nil {
			if err := m.cfg.Jobs.DeleteJob(id); err != nil {
				m.cfg.Log.Warn("forgetting an ended job in the engine", "job", id, "err", err)
			}
		}
		delete(m.jobs, id)
		m.recordLocked(id, "end", dfra.Assignment{Reasons: []string{"job ended: its compute nodes are back on the fixed mapping"}})
		m.cfg.Log.Info("job ended, forwarding nodes released", "job", id)
	}
}

func (m *Manager) placement(j *job, addr map[string]string) fwdmap.Placement {
	p := fwdmap.Placement{Job: j.spec.ID, Policy: j.a.Policy, Dedicated: j.a.Dedicated, Reasons: j.a.Reasons,
		Version: j.ver, Since: j.at.UnixNano()}
	for _, f := range j.a.Fwds {
		p.Fwds = append(p.Fwds, fwdmap.Target{ID: f, Addr: addr[f]})
	}
	return p
}

// Map returns the forwarding nodes serving a job on a node: if the job is
// registered, the share of its placement that serves the node (all of it
// for a node that is not one of the job's), else the fixed mapping of the
// node.
func (m *Manager) Map(jobID, node string) (fwdmap.Placement, error) {
	fwds, addr := m.fwds()
	m.mu.Lock()
	j := m.jobs[jobID]
	if j != nil {
		a := j.a
		a.Fwds = dfra.Share(m.cfg.Policy, fwds, j.a, j.spec.Nodes, node)
		p := m.placement(&job{spec: j.spec, a: a, ver: j.ver, at: j.at}, addr)
		m.mu.Unlock()
		// the mount goes on through these, in turn, when its node is
		// lost, until Check has remapped the job
		if len(a.Fwds) > 0 {
			for _, f := range dfra.StandIns(a.Fwds[0], fwds) {
				p.Fallbacks = append(p.Fallbacks, fwdmap.Target{ID: f, Addr: addr[f]})
			}
		}
		return p, nil
	}
	m.mu.Unlock()
	a := dfra.Decide(m.cfg.Policy, fwds, nil, dfra.Job{ID: jobID, Nodes: []string{node}})
	if len(a.Fwds) == 0 {
		return fwdmap.Placement{}, rpc.Errorf(syscall.EIO, "no live forwarding node registered")
	}
	p := fwdmap.Placement{Job: jobID, Policy: "ffm", Reasons: []string{"job not registered: fixed mapping"}}
	for _, f := range a.Fwds {
		p.Fwds = append(p.Fwds, fwdmap.Target{ID: f, Addr: addr[f]})
	}
	for _, f := range dfra.StandIns(a.Fwds[0], fwds) {
		p.Fallbacks = append(p.Fallbacks, fwdmap.Target{ID: f, Addr: addr[f]})
	}
	return p, nil
}

// List returns every registered job's placement.
func (m *Manager) List() []fwdmap.Placement {
	_, addr := m.fwds()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fwdmap.Placement
	for _, j := range m.jobs {
		out = append(out, m.placement(j, addr))
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Job < out[k].Job })
	return out
}

// Check re-decides jobs whose forwarding nodes became fail-slow or dead.
func (m *Manager) Check() {
	fwds, _ := m.fwds()
	m.mu.Lock()
	defer m.mu.Unlock()
	placed := m.placedLocked("")
	jobs := make(map[string]dfra.Job, len(m.jobs))
	for id, j := range m.jobs {
		jobs[id] = m.policyJobLocked(j.spec)
	}
	out, moved := dfra.Remap(m.cfg.Policy, fwds, placed, jobs)
	for _, i := range moved {
		a := out[i]
		j := m.jobs[a.Job]
		m.ver++
		j.a, j.ver, j.at = a, m.ver, m.cfg.Now()
		if err := m.saveLocked(j); err != nil {
			m.cfg.Log.Warn("keeping a remapped job in the engine", "job", a.Job, "err", err)
		}
		m.recordLocked(a.Job, "remap", a)
		m.cfg.Log.Warn("job remapped", "job", a.Job, "from", strings.Join(placed[i].Fwds, ","), "fwds", strings.Join(a.Fwds, ","))
	}
}

// Run calls Check on every tick until ctx ends.
func (m *Manager) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			m.Check()
		}
	}
}

// Serve adds the forwarding map's operations (fwdmap) to t.
func (m *Manager) Serve(t *rpc.Table) {
	rpc.On(t, fwdmap.Start, func(_ context.Context, spec *fwdmap.JobSpec) (*fwdmap.Placement, error) {
		pl, err := m.Start(*spec)
		if err != nil {
			return nil, err
		}
		return &pl, nil
	})
	rpc.On(t, fwdmap.End, func(_ context.Context, q *fwdmap.JobRef) (*wire.Empty, error) {
		m.End(q.Job)
		return &wire.Empty{}, nil
	})
	rpc.On(t, fwdmap.Map, func(_ context.Context, q *fwdmap.MapReq) (*fwdmap.Placement, error) {
		pl, err := m.Map(q.Job, q.Node)
		if err != nil {
			return nil, err
		}
		return &pl, nil
	})
	rpc.On(t, fwdmap.List, func(context.Context, *wire.Empty) (*fwdmap.ListRep, error) {
		return &fwdmap.ListRep{Placements: m.List()}, nil
	})
	rpc.On(t, fwdmap.History, func(_ context.Context, q *fwdmap.JobRef) (*fwdmap.HistoryRep, error) {
		h, err := m.History(q.Job)
		if err != nil {
			return nil, rpc.Errorf(syscall.EIO, "job history: %v", err)
		}
		return &fwdmap.HistoryRep{Decisions: h}, nil
	})
}
