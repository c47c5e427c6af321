package meta

import (
	"context"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Relocating an empty chunk.
//
// A chunk keeps its location when a truncate cuts it away whole while a
// migration of it is in flight (mayCutLocked): it stays placed, trimmed
// empty. Its next write is not the write of a fresh chunk, so when its
// server has no room for a new chunk any more (a full mem tier) the write
// used to fail with ENOSPC although lower tiers had room. RelocateEmpty
// moves such a chunk: it fences every server of the chunk's group at the
// next layout generation, each only if it holds no byte of the chunk
// (chunk.Fence, atomic with the server's chunk I/O), then commits a new
// location at that generation. A write that lands on an old server
// before its fence makes the fence fail (EEXIST): the chunk then stays,
// and the writer writes there again (the chunk now holds its room). One
// that comes after gets EREMCHG and looks the chunk up again. So no
// acknowledged byte is ever left behind in a place the layout left.

// RelocateEmpty moves chunk idx of ino, placed earlier, off server
// refusedBy, which refused a write of it for room, if it holds no byte
// anywhere. gen is the writer's truncation generation (ESTALE if older
// than the file's). placed says whether it moved; if not, loc is where it
// is (write there again). A chunk in migration, or owed a drop, is not
// moved: EAGAIN (the writer tries again shortly).
func (s *Service) RelocateEmpty(ctx context.Context, ino, idx, gen, refusedBy uint64, job string) (loc wire.ChunkLoc, placed bool, err error) {
	s.reg.reachable(ctx, refusedBy)
	s.mu.Lock()
	n, err := s.getInode(ino)
	if err != nil {
		s.mu.Unlock()
		return loc, false, err
	}
	if gen < n.Trunc {
		s.mu.Unlock()
		return loc, false, errno(syscall.ESTALE, "inode %d was truncated (generation %d, writer's %d)", ino, n.Trunc, gen)
	}
	v, err := s.e.Get(layoutKey(ino, idx))
	if err != nil {
		s.mu.Unlock() // no place at all: a fresh chunk
		loc, placed, _, err = s.allocOnce(ctx, ino, idx, gen, nil, false, job)
		return loc, placed, err
	}
	cur, err := decodeChunk(v)
	if err != nil || isCut(cur) || !anyIn(cur.All(), []uint64{refusedBy}) {
		s.mu.Unlock()
		if err == nil && isCut(cur) {
			loc, placed, _, err = s.allocOnce(ctx, ino, idx, gen, nil, false, job)
			return loc, placed, err
		}
		return cur, false, err // moved meanwhile: write there
	}
	if _, moving, merr := s.getMove(ino, idx); merr != nil || moving || len(s.drops.Servers(ino, idx)) > 0 || len(cur.Home) > 0 {
		s.mu.Unlock()
		return cur, false, errno(syscall.EAGAIN, "chunk %d of inode %d is migrating: its place cannot change now", idx, ino)
	}
	// chosen before the fences: a tier with no room anywhere fences nothing
	next, _, err := s.reg.choose(n, idx, cur.All(), false, job)
	s.mu.Unlock()
	if err != nil {
		return cur, false, err
	}
	next.Gen = cur.Gen + 1
	var fenced []uint64
	var prev []uint64
	undo := func() {
		for i, id := range fenced {
			q := &chunk.FenceReq{ID: chunk.ID{Ino: ino, Idx: idx, ChunkSize: n.ChunkSize}, Layout: next.Gen, Undo: true, UndoTo: prev[i]}
			if _, err := callData(ctx, &s.reg, id, chunk.Fence, q); err != nil {
				// its writes get EREMCHG and ask for the chunk's location:
				// answered by moving it (below) on their next refusal
				s.log.Warn("relocating an empty chunk: undoing a fence failed", "ino", ino, "chunk", idx, "server", id, "err", err)
			}
		}
	}
	for _, id := range cur.All() {
		r, err := callData(ctx, &s.reg, id, chunk.Fence, &chunk.FenceReq{ID: chunk.ID{Ino: ino, Idx: idx, ChunkSize: n.ChunkSize}, Layout: next.Gen})
		if err != nil {
			undo()
			switch rpc.Errno(err) {
			case syscall.EEXIST:
				return cur, false, nil // written meanwhile: it has its room now
			case syscall.EBUSY:
				return cur, false, errno(syscall.EAGAIN, "chunk %d of inode %d is migrating: %v", idx, ino, err)
			}
			return cur, false, err
		}
		fenced, prev = append(fenced, id), append(prev, r.Before)
	}
	s.mu.Lock()
	now, err := s.chunkLocAny(ino, idx)
	if err != nil || now.Gen != cur.Gen || !sameServers(now.All(), cur.All()) {
		// changed meanwhile (a migration committed: it fenced the same
		// generation; a truncate cut it): the location now stands
		s.mu.Unlock()
		if err == nil && isCut(now) {
			loc, placed, _, err = s.allocOnce(ctx, ino, idx, gen, nil, false, job)
			return loc, placed, err
		}
		return now, false, err
	}
	var b engine.Batch
	b.Set(layoutKey(ino, idx), encodeChunk(next))
	err = s.e.Apply(&b, false)
	var path string
	if err == nil && next.Tier == "pfs" {
		path = s.pfsPathLocked(ino, 0, "")
	}
	size := n.Size
	if cn, gerr := s.getInode(ino); gerr == nil {
		size = cn.Size
	}
	s.mu.Unlock()
	if err != nil {
		undo()
		return cur, false, err
	}
	s.log.Info("empty chunk relocated", "ino", ino, "chunk", idx, "from", cur.All(), "to", next.All(), "tier", next.Tier, "layout gen", next.Gen)
	s.linkPfs(ctx, ino, next, path, size)
	return next, true, nil
}

// chunkLocAny is chunk idx's location, a cut mark included. Caller holds
// mu.
func (s *Service) chunkLocAny(ino, idx uint64) (wire.ChunkLoc, error) {
	v, err := s.e.Get(layoutKey(ino, idx))
	if err != nil {
		return wire.ChunkLoc{}, errno(syscall.ENOENT, "chunk %d of inode %d has no location", idx, ino)
	}
	return decodeChunk(v)
}
