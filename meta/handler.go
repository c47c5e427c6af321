package meta

import (
	"context"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Serve adds the service's typed operations to t: the namespace
// service's (internal/wire/ns) and the administration service's it
// answers (api: daemons, QoS rules).
func (s *Service) Serve(t *rpc.Table) {
	s.serveNamespace(t)
	rpc.On(t, api.Register, s.register)
	rpc.On(t, api.Servers, func(context.Context, *wire.Empty) (*api.ServersRep, error) {
		return &api.ServersRep{Servers: s.Servers()}, nil
	})
	rpc.On(t, api.Fault, func(_ context.Context, f *api.FaultReq) (*wire.Empty, error) { return &wire.Empty{}, s.fault(f) })
	s.qos.Serve(t)
	rpc.On(t, ns.Access, func(_ context.Context, q *ns.AccessReq) (*wire.Empty, error) {
		s.Accessed(q.At, q.Files)
		return &wire.Empty{}, nil
	})
	rpc.On(t, ns.Watch, func(ctx context.Context, q *ns.WatchReq) (*ns.WatchRep, error) {
		cs, pos, lost := s.feed.watch(ctx, q.Seen, q.Client, min(q.Wait, FeedWait))
		return &ns.WatchRep{Changes: cs, Feed: pos, Lost: lost}, nil
	})
	rpc.On(t, ns.Delegate, func(_ context.Context, q *ns.DelegateReq) (*ns.DelegateRep, error) {
		if s.local.Tier(q.Dir) != "" {
			// its creates are its data servers' to make
			return nil, errno(syscall.EBUSY, "directory %d is in local mode: not delegated", q.Dir)
		}
		if s.hasDefaultACL(q.Dir) {
			// its creates inherit the ACL here (acl.go)
			return nil, errno(syscall.EBUSY, "directory %d has a default ACL: not delegated", q.Dir)
		}
		first, pos, err := s.Delegate(q.Client, q.Dir)
		if err != nil {
			return nil, err
		}
		return &ns.DelegateRep{First: first, Count: DelegInos, Feed: pos}, nil
	})
	rpc.On(t, ns.Undelegate, func(_ context.Context, q *ns.DelegateReq) (*wire.Empty, error) {
		s.Undelegate(q.Client, q.Dir)
		return &wire.Empty{}, nil
	})
	rpc.On(t, ns.Layout, func(_ context.Context, q *ns.FileReq) (*ns.LayoutRep, error) {
		cs, err := s.Layout(q.Ino)
		if err != nil {
			return nil, err
		}
		return &ns.LayoutRep{Chunks: cs}, nil
	})
	rpc.On(t, ns.Alloc, s.alloc)
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
	rpc.On(t, ns.Dirty, func(ctx context.Context, q *ns.ChunkReq) (*ns.ChunkRep, error) {
		c, err := s.Dirty(ctx, q.Ino, q.Idx, q.Layout)
		if err != nil {
			return nil, err
		}
		return &ns.ChunkRep{Chunk: c}, nil
	})
	rpc.On(t, ns.Degrade, func(ctx context.Context, q *ns.ChunkReq) (*ns.ChunkRep, error) {
		c, err := s.Degrade(ctx, q.Ino, q.Idx, q.Layout, q.Server)
		if err != nil {
			return nil, err
		}
		return &ns.ChunkRep{Chunk: c}, nil
	})
	rpc.On(t, ns.Trims, func(_ context.Context, q *ns.TrimsReq) (*ns.TrimsRep, error) {
		ts, gen, err := s.PendingTrims(q.Server, q.Ino)
		if err != nil {
			return nil, err
		}
		return &ns.TrimsRep{Trims: ts, Trunc: gen}, nil
	})
	rpc.On(t, ns.TrimsDone, func(_ context.Context, q *ns.TrimsDoneReq) (*wire.Empty, error) {
		return &wire.Empty{}, s.TrimsDone(q.Server, q.Trims)
	})
	rpc.On(t, ns.MoveState, func(_ context.Context, q *ns.MoveStateReq) (*ns.MoveStateRep, error) {
		return s.MoveStateOf(q.Server, q.Ino, q.Idx, q.Session), nil
	})
	rpc.On(t, ns.Activity, func(_ context.Context, q *ns.FileReq) (*wire.Activity, error) {
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
	rpc.On[Q, R, PQ, PR](t, d, func(ctx context.Context, q PQ) (PR, error) {
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

// Handler adapts the Service to rpc: one goroutine per request, each
// answered by the service's table of typed operations (Operations).
func (s *Service) Handler() rpc.Handler {
	return &rpc.Mux{Name: "metadata service", Tables: []*rpc.Table{s.typed}}
}

// Operations is the table of the service's typed operations (Serve).
func (s *Service) Operations() *rpc.Table { return s.typed }

// observe counts a request of op served in took (rpc.Table.Observe).
func (m serviceMetrics) observe(op wire.Op, took time.Duration) {
	m.requests.WithLabelValues(op.String()).Inc()
	m.latency.WithLabelValues(op.String()).Observe(took.Seconds())
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
	return &api.RegisterRep{ID: id, QoSVersion: s.qos.Version(), HasTrims: si.Role == "data" && s.hasPendingTrims(id)}, nil
}
