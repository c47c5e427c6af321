package data

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/tier"
)

// Chunk migration, the data servers' side (docs/tiering.md has the whole
// protocol; meta/move.go the coordinator's side).
//
// The source S of a chunk moving to destination group D:
//   - MoveBegin opens a session: from then on S notes the local range of
//     every write to the chunk and whether it was truncated, while it goes
//     on serving reads and writes from the chunk itself.
//   - MoveStop (after the mover's first copy) stops the chunk: a marker
//     file makes the stop survive a crash, and every request for the chunk
//     waits, except the mover's reads (chunk.ReadReq with the session).
//     The reply hands over the ranges written since Begin.
//   - MoveEnd says how it ended. Committed: S keeps a moved fence (the
//     chunk's new layout generation, on disk) and drops its copy; requests
//     of an older generation get EREMCHG, and the forwarding daemon loads
//     the new location and sends them there. Aborted: S serves the chunk
//     again.
//
// A stopped chunk whose end does not come (the coordinator died, or S
// restarted with a marker) is resolved by asking the metadata service
// (ns.MoveState), which answers from its intent record and the chunk's
// location. Until then requests for it wait, bounded by stopWait, and
// are answered EREMCHG so the forwarding daemon asks again.
//
// The mover is the destination group's first member (MoveCopy): it
// copies the chunk from S's members into D's, stops S, copies what was
// written meanwhile, and fsyncs D before it answers. A chunk truncated
// during the copy is not moved (the coordinator tries again later).

// stopWait bounds how long a request waits for a stopped chunk.
const stopWait = 10 * time.Second

// resolveAfter is how long a stop may last before the server asks the
// metadata service how the migration ended.
const resolveAfter = 10 * time.Second

// maxDirty bounds the ranges a session notes; past it the whole chunk is
// copied again at the stop.
const maxDirty = 1024

type chunkKey struct{ ino, idx uint64 }

// session is one migration of one chunk away from this server.
type session struct {
	id        uint64
	dirty     []chunk.Run // local ranges written
	all       bool        // too many ranges: everything is dirty
	cut       bool        // truncated since Begin
	stopped   bool
	stoppedAt time.Time
	restored  bool          // stopped by an earlier run of the server (marker)
	done      chan struct{} // closed when the session ends
}

// moves keeps the server's migration sessions and moved fences.
type moves struct {
	dir string // StateDir ("" keeps nothing on disk)

	mu       sync.Mutex // guards sessions and moved
	sessions map[chunkKey]*session
	// moved holds, per inode and chunk, the lowest layout generation this
	// server still serves: the chunk moved away at that generation.
	moved map[uint64]map[uint64]uint64
}

func openMoves(dir string) (*moves, error) {
	mv := &moves{dir: dir, sessions: map[chunkKey]*session{}, moved: map[uint64]map[uint64]uint64{}}
	if dir == "" {
		return mv, nil
	}
	for _, d := range []string{"moved", "moving"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "moved"))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		ino, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil {
			continue // a temporary file left by a crash
		}
		b, err := os.ReadFile(filepath.Join(dir, "moved", e.Name()))
		if err != nil {
			return nil, err
		}
		m := map[uint64]uint64{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var idx, gen uint64
			if _, err := fmt.Sscanf(line, "%d %d", &idx, &gen); err != nil {
				return nil, fmt.Errorf("moved fences of inode %d: %q: %w", ino, line, err)
			}
			m[idx] = gen
		}
		mv.moved[ino] = m
	}
	ents, err = os.ReadDir(filepath.Join(dir, "moving"))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		var ino, idx uint64
		if _, err := fmt.Sscanf(e.Name(), "%d.%d", &ino, &idx); err != nil || e.Name() != fmt.Sprintf("%d.%d", ino, idx) {
			continue // a temporary file left by a crash (atomicfile's, renamed only once whole)
		}
		b, err := os.ReadFile(filepath.Join(dir, "moving", e.Name()))
		if err != nil {
			return nil, err
		}
		id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration marker %s: %w", e.Name(), err)
		}
		mv.sessions[chunkKey{ino, idx}] = &session{id: id, stopped: true, restored: true, done: make(chan struct{})}
	}
	return mv, nil
}

// writeFile replaces path with content, durably (whole or not at all).
func writeFile(path, content string) error {
	return atomicfile.Write(path, []byte(content), 0o600)
}

func (mv *moves) markerPath(k chunkKey) string {
	return filepath.Join(mv.dir, "moving", fmt.Sprintf("%d.%d", k.ino, k.idx))
}

// setMovedLocked raises the moved fence of chunk k to gen, on disk first.
// Caller holds the inode's fence lock exclusively.
func (mv *moves) setMovedLocked(k chunkKey, gen uint64) error {
	mv.mu.Lock()
	if g, ok := mv.moved[k.ino][k.idx]; ok && g >= gen {
		mv.mu.Unlock()
		return nil
	}
	mv.mu.Unlock()
	return mv.putMovedLocked(k, gen)
}

// putMovedLocked sets the moved fence of chunk k to gen (0: none), on
// disk first. Caller holds the inode's fence lock exclusively (no other
// change of the inode's fences can come in between).
func (mv *moves) putMovedLocked(k chunkKey, gen uint64) error {
	mv.mu.Lock()
	next := map[uint64]uint64{}
	for i, g := range mv.moved[k.ino] {
		if i != k.idx {
			next[i] = g
		}
	}
	if gen != 0 {
		next[k.idx] = gen
	}
	mv.mu.Unlock()
	if mv.dir != "" {
		path := filepath.Join(mv.dir, "moved", strconv.FormatUint(k.ino, 10))
		var err error
		if len(next) == 0 {
			if err = os.Remove(path); os.IsNotExist(err) {
				err = nil
			}
		} else {
			var b strings.Builder
			for i, g := range next {
				fmt.Fprintf(&b, "%d %d\n", i, g)
			}
			err = writeFile(path, b.String())
		}
		if err != nil {
			return fmt.Errorf("keeping the moved fence of inode %d chunk %d: %w", k.ino, k.idx, err)
		}
	}
	mv.mu.Lock()
	if len(next) == 0 {
		delete(mv.moved, k.ino)
	} else {
		mv.moved[k.ino] = next
	}
	mv.mu.Unlock()
	return nil
}

// chunkFence fences chunk q.ID at layout generation q.Layout if this
// server holds nothing of it (chunk.Fence): the metadata service then
// places it elsewhere, and a write that still comes here with the old
// location gets EREMCHG and looks the chunk up again, so no byte can land
// in a place the layout has left. A chunk that holds bytes here is not
// fenced (EEXIST), nor one being migrated (EBUSY). The reply is the fence
// before (for Undo, which lowers the fence back to UndoTo if it is still
// at Layout: the metadata service gave the move up).
func (s *Server) chunkFence(_ context.Context, q *chunk.FenceReq) (*chunk.FenceRep, error) {
	k := chunkKey{q.Ino, q.Idx}
	id := tier.ChunkID{Ino: q.Ino, Idx: q.Idx, ChunkSize: q.ChunkSize}
	l := s.fence.lock(q.Ino)
	l.Lock()
	defer l.Unlock()
	mv := s.moves
	mv.mu.Lock()
	prev := mv.moved[k.ino][k.idx]
	busy := mv.sessions[k] != nil
	mv.mu.Unlock()
	if q.Undo {
		if prev != q.Layout {
			return &chunk.FenceRep{Before: prev}, nil // raised since, or never
		}
		return &chunk.FenceRep{Before: prev}, mv.putMovedLocked(k, q.UndoTo)
	}
	if busy {
		return nil, rpc.Errorf(syscall.EBUSY, "data server %d: chunk %d of inode %d is migrating", s.mem.ID(), q.Idx, q.Ino)
	}
	if prev >= q.Layout {
		return &chunk.FenceRep{Before: prev}, nil // fenced already (a retry)
	}
	n, err := s.localSize(id)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		return nil, rpc.Errorf(syscall.EEXIST, "data server %d: chunk %d of inode %d holds %d bytes here", s.mem.ID(), q.Idx, q.Ino, n)
	}
	// an empty chunk file may hold a reservation: given back
	if err := tier.Discard(s.store, id); err != nil {
		return nil, err
	}
	return &chunk.FenceRep{Before: prev}, mv.putMovedLocked(k, q.Layout)
}

// drop forgets everything of ino (the file was deleted): its sessions are
// cut, so their migrations are not committed.
func (mv *moves) drop(ino uint64) {
	mv.mu.Lock()
	delete(mv.moved, ino)
	for k, ss := range mv.sessions {
		if k.ino == ino {
			ss.cut = true
		}
	}
	mv.mu.Unlock()
	if mv.dir != "" {
		os.Remove(filepath.Join(mv.dir, "moved", strconv.FormatUint(ino, 10)))
	}
}

// cutFrom notes that the chunks of ino from idx on were truncated.
func (mv *moves) cutFrom(ino, idx uint64) {
	mv.mu.Lock()
	for k, ss := range mv.sessions {
		if k.ino == ino && k.idx >= idx {
			ss.cut = true
		}
	}
	mv.mu.Unlock()
}

// checkMoveLocked admits one chunk request against the chunk's moved
// fence and migration session. It returns a channel to wait on when the
// chunk is stopped. A write is noted in the session. session is the
// migration a mover's read belongs to (0: not a mover's). Caller holds the
// inode's fence lock shared.
func (s *Server) checkMoveLocked(at *chunk.At, session uint64, write bool) (<-chan struct{}, error) {
	mv := s.moves
	k := chunkKey{at.Ino, at.Idx}
	mv.mu.Lock()
	defer mv.mu.Unlock()
	if g, ok := mv.moved[at.Ino][at.Idx]; ok && at.Layout < g {
		return nil, rpc.Errorf(syscall.EREMCHG, "data server %d: chunk %d of inode %d moved (layout generation %d, request's %d)",
			s.mem.ID(), at.Idx, at.Ino, g, at.Layout)
	}
	ss := mv.sessions[k]
	switch {
	case ss == nil:
	case ss.stopped:
		if session != 0 && session == ss.id {
			return nil, nil
		}
		return ss.done, nil
	case write && !ss.all:
		ss.dirty = append(ss.dirty, chunk.Run{Off: at.Off, Len: at.Len})
		if len(ss.dirty) > maxDirty {
			ss.all, ss.dirty = true, nil
		}
	}
	return nil, nil
}

// admitChunk admits a chunk read or write: truncation fence (admit), then
// moved fence and migration stop. It returns the inode's lock, held
// shared.
func (s *Server) admitChunk(ctx context.Context, at *chunk.At, session uint64, write bool) (*sync.RWMutex, error) {
	deadline := time.NewTimer(stopWait)
	defer deadline.Stop()
	for {
		l, err := s.admit(ctx, at.Ino, at.Trunc, write)
		if err != nil {
			return nil, err
		}
		wait, err := s.checkMoveLocked(at, session, write)
		if err != nil || wait == nil {
			if err != nil {
				l.RUnlock()
				l = nil
			}
			return l, err
		}
		l.RUnlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, rpc.Errorf(syscall.EREMCHG, "data server %d: chunk %d of inode %d is migrating", s.mem.ID(), at.Idx, at.Ino)
		}
	}
}

func (s *Server) localSize(id tier.ChunkID) (int64, error) {
	sz, ok := s.store.(tier.Sizer)
	if !ok {
		return 0, rpc.Errorf(syscall.ENOTSUP, "%s tier cannot tell chunk sizes", s.cfg.Kind)
	}
	return sz.LocalSize(id)
}

// moveBegin opens a migration session for the chunk (chunk.MoveBegin).
func (s *Server) moveBegin(_ context.Context, q *chunk.MoveReq) (*chunk.MoveBeginRep, error) {
	l := s.fence.lock(q.Ino)
	l.Lock() // writes under way finish first: later ones are noted
	defer l.Unlock()
	k := chunkKey{q.Ino, q.Idx}
	mv := s.moves
	mv.mu.Lock()
	if ss := mv.sessions[k]; ss != nil && ss.stopped {
		mv.mu.Unlock()
		return nil, rpc.Errorf(syscall.EBUSY, "data server %d: chunk %d of inode %d is stopped by migration %d", s.mem.ID(), q.Idx, q.Ino, ss.id)
	} else if ss != nil {
		close(ss.done) // a mover that gave up: its session is replaced
	}
	mv.sessions[k] = &session{id: q.Session, done: make(chan struct{})}
	mv.mu.Unlock()
	n, err := s.localSize(tier.ChunkID{Ino: q.Ino, Idx: q.Idx, ChunkSize: q.ChunkSize})
	return &chunk.MoveBeginRep{Len: uint64(n)}, err
}

// moveStop stops the chunk for the switch (chunk.MoveStop) and hands
// over what was written since Begin.
func (s *Server) moveStop(_ context.Context, q *chunk.MoveReq) (*chunk.MoveStopRep, error) {
	l := s.fence.lock(q.Ino)
	l.Lock()
	defer l.Unlock()
	k := chunkKey{q.Ino, q.Idx}
	mv := s.moves
	mv.mu.Lock()
	ss := mv.sessions[k]
	mv.mu.Unlock()
	if ss == nil || ss.id != q.Session {
		return nil, rpc.Errorf(syscall.ENOENT, "data server %d: no migration %d of chunk %d of inode %d", s.mem.ID(), q.Session, q.Idx, q.Ino)
	}
	if mv.dir != "" && !ss.stopped {
		if err := writeFile(mv.markerPath(k), strconv.FormatUint(ss.id, 10)+"\n"); err != nil {
			return nil, fmt.Errorf("data server %d: keeping the migration stop of chunk %d of inode %d: %w", s.mem.ID(), q.Idx, q.Ino, err)
		}
	}
	n, err := s.localSize(tier.ChunkID{Ino: q.Ino, Idx: q.Idx, ChunkSize: q.ChunkSize})
	if err != nil {
		return nil, err
	}
	mv.mu.Lock()
	defer mv.mu.Unlock()
	if !ss.stopped {
		ss.stopped, ss.stoppedAt = true, s.cfg.Now()
	}
	r := &chunk.MoveStopRep{Len: uint64(n), Written: ss.dirty, Cut: ss.cut}
	if ss.all {
		r.Written = []chunk.Run{{Off: 0, Len: uint64(n)}}
	}
	ss.dirty, ss.all = nil, false
	return r, nil
}

// moveEnd ends a migration on a source or destination member
// (chunk.MoveEnd).
func (s *Server) moveEnd(q *chunk.MoveEndReq) error {
	id := tier.ChunkID{Ino: q.Ino, Idx: q.Idx, ChunkSize: q.ChunkSize}
	l := s.fence.lock(q.Ino)
	l.Lock()
	defer l.Unlock()
	if !q.Source {
		if q.Committed {
			return nil
		}
		return tier.Discard(s.store, id) // the abandoned copy
	}
	return s.endSourceLocked(chunkKey{q.Ino, q.Idx}, q.Session, q.Committed, q.Keep, q.Layout, q.ChunkSize)
}

// endSourceLocked ends the source side of migration h of chunk k: fence
// and drop the chunk if the move was committed at layout generation gen
// (keep: a copy was made, the chunk stays and only requests of older
// generations are fenced), serve it again if not. Handle 0 ends no
// session: a copy of a replicated chunk that was given up (meta/replica.go).
// Caller holds the inode's fence lock exclusively.
func (s *Server) endSourceLocked(k chunkKey, h uint64, committed, keep bool, gen uint64, chunkSize uint32) error {
	mv := s.moves
	if committed {
		if err := mv.setMovedLocked(k, gen); err != nil {
			return err
		}
	}
	if committed && !keep {
		if err := tier.Discard(s.store, tier.ChunkID{Ino: k.ino, Idx: k.idx, ChunkSize: chunkSize}); err != nil {
			s.cfg.Log.Warn("dropping a moved chunk failed", "ino", k.ino, "chunk", k.idx, "err", err)
		}
	}
	mv.mu.Lock()
	ss := mv.sessions[k]
	if ss != nil && (ss.id == h || committed) {
		delete(mv.sessions, k)
		close(ss.done)
	}
	mv.mu.Unlock()
	if mv.dir != "" && (ss == nil || ss.id == h || committed) {
		if err := os.Remove(mv.markerPath(k)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// resolveStops asks the metadata service how the migrations of chunks
// stopped for long (or since before a restart) ended, and ends them.
func (s *Server) resolveStops(ctx context.Context) {
	now := s.cfg.Now()
	type stop struct {
		k  chunkKey
		id uint64
	}
	var todo []stop
	s.moves.mu.Lock()
	for k, ss := range s.moves.sessions {
		if ss.stopped && (ss.restored || now.Sub(ss.stoppedAt) > resolveAfter) {
			todo = append(todo, stop{k, ss.id})
		}
	}
	s.moves.mu.Unlock()
	for _, t := range todo {
		resp, err := rpc.Do(ctx, s.meta, ns.MoveState, &ns.MoveStateReq{Server: s.mem.ID(), Ino: t.k.ino, Idx: t.k.idx, Session: t.id})
		if err != nil {
			s.cfg.Log.Warn("cannot learn how a migration ended; its chunk stays stopped", "ino", t.k.ino, "chunk", t.k.idx, "err", err)
			continue
		}
		if resp.State == ns.MovePending {
			continue
		}
		committed := resp.State == ns.MoveCommitted
		l := s.fence.lock(t.k.ino)
		l.Lock()
		err = s.endSourceLocked(t.k, t.id, committed, resp.Keep, resp.Layout, resp.ChunkSize)
		l.Unlock()
		s.cfg.Log.Info("migration resolved with the metadata service", "ino", t.k.ino, "chunk", t.k.idx,
			"committed", committed, "err", err)
	}
}
