package bbos

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/bbos"
)

// The checkpoints: the grants' globs resolved to files (scan, resolve,
// look) and the versions demoted or evicted in cold order (act, run).

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
	ino := uint64(api.RootIno)
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
	// placement's view of each server's room (its usage as last reported,
	// the chunks promised since counted whole, the evictions done since
	// taken off): what a writer waiting for room waits on. Read before
	// m.mu (placement calls Hint with its lock held). An eviction that
	// ends between that read and m.mu is no longer in p.freeing and may
	// not be in the view: its bytes count as free (freedBefore), else it
	// would be evicted for twice. One that ended before the read and is
	// counted again only delays an eviction to the kick it sends.
	m.mu.Lock()
	freedBefore := map[string]float64{}
	for name, p := range m.pools {
		freedBefore[name] = p.freed
	}
	m.mu.Unlock()
	placeFree := map[uint64]float64{}
	for _, si := range m.cfg.NS.Servers() {
		if si.Role == "data" && si.Alive {
			placeFree[si.ID] = float64(si.Capacity - min(si.Used, si.Capacity))
		}
	}
	st, _ := m.cfg.NS.(Stalls)
	var jobs []bbJob
	m.mu.Lock()
	for _, p := range m.pools {
		order, demotable := m.orderLocked(p, st)
		jobs = append(jobs, m.demotersLocked(p, order, demotable)...)
		jobs = append(jobs, m.deletersLocked(p, order, placeFree, p.freed-freedBefore[p.Name], st)...)
	}
	m.mu.Unlock()
	for _, j := range jobs {
		m.logDecision(j.v.JobID, map[bool]string{false: "demote", true: "evict"}[j.evict], j.why)
		go m.run(ctx, j.v, j.evict)
	}
}

// bbJob is a demotion or (evict) an eviction to start, and why.
type bbJob struct {
	v     *version
	evict bool
	why   string
}

// orderLocked is the cold order of everything on pool p's buffer (a
// version is old whether or not its newer one may move now) and the
// versions that may be demoted; it notes whether room can come
// (p.canFree). Caller holds mu.
func (m *Manager) orderLocked(p *pool, st Stalls) (order []*version, demotable []pol.Version) {
	var resident []pol.Version
	freeable := false
	byID := map[uint64]*version{}
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
	for _, o := range pol.Order(m.cfg.Policy, resident, !m.cfg.NoVersions) {
		order = append(order, byID[o.ID])
	}
	return order, demotable
}

// demotersLocked starts demoters: demoteStreams files at a time per pool,
// the next as soon as one ends, paced by the servers at the plan's rates
// (held while jobs write where it demotes only while idle). Caller holds
// mu.
func (m *Manager) demotersLocked(p *pool, order []*version, demotable []pol.Version) []bbJob {
	var jobs []bbJob
	for m.streams[p.Name] < demoteStreams {
		v := first(order, func(v *version) bool { return !m.busy[v.ID] && !v.Open && !v.Demoted })
		if v == nil {
			break
		}
		m.busy[v.ID] = true
		m.streams[p.Name]++
		jobs = append(jobs, bbJob{v: v, why: fmt.Sprintf("demote %s (inode %d): coldest of %d on the buffer not on the PFS yet; %s", v.Name, v.ID,
			len(demotable), m.planLocked(p))})
	}
	return jobs
}

// deletersLocked starts deleters: they keep room for the largest
// checkpoint, and one more for each writer waiting for room (a burst of
// checkpoints at a full buffer), above the reserve placement keeps free
// for writers to wait at; at most half the buffer. Caller holds mu.
func (m *Manager) deletersLocked(p *pool, order []*version, placeFree map[uint64]float64, freedSince float64, st Stalls) []bbJob {
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
		free = min(free, pf+freedSince)
	}
	free += p.freeing
	if free >= room {
		return nil
	}
	var jobs []bbJob
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
		jobs = append(jobs, bbJob{v: v, evict: true, why: fmt.Sprintf("evict %s (inode %d): coldest demoted copy; %s free of %s, room kept for %s",
			v.Name, v.ID, size.Format(uint64(max(p.Free, 0))), size.Format(uint64(p.S)), size.Format(uint64(room)))})
	}
	return jobs
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
		p.freed += float64(v.Bytes)
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
