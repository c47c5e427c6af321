package meta

import (
	"context"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
)

// Settling new chunks' reservations. A data server reserves a whole
// chunk's room when a chunk is created (tier.Store.Write), and placement
// promises that room in its view of the server (member.reserved) until
// the server's next report: without more, a 4 KiB file would hold 4 MiB
// of a mem tier, and a storm of small files would find the tier "full"
// at 1,024 files per GiB. When a file is closed its size is reported
// (ns.Extend with Close); if its tail chunk was placed since its
// servers' last reports, the promise drops to the chunk's bytes at once
// and the servers are asked, in batches (chunk.Settle, RunSettle), to
// give back what the chunk reserved past its bytes. A chunk that is never
// settled this way (a file left open, a striped file) gives the room back
// by itself once it has gone unwritten for a second (tier.Config).

// promise is room placement promised a data server for a new chunk.
type promise struct {
	server uint64
	charge uint64
	epoch  uint64    // the server's report count when promised
	at     time.Time // when promised
}

// promiseKeep is how long a promise whose servers have reported since is
// kept for its file's close. The sweep that bounds the promises kept for
// files never closed removes only older ones: a promise a report made
// stale still settles (the server's usage counted the whole reservation,
// which the close gives back). The first report after a promise used to
// sweep it, and a file closed after its server's next heartbeat kept its
// chunk's whole room until the server's own reclaim (an hour in
// `fwd TestSmallFilesDoNotFillTheTier`, which failed now and then on it).
const promiseKeep = 10 * time.Minute

type chunkKey struct{ ino, idx uint64 }

// promiseLocked notes the room promised for chunk idx of ino on the
// servers of d (a chunk of one member only: a striped chunk's pieces are
// left to the data servers' own reclaim). Caller holds r.mu.
func (r *registry) promiseLocked(ino, idx uint64, servers, charge, replicas, replicaCharge []uint64) {
	if len(servers) != 1 || idx > 1<<32-1 {
		return
	}
	var ps []promise
	now := r.s.now()
	for i, id := range servers {
		ps = append(ps, promise{server: id, charge: charge[i], epoch: r.servers[id].epoch, at: now})
	}
	for i, id := range replicas {
		ps = append(ps, promise{server: id, charge: replicaCharge[i], epoch: r.servers[id].epoch, at: now})
	}
	r.promises[chunkKey{ino, idx}] = ps
}

// reportedLocked ends the promises made to server m before its report
// (its usage counts them now); stale ones older than promiseKeep are
// swept once there are many. Caller holds r.mu.
func (r *registry) reportedLocked(m *member) {
	m.reserved = 0
	m.epoch++
	if len(r.promises) <= r.promiseSweep {
		return
	}
	now := r.s.now()
	for k, ps := range r.promises {
		live := false
		for _, p := range ps {
			if sm := r.servers[p.server]; (sm != nil && sm.epoch == p.epoch) || now.Sub(p.at) < promiseKeep {
				live = true
			}
		}
		if !live {
			delete(r.promises, k)
		}
	}
	r.promiseSweep = 2*len(r.promises) + 1024
}

// settle takes the promise of chunk idx of ino down to its bytes and
// queues the chunk's settlement on its servers. It reports whether there
// was a promise.
func (r *registry) settle(ino, idx, bytes uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := chunkKey{ino, idx}
	ps, ok := r.promises[k]
	if !ok {
		return false
	}
	delete(r.promises, k)
	for _, p := range ps {
		m := r.servers[p.server]
		if m == nil {
			continue
		}
		if bytes < p.charge {
			if m.epoch == p.epoch {
				m.reserved -= min(m.reserved, p.charge-bytes)
			} else {
				// the server reported since: its usage counted the
				// chunk's whole reservation, which it gives back now
				m.info.Used -= min(m.info.Used, p.charge-bytes)
			}
			r.backlogLocked(p.server).Settle(r.s.now(), p.charge-bytes, m.info.MaxPerf)
		}
		r.settleQ[p.server] = append(r.settleQ[p.server], chunk.ID{Ino: ino, Idx: idx})
	}
	r.spaceChangedLocked()
	select {
	case r.settleKick <- struct{}{}:
	default:
	}
	return true
}

// settleTail settles the tail chunk of a file just closed with attributes
// a (see above).
func (s *Service) settleTail(a *wire.Attr) {
	if a.Size == 0 || a.ChunkSize == 0 || a.StripeCnt > 1 {
		return
	}
	cs := uint64(a.ChunkSize)
	idx := (a.Size - 1) / cs
	s.reg.settle(a.Ino, idx, a.Size-idx*cs)
}

// settleBatch bounds the chunks of one chunk.Settle.
const settleBatch = 4096

// RunSettle sends the queued settlements to the data servers until ctx
// ends: what was queued while one batch was on its way goes in the next.
func (s *Service) RunSettle(ctx context.Context) {
	r := &s.reg
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.settleKick:
		}
		r.mu.Lock()
		q := r.settleQ
		r.settleQ = map[uint64][]chunk.ID{}
		r.mu.Unlock()
		for id, es := range q {
			for len(es) > 0 {
				n := min(len(es), settleBatch)
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if _, err := callData(cctx, r, id, chunk.Settle, &chunk.SettleReq{Chunks: es[:n]}); err != nil && ctx.Err() == nil {
					// the server's own reclaim gives the room back a second later
					s.log.Debug("settling chunks failed", "server", id, "chunks", n, "err", err)
				}
				cancel()
				es = es[n:]
			}
		}
	}
}
