package fwd

import (
	"context"
	"errors"
	"slices"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Replicated chunks (meta/replica.go): a chunk with a replica group is
// written to both groups and acknowledged when both have the bytes; it is
// read from its group, or from the replica when the group's server
// cannot be reached. A copy whose server cannot be reached while the
// other took the write is given up (ns.Degrade): the metadata service
// checks the server itself, and the write goes on with the copy left.

// copiesOf returns the servers holding member m's share of the chunk at
// loc: its group's member, then its replica's.
func copiesOf(loc wire.ChunkLoc, m int) []uint64 {
	if len(loc.Replicas) == len(loc.Servers) && len(loc.Replicas) > 0 {
		return []uint64{loc.Servers[m], loc.Replicas[m]}
	}
	return []uint64{loc.Servers[m]}
}

// lostCopyErr: the server of one copy could not be reached while the
// other copy took the write.
type lostCopyErr struct {
	id  uint64
	err error
}

func (e *lostCopyErr) Error() string { return e.err.Error() }

func (e *lostCopyErr) Unwrap() error { return e.err }

func unreachable(err error) bool {
	var te *rpc.TransportError
	return errors.As(err, &te)
}

// writeCopies sends one piece's write req with payload p to every server
// in ids (the copies of one member), in parallel, and marks them dirty
// for fsync. placer: the chunk is fresh, and a copy that refuses it (full,
// or down) makes the whole chunk move (refusedErr). patient: retry a
// server that cannot be reached for the whole timeout (it may be
// restarting), not only for Failover.
func (s *Server) writeCopies(ctx context.Context, f *file, ids []uint64, req *chunk.WriteReq, p payload, placer, patient bool) error {
	errs := make([]error, len(ids))
	if !patient {
		ctx = rpc.WithRetryLimit(ctx, s.cfg.Failover)
	}
	s.parallel(len(ids), func(k int) error {
		errs[k] = s.writeData(ctx, ids[k], req, p)
		if errs[k] == nil {
			f.mu.Lock()
			f.dirty[ids[k]] = true
			f.mu.Unlock()
		}
		return nil
	})
	var lost *lostCopyErr
	for k, err := range errs {
		if err == nil {
			continue
		}
		if placer && (rpc.Errno(err) == syscall.ENOSPC || unreachable(err)) {
			return &refusedErr{id: ids[k], err: err}
		}
		if rpc.Errno(err) == syscall.ENOSPC {
			// not this write's to move: the chunk was placed before
			// (the metadata service may move it if it holds nothing)
			return &fullErr{id: ids[k], err: err}
		}
		if len(ids) == 2 && errs[1-k] == nil && unreachable(err) {
			lost = &lostCopyErr{id: ids[k], err: err}
			continue
		}
		return err
	}
	if lost != nil {
		return lost
	}
	return nil
}

// readCopies reads one piece from the first of ids (the copies of one
// member) that can be reached; lost is a server that could not be (0:
// none). When none can, the caller looks up the chunk's location again
// (this daemon's may be old) and then tries again, patient: retrying for
// the whole timeout, not only Failover.
func (s *Server) readCopies(ctx context.Context, ids []uint64, req *chunk.ReadReq, into []byte, patient bool) (lost uint64, err error) {
	switch {
	case patient:
	case len(ids) > 1:
		// the other copy serves at once: a read gives up on a server
		// sooner than a write, which gives the copy up
		ctx = rpc.WithRetryLimit(ctx, s.cfg.Failover/10)
	default:
		ctx = rpc.WithRetryLimit(ctx, s.cfg.Failover)
	}
	for i, id := range ids {
		if err = s.readData(ctx, id, req, into); err == nil || !unreachable(err) {
			return lost, err
		}
		if i+1 < len(ids) {
			s.log.Warn("chunk copy unreachable: reading the replica", "ino", req.Ino, "chunk", req.Idx, "server", id, "err", err)
			lost = id
		}
	}
	return lost, err
}

// changeChunk sends req, a change of one chunk's location (ns.Dirty,
// ns.Degrade), to the metadata service and keeps the location it answers,
// unless this daemon knows a newer one (or adopted a truncate meanwhile,
// which may have cut the chunk).
func (s *Server) changeChunk(ctx context.Context, f *file, op wire.Def[ns.ChunkReq, ns.ChunkRep], req *ns.ChunkReq) (wire.ChunkLoc, error) {
	f.mu.Lock()
	gen := f.gen
	f.mu.Unlock()
	resp, err := rpc.Do(ctx, s.meta, op, req)
	if err != nil {
		return wire.ChunkLoc{}, err
	}
	now := resp.Chunk
	f.mu.Lock()
	if cur, ok := f.chunks[req.Idx]; f.gen == gen && (!ok || cur.Gen <= now.Gen) {
		f.chunks[req.Idx] = now
	}
	f.mu.Unlock()
	return now, nil
}

// dirty asks the metadata service to give up the home of chunk idx (a
// clean copy on the PFS) before it is written, and returns the chunk's
// location now.
func (s *Server) dirty(ctx context.Context, ino uint64, f *file, idx uint64, loc wire.ChunkLoc) (wire.ChunkLoc, error) {
	for try := 0; ; try++ {
		now, err := s.changeChunk(ctx, f, ns.Dirty, &ns.ChunkReq{Ino: ino, Idx: idx, Layout: loc.Gen})
		if err != nil || len(now.Home) == 0 {
			return now, err
		}
		if now.Gen == loc.Gen || try == 8 {
			return now, rpc.Errorf(syscall.EIO, "chunk %d of inode %d keeps its home %v", idx, ino, now.Home)
		}
		// this daemon's location was old (a newer drain gave the chunk
		// a home since): give the home up in the location there is now
		loc = now
	}
}

// giveUp asks the metadata service to give up the copy of chunk idx on
// server id (which could not be reached) and returns the chunk's
// location now. When the location still names id (the service reached
// it, or the chunk has one copy), cause is returned.
func (s *Server) giveUp(ctx context.Context, ino uint64, f *file, idx uint64, loc wire.ChunkLoc, id uint64, cause error) (wire.ChunkLoc, error) {
	now := loc
	for try := 0; ; try++ {
		prev := now
		var err error
		if now, err = s.changeChunk(ctx, f, ns.Degrade, &ns.ChunkReq{Ino: ino, Idx: idx, Layout: prev.Gen, Server: id}); err != nil {
			return loc, err
		}
		if !slices.Contains(now.All(), id) {
			break
		}
		if now.Gen == prev.Gen || try == 3 {
			return loc, cause // the service keeps the copy (it reached the server, or it is the only one)
		}
		// this daemon's location was old: give the copy up in the
		// location the service has now
	}
	s.log.Warn("chunk copy given up: going on with the other copy", "ino", ino, "chunk", idx, "server", id,
		"now", now.Servers, "gen", now.Gen)
	return now, nil
}

// reload learns chunk idx's location again after its server could not be
// reached, and says whether it changed since stale (a copy was given up
// or made elsewhere meanwhile, while this daemon's layout was old).
func (s *Server) reload(ctx context.Context, ino uint64, f *file, idx uint64, stale wire.ChunkLoc) (wire.ChunkLoc, bool) {
	if err := s.loadLayout(ctx, ino, f); err != nil {
		return stale, false
	}
	now, ok := f.lookup(idx)
	return now, ok && now.Gen != stale.Gen
}

// held is what one data server holds of a file, as this daemon knows it.
type held struct {
	any       bool // a copy of a chunk
	allCopied bool // only chunks that have another copy
}

// holding says what each of ids holds of f.
func (s *Server) holding(f *file, ids []uint64) map[uint64]held {
	out := make(map[uint64]held, len(ids))
	for _, id := range ids {
		out[id] = held{allCopied: true}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.chunks {
		for _, id := range l.All() {
			if h, ok := out[id]; ok {
				h.any = true
				h.allCopied = h.allCopied && len(l.Replicas) > 0
				out[id] = h
			}
		}
	}
	return out
}

// syncLost handles an fsync that could not reach server id: every chunk of
// f with a copy there and another copy gives that copy up (the other copy
// was synced with the rest). It says whether id holds nothing of f now.
func (s *Server) syncLost(ctx context.Context, ino uint64, f *file, id uint64, cause error) bool {
	f.mu.Lock()
	var locs []wire.ChunkLoc
	for _, l := range f.chunks {
		if slices.Contains(l.All(), id) {
			locs = append(locs, l)
		}
	}
	f.mu.Unlock()
	for _, l := range locs {
		if _, err := s.giveUp(ctx, ino, f, l.Idx, l, id, cause); err != nil {
			s.log.Warn("a copy on an unreachable server could not be given up", "ino", ino, "chunk", l.Idx,
				"server", id, "location", l.All(), "gen", l.Gen, "err", err)
			return false
		}
	}
	return true
}
