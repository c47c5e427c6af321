package fwd

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
	"github.com/sluice-hpc/sluice/layout"
)

// readPlan is a read clamped to the end of the file.
type readPlan struct {
	f     *file
	gen   uint64 // the truncation generation the size is of
	n     int64  // bytes to return
	spans []layout.Span
}

// planRead charges the emulated link for m's read and clamps it to the end
// of the file.
func (s *Server) planRead(ctx context.Context, m *ns.IOReq) (readPlan, error) {
	if err := s.payLink(ctx, float64(m.Len)); err != nil {
		return readPlan{}, err
	}
	f, err := s.fileFor(ctx, m.Ino)
	if err != nil {
		return readPlan{}, err
	}
	f.mu.Lock()
	size, gen := f.size, f.gen
	f.atime = s.cfg.Now().UnixNano()
	f.mu.Unlock()
	if m.Off+m.Len > size {
		// the file may have grown through another daemon
		a, err := s.getattr(ctx, m.Ino)
		if err != nil {
			return readPlan{}, err
		}
		s.mergeAttr(a)
		f.mu.Lock()
		size, gen = f.size, f.gen
		f.mu.Unlock()
	}
	if m.Off >= size {
		return readPlan{f: f, gen: gen}, nil
	}
	n := int64(m.Len)
	if rem := int64(size - m.Off); rem < n {
		n = rem
	}
	return readPlan{f: f, gen: gen, n: n, spans: layout.Spans(int64(m.Off), n, f.chunkSize)}, nil
}

// readPlanned fills buf (rp.n bytes) with the planned read.
func (s *Server) readPlanned(ctx context.Context, m *ns.IOReq, rp readPlan, buf []byte) error {
	f := rp.f
	return s.parallel(len(rp.spans), func(i int) error {
		sp := rp.spans[i]
		dst := buf[sp.BufOff : sp.BufOff+sp.Len]
		loc, ok, err := s.chunk(ctx, m.Ino, f, sp.Idx)
		if err != nil {
			return err
		}
		if !ok {
			clear(dst)
			return nil
		}
		patient := false // a server that cannot be reached may be restarting
		for attempt := 0; ; attempt++ {
			g := len(loc.Servers)
			pieces := layout.Pieces(sp.Off, sp.Len, g, f.stripeUnit)
			var lost atomic.Uint64
			err = s.parallel(len(pieces), func(j int) error {
				pc := pieces[j]
				into := dst[pc.BufOff : pc.BufOff+pc.Len]
				l, err := s.readCopies(ctx, copiesOf(loc, pc.Member), s.chunkRead(m, rp, sp, pc, loc.Gen), into, patient)
				if l != 0 {
					lost.Store(l)
				}
				return err
			})
			if l := lost.Load(); l != 0 && err == nil {
				// the replica served: give the lost copy up, so the
				// next reads go to the replica at once (without
				// holding this read)
				go func(loc wire.ChunkLoc) {
					gctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
					defer cancel()
					s.giveUp(gctx, m.Ino, f, sp.Idx, loc, l, nil)
				}(loc)
			}
			if unreachable(err) && attempt < maxRelocate {
				// the chunk may have a copy elsewhere by now (given up
				// and copied again while this daemon's layout was old)
				if now, changed := s.reload(ctx, m.Ino, f, sp.Idx, loc); changed {
					loc = now
					continue
				}
				if !patient {
					patient = true
					continue
				}
			}
			if rpc.Errno(err) != syscall.EREMCHG || attempt >= maxRelocate {
				return err
			}
			if loc, err = s.relocate(ctx, m.Ino, f, sp.Idx, loc, attempt, err); err != nil {
				return err
			}
		}
	})
}

func (s *Server) chunkRead(m *ns.IOReq, rp readPlan, sp layout.Span, pc layout.Piece, gen uint64) *chunk.ReadReq {
	return &chunk.ReadReq{At: chunk.At{ID: chunk.ID{Ino: m.Ino, Idx: sp.Idx, ChunkSize: uint32(rp.f.chunkSize)},
		Off: uint64(pc.LocalOff), Len: uint64(pc.Len), Layout: gen, Trunc: rp.gen}, Who: m.Who}
}

// relayRead answers a read that one data server serves whole by splicing
// the server's answer into the reply (zerocopy.Relay): the payload never
// enters this process. relayed is false, with nothing sent, when the read
// is not of that shape (end of file, a hole, stripes, several chunks) or
// the data server answered with an error, which is then returned.
func (s *Server) relayRead(ctx context.Context, r *rpc.Request, m *ns.IOReq, rp readPlan) (relayed bool, err error) {
	if len(rp.spans) != 1 {
		return false, nil
	}
	sp := rp.spans[0]
	loc, ok, err := s.chunk(ctx, m.Ino, rp.f, sp.Idx)
	if err != nil || !ok {
		return false, err
	}
	pieces := layout.Pieces(sp.Off, sp.Len, len(loc.Servers), rp.f.stripeUnit)
	if len(pieces) != 1 {
		return false, nil
	}
	// a server that cannot be reached is left to the copying path, which
	// reads the replica or learns where the chunk is now
	err = s.readDataSink(rpc.WithRetryLimit(ctx, s.cfg.Failover), loc.Servers[pieces[0].Member], s.chunkRead(m, rp, sp, pieces[0], loc.Gen),
		func(n int, prefix []byte, conn net.Conn) error {
			if int64(n) != rp.n {
				return fmt.Errorf("data server answered %d bytes for a read of %d", n, rp.n)
			}
			relayed = true
			return r.ReplySend(&ns.IORep{Len: uint64(n)}, n, func(c net.Conn) error {
				return zerocopy.Relay(c, prefix, conn, n)
			})
		})
	if relayed && err != nil {
		s.log.Warn("relayed read cut short; client connection closed", "ino", m.Ino, "err", err)
	}
	if relayed && err == nil {
		s.relays.Add(1)
	}
	if !relayed && rpc.Errno(err) == syscall.EREMCHG {
		return false, nil // the chunk migrated: the copying path follows it
	}
	if !relayed && unreachable(err) {
		return false, nil
	}
	return relayed, err
}

// maxRelocate bounds how often one request follows a migrating chunk.
const maxRelocate = 8

// relocate learns chunk idx's location again after a data server
// answered that the chunk moved or is being switched (EREMCHG, cause).
// While the metadata service still names the place that refused, the
// switch is under way: it waits a little, longer each attempt.
func (s *Server) relocate(ctx context.Context, ino uint64, f *file, idx uint64, stale wire.ChunkLoc, attempt int, cause error) (wire.ChunkLoc, error) {
	if err := s.loadLayout(ctx, ino, f); err != nil {
		return stale, err
	}
	loc, ok := f.lookup(idx)
	if !ok {
		return stale, cause
	}
	if loc.Gen == stale.Gen {
		t := time.NewTimer(min(50*time.Millisecond<<attempt, 2*time.Second))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return stale, ctx.Err()
		}
	}
	return loc, nil
}
