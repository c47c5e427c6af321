package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/meta/drops"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/place"
)

// Chunk replicas (docs/tiering.md, "Mem-tier replicas"). A chunk of a
// tier that keeps two copies (Config.Copies) has a replica group beside
// its group: ChunkLoc.Replicas, member i mirroring Servers[i], in other
// failure domains (policy/place). The forwarding daemons write both and
// read either.
//
// A copy that cannot be reached is given up (Degrade): the chunk's
// location keeps only the other group, with the layout generation plus
// one, and the lost group is owed a drop ('R' keys): when it can be
// reached again it fences the chunk at the new generation and deletes its
// stale copy (chunk.MoveEnd, committed, session 0). Re-replication
// (Replicate) copies the chunk from its group to a new replica group with
// the migration protocol (move.go) while writes go on; at the commit the
// source keeps the chunk and fences requests of the old generation, so
// every writer learns the new location and writes both copies again.

// Degrade gives up the copy of chunk idx of ino on server dead, which a
// writer or reader working with layout generation gen could not reach:
// the chunk keeps its other copy only, until re-replication makes a new
// one. It returns the chunk's location now. A location that changed since
// gen, or that does not name dead, is returned as it is; a chunk with one
// copy keeps it (there is nothing to fall back on).
func (s *Service) Degrade(ctx context.Context, ino, idx, gen, dead uint64) (wire.ChunkLoc, error) {
	if s.reg.reachable(ctx, dead) {
		// the caller's trouble, not the server's: keep the copy
		return s.chunkLoc(ino, idx)
	}
	loc, dropped, err := s.degrade(ino, idx, gen, dead)
	if err != nil || len(dropped) == 0 {
		return loc, err
	}
	n, _ := s.getInode(ino)
	if n != nil {
		s.reg.moved(dropped, nil, int64(n.ChunkSize), int64(n.StripeUnit))
	}
	s.log.Warn("chunk copy lost: the chunk keeps its other copy until it is replicated again",
		"ino", ino, "chunk", idx, "unreachable", dead, "dropped", dropped, "now", loc.Servers, "gen", loc.Gen)
	s.met.degraded.Inc()
	// the lost group's live members drop their copies now; the rest
	// when they come back (DeliverDrops)
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.deliverDrops(dctx, func() []drops.Drop { return s.drops.Of(ino, idx) })
	}()
	return loc, nil
}

func (s *Service) degrade(ino, idx, gen, dead uint64) (wire.ChunkLoc, []uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, err := s.chunkLoc(ino, idx)
	if err != nil || loc.Gen != gen || len(loc.Replicas) == 0 {
		return loc, nil, err
	}
	var dropped []uint64
	switch {
	case anyIn([]uint64{dead}, loc.Servers):
		dropped, loc.Servers = loc.Servers, loc.Replicas
	case anyIn([]uint64{dead}, loc.Replicas):
		dropped = loc.Replicas
	default:
		return loc, nil, nil
	}
	loc.Replicas = nil
	if err := s.giveUpLocked(ino, &loc, dropped); err != nil {
		return wire.ChunkLoc{}, nil, err
	}
	return loc, dropped, nil
}

// giveUpLocked commits loc, chunk loc.Idx of ino, which the caller changed
// so that the copies on dropped are no longer in it, with its layout
// generation plus one, and records the drop each server of dropped owes.
// Caller holds mu.
func (s *Service) giveUpLocked(ino uint64, loc *wire.ChunkLoc, dropped []uint64) error {
	loc.Gen++
	var b engine.Batch
	b.Set(layoutKey(ino, loc.Idx), encodeChunk(*loc))
	for _, id := range dropped {
		s.drops.Add(&b, ino, loc.Idx, id, loc.Gen)
	}
	return s.e.Apply(&b, true)
}

// chunkLoc returns chunk idx of ino's location. A chunk a truncate cut
// away is ESTALE: the caller worked in an older truncation generation.
func (s *Service) chunkLoc(ino, idx uint64) (wire.ChunkLoc, error) {
	v, err := s.e.Get(layoutKey(ino, idx))
	if err != nil {
		return wire.ChunkLoc{}, errno(syscall.ENOENT, "chunk %d of inode %d has no location", idx, ino)
	}
	loc, err := decodeChunk(v)
	if err == nil && isCut(loc) {
		return wire.ChunkLoc{}, errno(syscall.ESTALE, "chunk %d of inode %d was cut away by a truncate", idx, ino)
	}
	return loc, err
}

// DeliverDrops tells the servers whose copies were given up to fence and
// delete them, and forgets the drops they acknowledge. It returns how
// many are still owed (their servers are down). The tiering manager
// calls it with FinishMoves.
func (s *Service) DeliverDrops(ctx context.Context) int {
	return s.deliverDrops(ctx, s.drops.All)
}

// deliverDrops delivers the drops list returns.
func (s *Service) deliverDrops(ctx context.Context, list func() []drops.Drop) (pending int) {
	// one deliverer at a time, each drop checked just before it is sent:
	// a drop sent twice, the second time after its key went and a new copy
	// of the chunk was made on the server (the drain of a cached chunk
	// copies to the home it gave up), would delete that copy
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	all := list()
	for _, d := range all {
		if !s.drops.Owes(d.Ino, d.Idx, d.Server, d.Gen) {
			continue // delivered meanwhile (or owed again at another generation: the next pass)
		}
		var cs uint32
		if n, err := s.getInode(d.Ino); err == nil {
			cs = n.ChunkSize
		}
		if cs != 0 && s.reg.alive(d.Server) {
			_, err := callData(ctx, &s.reg, d.Server, chunk.MoveEnd, &chunk.MoveEndReq{ID: chunk.ID{Ino: d.Ino, Idx: d.Idx, ChunkSize: cs},
				Source: true, Committed: true, Layout: d.Gen})
			if err != nil {
				pending++
				continue
			}
		} else if cs != 0 {
			pending++
			continue
		}
		// delivered, or the file is gone (its deletion removes every
		// copy anyway); a drop owed again meanwhile (giveUpLocked, under
		// mu) at a newer generation stays
		s.mu.Lock()
		if s.drops.Owes(d.Ino, d.Idx, d.Server, d.Gen) {
			var b engine.Batch
			s.drops.Forget(&b, d.Ino, d.Idx, d.Server)
			if err := s.e.Apply(&b, false); err != nil {
				pending++
			}
		}
		s.mu.Unlock()
	}
	return pending
}

// Replicate makes a second copy of chunk idx of ino, which has one, on a
// group of its tier in other failure domains (policy/place), with the
// migration protocol: writes go on meanwhile. It returns the bytes
// copied, or an error saying why the chunk keeps one copy (no room in
// another domain: ENOSPC).
func (s *Service) Replicate(ctx context.Context, ino, idx uint64) (uint64, error) {
	loc, err := s.chunkLoc(ino, idx)
	if err != nil {
		return 0, err
	}
	if len(loc.Replicas) > 0 {
		return 0, nil
	}
	n, err := s.getInode(ino)
	if err != nil {
		return 0, err
	}
	dst, err := s.reg.chooseReplica(n, loc, s.drops.Servers(ino, idx))
	if err != nil {
		return 0, err
	}
	b, err := s.moveChunk(ctx, ino, idx, loc.Tier, dst, true)
	if err != nil {
		// the promise made to dst is released with its next report
		return 0, err
	}
	s.met.replicated.Inc()
	return b, nil
}

// chooseReplica asks the placement policy for a group for another copy of
// the chunk at loc, away from the servers in exclude, and promises it the
// space.
func (r *registry) chooseReplica(n *inode, loc wire.ChunkLoc, exclude []uint64) ([]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.s.now()
	servers := r.placeServersLocked(now)
	r.rotation++
	d, err := place.ChooseReplica(servers, place.Chunk{Ino: n.Ino, Idx: loc.Idx, ChunkSize: int64(n.ChunkSize),
		StripeUnit: int64(n.StripeUnit), Exclude: exclude, Seq: r.rotation}, loc.Tier, loc.Servers)
	if errors.Is(err, place.ErrNoReplica) {
		return nil, errno(syscall.ENOSPC, "chunk %d of inode %d on %s %v: %v", loc.Idx, n.Ino, loc.Tier, loc.Servers, err)
	}
	if err != nil {
		return nil, err
	}
	for i, id := range d.Servers {
		r.servers[id].reserved += d.Charge[i]
	}
	return d.Servers, nil
}

// ShortChunk is a chunk with fewer copies than its tier keeps.
type ShortChunk = api.ShortChunk

// shortScan bounds the chunk locations one ShortChunks call reads; the
// next call goes on from where it stopped. A variable for tests.
var shortScan = 16384

// ShortChunks lists up to max chunks of tiers that keep two copies which
// have one, or a copy on a server that is down. The tiering manager calls
// it every tick: each call reads the next shortScan locations at most,
// round the whole table in turn, so a tick's cost does not grow with the
// files the service holds (until 2026-12-04 every tick read every
// location, even with no tier keeping two copies: 6 % of the service's
// CPU in a run of small files once 60,000 were made). None is read when
// no tier keeps two copies.
func (s *Service) ShortChunks(max int) ([]ShortChunk, error) {
	two := false
	for _, n := range s.cfg.Copies {
		two = two || n >= 2
	}
	if !two {
		return nil, nil
	}
	s.shortMu.Lock()
	defer s.shortMu.Unlock()
	var out []ShortChunk
	var derr error
	read, next := 0, []byte(nil)
	err := s.e.Scan([]byte{pLayout}, s.shortFrom, func(k, v []byte) bool {
		if read == shortScan {
			next = append([]byte(nil), k...)
			return false
		}
		read++
		if len(k) != 17 {
			return true
		}
		loc, err := decodeChunk(v)
		if err != nil {
			derr = err
			return false
		}
		if s.cfg.Copies[loc.Tier] < 2 || isCut(loc) {
			return true
		}
		sc := ShortChunk{Ino: binary.BigEndian.Uint64(k[1:]), Loc: loc}
		if _, err := s.e.Get(garbageKey(sc.Ino)); err == nil {
			return true // deleted: its chunks are going
		}
		for _, id := range loc.All() {
			if !s.reg.alive(id) {
				sc.Lost = id
				break
			}
		}
		// a copy on a server that is down is given up; a chunk with one
		// copy, on a live server, gets another (one whose only copy is
		// down waits for its server)
		if sc.Lost != 0 && len(loc.Replicas) > 0 || sc.Lost == 0 && len(loc.Replicas) == 0 {
			out = append(out, sc)
		}
		if len(out) == max {
			next = append(append([]byte(nil), k...), 0) // the key after k
			return false
		}
		return true
	})
	if err == nil {
		err = derr
	}
	if err == nil {
		s.shortFrom = next // nil at the table's end: from the start again
	}
	return out, err
}
