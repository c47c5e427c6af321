// Package fwd is the forwarding daemon (LWFSD / IO proxy): it serves many
// clients over authenticated connections and runs every request through a
// staged pipeline with one queue and worker pool per class (metadata, small
// I/O, bulk I/O), so a slow bulk transfer never holds up metadata or small
// requests. It resolves file layouts with the metadata service, moves data
// to and from data servers with a bounded number of requests in flight per
// backend, and reports file growth back to the metadata service.
//
// It keeps no durable state: a crash loses only sizes not yet reported for
// writes never fsynced. It never decides placement (the metadata service
// does) and never talks FUSE (the client does).
package fwd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/member"
	"github.com/sluice-hpc/sluice/internal/qosgate"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// Config configures a forwarding daemon.
type Config struct {
	Listen string
	// LocalSocket also listens on the unix socket clients on this host
	// use instead of TCP (rpc.ListenOptions.Local).
	LocalSocket bool
	Meta        string
	Secret      []byte
	Node        string
	Log         *slog.Logger
	Now         func() time.Time // the daemon's clock (nil: time.Now)
	MaxMBps     float64          // emulated link bandwidth; 0: unlimited
	MaxIOPS     float64          // emulated request rate (every operation); 0: unlimited
	// Workers per pipeline class (meta, small, bulk). Defaults 16, 16, 8.
	Workers [wire.NumClasses]int
	// BackendInflight bounds requests in flight to one data server.
	BackendInflight int
	// Timeout bounds each call to the metadata service or a data server.
	Timeout time.Duration
	// StallMax bounds how long a write waits for a tier at its
	// write-stall threshold before its new chunk goes to a lower tier
	// instead (default Timeout/2, so the client's call does not time out).
	StallMax time.Duration
	// Failover is how long a copy of a replicated chunk whose server
	// cannot be reached is retried before a write gives it up and goes on
	// with the other copy (default 1 s, at most Timeout/4); a read goes to
	// the other copy after a tenth of it. Chunks with one copy retry for
	// the whole Timeout (after looking their location up again): their
	// server may be restarting.
	Failover time.Duration
	// SizeFlush is how often unreported file growth is sent to the
	// metadata service (default 500 ms).
	SizeFlush time.Duration
	// MaxUnsynced bounds the closed files whose writes through this
	// daemon no fsync has synced yet that it remembers the data servers
	// of (files.go, unsynced; default 262,144); past it the data servers
	// of the one let go are synced in the background.
	MaxUnsynced int
	// Metrics receives the daemon's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	// Monitor records every request for Beacon (nil: monitoring off);
	// Run ships its windows to Monitors, or the metadata daemon.
	Monitor *beacon.Collector
	// Monitors, if set, is Beacon's monitor daemons (`sluice monitor`,
	// beaconrpc.Monitors): the records go to them, not through the
	// metadata daemon.
	Monitors rpc.Invoker
	// ZeroCopy splices a data server's answer to a read into the reply
	// (zerocopy.Relay) instead of reading it into a buffer first, and
	// keeps a write's payload in a pipe, spliced on to its data servers
	// (rpc.BodyTaker) (docs/benchmarks.md, "Streams and CPU per byte").
	ZeroCopy bool
}

// Server is a running forwarding daemon.
type Server struct {
	cfg  Config
	log  *slog.Logger
	meta *rpc.Client
	ctx  context.Context // Run's
	// gates order each pipeline class's requests by QoS (flows of rules
	// or jobs) and hold them while the class's workers are busy.
	gates [wire.NumClasses]*qosgate.Gate
	bw    *throttle.Bucket
	ops   *throttle.Bucket // requests/s
	stall atomic.Int64     // injected per-request stall (ns)
	slow  atomic.Int64     // injected slowdown factor ×100 (0 or 100: healthy)
	// svc is a moving average of service time per class (ns), used to
	// emulate a fail-slow node: under a slowdown f each request first
	// waits (f-1) times the class's usual service time.
	svc  [wire.NumClasses]atomic.Int64
	addr string
	mem  *member.Member

	// localDirs caches the local-mode directories' servers (local.go).
	localDirs localDirCache

	bmu      sync.Mutex // guards backends
	backends map[uint64]*backend

	fmu   sync.Mutex // guards files, unsynced and recent
	files map[uint64]*file
	// unsynced holds, for each file whose state went (closed, nothing
	// else to do here) with writes no fsync synced yet, the data servers
	// written (0 among them: the state was adopted, sync every holder):
	// the file's next state starts from them (files.go)
	unsynced map[uint64][]uint64
	// recent holds the size and generation of the states let go within
	// the last two Timeouts, oldest first in recentAge: attributes the
	// metadata service served before the last report of such a file
	// reached it may still be on their way back through this daemon
	// (mergeAttr raises them, as a state would)
	recent    map[uint64]retired
	recentAge []retiredAt
	// syncs takes the files let go of unsynced past MaxUnsynced, synced
	// in the background (syncLoop)
	syncs chan unsyncedFile

	jobs jobTable
	met  *metrics
	// own answers the daemon's own typed operations (operations)
	own *rpc.Table

	// Depth and served count per class, for status and tests.
	Depth  [wire.NumClasses]atomic.Int64
	Served [wire.NumClasses]atomic.Int64
	// stalls and stallNs count the chunk placements that waited for a
	// stalled tier and how long they waited in all.
	stalls, stallNs atomic.Int64
	// relays counts reads spliced from a data server's socket, bodyWrites
	// writes kept in a pipe (zero-copy)
	relays, bodyWrites atomic.Int64
}

// New returns a daemon; Run starts it.
func New(cfg Config) *Server {
	def := [wire.NumClasses]int{16, 16, 8}
	for i := range cfg.Workers {
		if cfg.Workers[i] <= 0 {
			cfg.Workers[i] = def[i]
		}
	}
	if cfg.BackendInflight <= 0 {
		cfg.BackendInflight = 8
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.StallMax <= 0 {
		cfg.StallMax = cfg.Timeout / 2
	}
	if cfg.MaxUnsynced <= 0 {
		cfg.MaxUnsynced = 1 << 18
	}
	if cfg.Failover <= 0 {
		cfg.Failover = min(time.Second, cfg.Timeout/4)
	}
	if cfg.SizeFlush <= 0 {
		cfg.SizeFlush = 500 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	// The bucket always exists so a slowdown can be injected into an
	// uncapped daemon; uncapped means a rate no link reaches.
	mbps := cfg.MaxMBps
	if mbps <= 0 {
		mbps = 1e6
	}
	iops := cfg.MaxIOPS
	if iops <= 0 {
		iops = 1e9
	}
	s := &Server{cfg: cfg, log: cfg.Log, backends: map[uint64]*backend{}, files: map[uint64]*file{},
		unsynced: map[uint64][]uint64{}, syncs: make(chan unsyncedFile, 1024), recent: map[uint64]retired{},
		bw: throttle.New(mbps*1e6, mbps*1e6/20, cfg.Now), ops: throttle.New(iops, iops/20, cfg.Now)}
	s.meta = rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "metadata service " + cfg.Meta})
	for c := range s.gates {
		gc := qosgate.Config{Slots: cfg.Workers[c], Now: cfg.Now, Metrics: cfg.Metrics, Role: "fwd", Class: wire.Class(c).String()}
		if wire.Class(c) == wire.ClassBulk {
			gc.Link, gc.LinkQueue = s.bw, linkQueue
		}
		s.gates[c] = qosgate.New(gc)
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.met = newMetrics(reg, s)
	s.own = s.operations()
	return s
}

// Listen binds the daemon's socket.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := rpc.Listen(s.cfg.Listen, rpc.ListenOptions{Local: s.cfg.LocalSocket})
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	return ln, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.addr }

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context, ln net.Listener, idFile string) error {
	s.ctx = ctx
	follow := &qosgate.Follower{Meta: s.meta, Gates: s.gates[:], Log: s.log}
	go follow.Watch(ctx, 20*time.Second)
	s.mem = &member.Member{Meta: s.meta, IDFile: idFile, Log: s.log, Info: func() wire.ServerInfo {
		return wire.ServerInfo{Role: "fwd", Addr: s.addr, Node: s.cfg.Node}
	}, Replied: func(r *api.RegisterRep) { follow.Seen(r.QoSVersion) }}
	go func() {
		for ctx.Err() == nil {
			if err := s.mem.Register(ctx); err == nil {
				s.log.Info("forwarding node registered", "id", s.mem.ID(), "addr", s.addr)
				if s.cfg.Monitor != nil {
					s.cfg.Monitor.SetServer(fmt.Sprintf("fwd-%d", s.mem.ID()))
				}
				s.mem.Run(ctx)
				return
			} else {
				s.log.Warn("registration failed, retrying", "err", err)
			}
		}
	}()
	go s.flushLoop(ctx)
	go s.syncLoop(ctx)
	if s.cfg.Monitor != nil {
		var to rpc.Invoker = s.meta
		if s.cfg.Monitors != nil {
			to = s.cfg.Monitors
		}
		beaconrpc.Ship(ctx, s.cfg.Monitor, to, s.log)
	}
	srv := rpc.NewServer(s.cfg.Secret, s, s.log)
	srv.Now = s.cfg.Now
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(ln)
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.flushSizes(fctx, 0, false)
	cancel()
	return err
}

// TakesBody implements rpc.BodyTaker: a write's payload stays in the
// kernel (a pipe) and is spliced on to its data servers, not copied in and
// out of this process; a node-local write goes to its data server as bytes.
func (s *Server) TakesBody(r *rpc.Request) bool {
	q, ok := r.Req.(*ns.IOReq)
	if r.Op != ns.OpWrite || !ok || !s.cfg.ZeroCopy {
		return false
	}
	_, local, err := localTarget(r.Op, q)
	return err == nil && !local
}

var _ rpc.BodyTaker = (*Server)(nil)

// Handle implements rpc.Handler: it classifies a mount's namespace
// request and queues it in its class's QoS gate, which hands the class's
// workers to the flows in turn (policy/qos: fair between jobs, shares and
// caps by rule). The other requests of the monitoring and namespace
// services (a mount's records, its watch of the change feed, its
// delegations) and file-lock requests are relayed to the metadata daemon
// as they come.
func (s *Server) Handle(r *rpc.Request) {
	if s.own.Has(r.Op) {
		go s.own.Dispatch(s.ctx, r)
		return
	}
	q, ok := r.Req.(ns.Request)
	if !ok {
		go s.relay(r)
		return
	}
	if lockOp(r.Op) {
		// a lock request may wait at the service for seconds: it holds
		// no worker meanwhile
		go s.serve(s.ctx, r, q)
		return
	}
	c := wire.Classify(q)
	s.Depth[c].Add(1)
	go s.queued(c, r, q)
}

// lockOp reports whether op is a file-lock operation: relayed to the
// metadata service as it comes, node-local files' too.
func lockOp(op wire.Op) bool {
	return op == ns.OpLock || op == ns.OpLockCancel || op == ns.OpLockRenew
}

// size is the bytes request q moves: a read's length, a write's payload.
func size(r *rpc.Request, q ns.Request) uint64 {
	if io, ok := q.(*ns.IOReq); ok && r.Op == ns.OpRead {
		return io.Len
	}
	return uint64(r.PayloadLen())
}

// qosClass is the class QoS rules see operation op as: reads and writes
// of files are data, every other operation metadata.
func qosClass(op wire.Op) qos.Class {
	switch op {
	case ns.OpRead:
		return qos.Read
	case ns.OpWrite:
		return qos.Write
	}
	return qos.Meta
}

func (s *Server) queued(c wire.Class, r *rpc.Request, q ns.Request) {
	ctx := s.ctx
	n := size(r, q)
	link := linkBytes(c, r.Op, q, n)
	leave, waited, linkWait, err := s.gates[c].EnterLink(ctx, qos.ReqBy(q.Header().Who, qosClass(r.Op), n), link)
	r.Gated = waited
	s.Depth[c].Add(-1)
	if err != nil {
		r.ReplyErr(rpc.Errorf(syscall.ESHUTDOWN, "forwarding daemon %s stopping", s.addr))
		return
	}
	defer leave()
	if link > 0 {
		ctx = withLinkPaid(ctx, linkWait)
	}
	s.work(context.WithValue(ctx, workerKey{}, leave), c, r, q)
}

type workerKey struct{}

// releaseWorker gives ctx's request's worker back to its class before the
// request is done (for a wait that is not this daemon's work: a job's
// chunk request at its data server, callDataWith). Leaving the gate is
// idempotent.
func releaseWorker(ctx context.Context) {
	if leave, ok := ctx.Value(workerKey{}).(func()); ok {
		leave()
	}
}

func (s *Server) work(ctx context.Context, c wire.Class, r *rpc.Request, q ns.Request) {
	begin := s.cfg.Now() // service starts (an injected slowness is service time)
	if d := s.stall.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if f := s.slow.Load(); f > 100 {
		time.Sleep(time.Duration(s.svc[c].Load() * (f - 100) / 100))
	}
	s.ops.Wait(ctx, 1) // the emulated node's request rate: service time
	start := s.cfg.Now()
	n, who := size(r, q), q.Header().Who
	stalled := stallClock{jobID: who.Job}
	s.serve(withStallClock(ctx, &stalled), r, q)
	s.met.observe(c, r.Op, who, s.cfg.Now().Sub(start), int(n))
	if mon := s.cfg.Monitor; mon != nil {
		if name := beaconrpc.OpName(r.Op); name != "" {
			ino, _, _ := q.Inodes()
			var off uint64
			if io, ok := q.(*ns.IOReq); ok {
				off = io.Off
			}
			mon.Add(beacon.Op{Start: begin, Who: who, Name: name,
				Ino: ino, Off: off, Size: n, Lat: s.cfg.Now().Sub(begin), Wait: begin.Sub(r.At) + stalled.get(),
				QoSWait: r.Gated, N: uint32(opsIn(q))})
		}
	}
	d := s.cfg.Now().Sub(start).Nanoseconds()
	s.svc[c].Store((s.svc[c].Load()*7 + d) / 8)
	s.Served[c].Add(1)
}

func (s *Server) serve(ctx context.Context, r *rpc.Request, q ns.Request) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout+5*time.Second)
	defer cancel()
	switch r.Op {
	case ns.OpPing, ns.OpRead:
		// reads are counted with the bytes they returned, below
	default:
		s.jobs.record(r.Op, q, uint64(r.PayloadLen()))
	}
	isLock := lockOp(r.Op)
	if id, local, err := localTarget(r.Op, q); err != nil && !isLock {
		r.ReplyErr(err)
		return
	} else if local && !isLock {
		s.relayLocal(ctx, r, id, q)
		return
	}
	switch q := q.(type) {
	case *ns.IOReq:
		if r.Op == ns.OpWrite {
			s.serveWrite(ctx, r, q)
		} else {
			s.serveRead(ctx, r, q)
		}
	case *ns.SizeReq:
		err := s.sizeHint(ctx, q.Ino, q.Size, q.Trunc)
		if r.Op == ns.OpFsync {
			if err == nil {
				err = s.fsync(ctx, q.Ino, q.Who)
			}
			r.Answer(&ns.FeedRep{}, err, nil)
			return
		}
		var a *wire.Attr
		var gen uint64
		if err == nil {
			a, gen, err = s.reportSizes(ctx, q.Ino, false, q.Client)
		}
		r.Answer(&ns.AttrRep{Attr: a, Feed: gen}, err, nil)
	default:
		if r.Op == ns.OpPing {
			r.Reply(&ns.PingRep{ID: s.mem.ID()}, nil)
			return
		}
		rep, err := s.metaOp(ctx, r.Op, q)
		r.Answer(rep, err, nil)
	}
}

// serveWrite stores a write's payload.
func (s *Server) serveWrite(ctx context.Context, r *rpc.Request, q *ns.IOReq) {
	p := bytesPayload(r.Payload)
	if r.Body != nil {
		p = payload{body: r.Body, n: r.Body.Len()}
		s.bodyWrites.Add(1)
	}
	gen, err := s.write(ctx, q, p)
	r.Answer(&ns.IORep{Len: uint64(p.len()), Trunc: gen}, err, nil)
}

// serveRead answers a read: relayed from its data server when one serves
// it whole, else gathered here.
func (s *Server) serveRead(ctx context.Context, r *rpc.Request, q *ns.IOReq) {
	if q.Len > wire.MaxPayload {
		r.ReplyErr(rpc.Errorf(syscall.EINVAL, "read too large"))
		return
	}
	rp, err := s.planRead(ctx, q)
	if err == nil && s.cfg.ZeroCopy {
		var relayed bool
		if relayed, err = s.relayRead(ctx, r, q, rp); relayed {
			s.jobs.record(r.Op, q, uint64(rp.n))
			return
		}
	}
	buf := bufpool.Get(int(rp.n))
	if err == nil {
		err = s.readPlanned(ctx, q, rp, buf)
	}
	if err != nil {
		r.ReplyErr(err)
	} else {
		s.jobs.record(r.Op, q, uint64(rp.n))
		r.Reply(&ns.IORep{Len: uint64(rp.n)}, buf)
	}
	bufpool.Put(buf)
}

// relay sends a typed request of the monitoring or namespace service
// this daemon does not serve itself (a mount's records, its watch of the
// change feed or its delegations, when it sends them here) on to the
// metadata daemon (a mount's records to the monitors, if set) and its
// answer back; other operations are refused.
func (s *Server) relay(r *rpc.Request) {
	spec := wire.SpecOf(r.Op)
	if spec == nil || spec.Service != wire.Monitor && spec.Service != wire.Namespace {
		r.ReplyErr(rpc.Errorf(syscall.ENOSYS, "forwarding daemon %s: unsupported operation %v", s.addr, r.Op))
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	rep := spec.NewReply()
	var to rpc.Invoker = s.meta
	if r.Op == beaconrpc.OpPut && s.cfg.Monitors != nil {
		to = s.cfg.Monitors // a mount's records: to the job's monitor
	}
	p, err := to.Invoke(ctx, r.Op, r.Req, rep, r.Payload, nil)
	r.Answer(rep, err, p)
	if p != nil {
		bufpool.Put(p)
	}
}

// operations is the table of the daemon's own typed operations: its
// counters, its QoS gates, injected faults. They are answered at once,
// outside the pipeline (a stalled daemon takes its stall away).
func (s *Server) operations() *rpc.Table {
	t := &rpc.Table{Name: "forwarding daemon"}
	rpc.On(t, api.JobStats, func(context.Context, *wire.Empty) (*api.JobStatsRep, error) {
		return &api.JobStatsRep{Jobs: s.jobs.snapshot()}, nil
	})
	rpc.On(t, api.QoSStats, func(context.Context, *wire.Empty) (*api.QoSStatsRep, error) {
		var st []qos.GateStats
		for c, g := range s.gates {
			st = append(st, g.GateStats("fwd", wire.Class(c).String()))
		}
		return &api.QoSStatsRep{Gates: st}, nil
	})
	rpc.On(t, api.Fault, func(_ context.Context, f *api.FaultReq) (*wire.Empty, error) { return &wire.Empty{}, s.fault(f) })
	return t
}

func (s *Server) fault(f *api.FaultReq) error {
	switch f.Kind {
	case api.FaultStall:
		s.stall.Store(int64(time.Duration(f.Value) * time.Millisecond))
	case api.FaultSlow:
		s.slow.Store(int64(f.Value))
		s.bw.SetSlowdown(float64(f.Value) / 100)
	default:
		return rpc.Errorf(syscall.EINVAL, "unknown fault %q", f.Kind)
	}
	s.log.Warn("fault injected", "fault", f.Kind, "value", f.Value)
	return nil
}

// metaOp forwards a namespace operation, keeping the file table in step.
func (s *Server) metaOp(ctx context.Context, op wire.Op, q ns.Request) (wire.Message, error) {
	if rel, ok := q.(*ns.InoReq); ok && op == ns.OpRelease {
		if err := s.flushSizes(ctx, rel.Ino, false); err != nil {
			s.log.Warn("size report at close failed", "ino", rel.Ino, "err", err)
		}
		s.release(rel.Ino)
	}
	if rep, ok, err := s.localEntry(ctx, op, q); ok {
		return rep, err
	}
	spec := wire.SpecOf(op)
	rep := spec.NewReply()
	if _, err := s.meta.Invoke(ctx, op, q, rep, nil, nil); err != nil {
		return nil, err
	}
	switch rep := rep.(type) {
	case *ns.EntryRep:
		if rep.Redirect != nil {
			return s.redirected(ctx, op, q, rep.Redirect)
		}
		if m, ok := q.(*ns.MknodReq); ok && m.Open && rep.Attr != nil {
			s.opened(rep.Attr)
		} else if op == ns.OpLookup && rep.Attr != nil {
			s.mergeAttr(rep.Attr)
		}
	case *ns.ReaddirRep:
		if rep.Redirect != nil {
			return s.redirected(ctx, op, q, rep.Redirect)
		}
	case *ns.BatchRep:
		b := q.(*ns.BatchReq)
		s.openedInBatch(b.Entries, rep.Failed, rep.Dir)
	case *ns.AttrRep:
		if rep.Attr == nil {
			break
		}
		switch op {
		case ns.OpOpen:
			s.opened(rep.Attr)
		case ns.OpGetattr, ns.OpSetattr:
			s.mergeAttr(rep.Attr)
		}
	}
	return rep, nil
}
