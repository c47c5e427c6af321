package fwd

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
	"github.com/sluice-hpc/sluice/layout"
)

// chunkForWrite returns chunk idx's location for a write in truncation
// generation gen, placing the chunk if it has none. placer is true when the
// chunk is fresh (placed by this daemon, nothing landed in it yet): the
// caller's write may move it and must call placed when it ends; other
// writes of the chunk wait here until then.
func (s *Server) chunkForWrite(ctx context.Context, ino uint64, f *file, idx, gen uint64) (loc wire.ChunkLoc, placer bool, err error) {
	for {
		f.mu.Lock()
		ch := f.placing[idx]
		loc, known := f.chunks[idx]
		loaded := f.loaded
		if ch == nil && (f.fresh[idx] || !known && loaded) {
			f.placing[idx] = make(chan struct{})
			placer = true
		}
		f.mu.Unlock()
		switch {
		case placer && known:
			return loc, true, nil // fresh: this write may still move it
		case placer:
			loc, placed, err := s.alloc(ctx, ino, f, idx, 0, gen)
			if err != nil || !placed {
				s.placed(f, idx, false) // failed, or another daemon placed it
				return loc, false, err
			}
			f.mu.Lock()
			f.fresh[idx] = true
			f.mu.Unlock()
			return loc, true, nil
		case ch != nil:
			// another request's write places the chunk: waiting for it
			// is not this daemon's work (it may be at a slow server)
			releaseWorker(ctx)
			select {
			case <-ch:
			case <-ctx.Done():
				return loc, false, ctx.Err()
			}
		case known:
			return loc, false, nil
		default:
			if err := s.loadLayout(ctx, ino, f); err != nil {
				return loc, false, err
			}
		}
	}
}

// alloc asks the metadata service for chunk idx's location, placing it
// (away from server exclude, if set) when it has none; placed says
// whether this call placed it.
//
// A fresh placement may wait: while the tier the chunk belongs on is at
// its write-stall threshold (ONFS Cs-w) the metadata service answers
// AllocStalled after holding the request while space may still free (the
// write waits for the tiering manager), at most StallMax in all; then the
// chunk goes to a lower tier. The wait counts as the request's queue time
// in Beacon (stallClock).
func (s *Server) alloc(ctx context.Context, ino uint64, f *file, idx, exclude, gen uint64) (loc wire.ChunkLoc, placed bool, err error) {
	req := ns.AllocReq{Ino: ino, Idx: idx, Exclude: exclude, Trunc: gen, Job: stallOf(ctx).job()}
	if exclude == 0 {
		req.MayWait = true
		// the metadata service may hold it until the tier has room:
		// not this daemon's work
		releaseWorker(ctx)
	}
	var stalled time.Duration // waited for stalled tiers so far
	tries := 0                // answers EAGAIN: the chunk is migrating
	for {
		r := req
		if r.MayWait {
			// the metadata service holds a stalled request until space
			// frees or the rest of the writer's budget is spent
			r.Wait = max(s.cfg.StallMax-stalled, time.Millisecond)
		}
		resp, err := rpc.Do(ctx, s.meta, ns.Alloc, &r)
		if exclude != 0 && rpc.Errno(err) == syscall.EAGAIN && tries < againTries {
			// the chunk is migrating: it stays put until that ends
			if err = pauseAgain(ctx, tries); err != nil {
				return wire.ChunkLoc{}, false, err
			}
			tries++
			continue
		}
		if err != nil {
			return wire.ChunkLoc{}, false, err
		}
		waited := resp.Waited
		if resp.Stalled {
			stalled += max(waited, time.Millisecond) // never a loop that spends nothing
			if stalled >= s.cfg.StallMax {
				s.log.Warn("tier stalled too long: placing the chunk on a lower tier", "ino", ino, "chunk", idx,
					"waited", stalled)
				req.MayWait = false
			}
			continue
		}
		if stalled += waited; stalled > 0 {
			stallOf(ctx).add(stalled)
			s.stalls.Add(1)
			s.stallNs.Add(stalled.Nanoseconds())
		}
		if resp.Chunk == nil {
			return wire.ChunkLoc{}, false, rpc.Errorf(syscall.EIO, "metadata service answered an allocation with no chunk")
		}
		loc = *resp.Chunk
		f.mu.Lock()
		if f.gen == gen {
			// (a truncate adopted since may have cut it: not kept)
			f.chunks[idx] = loc
		}
		f.mu.Unlock()
		return loc, resp.Placed, nil
	}
}

// stallClock adds up the time one request waited for stalled tiers; it
// also carries the request's job (placement binds jobs to pools).
type stallClock struct {
	ns    atomic.Int64
	jobID string // set before the request is served, read-only after
}

// job is the request's job ("" outside a request).
func (c *stallClock) job() string {
	if c == nil {
		return ""
	}
	return c.jobID
}

type stallKey struct{}

func withStallClock(ctx context.Context, c *stallClock) context.Context {
	return context.WithValue(ctx, stallKey{}, c)
}

// stallOf returns the request's stall clock (nil outside a request: adds
// are dropped).
func stallOf(ctx context.Context) *stallClock {
	c, _ := ctx.Value(stallKey{}).(*stallClock)
	return c
}

func (c *stallClock) add(d time.Duration) {
	if c != nil {
		c.ns.Add(d.Nanoseconds())
	}
}

func (c *stallClock) get() time.Duration { return time.Duration(c.ns.Load()) }

// payload is a write's bytes: in memory, or bytes [off, off+n) of a
// request's Body (a pipe: received without a copy, sent on by reference).
type payload struct {
	b      []byte
	body   *zerocopy.Pipe
	off, n int
}

func bytesPayload(b []byte) payload { return payload{b: b, n: len(b)} }

func (p payload) len() int { return p.n }

// slice is bytes [off, off+n) of p.
func (p payload) slice(off, n int) payload {
	if p.body != nil {
		return payload{body: p.body, off: p.off + off, n: n}
	}
	return bytesPayload(p.b[off : off+n])
}

// write stores p at m.Off of file m.Ino and returns the truncation
// generation it landed in. A write refused because a truncate came in
// between (ESTALE from a data server or the metadata service) is made
// again in the new generation, after the truncate.
func (s *Server) write(ctx context.Context, m *ns.IOReq, p payload) (uint64, error) {
	if uint64(p.len()) != m.Len {
		return 0, rpc.Errorf(syscall.EINVAL, "payload %d bytes, header says %d", p.len(), m.Len)
	}
	if err := s.payLink(ctx, float64(p.len())); err != nil {
		return 0, err
	}
	f, err := s.holdFile(ctx, m.Ino)
	if err != nil {
		return 0, err
	}
	defer s.letGo(m.Ino, f)
	spans := layout.Spans(int64(m.Off), int64(p.len()), f.chunkSize)
	for attempt := 0; ; attempt++ {
		f.mu.Lock()
		gen := f.gen
		f.mu.Unlock()
		err = s.parallel(len(spans), func(i int) error {
			sp := spans[i]
			return s.writeSpan(ctx, m, f, sp, p.slice(int(sp.BufOff), int(sp.Len)), gen)
		})
		if rpc.Errno(err) == syscall.ESTALE && attempt < 8 {
			if err = s.refresh(ctx, m.Ino, f, gen, err); err != nil {
				return 0, err
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		end := m.Off + uint64(p.len())
		f.mu.Lock()
		// a truncate adopted meanwhile came after this write: the write's
		// growth is void (its bytes past the new size were cut)
		if f.gen == gen {
			if end > f.size {
				f.size = end
			}
			f.mtime = s.cfg.Now().UnixNano()
			f.pending = true
			f.wrote = true
			f.unclosed = true
		}
		f.atime = s.cfg.Now().UnixNano()
		f.mu.Unlock()
		return gen, nil
	}
}

func (s *Server) writeSpan(ctx context.Context, m *ns.IOReq, f *file, sp layout.Span, p payload, gen uint64) (err error) {
	loc, placer, err := s.chunkForWrite(ctx, m.Ino, f, sp.Idx, gen)
	if err != nil {
		return err
	}
	if placer {
		defer func() { s.placed(f, sp.Idx, err == nil) }()
		f.mu.Lock()
		x := f.refused[sp.Idx]
		f.mu.Unlock()
		if x != 0 {
			if loc, placer, err = s.move(ctx, m.Ino, f, sp.Idx, x, gen); err != nil {
				return err
			}
		}
	}
	patient := false // a server that cannot be reached may be restarting
	fulls := 0       // refusals for room of a chunk placed earlier
	for attempt := 0; ; attempt++ {
		if len(loc.Home) > 0 {
			// a drained chunk kept as a cache: its copy on the PFS
			// stops being its home before it changes
			if loc, err = s.dirty(ctx, m.Ino, f, sp.Idx, loc); err != nil {
				return err
			}
		}
		g := len(loc.Servers)
		pieces := layout.Pieces(sp.Off, sp.Len, g, f.stripeUnit)
		err = s.parallel(len(pieces), func(i int) error {
			pc := pieces[i]
			req := &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: m.Ino, Idx: sp.Idx, ChunkSize: uint32(f.chunkSize)},
				Off: uint64(pc.LocalOff), Len: uint64(pc.Len), Layout: loc.Gen, Trunc: gen},
				Reserve: uint64(layout.LocalSize(pc.Member, g, f.stripeUnit, f.chunkSize)), Who: m.Who}
			// only a write to a fresh chunk may move it: nothing of
			// anyone else's is in it yet
			return s.writeCopies(ctx, f, copiesOf(loc, pc.Member), req, p.slice(int(pc.BufOff), int(pc.Len)), placer, patient)
		})
		var lost *lostCopyErr
		if errors.As(err, &lost) && attempt < maxRelocate {
			// one copy's server is gone: give it up and write again
			// (the copy left has this write already; writing it again
			// is harmless)
			if loc, err = s.giveUp(ctx, m.Ino, f, sp.Idx, loc, lost.id, err); err != nil {
				return err
			}
			continue
		}
		if !placer && unreachable(err) && attempt < maxRelocate {
			if now, changed := s.reload(ctx, m.Ino, f, sp.Idx, loc); changed {
				loc = now // this daemon's layout was old
				continue
			}
			if !patient {
				patient = true
				continue
			}
		}
		if rpc.Errno(err) == syscall.EREMCHG && attempt < maxRelocate {
			// the chunk migrated: write again where it is now (pieces
			// that landed before the switch were copied with it)
			if loc, err = s.relocate(ctx, m.Ino, f, sp.Idx, loc, attempt, err); err != nil {
				return err
			}
			continue
		}
		var full *fullErr
		if errors.As(err, &full) && fulls < 2 {
			// a chunk placed earlier whose server has no room for it:
			// it may hold nothing yet (placed before a truncate cut it
			// away during a migration), then it moves; if it stays, it
			// holds bytes now (its room is reserved): written again
			// there once
			fulls++
			if loc, err = s.relocateEmpty(ctx, m.Ino, f, sp.Idx, full, gen); err != nil {
				return err
			}
			continue
		}
		var re *refusedErr
		if !errors.As(err, &re) || attempt > 8 {
			return err
		}
		// the server has no room for a new chunk, or is down and the
		// chunk holds nothing yet: place it elsewhere (the next tier down
		// if this one is full)
		s.log.Warn("placing chunk elsewhere", "ino", m.Ino, "chunk", sp.Idx, "refused by", re.id, "err", re.err)
		if loc, placer, err = s.move(ctx, m.Ino, f, sp.Idx, re.id, gen); err != nil {
			return err
		}
	}
}

// move places fresh chunk idx away from server refusedBy. If that fails
// (a truncate came in between: ESTALE) the next write of the chunk tries
// again. stillFresh is false when another daemon's write placed the chunk
// meanwhile: it is not this daemon's to move any more.
func (s *Server) move(ctx context.Context, ino uint64, f *file, idx, refusedBy, gen uint64) (loc wire.ChunkLoc, stillFresh bool, err error) {
	f.mu.Lock()
	f.refused[idx] = refusedBy
	f.mu.Unlock()
	loc, moved, err := s.alloc(ctx, ino, f, idx, refusedBy, gen)
	if err != nil {
		return loc, true, err
	}
	f.mu.Lock()
	delete(f.refused, idx)
	if !moved {
		delete(f.fresh, idx)
	}
	f.mu.Unlock()
	return loc, moved, nil
}

// relocateEmpty asks the metadata service to move chunk idx, placed
// earlier, off the server that refused a write of it for room (full),
// which it does only if the chunk holds nothing anywhere
// (meta/relocate.go). It returns where to write again: the new location,
// or the same one (the chunk holds bytes now: its room is reserved). A
// chunk that cannot move now (migrating) is asked about again after a
// pause.
func (s *Server) relocateEmpty(ctx context.Context, ino uint64, f *file, idx uint64, full *fullErr, gen uint64) (wire.ChunkLoc, error) {
	req := ns.AllocReq{Empty: true, Ino: ino, Idx: idx, Exclude: full.id, Trunc: gen, Job: stallOf(ctx).job()}
	for try := 0; ; try++ {
		resp, err := rpc.Do(ctx, s.meta, ns.Alloc, &req)
		if rpc.Errno(err) == syscall.EAGAIN && try < againTries {
			if err := pauseAgain(ctx, try); err != nil {
				return wire.ChunkLoc{}, err
			}
			continue
		}
		if err != nil {
			return wire.ChunkLoc{}, err
		}
		if resp.Chunk == nil {
			return wire.ChunkLoc{}, rpc.Errorf(syscall.EIO, "metadata service answered a relocation with no chunk")
		}
		loc := *resp.Chunk
		f.mu.Lock()
		if f.gen == gen {
			f.chunks[idx] = loc
		}
		f.mu.Unlock()
		if resp.Placed {
			s.log.Info("empty chunk placed elsewhere", "ino", ino, "chunk", idx, "refused by", full.id, "now", loc.All(), "tier", loc.Tier)
		}
		return loc, nil
	}
}

// againTries bounds how often a chunk's relocation is asked again while
// the metadata service answers that the chunk is migrating (EAGAIN); with
// pauseAgain's pauses, about 17 s in all.
const againTries = 20

// pauseAgain waits before try+1 of a request answered EAGAIN: 50 ms,
// doubled each try, at most a second.
func pauseAgain(ctx context.Context, try int) error {
	return throttle.Sleep(ctx, min(50*time.Millisecond<<try, time.Second))
}

// fullErr: the data server of a chunk placed earlier has no room for it.
type fullErr struct {
	id  uint64
	err error
}

func (e *fullErr) Error() string { return e.err.Error() }

func (e *fullErr) Unwrap() error { return e.err }

// refusedErr: a data server could not take a new chunk.
type refusedErr struct {
	id  uint64
	err error
}

func (e *refusedErr) Error() string { return e.err.Error() }

func (e *refusedErr) Unwrap() error { return e.err }
