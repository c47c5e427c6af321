// Package data is the data server daemon: it serves chunk reads and writes
// for one tier from a tier.Store, under optional bandwidth and IOPS caps,
// reports capacity and usage to the metadata service, and accepts injected
// faults (slowdown, fill-up, stall). It owns no metadata and never decides
// where data goes.
package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/data/localns"
	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/faultpoint"
	"github.com/sluice-hpc/sluice/internal/member"
	"github.com/sluice-hpc/sluice/internal/qosgate"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
	"github.com/sluice-hpc/sluice/policy/qos"
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
	// Run ships its windows to the metadata daemon.
	Monitor *beacon.Collector
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
	cfg   Config
	store tier.Store
	bw    *throttle.Bucket
	iops  *throttle.Bucket
	perf  perf // measured max_perf (perf.go)
	sem   chan struct{}
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
	go s.reprobe(ctx)
	follow := &qosgate.Follower{Meta: metaC, Gates: []*qosgate.Gate{s.qos}, Log: s.cfg.Log}
	go follow.Watch(ctx, 20*time.Second)
	s.mem = &member.Member{Meta: metaC, IDFile: idFile, Log: s.cfg.Log, Info: func() wire.ServerInfo {
		c, u := s.usage()
		w, r := s.meter.rates(s.cfg.Now())
		return wire.ServerInfo{Role: "data", Tier: s.cfg.Kind, Addr: s.addr, Capacity: uint64(c), Used: uint64(u), Node: s.cfg.Node,
			WriteBW: w, ReadBW: r, Domain: s.cfg.Domain, MaxPerf: s.maxPerf(), Written: s.meter.written.Load()}
	}, Replied: func(r *wire.Msg) {
		if r.Flags&wire.RegisterHasTrims != 0 {
			go s.pullTrims(ctx)
		}
		follow.Seen(r.Handle)
	}}
	go func() {
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
	}()
	if s.cfg.Monitor != nil {
		beaconrpc.Ship(ctx, s.cfg.Monitor, metaC, s.cfg.Log)
	}
	go func() {
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
	}()
	err := s.rpc.Serve(ln)
	s.peers.close()
	s.store.Close()
	metaC.Close()
	return err
}

// TakesBody implements rpc.BodyTaker: a chunk write's payload stays in the
// kernel (a pipe) until it is spliced into the chunk's file.
func (s *Server) TakesBody(m *wire.Msg) bool {
	_, ok := s.store.(tier.SourceWriter)
	return ok && s.cfg.ZeroCopy && m.Op == wire.OpChunkWrite
}

var _ rpc.BodyTaker = (*Server)(nil)

// chunkOf is the chunk request m is about.
func chunkOf(m *wire.Msg) tier.ChunkID {
	return tier.ChunkID{Ino: m.Ino, Idx: m.Idx, ChunkSize: m.ChunkSize}
}

// usage is the store's budget and use, with the room of the new chunks
// whose first writes are queued here (queuedChunks): what placement must
// count as taken.
func (s *Server) usage() (capacity, used int64) {
	capacity, used = s.store.Usage()
	return capacity, used + s.queued.bytes()
}

// Handle implements rpc.Handler.
func (s *Server) Handle(r *rpc.Request) {
	go s.serve(r)
}

func (s *Server) serve(r *rpc.Request) {
	m := r.Msg
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if d := s.stall.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if m.Op == wire.OpMoveCopy {
		// long, and its own reads and writes (some to this server) take
		// worker slots: it holds none
		start := s.cfg.Now()
		n, err := s.moveCopy(ctx, m)
		s.reply(r, start, rpc.ToMsg(&wire.Msg{Size: uint64(n)}, err), nil)
		return
	}
	// Emulated device limits: bulk transfers pay the bandwidth bucket,
	// every request pays the IOPS bucket; small requests are not queued
	// behind bulk bandwidth debt, as a device with command queueing
	// serves a 4 KiB read between large transfers.
	local := s.local != nil && localns.Handles(m)
	var written *uint64 // the bytes a chunk write wrote, for max_perf
	if m.Op == wire.OpChunkRead || m.Op == wire.OpChunkWrite || local && (m.Op == wire.OpRead || m.Op == wire.OpWrite) {
		if h, ok := s.store.(tier.Holder); ok && m.Op == wire.OpChunkWrite && !h.Holds(chunkOf(m)) {
			// a new chunk: its room counts as used from now (queuedChunks)
			defer s.queued.enter(chunkOf(m), int64(m.Cap))()
		}
		// the burst buffer's I/O scheduler and caps come first (bb.go),
		// then the QoS rules' shares and caps
		defer s.admitBB(ctx, m)()
		leave, waited, err := s.qos.Enter(ctx, qos.ReqOf(m, m.Size))
		r.Gated = waited
		if err != nil {
			s.reply(r, s.cfg.Now(), rpc.ToMsg(&wire.Msg{}, rpc.Errorf(syscall.ETIMEDOUT, "data server %d: QoS queue: %v", s.mem.ID(), err)), nil)
			return
		}
		defer leave()
		if m.Op == wire.OpChunkWrite {
			// busy from the device limits to the store's reply (max_perf)
			done := s.perf.begin(s.cfg.Now)
			var wrote uint64
			defer func() { done(wrote) }()
			written = &wrote
		}
		s.iops.Wait(ctx, 1)
		if m.Size > wire.SmallIOMax {
			s.bw.Wait(ctx, float64(m.Size))
		}
	}
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	start := s.cfg.Now()
	if local {
		// a node-local namespace's operation (docs/nodelocal.md): every
		// one is an operation on this server's device
		switch m.Op {
		case wire.OpRead, wire.OpWrite, wire.OpOpen, wire.OpRelease, wire.OpFlush:
			// data: paid above; open, release, flush: no device work
		default:
			s.iops.Wait(ctx, 1)
		}
		resp, p, err := s.local.Serve(m, r.Payload)
		if resp == nil {
			resp = &wire.Msg{}
		}
		s.reply(r, start, rpc.ToMsg(resp, err), p)
		return
	}
	id := chunkOf(m)
	var err error
	switch m.Op {
	case wire.OpPing:
	case wire.OpChunkWrite:
		if uint64(r.PayloadLen()) != m.Size {
			err = rpc.Errorf(syscall.EINVAL, "payload %d bytes, header says %d", r.PayloadLen(), m.Size)
			break
		}
		var l *sync.RWMutex
		if l, err = s.admitChunk(ctx, m, true); err != nil {
			break
		}
		if r.Body != nil {
			// received into a pipe (TakesBody): spliced into the chunk
			err = s.store.(tier.SourceWriter).WriteFrom(id, int64(m.Offset), r.Body, int64(m.Cap))
			s.splicedWrites.Add(1)
		} else {
			err = s.store.Write(id, int64(m.Offset), r.Payload, int64(m.Cap))
		}
		l.RUnlock()
		if rpc.Errno(err) == syscall.ENOSPC || errors.Is(err, syscall.ENOSPC) {
			s.cfg.Log.Info("no room for a chunk", "ino", m.Ino, "chunk", m.Idx, "layout gen", m.Gen, "trunc gen", m.Trunc,
				"off", m.Offset, "len", m.Size, "err", err)
		}
		if err == nil {
			s.meter.written.Add(m.Size)
			if written != nil {
				*written = m.Size
			}
			s.wroteBB(m)
		}
	case wire.OpChunkRead:
		if m.Size > wire.MaxPayload {
			err = rpc.Errorf(syscall.EINVAL, "read of %d bytes too large", m.Size)
			break
		}
		var l *sync.RWMutex
		if l, err = s.admitChunk(ctx, m, false); err != nil {
			break
		}
		s.meter.read.Add(m.Size)
		if cf, ok := s.store.(tier.ChunkFiles); ok && s.cfg.ZeroCopy {
			err = s.sendChunk(r, start, cf, id)
			l.RUnlock()
			if err == nil {
				return
			}
			break
		}
		buf := bufpool.Get(int(m.Size))
		err = s.store.Read(id, int64(m.Offset), buf)
		l.RUnlock()
		if err == nil {
			s.reply(r, start, &wire.Msg{Size: m.Size}, buf)
			bufpool.Put(buf)
			return
		}
		bufpool.Put(buf)
	case wire.OpChunkTrunc:
		l := s.fence.lock(m.Ino)
		l.Lock()
		err = s.applyTrimsLocked(m.Ino, m.Trims, 0)
		l.Unlock()
	case wire.OpChunkDelete:
		err = s.store.DeleteFile(m.Ino)
		s.fence.drop(m.Ino)
		s.moves.drop(m.Ino)
	case wire.OpMoveBegin, wire.OpMoveStop:
		var resp *wire.Msg
		if m.Op == wire.OpMoveBegin {
			resp, err = s.moveBegin(m)
		} else {
			resp, err = s.moveStop(m)
		}
		if err == nil {
			s.reply(r, start, resp, nil)
			return
		}
	case wire.OpMoveEnd:
		err = s.moveEnd(m)
	case wire.OpChunkFence:
		var resp *wire.Msg
		if resp, err = s.chunkFence(m); err == nil {
			s.reply(r, start, resp, nil)
			return
		}
	case wire.OpChunkSettle:
		if st, ok := s.store.(tier.Settler); ok {
			for _, e := range m.Entries {
				st.Settle(tier.ChunkID{Ino: e.Ino, Idx: uint64(e.Mode)})
			}
		}
	case wire.OpChunkSync:
		err = s.store.Sync(m.Ino)
		s.syncedBB(m)
	case wire.OpStat:
		c, u := s.store.Usage()
		s.reply(r, start, &wire.Msg{Cap: uint64(c), Used: uint64(u), Tier: s.cfg.Kind}, nil)
		return
	case wire.OpPfsLink, wire.OpPfsRename, wire.OpPfsUnlink, wire.OpPfsGrow:
		pv, ok := s.store.(tier.PathView)
		if !ok {
			err = rpc.Errorf(syscall.EINVAL, "%s tier keeps no namespace view", s.cfg.Kind)
			break
		}
		switch m.Op {
		case wire.OpPfsLink:
			err = pv.Link(m.Ino, m.Path)
			if err == nil && m.Size > 0 {
				err = pv.Grow(m.Ino, int64(m.Size)) // as long as the file
			}
			if as, ok := s.store.(tier.AttrSetter); ok && err == nil && m.Attr != nil {
				a := m.Attr
				err = as.SetAttrs(m.Ino, a.Mode, a.Uid, a.Gid, a.Atime, a.Mtime)
			}
		case wire.OpPfsRename:
			err = pv.Rename(m.Path, m.NewName)
		case wire.OpPfsGrow:
			err = pv.Grow(m.Ino, int64(m.Size))
		default:
			err = pv.Unlink(m.Path)
		}
	case wire.OpFault:
		err = s.fault(m)
	case wire.OpQos:
		if m.Name != "stats" {
			err = rpc.Errorf(syscall.EINVAL, "data server: qos call %q (stats only)", m.Name)
			break
		}
		out, _ := json.Marshal([]qos.GateStats{s.qos.GateStats("data", "chunk")})
		s.reply(r, start, &wire.Msg{}, out)
		return
	case wire.OpBBServer:
		var out []byte
		if out, err = s.bbControl(r.Payload); err == nil {
			s.reply(r, start, &wire.Msg{}, out)
			return
		}
	case wire.OpBudget:
		var resp *wire.Msg
		if resp, err = s.setBudget(m); err == nil {
			s.reply(r, start, resp, nil)
			return
		}
	default:
		err = rpc.Errorf(syscall.ENOSYS, "data server: unsupported operation %v", m.Op)
	}
	if err != nil && rpc.Errno(err) == syscall.EIO {
		err = fmt.Errorf("data server %d (%s): %w", s.mem.ID(), s.cfg.Kind, err)
	}
	s.reply(r, start, rpc.ToMsg(&wire.Msg{}, err), nil)
}

// sendChunk answers a chunk read with sendfile from the chunk's file, so
// the bytes go from the tier's pages to the socket without a copy through
// this process. An error before the answer began is returned for an error
// reply; after it began, the connection is closed and nil returned.
func (s *Server) sendChunk(r *rpc.Request, start time.Time, cf tier.ChunkFiles, id tier.ChunkID) error {
	m := r.Msg
	f, err := cf.ChunkFile(id)
	if err != nil {
		return err
	}
	resp := &wire.Msg{Size: m.Size}
	// the read is the send: an injected slowdown scales it by what a
	// send of this size has been taking here
	s.slowdown(start, time.Duration(s.sendCost.Load()*int64(m.Size)>>10))
	sent := s.cfg.Now()
	err = r.ReplySend(resp, int(m.Size), func(c net.Conn) error {
		err := zerocopy.SendFile(c, f, int64(m.Offset), int(m.Size))
		if errors.Is(err, os.ErrClosed) {
			// evicted from the store's open files meanwhile: nothing
			// was sent, ask again
			if f, err = cf.ChunkFile(id); err == nil {
				err = zerocopy.SendFile(c, f, int64(m.Offset), int(m.Size))
			}
		}
		return err
	})
	if err != nil {
		s.cfg.Log.Warn("chunk read cut short; connection closed", "ino", m.Ino, "chunk", m.Idx, "peer", r.Peer, "err", err)
	} else {
		s.sendfiles.Add(1)
		s.learnSend(s.cfg.Now().Sub(sent), m.Size)
	}
	s.account(r, start, resp, int(m.Size))
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

// reply answers r and accounts for it: a read once its data went (the
// send is part of a read's service, as it is with sendfile), anything
// else before its answer, so that a caller holding the answer finds the
// request counted.
func (s *Server) reply(r *rpc.Request, start time.Time, m *wire.Msg, payload []byte) {
	s.slowdown(start, 0)
	if op := r.Msg.Op; (op == wire.OpChunkRead || op == wire.OpRead) && m.Errno == 0 {
		r.Reply(m, payload)
		s.account(r, start, m, len(payload))
		return
	}
	s.account(r, start, m, len(payload))
	r.Reply(m, payload)
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
func (s *Server) account(r *rpc.Request, start time.Time, m *wire.Msg, n int) {
	op := r.Msg.Op
	if mon := s.cfg.Monitor; mon != nil {
		if name := beaconrpc.OpName(op); name != "" {
			mm := r.Msg
			size := mm.Size
			if op == wire.OpChunkRead {
				size = uint64(n) // what was read: less than asked at the end of a chunk
			}
			mon.Add(beacon.Op{Start: start, Who: mm.Who, Name: name, Ino: mm.Ino,
				Off: mm.Offset, Size: size, Lat: s.cfg.Now().Sub(start), Wait: start.Sub(r.At), QoSWait: r.Gated, Err: m.Errno != 0})
		}
	}
	s.requests.WithLabelValues(op.String()).Inc()
	s.latency.WithLabelValues(op.String()).Observe(s.cfg.Now().Sub(start).Seconds())
	if m.Errno == 0 {
		switch op {
		case wire.OpChunkRead:
			s.bytes.WithLabelValues("read").Add(float64(n))
		case wire.OpChunkWrite:
			s.bytes.WithLabelValues("write").Add(float64(r.Msg.Size))
		}
	}
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
func (s *Server) fault(m *wire.Msg) error {
	switch m.Name {
	case "slow":
		f := float64(m.Size) / 100
		s.slow.Store(int64(m.Size))
		s.bw.SetSlowdown(f)
		s.iops.SetSlowdown(f)
	case "fill":
		s.store.SetCapacity(int64(m.Size))
	case "stall":
		s.stall.Store(int64(time.Duration(m.Size) * time.Millisecond))
	case "pause":
		s.faults.Arm(m.Tier)
	case "resume":
		s.faults.Release(m.Tier)
	default:
		return rpc.Errorf(syscall.EINVAL, "unknown fault %q", m.Name)
	}
	s.cfg.Log.Warn("fault injected", "fault", m.Name, "value", m.Size)
	return nil
}
