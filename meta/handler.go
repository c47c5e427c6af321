package meta

import (
	"context"
	"github.com/sluice-hpc/sluice/api"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Serve adds the service's typed operations to t: the namespace
// service's (internal/wire/ns) and the administration service's it
// answers (api: daemons, pools, QoS rules, burst-buffer grants).
func (s *Service) Serve(t *rpc.Table) {
	serveOp(s, t, api.Register, s.register)
	serveOp(s, t, api.Servers, func(context.Context, *wire.Empty) (*api.ServersRep, error) {
		return &api.ServersRep{Servers: s.Servers()}, nil
	})
	serveOp(s, t, api.Fault, func(_ context.Context, f *api.FaultReq) (*wire.Empty, error) { return &wire.Empty{}, s.fault(f) })
	s.servePools(t)
	s.serveQoS(t)
	s.serveGrants(t)
	serveOp(s, t, ns.Access, func(_ context.Context, q *ns.AccessReq) (*wire.Empty, error) {
		s.Accessed(q.At, q.Files)
		return &wire.Empty{}, nil
	})
	serveOp(s, t, ns.Watch, func(ctx context.Context, q *ns.WatchReq) (*ns.WatchRep, error) {
		cs, pos, lost := s.feed.watch(ctx, q.Seen, q.Client, min(q.Wait, FeedWait))
		return &ns.WatchRep{Changes: cs, Feed: pos, Lost: lost}, nil
	})
	serveOp(s, t, ns.Delegate, func(_ context.Context, q *ns.DelegateReq) (*ns.DelegateRep, error) {
		if s.LocalTier(q.Dir) != "" {
			// its creates are its data servers' to make
			return nil, errno(syscall.EBUSY, "directory %d is in local mode: not delegated", q.Dir)
		}
		first, pos, err := s.Delegate(q.Client, q.Dir)
		if err != nil {
			return nil, err
		}
		return &ns.DelegateRep{First: first, Count: DelegInos, Feed: pos}, nil
	})
	serveOp(s, t, ns.Undelegate, func(_ context.Context, q *ns.DelegateReq) (*wire.Empty, error) {
		s.Undelegate(q.Client, q.Dir)
		return &wire.Empty{}, nil
	})
	serveOp(s, t, ns.Layout, func(_ context.Context, q *ns.FileReq) (*ns.LayoutRep, error) {
		cs, err := s.Layout(q.Ino)
		if err != nil {
			return nil, err
		}
		return &ns.LayoutRep{Chunks: cs}, nil
	})
	serveOp(s, t, ns.Alloc, s.alloc)
	feedOp(s, t, ns.Extend, func(_ context.Context, q *ns.ExtendReq) (*ns.AttrRep, uint64, []ns.Change, error) {
		a, err := s.Extend(q.Ino, q.Size, q.Mtime, q.Trunc)
		if err == nil && q.Sync {
			err = s.Sync()
		}
		if err == nil && q.Close {
			s.settleTail(a)
		}
		ch := []ns.Change{attrChange(q.Ino)}
		if err != nil {
			return nil, q.Client, ch, err
		}
		return &ns.AttrRep{Attr: a}, q.Client, ch, nil
	})
	serveOp(s, t, ns.Dirty, func(ctx context.Context, q *ns.ChunkReq) (*ns.ChunkRep, error) {
		c, err := s.Dirty(ctx, q.Ino, q.Idx, q.Layout)
		if err != nil {
			return nil, err
		}
		return &ns.ChunkRep{Chunk: c}, nil
	})
	serveOp(s, t, ns.Degrade, func(ctx context.Context, q *ns.ChunkReq) (*ns.ChunkRep, error) {
		c, err := s.Degrade(ctx, q.Ino, q.Idx, q.Layout, q.Server)
		if err != nil {
			return nil, err
		}
		return &ns.ChunkRep{Chunk: c}, nil
	})
	serveOp(s, t, ns.Trims, func(_ context.Context, q *ns.TrimsReq) (*ns.TrimsRep, error) {
		ts, gen, err := s.PendingTrims(q.Server, q.Ino)
		if err != nil {
			return nil, err
		}
		return &ns.TrimsRep{Trims: ts, Trunc: gen}, nil
	})
	serveOp(s, t, ns.TrimsDone, func(_ context.Context, q *ns.TrimsDoneReq) (*wire.Empty, error) {
		return &wire.Empty{}, s.TrimsDone(q.Server, q.Trims)
	})
	serveOp(s, t, ns.MoveState, func(_ context.Context, q *ns.MoveStateReq) (*ns.MoveStateRep, error) {
		return s.MoveStateOf(q.Server, q.Ino, q.Idx, q.Session), nil
	})
	serveOp(s, t, ns.Activity, func(_ context.Context, q *ns.FileReq) (*wire.Activity, error) {
		act, err := s.Activity(q.Ino)
		if err != nil {
			return nil, err
		}
		return &act, nil
	})
}

// feedOp serves a namespace operation that changes the namespace: f
// returns its reply, the mount it came from (its own changes are not
// echoed to it) and its changes, which go into the change feed (also
// after a failure half-way: a needless invalidation costs a lookup, a
// missed one a stale cache); the reply carries the feed's position
// before the request was served.
func feedOp[Q, R any, PQ wire.Ptr[Q], PR interface {
	wire.Ptr[R]
	feedReply
}](s *Service, t *rpc.Table, d wire.Def[Q, R], f func(ctx context.Context, q PQ) (PR, uint64, []ns.Change, error)) {
	serveOp[Q, R, PQ, PR](s, t, d, func(ctx context.Context, q PQ) (PR, error) {
		pos := s.feed.position()
		rep, client, changes, err := f(ctx, q)
		if len(changes) > 0 {
			s.feed.add(client, changes...)
		}
		if err != nil {
			return nil, err
		}
		rep.SetFeed(pos)
		return rep, nil
	})
}

// feedReply is a reply that carries the change feed's position.
type feedReply interface{ SetFeed(pos uint64) }

// alloc places a chunk (ns.Alloc).
func (s *Service) alloc(ctx context.Context, q *ns.AllocReq) (*ns.AllocRep, error) {
	if q.Empty {
		c, placed, err := s.RelocateEmpty(ctx, q.Ino, q.Idx, q.Trunc, q.Exclude, q.Job)
		if err != nil {
			return nil, err
		}
		return &ns.AllocRep{Chunk: &c, Placed: placed}, nil
	}
	var excl []uint64
	if q.Exclude != 0 {
		excl = []uint64{q.Exclude}
	}
	var wait time.Duration
	if q.MayWait {
		wait = max(q.Wait, time.Millisecond)
	}
	c, placed, waited, err := s.AllocWait(ctx, q.Ino, q.Idx, q.Trunc, excl, wait, q.Job)
	r := &ns.AllocRep{Waited: waited}
	if err == ErrStall {
		r.Stalled = true
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	r.Chunk, r.Placed = &c, placed
	return r, nil
}

// serveOp serves operation d with f, timed in the service's metrics.
func serveOp[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](s *Service, t *rpc.Table, d wire.Def[Q, R], f func(ctx context.Context, q PQ) (PR, error)) {
	rpc.On[Q, R, PQ, PR](t, d, func(ctx context.Context, q PQ) (PR, error) {
		start := time.Now()
		defer func() {
			s.met.requests.WithLabelValues(d.Op.String()).Inc()
			s.met.latency.WithLabelValues(d.Op.String()).Observe(time.Since(start).Seconds())
		}()
		return f(ctx, q)
	})
}

// Handler adapts the Service to rpc: one goroutine per request, the
// typed operations by their table (Serve), the others by Dispatch.
func (s *Service) Handler() rpc.Handler {
	return &rpc.Mux{Tables: []*rpc.Table{s.typed}, Default: s.legacyHandler()}
}

func (s *Service) legacyHandler() rpc.Handler {
	return rpc.HandlerFunc(func(m *wire.Msg, _ []byte) (*wire.Msg, []byte) {
		start := time.Now()
		defer func() {
			s.met.requests.WithLabelValues(m.Op.String()).Inc()
			s.met.latency.WithLabelValues(m.Op.String()).Observe(time.Since(start).Seconds())
		}()
		if s.ops != nil && namespaceOp(m.Op) {
			s.ops.Wait(context.Background(), 1)
		}
		resp, err := s.Dispatch(context.Background(), m)
		if resp == nil {
			resp = &wire.Msg{}
		}
		return rpc.ToMsg(resp, err), nil
	})
}

// Dispatch runs one request. Replies carry the change feed's position
// before the request was served (Gen): every change at or below it was
// applied before the reply was read, so a client may cache the reply until
// it sees a later change. Namespace changes go into the feed.
func (s *Service) Dispatch(ctx context.Context, m *wire.Msg) (*wire.Msg, error) {
	ns := namespaceOp(m.Op) || ownedOp(m) && s.deleg.n.Load() > 0
	for ns {
		// a request that names a directory runs whole (its check of the
		// delegations, its change and its place in the feed) between two
		// grants, so a grant's feed position covers every change made
		// to the directory before it (deleg.go)
		s.deleg.grantMu.RLock()
		held := s.othersDelegs(m)
		if len(held) == 0 || ctx.Err() != nil {
			break
		}
		s.deleg.grantMu.RUnlock()
		s.recallWait(ctx, m.Client, held) // then check again: granted meanwhile?
	}
	pos := s.feed.position()
	resp, changes, err := s.dispatch(ctx, m)
	if len(changes) > 0 {
		// also after a failure half-way (a create that could not open):
		// a needless invalidation costs a lookup, a missed one a stale cache
		s.feed.add(m.Client, changes...)
	}
	if ns {
		s.deleg.grantMu.RUnlock()
	}
	if err != nil {
		return nil, err
	}
	if resp == nil {
		resp = &wire.Msg{}
	}
	resp.Gen = pos
	if len(changes) > 0 {
		switch m.Op {
		case wire.OpMknod, wire.OpMkdir, wire.OpSymlink, wire.OpUnlink, wire.OpRmdir, wire.OpLink, wire.OpCreateBatch:
			dir := m.Parent
			if m.Op == wire.OpLink {
				dir = m.NewParent
			}
			resp.ParentAttr, _ = s.Getattr(dir)
		}
	}
	return resp, nil
}

func (s *Service) dispatch(ctx context.Context, m *wire.Msg) (*wire.Msg, []ns.Change, error) {
	var a *wire.Attr
	var err error
	var ch []ns.Change
	if r, ok, err := s.localRedirect(m); ok {
		return r, nil, err
	}
	switch m.Op {
	case wire.OpPing:
		return &wire.Msg{}, nil, nil
	case wire.OpCreateBatch:
		failed, err := s.applyBatch(m)
		ch = []ns.Change{attrChange(m.Parent)}
		for _, e := range m.Entries {
			ch = append(ch, entryChange(m.Parent, e.Name))
		}
		if err != nil {
			return nil, ch, err
		}
		resp := &wire.Msg{Entries: failed}
		if slices.ContainsFunc(m.Entries, func(e wire.DirEntry) bool { return e.Mode&wire.CreateOpen != 0 }) {
			// the directory's layout, which its new files took: a
			// forwarding daemon starts the state of those still open
			// from it (fwd/files.go, openedInBatch)
			resp.Attr, _ = s.Getattr(m.Parent)
		}
		return resp, ch, nil
	case wire.OpLookup:
		a, err = s.Lookup(m.Parent, m.Name)
	case wire.OpGetattr:
		a, err = s.Getattr(m.Ino)
	case wire.OpSetattr:
		a, err = s.Setattr(ctx, m)
		ch = []ns.Change{attrChange(m.Ino)}
	case wire.OpMknod:
		typ := m.Mode & syscall.S_IFMT
		if typ == 0 {
			typ = syscall.S_IFREG
		}
		a, err = s.Create(m.Parent, m.Name, typ|m.Mode&0o7777, m.Uid, m.Gid, "", m.Flags&syscall.O_EXCL != 0 || typ != syscall.S_IFREG, m.Rdev)
		if err == nil && m.Flags&wire.CreateOpen != 0 {
			a, err = s.Open(a.Ino)
		}
		ch = []ns.Change{entryChange(m.Parent, m.Name), attrChange(m.Parent)}
	case wire.OpMkdir:
		a, err = s.Create(m.Parent, m.Name, syscall.S_IFDIR|m.Mode&0o7777, m.Uid, m.Gid, "", true, 0)
		ch = []ns.Change{entryChange(m.Parent, m.Name), attrChange(m.Parent)}
	case wire.OpSymlink:
		a, err = s.Create(m.Parent, m.Name, syscall.S_IFLNK, m.Uid, m.Gid, m.Path, true, 0)
		ch = []ns.Change{entryChange(m.Parent, m.Name), attrChange(m.Parent)}
	case wire.OpUnlink:
		err = s.Remove(m.Parent, m.Name, false)
		ch = []ns.Change{entryChange(m.Parent, m.Name), attrChange(m.Parent)}
	case wire.OpRmdir:
		err = s.Remove(m.Parent, m.Name, true)
		ch = []ns.Change{entryChange(m.Parent, m.Name), attrChange(m.Parent)}
	case wire.OpRename:
		err = s.Rename(m.Parent, m.Name, m.NewParent, m.NewName, m.Flags)
		ch = []ns.Change{entryChange(m.Parent, m.Name), entryChange(m.NewParent, m.NewName),
			attrChange(m.Parent), attrChange(m.NewParent)}
	case wire.OpLink:
		a, err = s.Link(m.Ino, m.NewParent, m.NewName)
		ch = []ns.Change{entryChange(m.NewParent, m.NewName), attrChange(m.Ino), attrChange(m.NewParent)}
	case wire.OpReadlink:
		var t string
		t, err = s.Readlink(m.Ino)
		return &wire.Msg{Path: t}, nil, err
	case wire.OpReaddir:
		var es []wire.DirEntry
		es, err = s.Readdir(m.Ino, m.Name, int(m.Size))
		return &wire.Msg{Entries: es}, nil, err
	case wire.OpOpen:
		a, err = s.Open(m.Ino)
	case wire.OpRelease:
		err = s.Release(m.Ino)
	case wire.OpFsync:
		err = s.Sync()
	case wire.OpStatfs:
		c, u := s.Statfs()
		return &wire.Msg{Cap: c, Used: u}, nil, nil
	case wire.OpSetLayout:
		if m.Flags&(wire.LayoutLocal|wire.LayoutGlobal) != 0 {
			a, err = s.SetLocal(m.Ino, m.Tier, m.Flags&wire.LayoutLocal != 0)
			return &wire.Msg{Attr: a, Tier: s.LocalTier(m.Ino)}, []ns.Change{attrChange(m.Ino)}, err
		}
		a, err = s.SetLayout(m.Ino, m.ChunkSize, m.StripeCnt, m.StripeUnit)
		ch = []ns.Change{attrChange(m.Ino)}
	default:
		return nil, nil, rpc.Errorf(syscall.ENOSYS, "metadata service: unsupported operation %v", m.Op)
	}
	if err != nil {
		return nil, ch, err
	}
	return &wire.Msg{Attr: a}, ch, nil
}

type serviceMetrics struct {
	requests *prometheus.CounterVec   // op
	latency  *prometheus.HistogramVec // op
	// degraded counts chunk copies given up (a replica's server could
	// not be reached), replicated the copies made again
	degraded, replicated prometheus.Counter
}

func newServiceMetrics(reg prometheus.Registerer) serviceMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := serviceMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_meta_requests_total",
			Help: "Requests served by the metadata service."}, []string{"op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_meta_request_duration_seconds",
			Help: "Service time of metadata requests.", Buckets: prometheus.ExponentialBuckets(5e-6, 2, 20)}, []string{"op"}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_meta_chunk_copies_lost_total",
			Help: "Chunk copies given up because their data server could not be reached."}),
		replicated: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_meta_chunk_copies_made_total",
			Help: "Chunk copies made again by re-replication."}),
	}
	reg.MustRegister(m.requests, m.latency, m.degraded, m.replicated)
	return m
}

// register answers a daemon's registration or heartbeat.
func (s *Service) register(_ context.Context, si *wire.ServerInfo) (*api.RegisterRep, error) {
	back := si.Role == "data" && si.ID != 0 && !s.reg.alive(si.ID)
	id, err := s.Register(*si)
	if err != nil {
		return nil, err
	}
	if back {
		// a data server coming back drops the copies given up while it
		// was away before it is asked for them again
		go func() {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.DeliverDrops(dctx)
		}()
	}
	// a daemon with older QoS rules asks for them
	return &api.RegisterRep{ID: id, QoSVersion: s.QoSVersion(), HasTrims: si.Role == "data" && s.hasPendingTrims(id)}, nil
}
