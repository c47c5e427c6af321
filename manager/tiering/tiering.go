// Package tiering is the tier-migration manager: it runs inside the
// metadata daemon, watches every mem/ssd/hdd data server's free space
// and recent bandwidth (heartbeats) and every file's open/close history
// (meta/activity.go), asks the ONFS policy (policy/tiering) what to move
// where, and carries the moves out chunk by chunk with the metadata
// service's consistent migration (meta/move.go). It also answers OpMigrate
// (`sluice file migrate`: move a file to a tier now) and finishes migrations a
// crash left undecided.
//
// It owns the migrations in flight and their figures (soft state). It
// must not copy data itself (the destination data servers do) or decide
// anything the policy decides.
package tiering

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/meta/tierpolicy"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/tiering"
	"github.com/sluice-hpc/sluice/tier"
)

// Namespace is what the manager needs of the metadata service.
type Namespace interface {
	Servers() []wire.ServerInfo
	ServerFiles() (map[uint64][]api.FileUse, error)
	Activity(ino uint64) (wire.Activity, error)
	Layout(ino uint64) ([]wire.ChunkLoc, error)
	MoveChunk(ctx context.Context, ino, idx uint64, tier string, servers []uint64) (uint64, error)
	FinishMoves(ctx context.Context) int
	// ChunkMoves is file ino's unfinished chunk migrations.
	ChunkMoves(ino uint64) ([]api.ChunkMove, error)
	Getattr(ino uint64) (*wire.Attr, error)
	// WakeStalled makes writers waiting at Cs-w look again (a reserve
	// StallReserve gives went to 0).
	WakeStalled()
	// Replicas (repair.go).
	ShortChunks(max int) ([]api.ShortChunk, error)
	Degrade(ctx context.Context, ino, idx, gen, dead uint64) (wire.ChunkLoc, error)
	Replicate(ctx context.Context, ino, idx uint64) (uint64, error)
	DeliverDrops(ctx context.Context) int
	// Drained chunks kept as caches (--keep-cache).
	CopyChunk(ctx context.Context, ino, idx uint64, servers []uint64) (uint64, error)
	EvictChunk(ctx context.Context, ino, idx uint64) (uint64, error)
}

// Policies is the directories' tiering policies (meta/tierpolicy).
type Policies interface {
	// Of is the policy ino follows and the directory it is set on.
	Of(ino uint64) (api.TierPolicy, uint64, error)
	// Any says whether a directory has one.
	Any() bool
	Set(dir uint64, p api.TierPolicy) error
}

var _ Policies = (*tierpolicy.Policies)(nil)

// noPolicies is the policies of a cluster without any.
type noPolicies struct{}

func (noPolicies) Of(uint64) (api.TierPolicy, uint64, error) { return api.TierPolicy{}, 0, nil }
func (noPolicies) Any() bool                                 { return false }
func (noPolicies) Set(uint64, api.TierPolicy) error {
	return rpc.Errorf(syscall.ENOTSUP, "no directory tiering policies here")
}

// Config configures the manager.
type Config struct {
	NS Namespace
	// Dirs is the directories' tiering policies (nil: none)
	Dirs   Policies
	Policy pol.Config
	// Auto runs the policy every tick (false: only OpMigrate moves data).
	Auto bool
	// QuietUntil is when the policy and repairs may start moving data
	// (zero: at once). A metadata server that took over from another
	// waits until mounts have learnt of it and sent what they held (the
	// bytes of files they own, writes closed behind): the old server knew
	// of those, this one does not.
	QuietUntil time.Time
	Log        *slog.Logger
	Now        func() time.Time
	// Metrics receives the manager's series (nil: not exported).
	Metrics prometheus.Registerer
	// PrefetchHold is how long a prefetched file stays pinned on mem
	// waiting for its job to read it (default 10 min).
	PrefetchHold time.Duration
	// DefaultDrain is when files of directories without a policy drain to
	// the PFS: "cool" (the default), "on-close", "now" or "never".
	DefaultDrain string
	// DrainAge is how long a file stays closed before it is cool enough to
	// drain (default 10 min).
	DrainAge time.Duration
	// Decisions keeps the manager's decisions for `sluice job` (Beacon's
	// store; nil: the log only).
	Decisions DecisionLog
	// Managed says whether another manager moves file ino (the burst
	// buffer's checkpoints, manager/bbos): this one then neither moves
	// nor drains it. nil: none.
	Managed func(ino uint64) bool
}

// Manager carries out tier migrations.
type Manager struct {
	cfg Config

	mu        sync.Mutex              // guards the fields below
	inflight  map[uint64]int          // files moving off each server
	migrating map[uint64]bool         // files moving now
	streamBW  map[uint64]float64      // measured bytes/s of one migration stream into each server (EWMA)
	last      map[uint64]pol.Decision // the latest decision per server
	totals    Totals

	kick chan struct{} // a file migration ended (Run looks again); buffered, 1

	prefetches map[string]*prefetch // by job (prefetch.go)
	pinned     map[uint64]int       // files in a prefetch window: not moved down
	draining   int                  // files moving to the PFS now (drain.go)
	// lastDrainScan is when drainTick last looked at every file (only
	// Tick's goroutine uses it)
	lastDrainScan time.Time
	repairing     map[chunkRef]bool      // chunks being copied again (repair.go)
	repairAfter   map[chunkRef]time.Time // chunks whose copy failed: not before then

	moved  *prometheus.CounterVec // bytes, by source and destination tier
	queue  *prometheus.GaugeVec   // migrations in flight, by source tier
	failed prometheus.Counter
}

// Totals counts what the manager moved.
type Totals = api.TierTotals

// New returns a manager.
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PrefetchHold <= 0 {
		cfg.PrefetchHold = 10 * time.Minute
	}
	if cfg.Dirs == nil {
		cfg.Dirs = noPolicies{}
	}
	if cfg.DefaultDrain == "" {
		cfg.DefaultDrain = "cool"
	}
	if cfg.DrainAge <= 0 {
		cfg.DrainAge = 10 * time.Minute
	}
	m := &Manager{cfg: cfg, inflight: map[uint64]int{}, migrating: map[uint64]bool{}, streamBW: map[uint64]float64{},
		last: map[uint64]pol.Decision{}, kick: make(chan struct{}, 1),
		prefetches: map[string]*prefetch{}, pinned: map[uint64]int{},
		repairing: map[chunkRef]bool{}, repairAfter: map[chunkRef]time.Time{}}
	m.moved = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_tiering_migrated_bytes_total",
		Help: "Bytes of chunks migrated between tiers."}, []string{"from", "to"})
	m.queue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tiering_migrations_in_flight",
		Help: "File migrations running, by source tier."}, []string{"tier"})
	m.failed = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_tiering_chunk_moves_failed_total",
		Help: "Chunk migrations aborted (truncated, deleted or a server failed meanwhile)."})
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(m.moved, m.queue, m.failed)
	}
	return m
}

// Run finishes undecided migrations, then on every tick does it again,
// makes lost chunk copies again and (Auto) runs the policy, until ctx
// ends.
//
// A finished file migration, and a writer that begins to wait at Cs-w,
// also run the policy (Kick; at most every 100 ms): a server short of
// space then starts its next moves at once instead of at the next tick,
// so writes waiting at Cs-w go on at the speed the moves free space.
func (m *Manager) Run(ctx context.Context, tick <-chan time.Time) {
	m.cfg.NS.FinishMoves(ctx)
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			m.cfg.NS.FinishMoves(ctx)
			m.cfg.NS.DeliverDrops(ctx)
			if !m.cfg.Now().Before(m.cfg.QuietUntil) {
				m.repairTick(ctx)
			}
		case <-m.kick:
			if d := 100*time.Millisecond - time.Since(last); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
		last = time.Now()
		if m.cfg.Auto && !m.cfg.Now().Before(m.cfg.QuietUntil) {
			m.Tick(ctx)
		}
	}
}

// Tick runs the policy once for every data server above the lowest tier
// and starts the moves it returns (in the background).
func (m *Manager) Tick(ctx context.Context) {
	now := m.cfg.Now()
	servers := m.cfg.NS.Servers()
	var files map[uint64][]api.FileUse
	for _, si := range servers {
		if si.Role != "data" || !si.Alive || si.Tier == "pfs" || si.Capacity == 0 {
			continue
		}
		src := m.observe(si, nil)
		d := pol.Plan(now, m.cfg.Policy, src, si.Rank, nil)
		if d.Mode == pol.Calm {
			m.setDecision(si.ID, d)
			continue
		}
		if files == nil {
			var err error
			if files, err = m.cfg.NS.ServerFiles(); err != nil {
				m.cfg.Log.Warn("tiering: listing files per server failed", "err", err)
				return
			}
		}
		src = m.observe(si, files[si.ID])
		for i := range src.Files {
			src.Files[i].Pinned = src.Files[i].Pinned || m.pinnedOn(src.Files[i].Ino, si.Tier) || m.managed(src.Files[i].Ino)
		}
		d = pol.Plan(now, m.cfg.Policy, src, si.Rank, m.targets(servers, si.Rank))
		m.setDecision(si.ID, d)
		if len(d.Moves) > 0 {
			m.logPlan(si, d)
		}
		for _, mv := range d.Moves {
			m.cfg.Log.Info("tiering: moving a file down", "ino", mv.Ino, "bytes", mv.Bytes, "from", si.ID, "tier", si.Tier,
				"to", mv.To, "to-tier", mv.Tier, "mode", d.Mode.String(), "forced", mv.Forced, "coolness", mv.Coolness, "n", d.Concurrency)
			m.start(si.ID, si.Tier, mv.Ino)
			go func(mv pol.Move, from uint64, fromTier string) {
				defer m.done(from, fromTier, mv.Ino)
				m.moveFile(ctx, mv.Ino, from, mv.Tier, mv.To)
			}(mv, si.ID, si.Tier)
		}
	}
	m.drainTick(ctx, now, servers, files)
}

func (m *Manager) setDecision(id uint64, d pol.Decision) {
	m.mu.Lock()
	was, seen := m.last[id]
	m.last[id] = d
	wake := pol.Stuck(d, m.inflight[id]) && (!seen || !pol.Stuck(was, m.inflight[id]))
	m.mu.Unlock()
	if wake {
		m.cfg.NS.WakeStalled() // their wait is in vain now: let them spill
	}
}

func (m *Manager) managed(ino uint64) bool {
	return m.cfg.Managed != nil && m.cfg.Managed(ino)
}

// StallReserve is the free space placement keeps on data server si for
// writes to wait at (meta.Service.SetStallReserve): its Cs-w, so that new
// chunks wait for the space migration frees rather than take the
// server's last bytes. It is 0 where waiting would be in vain: with
// tiering manual, and while the policy, looking with nothing moving off a
// server short of space, found nothing to move (pol.Stuck; new chunks then
// take the last free bytes and go on to a lower tier). A server the policy has not looked at yet gets the Cs-w it
// would decide, so that one filling before the first tick waits too.
func (m *Manager) StallReserve(si wire.ServerInfo) uint64 {
	if !m.cfg.Auto || si.Tier == "pfs" || si.Capacity == 0 {
		return 0
	}
	d, stuck := m.decisionFor(si)
	if stuck {
		return 0
	}
	return d.Thresholds.StallWrite
}

// decisionFor is the policy's latest decision for server si, and whether
// it found nothing to move off it while short of space. A server it has
// not looked at yet gets what the policy would decide now without its
// files (the thresholds, which is what the callers need).
func (m *Manager) decisionFor(si wire.ServerInfo) (d pol.Decision, stuck bool) {
	m.mu.Lock()
	d, seen := m.last[si.ID]
	stuck = seen && pol.Stuck(d, m.inflight[si.ID])
	m.mu.Unlock()
	if !seen {
		d = pol.Plan(m.cfg.Now(), m.cfg.Policy, m.observe(si, nil), si.Rank, nil)
	}
	return d, stuck
}

func (m *Manager) start(from uint64, tier string, ino uint64) {
	m.mu.Lock()
	m.inflight[from]++
	m.migrating[ino] = true
	m.mu.Unlock()
	m.queue.WithLabelValues(tier).Inc()
}

func (m *Manager) done(from uint64, tier string, ino uint64) {
	m.mu.Lock()
	m.inflight[from]--
	delete(m.migrating, ino)
	m.mu.Unlock()
	m.queue.WithLabelValues(tier).Dec()
	m.Kick()
}

// Kick has Run look again now (at most every 100 ms) rather than at the
// next tick: a migration ended, or a writer began to wait for room at
// Cs-w (meta.Service.SetOnStall), whose wait the moves the look starts
// shorten.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// observe builds the policy's view of data server si holding files.
func (m *Manager) observe(si wire.ServerInfo, files []api.FileUse) pol.Server {
	m.mu.Lock()
	s := pol.Server{ID: si.ID, Tier: si.Tier, Capacity: si.Capacity, Used: si.Used, WriteBW: float64(si.WriteBW),
		InFlight: m.inflight[si.ID]}
	migrating, pinned := map[uint64]bool{}, map[uint64]bool{}
	for ino := range m.migrating {
		migrating[ino] = true
	}
	for ino := range m.pinned {
		pinned[ino] = true
	}
	m.mu.Unlock()
	for _, f := range files {
		a, err := m.cfg.NS.Activity(f.Ino)
		if err != nil {
			continue // deleted meanwhile
		}
		pf := pol.File{Ino: f.Ino, Bytes: f.Bytes, Open: a.Open > 0, MeanTco: a.MeanTco, MeanToc: a.MeanToc,
			Migrating: migrating[f.Ino], Pinned: pinned[f.Ino]}
		if a.LastClose != 0 {
			pf.LastClose = time.Unix(0, a.LastClose)
		}
		// the last read or write the forwarding daemons reported; the
		// last open if later (or none reported)
		if last := max(a.LastOpen, a.LastAccess); last != 0 {
			pf.LastAccess = time.Unix(0, last)
		}
		s.Files = append(s.Files, pf)
	}
	return s
}

// targets are the live servers of the tiers below rank.
func (m *Manager) targets(servers []wire.ServerInfo, rank uint32) []pol.Target {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []pol.Target
	for _, si := range servers {
		if si.Role != "data" || si.Rank <= rank {
			continue
		}
		t := pol.Target{ID: si.ID, Tier: si.Tier, Rank: si.Rank, Alive: si.Alive, Unbounded: si.Tier == "pfs",
			StreamBW: m.streamBW[si.ID]}
		if t.StreamBW == 0 {
			t.StreamBW = float64(si.WriteBW) // until a migration into it was measured
		}
		if si.Capacity > si.Used {
			t.Free = si.Capacity - si.Used
		}
		out = append(out, t)
	}
	return out
}

// group picks the destination group for a chunk striped over g servers:
// first (the policy's choice) and the other live servers of tier with the
// most free space, as many as there are up to g.
func group(servers []wire.ServerInfo, tier string, first uint64, g int) []uint64 {
	out := []uint64{}
	var rest []wire.ServerInfo
	for _, si := range servers {
		if si.Role != "data" || si.Tier != tier || !si.Alive {
			continue
		}
		if si.ID == first {
			out = append(out, first)
		} else {
			rest = append(rest, si)
		}
	}
	sort.Slice(rest, func(i, j int) bool {
		fi, fj := int64(rest[i].Capacity)-int64(rest[i].Used), int64(rest[j].Capacity)-int64(rest[j].Used)
		if fi != fj {
			return fi > fj
		}
		return rest[i].ID < rest[j].ID
	})
	if len(out) == 0 && len(rest) > 0 {
		out, rest = append(out, rest[0].ID), rest[1:]
	}
	for _, si := range rest {
		if len(out) >= g {
			break
		}
		out = append(out, si.ID)
	}
	return out
}

// moveFile moves every chunk of ino held by server from (every chunk not
// on tier, if from is 0) to tier, with to first in each destination
// group (0: the emptiest server of the tier). It returns the chunks moved
// and the first error.
func (m *Manager) moveFile(ctx context.Context, ino, from uint64, tierName string, to uint64) (int, error) {
	n, _, err := m.moveFileAs(ctx, ino, from, tierName, to, false)
	return n, err
}

// moveFileAs is moveFile; keep (a drain to the pfs tier with
// --keep-cache) copies the chunks there, leaving them where they are as
// clean caches. A chunk that is such a cache moving down anywhere is
// evicted to its home instead of copied. It also returns the bytes moved.
func (m *Manager) moveFileAs(ctx context.Context, ino, from uint64, tierName string, to uint64, keep bool) (int, uint64, error) {
	locs, err := m.cfg.NS.Layout(ino)
	if err != nil {
		return 0, 0, err
	}
	rank, ok := tier.Rank(tierName)
	if !ok {
		return 0, 0, rpc.Errorf(syscall.EINVAL, "unknown tier %q", tierName)
	}
	moved := 0
	var total uint64
	var first error
	for _, l := range locs {
		if l.Tier == tierName || from != 0 && !contains(l.All(), from) {
			continue
		}
		here, _ := tier.Rank(l.Tier)
		var dst []uint64
		var bytes uint64
		start := m.cfg.Now()
		switch {
		case len(l.Home) > 0 && rank > here:
			if keep {
				continue // drained already
			}
			dst = l.Home
			bytes, err = m.cfg.NS.EvictChunk(ctx, ino, l.Idx)
		default:
			dst = group(m.cfg.NS.Servers(), tierName, to, len(l.Servers))
			if len(dst) == 0 {
				return moved, total, rpc.Errorf(syscall.ENOSPC, "no live data server in the %s tier (rank %d)", tierName, rank)
			}
			if keep && tierName == "pfs" {
				bytes, err = m.cfg.NS.CopyChunk(ctx, ino, l.Idx, dst)
			} else {
				bytes, err = m.cfg.NS.MoveChunk(ctx, ino, l.Idx, tierName, dst)
			}
		}
		if err != nil {
			m.failed.Inc()
			m.mu.Lock()
			m.totals.Failed++
			m.mu.Unlock()
			m.cfg.Log.Info("tiering: chunk not moved", "ino", ino, "chunk", l.Idx, "to", tierName, "err", err)
			if first == nil {
				first = err
			}
			continue
		}
		moved++
		total += bytes
		d := m.cfg.Now().Sub(start).Seconds()
		m.moved.WithLabelValues(l.Tier, tierName).Add(float64(bytes))
		m.mu.Lock()
		m.totals.Chunks++
		m.totals.Bytes += bytes
		if d > 0 && bytes >= 1<<20 {
			bw := float64(bytes) / d
			if old := m.streamBW[dst[0]]; old > 0 {
				bw = 0.7*old + 0.3*bw
			}
			m.streamBW[dst[0]] = bw
		}
		m.mu.Unlock()
	}
	if moved > 0 {
		m.mu.Lock()
		m.totals.Files++
		m.mu.Unlock()
	}
	return moved, total, first
}

func contains(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Migrate moves file ino to tier now (OpMigrate), in the background
// unless wait is set; it returns the chunks moved when waited for.
func (m *Manager) Migrate(ctx context.Context, ino uint64, tierName string, wait bool) (int, error) {
	if _, ok := tier.Rank(tierName); !ok {
		return 0, rpc.Errorf(syscall.EINVAL, "unknown tier %q (want mem, ssd, hdd or pfs)", tierName)
	}
	if err := m.claim(ino); err != nil {
		return 0, err
	}
	run := func(ctx context.Context) (int, error) {
		defer m.release(ino)
		return m.moveFile(ctx, ino, 0, tierName, 0)
	}
	if wait {
		return run(ctx)
	}
	go run(context.Background())
	return 0, nil
}

// Demote copies every chunk of file ino that is not on the PFS to the
// pfs tier and keeps the fast copies as clean caches (a drain with
// --keep-cache): the burst-buffer manager's demotion (manager/bbos). It
// returns the bytes copied; EBUSY if the file is migrating already.
func (m *Manager) Demote(ctx context.Context, ino uint64) (uint64, error) {
	return m.exclusive(ino, func() (uint64, error) {
		_, n, err := m.moveFileAs(ctx, ino, 0, "pfs", 0, true)
		return n, err
	})
}

// Evict drops the fast copies of file ino's chunks that have a clean copy
// on the PFS (the burst buffer's deleters); chunks without one stay. It
// returns the chunks evicted.
func (m *Manager) Evict(ctx context.Context, ino uint64) (int, error) {
	n, err := m.exclusive(ino, func() (uint64, error) {
		locs, err := m.cfg.NS.Layout(ino)
		if err != nil {
			return 0, err
		}
		var evicted uint64
		for _, l := range locs {
			if len(l.Home) == 0 || l.Tier == "pfs" {
				continue
			}
			if _, err := m.cfg.NS.EvictChunk(ctx, ino, l.Idx); err != nil {
				return evicted, err
			}
			evicted++
		}
		return evicted, nil
	})
	return int(n), err
}

// exclusive runs f as file ino's only migration.
func (m *Manager) exclusive(ino uint64, f func() (uint64, error)) (uint64, error) {
	if err := m.claim(ino); err != nil {
		return 0, err
	}
	defer m.release(ino)
	return f()
}

// claim marks file ino migrating, or says it is already.
func (m *Manager) claim(ino uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.migrating[ino] {
		return rpc.Errorf(syscall.EBUSY, "inode %d is migrating already", ino)
	}
	m.migrating[ino] = true
	return nil
}

func (m *Manager) release(ino uint64) {
	m.mu.Lock()
	delete(m.migrating, ino)
	m.mu.Unlock()
}

// Status is the latest decisions and the totals; ServerStatus one
// server's latest decision (api carries them).
type (
	Status       = api.TierState
	ServerStatus = api.TierServer
)

// Status returns the latest decisions and the totals.
func (m *Manager) Status() Status {
	m.mu.Lock()
	st := Status{Totals: m.totals}
	for id, d := range m.last {
		st.Servers = append(st.Servers, ServerStatus{ID: id, Mode: d.Mode.String(), StallWrite: d.Thresholds.StallWrite,
			ForcedOut: d.Thresholds.ForcedOut, NormalOut: d.Thresholds.NormalOut, Concurrency: d.Concurrency,
			InFlight: m.inflight[id], Reason: d.Reason})
	}
	m.mu.Unlock()
	sort.Slice(st.Servers, func(i, j int) bool { return st.Servers[i].ID < st.Servers[j].ID })
	st.Prefetch = m.Prefetches()
	return st
}

// PolicyView is the answer to "tier-get": the policy a file or directory
// follows, the directory it is set on (0: none) and the manager's drain
// PolicyView is the policy a file follows and where from; FileState a
// file's migration state; ChunkMove one unfinished chunk migration.
type (
	PolicyView = api.PolicyView
	FileState  = api.FileMigrationState
	ChunkMove  = api.ChunkMove
)

// FileState returns file ino's migration state.
func (m *Manager) FileState(ino uint64) (FileState, error) {
	m.mu.Lock()
	st := FileState{Migrating: m.migrating[ino]}
	m.mu.Unlock()
	var err error
	st.Chunks, err = m.cfg.NS.ChunkMoves(ino)
	return st, err
}

// Serve adds the manager's operations to t: moving a file now
// (api.Migrate; with Wait, answered when done), its state, prefetching a
// job's inputs, directories' policies, a file's migration state.
func (m *Manager) Serve(t *rpc.Table) {
	rpc.On(t, api.Migrate, func(ctx context.Context, q *api.MigrateReq) (*api.MigrateRep, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		n, err := m.Migrate(ctx, q.Ino, q.Tier, q.Wait)
		if err != nil {
			return nil, fmt.Errorf("migrating inode %d to %s: %w", q.Ino, q.Tier, err)
		}
		return &api.MigrateRep{Chunks: uint64(n)}, nil
	})
	rpc.On(t, api.TierStatus, func(context.Context, *wire.Empty) (*api.TierState, error) {
		st := m.Status()
		return &st, nil
	})
	rpc.On(t, api.Prefetch, func(_ context.Context, q *api.PrefetchReq) (*wire.Empty, error) {
		if q.Job == "" || len(q.Files) == 0 {
			return nil, rpc.Errorf(syscall.EINVAL, "prefetch wants a job and at least one file")
		}
		m.Prefetch(q.Job, q.Files)
		return &wire.Empty{}, nil
	})
	rpc.On(t, api.TierSet, func(_ context.Context, q *api.TierSetReq) (*wire.Empty, error) {
		return &wire.Empty{}, m.cfg.Dirs.Set(q.Ino, q.Policy)
	})
	rpc.On(t, api.TierGet, func(_ context.Context, q *api.FileRef) (*api.PolicyView, error) {
		p, from, err := m.cfg.Dirs.Of(q.Ino)
		if err != nil {
			return nil, err
		}
		return &api.PolicyView{TierPolicy: p, From: from, DefaultDrain: m.cfg.DefaultDrain, DrainAge: m.cfg.DrainAge}, nil
	})
	rpc.On(t, api.FileMigration, func(_ context.Context, q *api.FileRef) (*api.FileMigrationState, error) {
		st, err := m.FileState(q.Ino)
		if err != nil {
			return nil, err
		}
		return &st, nil
	})
}
