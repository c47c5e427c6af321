package data

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/data/localns"
	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
	"github.com/sluice-hpc/sluice/policy/qos"
	"github.com/sluice-hpc/sluice/tier"
)

// operations is the server's table: one handler per operation it
// answers, each a few lines over the store, the fences (fence.go) and the
// migration sessions (move.go).
func (s *Server) operations() *rpc.Table {
	t := &rpc.Table{Name: "data server"}
	rpc.OnRequest(t, chunk.Write, s.write)
	rpc.OnRequest(t, chunk.Read, s.read)
	serveOp(s, t, chunk.Trunc, func(ctx context.Context, q *chunk.TruncReq) (*wire.Empty, error) {
		l := s.fence.lock(q.Ino)
		l.Lock()
		defer l.Unlock()
		return &wire.Empty{}, s.applyTrimsLocked(q.Ino, q.Trims, 0)
	})
	serveOp(s, t, chunk.Delete, func(ctx context.Context, q *chunk.DeleteReq) (*wire.Empty, error) {
		err := s.store.DeleteFile(q.Ino)
		s.fence.drop(q.Ino)
		s.moves.drop(q.Ino)
		return &wire.Empty{}, err
	})
	serveOp(s, t, chunk.Sync, func(ctx context.Context, q *chunk.SyncReq) (*wire.Empty, error) {
		err := s.store.Sync(q.Ino)
		s.syncedBB(q.Who)
		return &wire.Empty{}, err
	})
	serveOp(s, t, chunk.Fence, s.chunkFence)
	serveOp(s, t, chunk.Settle, func(ctx context.Context, q *chunk.SettleReq) (*wire.Empty, error) {
		if st, ok := s.store.(tier.Settler); ok {
			for _, c := range q.Chunks {
				st.Settle(tier.ChunkID{Ino: c.Ino, Idx: c.Idx})
			}
		}
		return &wire.Empty{}, nil
	})
	serveOp(s, t, chunk.MoveBegin, s.moveBegin)
	serveOp(s, t, chunk.MoveStop, s.moveStop)
	serveOp(s, t, chunk.MoveEnd, func(ctx context.Context, q *chunk.MoveEndReq) (*wire.Empty, error) {
		return &wire.Empty{}, s.moveEnd(q)
	})
	rpc.OnRequest(t, chunk.MoveCopy, func(ctx context.Context, r *rpc.Request, q *chunk.MoveCopyReq) {
		// long, and its own reads and writes (some to this server) take
		// worker slots: it holds none
		start := s.cfg.Now()
		n, err := s.moveCopy(ctx, q)
		s.answer(r, start, &chunk.MoveCopyRep{Len: uint64(n)}, err, nil)
	})
	serveOp(s, t, chunk.PfsLink, func(ctx context.Context, q *chunk.PfsLinkReq) (*wire.Empty, error) {
		pv, err := s.pathView()
		if err == nil {
			err = pv.Link(q.Ino, q.Path)
		}
		if err == nil && q.Size > 0 {
			err = pv.Grow(q.Ino, int64(q.Size)) // as long as the file
		}
		if as, ok := s.store.(tier.AttrSetter); ok && err == nil && q.Attr != nil {
			a := q.Attr
			err = as.SetAttrs(q.Ino, a.Mode, a.Uid, a.Gid, a.Atime, a.Mtime)
		}
		return &wire.Empty{}, err
	})
	serveOp(s, t, chunk.PfsRename, func(ctx context.Context, q *chunk.PfsRenameReq) (*wire.Empty, error) {
		pv, err := s.pathView()
		if err == nil {
			err = pv.Rename(q.From, q.To)
		}
		return &wire.Empty{}, err
	})
	serveOp(s, t, chunk.PfsUnlink, func(ctx context.Context, q *chunk.PfsUnlinkReq) (*wire.Empty, error) {
		pv, err := s.pathView()
		if err == nil {
			err = pv.Unlink(q.Path)
		}
		return &wire.Empty{}, err
	})
	serveOp(s, t, chunk.PfsGrow, func(ctx context.Context, q *chunk.PfsGrowReq) (*wire.Empty, error) {
		pv, err := s.pathView()
		if err == nil {
			err = pv.Grow(q.Ino, int64(q.Size))
		}
		return &wire.Empty{}, err
	})
	serveOp(s, t, ns.Ping, func(context.Context, *ns.PingReq) (*ns.PingRep, error) { return &ns.PingRep{}, nil })
	if s.local != nil {
		for op, f := range s.local.Ops() {
			s.serveLocal(t, op, f)
		}
	}
	serveOp(s, t, api.Fault, func(_ context.Context, f *api.FaultReq) (*wire.Empty, error) { return &wire.Empty{}, s.fault(f) })
	serveOp(s, t, api.QoSStats, func(context.Context, *wire.Empty) (*api.QoSStatsRep, error) {
		return &api.QoSStatsRep{Gates: []qos.GateStats{s.qos.GateStats("data", "chunk")}}, nil
	})
	serveOp(s, t, api.BBServer, func(_ context.Context, q *api.BBServerReq) (*api.BBServerState, error) {
		return s.bbControl(q.Set)
	})
	serveOp(s, t, api.Budget, s.setBudget)
	return t
}

// serveOp serves operation d with f within the server's bound on requests
// at the medium (Config.Workers), its answer accounted (answer).
func serveOp[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](s *Server, t *rpc.Table, d wire.Def[Q, R], f func(ctx context.Context, q PQ) (PR, error)) {
	rpc.OnRequest[Q, R, PQ, PR](t, d, func(ctx context.Context, r *rpc.Request, q PQ) {
		s.sem <- struct{}{}
		start := s.cfg.Now()
		rep, err := f(ctx, q)
		<-s.sem
		s.answer(r, start, rep, err, nil)
	})
}

func (s *Server) pathView() (tier.PathView, error) {
	pv, ok := s.store.(tier.PathView)
	if !ok {
		return nil, rpc.Errorf(syscall.EINVAL, "%s tier keeps no namespace view", s.cfg.Kind)
	}
	return pv, nil
}

// ioReq is a read or write as the device limits, the burst buffer's
// controls, the QoS gate and Beacon see it: a chunk's (at is set) or a
// node-local file's.
type ioReq struct {
	who   wire.Who
	write bool
	at    *chunk.At
	// reserve is the room a chunk write's new local object takes
	reserve  uint64
	ino, off uint64
	n        uint64
}

func chunkIO(q chunk.IO) ioReq {
	at := q.Where()
	io := ioReq{who: q.Identity(), write: q.IsWrite(), at: at, ino: at.Ino, off: at.Off, n: at.Len}
	if w, ok := q.(*chunk.WriteReq); ok {
		io.reserve = w.Reserve
	}
	return io
}

func (io ioReq) chunk() tier.ChunkID {
	return tier.ChunkID{Ino: io.at.Ino, Idx: io.at.Idx, ChunkSize: io.at.ChunkSize}
}

// enter admits a read or write to the medium: a new chunk's room counts as
// used from now (queuedChunks), then the burst buffer's I/O scheduler and
// caps (bb.go), the QoS rules' shares and caps, the emulated device's
// IOPS and (bulk transfers) bandwidth, and a worker slot. Small requests
// are not queued behind bulk bandwidth debt, as a device with command
// queueing serves a 4 KiB read between large transfers. leave ends it, a
// chunk write with the bytes it wrote (max_perf).
func (s *Server) enter(ctx context.Context, r *rpc.Request, io ioReq) (leave func(wrote uint64), err error) {
	var undo []func()
	unwind := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if h, ok := s.store.(tier.Holder); ok && io.write && io.at != nil && !h.Holds(io.chunk()) {
		undo = append(undo, s.queued.enter(io.chunk(), int64(io.reserve)))
	}
	undo = append(undo, s.admitBB(ctx, io))
	class := qos.Read
	if io.write {
		class = qos.Write
	}
	qleave, waited, err := s.qos.Enter(ctx, qos.ReqBy(io.who, class, io.n))
	r.Gated = waited
	if err != nil {
		unwind()
		return nil, rpc.Errorf(syscall.ETIMEDOUT, "data server %d: QoS queue: %v", s.mem.ID(), err)
	}
	undo = append(undo, qleave)
	var perfDone func(uint64)
	if io.write && io.at != nil {
		// busy from the device limits to the store's reply (max_perf)
		perfDone = s.perf.begin(s.cfg.Now)
	}
	s.iops.Wait(ctx, 1)
	if io.n > wire.SmallIOMax {
		s.bw.Wait(ctx, float64(io.n))
	}
	s.sem <- struct{}{}
	return func(wrote uint64) {
		<-s.sem
		if perfDone != nil {
			perfDone(wrote)
		}
		unwind()
	}, nil
}

// write serves a chunk write (chunk.Write).
func (s *Server) write(ctx context.Context, r *rpc.Request, q *chunk.WriteReq) {
	if uint64(r.PayloadLen()) != q.Len {
		s.answer(r, s.cfg.Now(), nil, rpc.Errorf(syscall.EINVAL, "payload %d bytes, header says %d", r.PayloadLen(), q.Len), nil)
		return
	}
	leave, err := s.enter(ctx, r, chunkIO(q))
	if err != nil {
		s.answer(r, s.cfg.Now(), nil, err, nil)
		return
	}
	var wrote uint64
	defer func() { leave(wrote) }()
	start := s.cfg.Now()
	id := tier.ChunkID{Ino: q.Ino, Idx: q.Idx, ChunkSize: q.ChunkSize}
	l, err := s.admitChunk(ctx, &q.At, 0, true)
	if err == nil {
		if r.Body != nil {
			// received into a pipe (TakesBody): spliced into the chunk
			err = s.store.(tier.SourceWriter).WriteFrom(id, int64(q.Off), r.Body, int64(q.Reserve))
			s.splicedWrites.Add(1)
		} else {
			err = s.store.Write(id, int64(q.Off), r.Payload, int64(q.Reserve))
		}
		l.RUnlock()
	}
	if errors.Is(err, syscall.ENOSPC) {
		s.cfg.Log.Info("no room for a chunk", "ino", q.Ino, "chunk", q.Idx, "layout gen", q.Layout, "trunc gen", q.Trunc,
			"off", q.Off, "len", q.Len, "err", err)
	}
	if err == nil {
		s.meter.written.Add(q.Len)
		wrote = q.Len
		s.wroteBB(q.Who, q.Len)
	}
	s.answer(r, start, &wire.Empty{}, err, nil)
}

// read serves a chunk read (chunk.Read).
func (s *Server) read(ctx context.Context, r *rpc.Request, q *chunk.ReadReq) {
	if q.Len > wire.MaxPayload {
		s.answer(r, s.cfg.Now(), nil, rpc.Errorf(syscall.EINVAL, "read of %d bytes too large", q.Len), nil)
		return
	}
	leave, err := s.enter(ctx, r, chunkIO(q))
	if err != nil {
		s.answer(r, s.cfg.Now(), nil, err, nil)
		return
	}
	defer leave(0)
	start := s.cfg.Now()
	l, err := s.admitChunk(ctx, &q.At, q.Session, false)
	if err != nil {
		s.answer(r, start, nil, err, nil)
		return
	}
	s.meter.read.Add(q.Len)
	id := tier.ChunkID{Ino: q.Ino, Idx: q.Idx, ChunkSize: q.ChunkSize}
	if cf, ok := s.store.(tier.ChunkFiles); ok && s.cfg.ZeroCopy {
		err = s.sendChunk(r, start, cf, id, q)
		l.RUnlock()
		if err != nil {
			s.answer(r, start, nil, err, nil)
		}
		return
	}
	buf := bufpool.Get(int(q.Len))
	err = s.store.Read(id, int64(q.Off), buf)
	l.RUnlock()
	s.answer(r, start, &chunk.ReadRep{Len: q.Len}, err, buf)
	bufpool.Put(buf)
}

// sendChunk answers a chunk read with sendfile from the chunk's file, so
// the bytes go from the tier's pages to the socket without a copy through
// this process. An error before the answer began is returned for an error
// reply; after it began, the connection is closed and nil returned.
func (s *Server) sendChunk(r *rpc.Request, start time.Time, cf tier.ChunkFiles, id tier.ChunkID, q *chunk.ReadReq) error {
	f, err := cf.ChunkFile(id)
	if err != nil {
		return err
	}
	// the read is the send: an injected slowdown scales it by what a
	// send of this size has been taking here
	s.slowdown(start, time.Duration(s.sendCost.Load()*int64(q.Len)>>10))
	sent := s.cfg.Now()
	err = r.ReplySend(&chunk.ReadRep{Len: q.Len}, int(q.Len), func(c net.Conn) error {
		err := zerocopy.SendFile(c, f, int64(q.Off), int(q.Len))
		if errors.Is(err, os.ErrClosed) {
			// evicted from the store's open files meanwhile: nothing
			// was sent, ask again
			if f, err = cf.ChunkFile(id); err == nil {
				err = zerocopy.SendFile(c, f, int64(q.Off), int(q.Len))
			}
		}
		return err
	})
	if err != nil {
		s.cfg.Log.Warn("chunk read cut short; connection closed", "ino", q.Ino, "chunk", q.Idx, "peer", r.Peer, "err", err)
	} else {
		s.sendfiles.Add(1)
		s.learnSend(s.cfg.Now().Sub(sent), q.Len)
	}
	s.account(r, start, nil, int(q.Len))
	return nil
}

// learnSend folds a send of n bytes that took d into sendCost (an
// exponentially weighted mean, an eighth for the newest).
func (s *Server) learnSend(d time.Duration, n uint64) {
	if n == 0 || d <= 0 {
		return
	}
	c := int64(d) << 10 / int64(n)
	for {
		old := s.sendCost.Load()
		nw := c
		if old > 0 {
			nw = old + (c-old)/8
		}
		if s.sendCost.CompareAndSwap(old, nw) {
			return
		}
	}
}

// answer sends r its reply, or err (an I/O error names this server), and
// accounts for it: a read once its data went (the send is part of a
// read's service, as it is with sendfile), anything else before its
// answer, so that a caller holding the answer finds the request counted.
func (s *Server) answer(r *rpc.Request, start time.Time, rep wire.Message, err error, payload []byte) {
	s.slowdown(start, 0)
	if err != nil && rpc.Errno(err) == syscall.EIO {
		err = fmt.Errorf("data server %d (%s): %w", s.mem.ID(), s.cfg.Kind, err)
	}
	if err == nil && (r.Op == chunk.OpRead || r.Op == ns.OpRead) {
		r.Answer(rep, nil, payload)
		s.account(r, start, nil, len(payload))
		return
	}
	s.account(r, start, err, len(payload))
	r.Answer(rep, err, payload)
}

// slowdown waits, under an injected slowdown of f, so that a request
// takes f times its real service time: the time since start and ahead,
// what is still to do (a send).
func (s *Server) slowdown(start time.Time, ahead time.Duration) {
	if f := s.slow.Load(); f > 100 {
		time.Sleep((s.cfg.Now().Sub(start) + ahead) * time.Duration(f-100) / 100)
	}
}

// account records an answer of n payload bytes for Beacon and the metrics.
func (s *Server) account(r *rpc.Request, start time.Time, err error, n int) {
	op := r.Op
	if mon := s.cfg.Monitor; mon != nil {
		if name := beaconrpc.OpName(op); name != "" {
			who, ino, off, size := describe(r)
			if op == chunk.OpRead {
				size = uint64(n) // what was read: less than asked at the end of a chunk
			}
			mon.Add(beacon.Op{Start: start, Who: who, Name: name, Ino: ino,
				Off: off, Size: size, Lat: s.cfg.Now().Sub(start), Wait: start.Sub(r.At), QoSWait: r.Gated, Err: err != nil})
		}
	}
	s.requests.WithLabelValues(op.String()).Inc()
	s.latency.WithLabelValues(op.String()).Observe(s.cfg.Now().Sub(start).Seconds())
	if err == nil {
		switch q := r.Req.(type) {
		case *chunk.ReadReq:
			s.bytes.WithLabelValues("read").Add(float64(n))
		case *chunk.WriteReq:
			s.bytes.WithLabelValues("write").Add(float64(q.Len))
		}
	}
}

// describe is what Beacon records of a request: who made it, the file,
// and the range it reads or writes.
func describe(r *rpc.Request) (who wire.Who, ino, off, size uint64) {
	switch q := r.Req.(type) {
	case chunk.IO:
		at := q.Where()
		return q.Identity(), at.Ino, at.Off, at.Len
	case *ns.IOReq:
		return q.Who, q.Ino, q.Off, q.Len
	case ns.Request:
		ino, parent, _ := q.Inodes()
		if ino == 0 {
			ino = parent
		}
		return q.Header().Who, ino, 0, 0
	}
	if q, ok := r.Req.(interface{ Identity() wire.Who }); ok {
		who = q.Identity()
	}
	if q, ok := r.Req.(wire.OfFile); ok {
		ino = q.FileIno()
	}
	return who, ino, 0, 0
}

// serveLocal adds operation op of the node-local namespace
// (docs/nodelocal.md) to t: every one is an operation on this server's
// device; a request that is not for the local namespace is refused.
func (s *Server) serveLocal(t *rpc.Table, op wire.Op, f localns.Op) {
	t.Add(op, func(ctx context.Context, r *rpc.Request) {
		q, ok := r.Req.(ns.Request)
		if !ok || !localns.Handles(q) {
			s.answer(r, s.cfg.Now(), nil, rpc.Errorf(syscall.EINVAL, "data server %d: %v of the global namespace: the metadata service's", s.mem.ID(), op), nil)
			return
		}
		if io, ok := q.(*ns.IOReq); ok {
			leave, err := s.enter(ctx, r, ioReq{who: io.Who, write: op == ns.OpWrite, ino: io.Ino, off: io.Off, n: io.Len})
			if err != nil {
				s.answer(r, s.cfg.Now(), nil, err, nil)
				return
			}
			defer leave(0)
		} else {
			s.sem <- struct{}{}
			defer func() { <-s.sem }()
		}
		start := s.cfg.Now()
		switch op {
		case ns.OpRead, ns.OpWrite, ns.OpOpen, ns.OpRelease, ns.OpFlush:
			// data: paid above; open, release, flush: no device work
		default:
			s.iops.Wait(ctx, 1)
		}
		rep, out, err := f(q, r.Payload)
		s.answer(r, start, rep, err, out)
	})
}
