package meta

import (
	"context"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Handler adapts the Service to rpc: one goroutine per request.
func (s *Service) Handler() rpc.Handler {
	return rpc.HandlerFunc(func(m *wire.Msg, _ []byte) (*wire.Msg, []byte) {
		start := time.Now()
		defer func() {
			s.met.requests.WithLabelValues(m.Op.String()).Inc()
			s.met.latency.WithLabelValues(m.Op.String()).Observe(time.Since(start).Seconds())
		}()
		resp, err := s.Dispatch(context.Background(), m)
		if resp == nil {
			resp = &wire.Msg{}
		}
		return rpc.ToMsg(resp, err), nil
	})
}

// Dispatch runs one request.
func (s *Service) Dispatch(ctx context.Context, m *wire.Msg) (*wire.Msg, error) {
	var a *wire.Attr
	var err error
	switch m.Op {
	case wire.OpPing:
		return &wire.Msg{}, nil
	case wire.OpLookup:
		a, err = s.Lookup(m.Parent, m.Name)
	case wire.OpGetattr:
		a, err = s.Getattr(m.Ino)
	case wire.OpSetattr:
		a, err = s.Setattr(ctx, m)
	case wire.OpMknod:
		a, err = s.Create(m.Parent, m.Name, syscall.S_IFREG|m.Mode&0o7777, m.Uid, m.Gid, "", m.Flags&syscall.O_EXCL != 0)
		if err == nil && m.Flags&wire.CreateOpen != 0 {
			a, err = s.Open(a.Ino)
		}
	case wire.OpMkdir:
		a, err = s.Create(m.Parent, m.Name, syscall.S_IFDIR|m.Mode&0o7777, m.Uid, m.Gid, "", true)
	case wire.OpSymlink:
		a, err = s.Create(m.Parent, m.Name, syscall.S_IFLNK, m.Uid, m.Gid, m.Path, true)
	case wire.OpUnlink:
		err = s.Remove(m.Parent, m.Name, false)
	case wire.OpRmdir:
		err = s.Remove(m.Parent, m.Name, true)
	case wire.OpRename:
		err = s.Rename(m.Parent, m.Name, m.NewParent, m.NewName, m.Flags)
	case wire.OpLink:
		a, err = s.Link(m.Ino, m.NewParent, m.NewName)
	case wire.OpReadlink:
		var t string
		t, err = s.Readlink(m.Ino)
		return &wire.Msg{Path: t}, err
	case wire.OpReaddir:
		var es []wire.DirEntry
		es, err = s.Readdir(m.Ino, m.Name, int(m.Size))
		return &wire.Msg{Entries: es}, err
	case wire.OpOpen:
		a, err = s.Open(m.Ino)
	case wire.OpRelease:
		err = s.Release(m.Ino)
	case wire.OpExtend:
		a, err = s.Extend(m.Ino, m.Size, m.Mtime)
		if err == nil && m.Sync {
			err = s.Sync()
		}
	case wire.OpFsync:
		err = s.Sync()
	case wire.OpStatfs:
		c, u := s.Statfs()
		return &wire.Msg{Cap: c, Used: u}, nil
	case wire.OpLayout:
		var cs []wire.ChunkLoc
		cs, err = s.Layout(m.Ino)
		return &wire.Msg{Chunks: cs}, err
	case wire.OpAlloc:
		var excl []uint64
		if m.ID != 0 {
			excl = []uint64{m.ID}
		}
		var c wire.ChunkLoc
		c, err = s.Alloc(ctx, m.Ino, m.Idx, excl)
		if err != nil {
			return nil, err
		}
		return &wire.Msg{Chunks: []wire.ChunkLoc{c}}, nil
	case wire.OpRegister:
		var id uint64
		si := wire.ServerInfo{ID: m.ID, Role: m.Name, Tier: m.Tier, Addr: m.Addr, Capacity: m.Cap, Used: m.Used, Node: m.Node}
		id, err = s.Register(si)
		return &wire.Msg{ID: id}, err
	case wire.OpServers:
		return &wire.Msg{Servers: s.Servers()}, nil
	case wire.OpSetLayout:
		a, err = s.SetLayout(m.Ino, m.ChunkSize, m.StripeCnt, m.StripeUnit)
	default:
		return nil, rpc.Errorf(syscall.ENOSYS, "metadata service: unsupported operation %v", m.Op)
	}
	if err != nil {
		return nil, err
	}
	return &wire.Msg{Attr: a}, nil
}

type serviceMetrics struct {
	requests *prometheus.CounterVec   // op
	latency  *prometheus.HistogramVec // op
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
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}
