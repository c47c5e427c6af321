// Package data is the data server daemon: it serves chunk reads and writes
// for one tier from a tier.Store, under optional bandwidth and IOPS caps,
// reports capacity and usage to the metadata service, and accepts injected
// faults (slowdown, fill-up, stall). It owns no metadata and never decides
// where data goes.
package data

import (
	"context"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/data/localns"
	"github.com/sluice-hpc/sluice/internal/faultpoint"
	"github.com/sluice-hpc/sluice/internal/member"
	"github.com/sluice-hpc/sluice/internal/qosgate"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/tier"
)

// Config configures a data server.
type Config struct {
	Kind     string // mem, ssd, hdd, pfs
	Dir      string
	Capacity int64
	// ReclaimAfter: a new chunk's room past its bytes is lent to other
	// chunks once it has gone unwritten this long, if it was not settled
	// at its file's close before (tier.Config; default 1 s).
	ReclaimAfter time.Duration
	// KeepFreed is how long deleted chunks' pages stay with the store for
	// new chunks (tier.Config.KeepFreed: 0 the kind's default, < 0 none).
	KeepFreed time.Duration
	Listen    string // default 127.0.0.1:0
	// LocalSocket also listens on the unix socket clients on this host
	// use instead of TCP (rpc.ListenOptions.Local).
	LocalSocket bool
	Meta        string // metadata service address
	Secret      []byte
	Node        string
	Domain      string  // failure domain label (replicated chunks keep copies in different ones)
	MaxMBps     float64 // 0: unlimited
	MaxIOPS     float64
	// Burst is how much of the bandwidth cap an idle device serves at
	// once (default 50 ms of it): small, a device with no cache.
	Burst   time.Duration
	Workers int // concurrent requests toward the medium (default 16)
	Log     *slog.Logger
	// Metrics receives the server's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	Now     func() time.Time
	// AddrFile, if set, receives the bound address once listening.
	AddrFile string
	// StateDir keeps the server's truncation fences (fence.go); "" keeps
	// them in memory only.
	StateDir string
	// ZeroCopy answers chunk reads with sendfile from the chunk's file
	// and takes chunk writes' payloads into pipes spliced into the file
	// (stores whose chunks are files) instead of through a buffer
	// (docs/benchmarks.md, "Streams and CPU per byte").
	ZeroCopy bool
	// Monitor records every request for Beacon (nil: monitoring off);
	// Run ships its windows to Monitors, or the metadata daemon.
	Monitor *beacon.Collector
	// Monitors, if set, is Beacon's monitor daemons (`sluice monitor`,
	// beaconrpc.Monitors): the records go to them, not through the
	// metadata daemon.
	Monitors rpc.Invoker
	// MaxPerfMBps is the bandwidth placement may count on from this
	// server (max_perf, MB/s); 0: measured (perf.go). Probe: measure it
	// before registering; ProbeEvery: again, when idle, this often (0:
	// never).
	MaxPerfMBps float64
	Probe       bool
	ProbeEvery  time.Duration
	// QoSSlots is how many chunk requests pass the QoS gate to the
	// device at once while QoS rules are in force (default 4): few, so
	// the gate, not the device's queue, orders them.
	QoSSlots int
}

// Server is a running data server.
type Server struct {
	cfg Config
	// work counts the goroutines Run starts and the requests being
	// served; Run waits for them before it closes the store, so nothing
	// of this server touches its directories once Run has returned
	// (a request's trace record, a fence, a registration's id file).
	work sync.WaitGroup
	// workMu guards closing, set once Run stops taking requests (a
	// request that arrives then is refused: a WaitGroup must not grow
	// from zero while it is waited for).
	workMu  sync.Mutex
	closing bool
	// runCtx ends when Run returns: the requests being served stop
	// waiting (for a gate, a peer) then. Set before the server serves.
	runCtx context.Context
	store  tier.Store
	bw     *throttle.Bucket
	iops   *throttle.Bucket
	perf   perf // measured max_perf (perf.go)
	sem    chan struct{}
	// qos orders chunk reads and writes by the cluster's QoS rules
	// before the device limits (passes them straight while none).
	qos *qosgate.Gate
	// local is the node-local namespace (docs/nodelocal.md) kept beside
	// the chunk store (nil on the pfs tier).
	local *localns.NS
	stall atomic.Int64 // injected per-request stall, ns
	slow  atomic.Int64 // injected slowdown factor ×100 (0 or 100: healthy)
	// sendCost is what sendfile has been taking here per byte, in
	// 1/1024 ns (learnSend): a slowed server delays a zero-copy read by
	// it before the send
	sendCost atomic.Int64
	// sendfiles counts chunk reads answered with sendfile (zero-copy),
	// splicedWrites chunk writes spliced from a pipe into the chunk
	sendfiles, splicedWrites atomic.Int64
	// faults are the pause points crash tests arm (OpFault "pause")
	faults faultpoint.Points
	mem    *member.Member
	meta   *rpc.Client // the metadata service
	rpc    *rpc.Server
	addr   string
	fence  *fences
	moves  *moves
	peers  peers        // other data servers (the mover's sources and destinations)
	meter  meter        // recent write and read bandwidth, for heartbeats
	bb     *bbState     // burst-buffer controls (bb.go)
	queued queuedChunks // the room of new chunks whose first writes wait here (queued.go; its own lock)

	// ops answers each operation (ops.go)
	ops      *rpc.Table
	requests *prometheus.CounterVec   // op
	latency  *prometheus.HistogramVec // op
	bytes    *prometheus.CounterVec   // dir
}

// New opens the store.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 50 * time.Millisecond
	}
	st, err := tier.Open(cfg.Kind, tier.Config{Dir: cfg.Dir, Capacity: cfg.Capacity, Now: cfg.Now, ReclaimAfter: cfg.ReclaimAfter,
		KeepFreed: cfg.KeepFreed})
	if err != nil {
		return nil, err
	}
	fdir := ""
	if cfg.StateDir != "" {
		fdir = filepath.Join(cfg.StateDir, "fences")
	}
	fc, err := openFences(fdir)
	if err != nil {
		st.Close()
		return nil, err
	}
	// Buckets always exist so a slowdown can be injected into an
	// uncapped server; uncapped means a rate no device reaches.
	mbps, iops := cfg.MaxMBps, cfg.MaxIOPS
	if mbps <= 0 {
		mbps = 1e6
	}
	if iops <= 0 {
		iops = 1e9
	}
	mv, err := openMoves(cfg.StateDir)
	if err != nil {
		st.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, store: st, sem: make(chan struct{}, cfg.Workers), fence: fc, moves: mv,
		peers: peers{secret: cfg.Secret, timeout: 30 * time.Second},
		meta:  rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Name: "metadata service " + cfg.Meta}),
		bw:    throttle.New(mbps*1e6, mbps*1e6*cfg.Burst.Seconds(), cfg.Now),
		iops:  throttle.New(iops, iops/20, cfg.Now),
		bb:    newBBState(cfg.Now)}
	if cfg.QoSSlots <= 0 {
		cfg.QoSSlots = 4
	}
	s.qos = qosgate.New(qosgate.Config{Slots: cfg.QoSSlots, PassIdle: true, Now: cfg.Now, Metrics: cfg.Metrics,
		Role: "data", Class: "chunk"})
	if cfg.Kind != "pfs" && cfg.Dir != "" {
		if s.local, err = localns.New(localns.Beside(cfg.Dir), func() uint64 { return s.mem.ID() }); err != nil {
			st.Close()
			return nil, err
		}
	}
	if err := s.loadBudget(); err != nil {
		st.Close()
		return nil, err
	}
	s.registerMetrics(cfg.Metrics)
	s.ops = s.operations()
	return s, nil
}

// Store exposes the chunk store (tests).
func (s *Server) Store() tier.Store { return s.store }

// Addr returns the listening address once Run has started listening.
func (s *Server) Addr() string { return s.addr }

// Listen binds the listening socket.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := rpc.Listen(s.cfg.Listen, rpc.ListenOptions{Local: s.cfg.LocalSocket})
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	return ln, nil
}

// Run serves on ln, registers with the metadata service and heartbeats
// until ctx ends.
func (s *Server) Run(ctx context.Context, ln net.Listener, idFile string) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s.runCtx = ctx
	s.rpc = rpc.NewServer(s.cfg.Secret, s, s.cfg.Log)
	s.rpc.Now = s.cfg.Now
	go func() {
		<-ctx.Done()
		s.rpc.Close()
	}()
	metaC := s.meta
	if s.cfg.Probe && s.cfg.MaxPerfMBps == 0 {
		s.probe(ctx)
	}
	s.work.Go(func() { s.reprobe(ctx) })
	follow := &qosgate.Follower{Meta: metaC, Gates: []*qosgate.Gate{s.qos}, Log: s.cfg.Log}
	s.work.Go(func() { follow.Watch(ctx, 20*time.Second) })
	s.mem = &member.Member{Meta: metaC, IDFile: idFile, Log: s.cfg.Log, Info: func() wire.ServerInfo {
		c, u := s.usage()
		w, r := s.meter.rates(s.cfg.Now())
		return wire.ServerInfo{Role: "data", Tier: s.cfg.Kind, Addr: s.addr, Capacity: uint64(c), Used: uint64(u), Node: s.cfg.Node,
			WriteBW: w, ReadBW: r, Domain: s.cfg.Domain, MaxPerf: s.maxPerf(), Written: s.meter.written.Load()}
	}, Replied: func(r *api.RegisterRep) {
		if r.HasTrims {
			s.work.Go(func() { s.pullTrims(ctx) })
		}
		follow.Seen(r.QoSVersion)
	}}
	s.work.Go(func() {
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := s.mem.Register(rctx)
			cancel()
			if err == nil {
				s.cfg.Log.Info("data server registered", "id", s.mem.ID(), "tier", s.cfg.Kind, "addr", s.addr)
				if s.cfg.Monitor != nil {
					s.cfg.Monitor.SetServer(fmt.Sprintf("data-%s-%d", s.cfg.Kind, s.mem.ID()))
				}
				s.mem.Run(ctx)
				return
			}
			s.cfg.Log.Warn("registration failed, retrying", "err", err)
		}
	})
	if s.cfg.Monitor != nil {
		var to rpc.Invoker = metaC
		if s.cfg.Monitors != nil {
			to = s.cfg.Monitors
		}
		beaconrpc.Ship(ctx, s.cfg.Monitor, to, s.cfg.Log)
	}
	s.work.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if s.mem.ID() != 0 {
					s.resolveStops(ctx)
				}
			}
		}
	})
	err := s.rpc.Serve(ln)
	stop()
	s.workMu.Lock()
	s.closing = true
	s.workMu.Unlock()
	s.work.Wait()
	s.peers.close()
	s.store.Close()
	metaC.Close()
	return err
}

// TakesBody implements rpc.BodyTaker: a chunk write's payload stays in the
// kernel (a pipe) until it is spliced into the chunk's file.
func (s *Server) TakesBody(r *rpc.Request) bool {
	_, ok := s.store.(tier.SourceWriter)
	return ok && s.cfg.ZeroCopy && r.Op == chunk.OpWrite
}

var _ rpc.BodyTaker = (*Server)(nil)

// usage is the store's budget and use, with the room of the new chunks
// whose first writes are queued here (queuedChunks): what placement must
// count as taken.
func (s *Server) usage() (capacity, used int64) {
	capacity, used = s.store.Usage()
	return capacity, used + s.queued.bytes()
}

// Handle implements rpc.Handler: each request in a goroutine of its own.
func (s *Server) Handle(r *rpc.Request) {
	s.workMu.Lock()
	if s.closing {
		s.workMu.Unlock()
		r.ReplyErr(rpc.Errorf(syscall.ESHUTDOWN, "data server %s is shutting down", s.addr))
		return
	}
	s.work.Add(1)
	s.workMu.Unlock()
	go func() {
		defer s.work.Done()
		s.serve(r)
	}()
}

func (s *Server) serve(r *rpc.Request) {
	base := s.runCtx
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithTimeout(base, time.Minute)
	defer cancel()
	if d := s.stall.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	s.ops.Dispatch(ctx, r)
}

func (s *Server) registerMetrics(reg prometheus.Registerer) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	labels := prometheus.Labels{"tier": s.cfg.Kind}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_data_requests_total",
		Help: "Requests served by the data server.", ConstLabels: labels}, []string{"op"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_data_request_duration_seconds",
		Help: "Service time of data server requests, throttling included.", ConstLabels: labels,
		Buckets: prometheus.ExponentialBuckets(20e-6, 2, 18)}, []string{"op"})
	s.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_data_bytes_total",
		Help: "Chunk data read and written.", ConstLabels: labels}, []string{"dir"})
	reg.MustRegister(s.requests, s.latency, s.bytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_data_capacity_bytes", Help: "Budget of the tier store.", ConstLabels: labels},
			func() float64 { c, _ := s.store.Usage(); return float64(c) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_data_used_bytes", Help: "Bytes reserved by chunks.", ConstLabels: labels},
			func() float64 { _, u := s.store.Usage(); return float64(u) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_data_kept_freed_bytes",
			Help: "Pages of deleted chunks kept for new chunks (--keep-freed), outside the used bytes.", ConstLabels: labels},
			func() float64 {
				if k, ok := s.store.(tier.FreedKeeper); ok {
					return float64(k.KeptFreed())
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_data_sendfile_reads_total",
			Help: "Chunk reads answered with sendfile from the chunk's file (--zero-copy).", ConstLabels: labels},
			func() float64 { return float64(s.sendfiles.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_data_spliced_writes_total",
			Help: "Chunk writes received into a pipe and spliced into the chunk's file (--zero-copy).", ConstLabels: labels},
			func() float64 { return float64(s.splicedWrites.Load()) }))
}

// fault applies an injected fault.
func (s *Server) fault(f *api.FaultReq) error {
	switch f.Kind {
	case api.FaultSlow:
		x := float64(f.Value) / 100
		s.slow.Store(int64(f.Value))
		s.bw.SetSlowdown(x)
		s.iops.SetSlowdown(x)
	case api.FaultFill:
		s.store.SetCapacity(int64(f.Value))
	case api.FaultStall:
		s.stall.Store(int64(time.Duration(f.Value) * time.Millisecond))
	case api.FaultPause:
		s.faults.Arm(f.Point)
	case api.FaultResume:
		s.faults.Release(f.Point)
	default:
		return rpc.Errorf(syscall.EINVAL, "unknown fault %q", f.Kind)
	}
	s.cfg.Log.Warn("fault injected", "fault", f.Kind, "value", f.Value, "point", f.Point)
	return nil
}
