package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/layout"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Truncation and its ordering against writes (docs/architecture.md,
// "Truncation").
//
// Every setattr that sets a file's size raises the file's truncation
// generation (Attr.Trunc) and, in the same commit, records one pending
// trim per data server, chunk and generation for every chunk that extends
// past the new size (key T server ino gen idx). After the commit the
// service sends each server its pending trims of the file; a server that
// applied them is forgotten, one that could not be reached keeps them
// until it asks for them (OpTrims) — which a data server does when it
// registers, when a heartbeat reply says it has some, and before it serves
// a chunk of a file under a generation newer than the last it applied
// (data/fence.go). A data server refuses writes of an older generation
// than the last it applied, a size report of an older generation than the
// file's is ignored (Extend), and a chunk allocation of an older one is
// refused (Alloc): a writer that raced with a truncate learns the new
// generation and writes again, after it.

// trimTimeout bounds one server's answer to a truncate's trims; a server
// that does not answer in time gets them later (they stay pending), and one
// whose heartbeats stopped is not asked at all.
const trimTimeout = 3 * time.Second

func trimKey(server, ino, gen, idx uint64) []byte {
	k := key1(pTrim, server)
	k = binary.BigEndian.AppendUint64(k, ino)
	k = binary.BigEndian.AppendUint64(k, gen)
	return binary.BigEndian.AppendUint64(k, idx)
}

// trimPrefix is the prefix of server's pending trims (of ino if non-zero).
func trimPrefix(server, ino uint64) []byte {
	k := key1(pTrim, server)
	if ino != 0 {
		k = binary.BigEndian.AppendUint64(k, ino)
	}
	return k
}

func encodeTrim(t wire.Trim) []byte {
	b := binary.BigEndian.AppendUint64(nil, t.Keep)
	return binary.BigEndian.AppendUint32(b, t.ChunkSize)
}

func decodeTrim(k, v []byte) (server uint64, t wire.Trim, err error) {
	if len(k) != 33 || len(v) != 12 {
		return 0, t, errCorrupt
	}
	server = binary.BigEndian.Uint64(k[1:])
	t = wire.Trim{Ino: binary.BigEndian.Uint64(k[9:]), Gen: binary.BigEndian.Uint64(k[17:]),
		Idx: binary.BigEndian.Uint64(k[25:]), Keep: binary.BigEndian.Uint64(v), ChunkSize: binary.BigEndian.Uint32(v[8:])}
	return server, t, nil
}

// trimsLocked records in b the trims that cutting n (whose generation the
// caller has just raised) to size requires: every located chunk that
// extends past size keeps size - start bytes (0 deletes it, and its
// location becomes a cut mark: mayCutLocked), on every server of its
// group. The file's
// plain file on the PFS (one object per file, on a pfs server or a
// drained chunk's home) gets one trim at the new size, also when no
// chunk on the pfs tier reaches past it any more (they were cut away
// before). It returns the servers concerned. Caller holds mu.
func (s *Service) trimsLocked(b *engine.Batch, n *inode, size uint64) []uint64 {
	cs := uint64(n.ChunkSize)
	seen := map[uint64]bool{}
	var servers []uint64
	add := func(id uint64, t wire.Trim) {
		b.Set(trimKey(id, n.Ino, t.Gen, t.Idx), encodeTrim(t))
		if !seen[id] {
			seen[id] = true
			servers = append(servers, id)
		}
	}
	plain := wire.Trim{Ino: n.Ino, Idx: size / cs, Keep: size % cs, Gen: n.Trunc, ChunkSize: n.ChunkSize}
	onPfs := false
	s.e.Scan(layoutPrefix(n.Ino), nil, func(_, v []byte) bool {
		l, err := decodeChunk(v)
		if err != nil {
			return true
		}
		onPfs = onPfs || l.Tier == "pfs" // cut marks keep their tier
		start := l.Idx * cs
		if isCut(l) || start+cs <= size {
			return true
		}
		keep := int64(0)
		if size > start {
			keep = int64(size - start)
		} else if s.mayCutLocked(n.Ino, l.Idx) {
			// cut away whole: the chunk has no place any more (a write
			// of it places it again, like a new chunk, where there is room)
			b.Set(layoutKey(n.Ino, l.Idx), encodeChunk(cutMark(l)))
		}
		for _, id := range l.Home {
			add(id, plain)
		}
		if l.Tier == "pfs" {
			return true // its plain file: below
		}
		g := len(l.Servers)
		for i, id := range l.All() {
			i %= g // replica member i mirrors member i
			add(id, wire.Trim{Ino: n.Ino, Idx: l.Idx, Gen: n.Trunc, ChunkSize: n.ChunkSize,
				Keep: uint64(layout.LocalSize(i, g, int64(n.StripeUnit), keep))})
		}
		return true
	})
	if onPfs {
		for _, id := range s.pfsServers() {
			add(id, plain)
		}
	}
	return servers
}

// mayCutLocked says whether chunk idx of ino, cut away whole by a
// truncate, may lose its place. Not while a migration of it is in flight
// or a server owes a drop of an old copy: the end of the migration (an
// abort deletes the destination's copy, a commit the source's) or the
// drop would delete what a new place on the same server got. It then
// keeps its place, trimmed empty, as any chunk did before cut marks.
// Caller holds mu.
func (s *Service) mayCutLocked(ino, idx uint64) bool {
	if _, moving, err := s.getMove(ino, idx); err != nil || moving {
		return false
	}
	return len(s.drops.Servers(ino, idx)) == 0
}

// PendingTrims returns server's pending trims (of ino, or of every file
// if ino is 0), in order of file, generation and chunk, and ino's
// truncation generation (0 if ino is 0 or gone).
func (s *Service) PendingTrims(server, ino uint64) ([]wire.Trim, uint64, error) {
	s.mu.Lock() // a consistent view: generation and its trims commit together
	defer s.mu.Unlock()
	var gen uint64
	if ino != 0 {
		if n, err := s.getInode(ino); err == nil {
			gen = n.Trunc
		}
	}
	ts, err := s.pendingTrims(server, ino)
	return ts, gen, err
}

func (s *Service) pendingTrims(server, ino uint64) ([]wire.Trim, error) {
	var out []wire.Trim
	var derr error
	s.e.Scan(trimPrefix(server, ino), nil, func(k, v []byte) bool {
		_, t, err := decodeTrim(k, v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, t)
		return true
	})
	return out, derr
}

// hasPendingTrims reports whether server has trims to apply.
func (s *Service) hasPendingTrims(server uint64) bool {
	found := false
	s.e.Scan(trimPrefix(server, 0), nil, func(_, _ []byte) bool {
		found = true
		return false
	})
	return found
}

// TrimsDone forgets trims server has applied.
func (s *Service) TrimsDone(server uint64, ts []wire.Trim) error {
	if len(ts) == 0 {
		return nil
	}
	var b engine.Batch
	for _, t := range ts {
		b.Del(trimKey(server, t.Ino, t.Gen, t.Idx))
	}
	for _, part := range engine.Parts(s.e, &b) { // forgetting applied trims may go a part at a time
		if err := s.e.Apply(part, false); err != nil {
			return err
		}
	}
	return nil
}

// dropTrimsLocked deletes in b every pending trim of ino on the given
// servers (the file is gone). Caller holds mu or owns ino.
func (s *Service) dropTrimsLocked(b *engine.Batch, ino uint64, servers map[uint64]bool) {
	for id := range servers {
		s.e.Scan(trimPrefix(id, ino), nil, func(k, _ []byte) bool {
			b.Del(append([]byte(nil), k...))
			return true
		})
	}
}

// sendTrims gives each server its pending trims of ino (in key order: by
// generation, then chunk), in parallel and
// bounded by trimTimeout; the ones applied are forgotten. A server that
// cannot be reached keeps them pending (and is logged): it applies them
// before it serves the file again.
func (s *Service) sendTrims(ctx context.Context, ino uint64, servers []uint64) {
	var wg sync.WaitGroup
	for _, id := range servers {
		ts, err := s.pendingTrims(id, ino)
		if err != nil || len(ts) == 0 {
			continue
		}
		if !s.reg.alive(id) {
			s.log.Warn("truncate: data server is down; its trims stay pending until it is back", "ino", ino, "server", id)
			continue
		}
		wg.Add(1)
		go func(id uint64, ts []wire.Trim) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, trimTimeout)
			defer cancel()
			if _, err := callData(cctx, &s.reg, id, chunk.Trunc, &chunk.TruncReq{Ino: ino, Trims: ts}); err != nil {
				s.log.Warn("truncate: data server did not apply its trims; they stay pending until it does",
					"ino", ino, "server", id, "err", err)
				var te *rpc.TransportError
				if errors.As(err, &te) {
					s.reg.suspect(id) // until its next heartbeat
				}
				return
			}
			if err := s.TrimsDone(id, ts); err != nil {
				s.log.Warn("truncate: forgetting applied trims failed", "ino", ino, "server", id, "err", err)
			}
		}(id, ts)
	}
	wg.Wait()
}
