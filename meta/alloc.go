package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/place"
)

// Chunk locations: where each chunk of a file lives, chosen when it is
// first written (Alloc, asking policy/place) and kept under the 'L' keys.

// Alloc returns the location of chunk idx of ino, choosing one if the chunk
// has none: the fastest tier with a live server group that has room, the
// group rotated over the tier's servers to spread files. exclude lists
// servers that just refused the chunk for lack of space. gen is the
// truncation generation the writer works in: an older one than the file's
// is refused with ESTALE (the writer raced with a truncate whose trims
// could not have reached a chunk placed now).
//
// placed is true when this call chose the location. A chunk that has one
// keeps it, unless exclude names one of its servers (its first writer
// was refused there): then it moves, once — a second writer refused by
// the same server gets the location the first one moved it to.
func (s *Service) Alloc(ctx context.Context, ino, idx, gen uint64, exclude []uint64) (loc wire.ChunkLoc, placed bool, err error) {
	loc, placed, _, err = s.AllocWait(ctx, ino, idx, gen, exclude, 0, "")
	return loc, placed, err
}

// AllocWait is Alloc for a writer that can wait up to wait (at most a
// second here) while the tier the chunk belongs on is at its write-stall
// reserve and the tiering manager is freeing it, instead of having the
// chunk spill to a lower tier. It is woken as soon as space may have been
// freed (a move committed, a server reported, the reserves changed), and
// answers ErrStall if the tier is still stalled at the end (the writer
// then asks again, or spills). waited is how long it waited. job is the
// writing job ("": none): a job bound to a resource pool writes there.
func (s *Service) AllocWait(ctx context.Context, ino, idx, gen uint64, exclude []uint64, wait time.Duration, job string) (loc wire.ChunkLoc, placed bool, waited time.Duration, err error) {
	start := s.now()
	for _, x := range exclude {
		// a server that refused a chunk is full, or down: one that does
		// not answer is counted down (and not full) until it reports
		s.reg.reachable(ctx, x)
	}
	limit := time.NewTimer(min(wait, stallWait))
	defer limit.Stop()
	for stalled := false; ; stalled = true {
		var wake <-chan struct{}
		loc, placed, wake, err = s.allocOnce(ctx, ino, idx, gen, exclude, wait > 0, job)
		if wake == nil {
			if stalled {
				waited = s.now().Sub(start)
			}
			return loc, placed, waited, err
		}
		if !s.waitStalled(ctx, loc.Tier, ino, wake, limit.C) {
			return wire.ChunkLoc{}, false, s.now().Sub(start), err
		}
	}
}

// waitStalled waits for wake (true) or until limit or ctx end (false),
// counted among tier's stalled writers (of file ino) meanwhile.
func (s *Service) waitStalled(ctx context.Context, tier string, ino uint64, wake <-chan struct{}, limit <-chan time.Time) bool {
	s.stalledMu.Lock()
	if s.stalled[tier] == nil {
		s.stalled[tier] = map[uint64]int{}
	}
	s.stalled[tier][ino]++
	f := s.onStall
	s.stalledMu.Unlock()
	defer func() {
		s.stalledMu.Lock()
		if s.stalled[tier][ino]--; s.stalled[tier][ino] == 0 {
			delete(s.stalled[tier], ino)
		}
		s.stalledMu.Unlock()
	}()
	if f != nil {
		f(tier)
	}
	select {
	case <-wake:
		return true
	case <-limit:
	case <-ctx.Done():
	}
	return false
}

// StalledWriters is how many chunk allocations wait now for room on
// tier, at its write-stall reserve: the burst-buffer manager frees room
// for them ahead of the writes.
func (s *Service) StalledWriters(tier string) int {
	s.stalledMu.Lock()
	defer s.stalledMu.Unlock()
	n := 0
	for _, c := range s.stalled[tier] {
		n += c
	}
	return n
}

// StalledFile says whether a chunk allocation of file ino waits now for
// room on tier: its writer cannot finish before room is freed.
func (s *Service) StalledFile(tier string, ino uint64) bool {
	s.stalledMu.Lock()
	defer s.stalledMu.Unlock()
	return s.stalled[tier][ino] > 0
}

// stallWait is the longest Alloc waits for a stalled tier before it
// answers ErrStall (the writer then asks again).
const stallWait = time.Second

// allocOnce is one try of Alloc; on ErrStall, wake is closed when space
// may have been freed.
func (s *Service) allocOnce(ctx context.Context, ino, idx, gen uint64, exclude []uint64, mayWait bool, job string) (loc wire.ChunkLoc, placed bool, wake <-chan struct{}, err error) {
	s.mu.Lock()
	n, err := s.getInode(ino)
	if err != nil {
		s.mu.Unlock()
		return wire.ChunkLoc{}, false, nil, err
	}
	if gen < n.Trunc {
		s.mu.Unlock()
		return wire.ChunkLoc{}, false, nil, errno(syscall.ESTALE, "inode %d was truncated (generation %d, writer's %d)", ino, n.Trunc, gen)
	}
	var lgen uint64
	if v, err := s.e.Get(layoutKey(ino, idx)); err == nil {
		cur, err := decodeChunk(v)
		if err != nil || !isCut(cur) && !anyIn(cur.Servers, exclude) && !anyIn(cur.Replicas, exclude) {
			s.mu.Unlock()
			return cur, false, nil, err
		}
		// moved, or placed again after a truncate cut it: a request to
		// an old place is refused there (a moved fence is below lgen)
		lgen = cur.Gen + 1
		if !isCut(cur) {
			// not while a migration of the chunk is undecided: its
			// commit would be refused (the chunk moved meanwhile) and
			// its abort drop the destination's copy, which may be the
			// place chosen here, bytes written there since and all. The
			// writer asks again shortly; by then the chunk is where the
			// migration left it.
			mi, moving, err := s.getMove(ino, idx)
			if err != nil || moving && mi.State == MoveCopying {
				s.mu.Unlock()
				if err == nil {
					err = errno(syscall.EAGAIN, "chunk %d of inode %d is migrating: its place cannot change now", idx, ino)
				}
				return cur, false, nil, err
			}
			// nor onto a server that still owes a drop of an old copy
			// of it, or the end of a decided migration (a fence and a
			// drop on the sources, a drop on the destinations of an
			// abort, whichever of them is down): either would delete
			// what is written there now
			exclude = append(slices.Clone(exclude), s.drops.Servers(ino, idx)...)
			if moving {
				exclude = append(append(exclude, mi.From.All()...), mi.To.Servers...)
			}
		}
	}
	loc, wake, err = s.reg.choose(n, idx, exclude, mayWait, job)
	if err != nil {
		s.mu.Unlock()
		return loc, false, wake, err
	}
	loc.Gen = lgen
	var b engine.Batch
	b.Set(layoutKey(ino, idx), encodeChunk(loc))
	err = s.e.Apply(&b, false)
	var path string
	if loc.Tier == "pfs" {
		path = s.pfsPathLocked(ino, 0, "")
	}
	size := n.Size
	s.mu.Unlock()
	if err != nil {
		return loc, false, nil, err
	}
	s.linkPfs(ctx, ino, loc, path, size)
	return loc, true, nil, nil
}

// linkPfs gives a chunk just placed on the pfs tier the file's plain file
// at path ("": not on the pfs tier), as long as the file (a truncate up
// before it had data on the pfs tier had no plain file to grow).
func (s *Service) linkPfs(ctx context.Context, ino uint64, loc wire.ChunkLoc, path string, size uint64) {
	if path == "" {
		return
	}
	for _, id := range loc.Servers {
		if _, err := callData(ctx, &s.reg, id, chunk.PfsLink, &chunk.PfsLinkReq{Ino: ino, Path: path, Size: size}); err != nil {
			s.log.Warn("pfs link failed", "ino", ino, "path", path, "err", err)
		}
	}
}

// ErrStall is Alloc's answer to a writer that may wait when the tier the
// chunk belongs on is at its write-stall threshold (ONFS Cs-w).
var ErrStall = errno(syscall.EAGAIN, "%v", place.ErrStall)

// SetStallReserve sets how placement learns the free space new chunks
// must leave on each data server (its Cs-w while the tiering manager can
// free space there; 0: none). f is called with the registry's lock held:
// it must not call back into the Service.
func (s *Service) SetStallReserve(f func(si wire.ServerInfo) uint64) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stallReserve = f
}

// SetOnStall sets f, called (no lock held) each time a chunk allocation
// begins to wait for room on tier, already counted among its stalled
// writers: the burst-buffer manager frees room for it at once rather
// than at its next look. f must not block.
func (s *Service) SetOnStall(f func(tier string)) {
	s.stalledMu.Lock()
	defer s.stalledMu.Unlock()
	s.onStall = f
}

// SetPlacementHint sets how placement learns a tier to try first for a
// new chunk of file ino (parent and name: its primary entry); "" for
// none. The burst-buffer manager sends checkpoints it classifies cold on
// arrival to the pfs tier with it (BBOS bypass). f is called with the
// registry's lock held: it must not call back into the Service.
func (s *Service) SetPlacementHint(f func(ino, parent uint64, name string) string) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	r.placeHint = f
}

// Pools is what placement asks the resource pools (meta/pools).
type Pools interface {
	// Of is the pool the new chunks of a file in directory dir written
	// by job go to (nil: none).
	Of(dir uint64, job string) *api.Pool
}

// SetPools has placement put a file's new chunks on the servers of the
// pool its directory or writer is bound to first.
func (s *Service) SetPools(p Pools) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pools = p
}

// WakeStalled makes writers waiting for a stalled tier look again (the
// reserves SetStallReserve gives changed).
func (s *Service) WakeStalled() {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spaceChangedLocked()
}

func anyIn(ids, set []uint64) bool {
	for _, id := range ids {
		for _, x := range set {
			if id == x {
				return true
			}
		}
	}
	return false
}

// choose asks the placement policy (policy/place) for a place for chunk
// idx of n, from the registry's view of the data servers, and promises
// the chosen servers the space and adds it to their backlogs (the perf
// policy's load). job is the writing job (its pool binding). Caller
// holds s.mu.
//
// On ErrStall it also returns a channel closed when space may have been
// freed (spaceChangedLocked).
func (r *registry) choose(n *inode, idx uint64, exclude []uint64, mayWait bool, job string) (wire.ChunkLoc, <-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// a server that refused a chunk and answers is full: it gets no new
	// chunks until its next report says otherwise
	now := r.s.now()
	for _, x := range exclude {
		if m := r.servers[x]; m != nil && m.info.Capacity > 0 && now.Sub(m.lastSeen) < r.s.cfg.HeartbeatTTL {
			m.reserved = m.info.Capacity
		}
	}
	servers := r.placeServersLocked(now)
	k := chunkKey{n.Ino, idx}
	if mayWait {
		// stalled writers take freed room in the order they stalled
		behind(servers, r.aheadLocked(k, now))
	}
	r.rotation++
	var first string
	if r.placeHint != nil {
		first = r.placeHint(n.Ino, n.Parent, n.Name)
	}
	c := place.Chunk{Ino: n.Ino, Idx: idx, ChunkSize: int64(n.ChunkSize),
		StripeCount: int(n.StripeCnt), StripeUnit: int64(n.StripeUnit), Exclude: exclude, Seq: r.rotation, MayWait: mayWait,
		Copies: r.s.cfg.Copies, Tier: first, Policy: r.s.cfg.Placement}
	if r.pools != nil {
		chunkPool(&c, r.pools.Of(n.Parent, job))
	}
	d, err := place.Choose(servers, c)
	if errors.Is(err, place.ErrStall) {
		r.stalledLocked(k, d.Tier, uint64(n.ChunkSize), now)
		if r.spaceWake == nil {
			r.spaceWake = make(chan struct{})
		}
		return wire.ChunkLoc{Tier: d.Tier}, r.spaceWake, ErrStall
	}
	delete(r.stallQ, k)
	if err != nil {
		return wire.ChunkLoc{}, nil, errno(syscall.ENOSPC, "%v", err)
	}
	if r.s.log.Enabled(context.Background(), slog.LevelDebug) {
		var view []string
		for _, sv := range servers {
			if sv.Tier == d.Tier {
				view = append(view, fmt.Sprintf("%d:%.1f/%.1f", sv.ID, float64(sv.Pending)/(1<<20), float64(sv.MaxPerf)/1e6))
			}
		}
		r.s.log.Debug("chunk placed", "ino", n.Ino, "chunk", idx, "servers", d.Servers, "pending MiB/max_perf MB/s", strings.Join(view, " "))
	}
	for i, id := range d.Servers {
		r.servers[id].reserved += d.Charge[i]
	}
	for i, id := range d.Replicas {
		r.servers[id].reserved += d.ReplicaCharge[i]
	}
	r.promiseLocked(n.Ino, idx, d.Servers, d.Charge, d.Replicas, d.ReplicaCharge)
	for i, id := range d.Servers {
		r.backlogLocked(id).Add(now, d.Charge[i], r.servers[id].info.MaxPerf)
	}
	for i, id := range d.Replicas { // the second copy's bytes load its servers too
		r.backlogLocked(id).Add(now, d.ReplicaCharge[i], r.servers[id].info.MaxPerf)
	}
	return wire.ChunkLoc{Idx: idx, Tier: d.Tier, Servers: d.Servers, Replicas: d.Replicas}, nil, nil
}

// backlogLocked is data server id's estimated backlog. Caller holds
// r.mu.
func (r *registry) backlogLocked(id uint64) *place.Backlog {
	b := r.backlog[id]
	if b == nil {
		b = &place.Backlog{}
		r.backlog[id] = b
	}
	return b
}

// placeServersLocked is the data servers as the placement policy sees
// them: liveness judged at now, space promised since their last report
// counted as used, their write-stall reserves. Caller holds r.mu.
func (r *registry) placeServersLocked(now time.Time) []place.Server {
	var servers []place.Server
	for _, m := range r.servers {
		if m.info.Role != "data" {
			continue
		}
		var reserve uint64
		if r.stallReserve != nil {
			reserve = r.stallReserve(m.info)
		}
		servers = append(servers, place.Server{ID: m.info.ID, Tier: m.info.Tier, Rank: m.info.Rank,
			Capacity: m.info.Capacity, Used: m.info.Used + m.reserved, Reserve: reserve,
			Alive: now.Sub(m.lastSeen) < r.s.cfg.HeartbeatTTL, Domain: m.info.Domain, MaxPerf: m.info.MaxPerf, Pending: r.backlogLocked(m.info.ID).Pending(now, m.info.MaxPerf)})
	}
	return servers
}

// Layout returns the known chunk locations of a file.
func (s *Service) Layout(ino uint64) ([]wire.ChunkLoc, error) {
	var out []wire.ChunkLoc
	var derr error
	s.e.Scan(layoutPrefix(ino), nil, func(_, v []byte) bool {
		c, err := decodeChunk(v)
		if err != nil {
			derr = err
			return false
		}
		if !isCut(c) {
			out = append(out, c)
		}
		return true
	})
	return out, derr
}

// chunkPool fills c's pool from p.
func chunkPool(c *place.Chunk, p *api.Pool) {
	if p == nil {
		return
	}
	c.Pool = p.Servers
	if len(p.Perf) > 0 {
		c.PoolPerf = map[uint64]uint64{}
		for id, mb := range p.Perf {
			c.PoolPerf[id] = uint64(mb * 1e6)
		}
	}
}
