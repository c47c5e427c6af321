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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/member"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
	"github.com/sluice-hpc/sluice/layout"
)

// Config configures a forwarding daemon.
type Config struct {
	Listen  string
	Meta    string
	Secret  []byte
	Node    string
	Log     *slog.Logger
	Now     func() time.Time
	MaxMBps float64 // emulated link bandwidth; 0: unlimited
	MaxIOPS float64 // emulated request rate (every operation); 0: unlimited
	// Workers per pipeline class (meta, small, bulk). Defaults 16, 16, 8.
	Workers [wire.NumClasses]int
	// BackendInflight bounds requests in flight to one data server.
	BackendInflight int
	// Timeout bounds each call to the metadata service or a data server.
	Timeout time.Duration
	// SizeFlush is how often unreported file growth is sent to the
	// metadata service (default 500 ms).
	SizeFlush time.Duration
	// Metrics receives the daemon's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	// Monitor records every request for Beacon (nil: monitoring off);
	// Run ships its windows to the metadata daemon.
	Monitor *beacon.Collector
	// ZeroCopy splices a data server's answer to a read into the reply
	// (zerocopy.Relay) instead of reading it into a buffer first. Over
	// loopback it costs more CPU than the copy (docs/benchmarks.md).
	ZeroCopy bool
}

// Server is a running forwarding daemon.
type Server struct {
	cfg    Config
	log    *slog.Logger
	meta   *rpc.Client
	queues [wire.NumClasses]chan *rpc.Request
	bw     *throttle.Bucket
	ops    *throttle.Bucket // requests/s
	stall  atomic.Int64     // injected per-request stall (ns)
	slow   atomic.Int64     // injected slowdown factor ×100 (0 or 100: healthy)
	// svc is a moving average of service time per class (ns), used to
	// emulate a fail-slow node: under a slowdown f each request first
	// waits (f-1) times the class's usual service time.
	svc  [wire.NumClasses]atomic.Int64
	addr string
	mem  *member.Member

	bmu      sync.Mutex // guards backends
	backends map[uint64]*backend

	fmu   sync.Mutex // guards files
	files map[uint64]*file

	jobs jobTable
	met  *metrics

	// Depth and served count per class, for status and tests.
	Depth  [wire.NumClasses]atomic.Int64
	Served [wire.NumClasses]atomic.Int64
}

// backend is one data server as seen from this daemon: a connection and,
// per pipeline class, a bound on requests in flight, so bulk transfers
// waiting on a slow server cannot take the slots small requests need.
type backend struct {
	c   *rpc.Client
	sem [wire.NumClasses]chan struct{}
}

// file is the daemon's soft state for one inode.
type file struct {
	// report is held while the file's growth is being reported to the
	// metadata service (flushSizes); taken before mu.
	report     sync.Mutex
	mu         sync.Mutex // guards the fields below
	chunkSize  int64
	stripeUnit int64
	// gen is the file's truncation generation this state is about;
	// size the largest size known in it (metadata or local writes).
	// A newer generation (a truncate) replaces both (adoptLocked).
	gen     uint64
	size    uint64
	pending bool // size/mtime not yet reported
	mtime   int64
	chunks  map[uint64]wire.ChunkLoc
	loaded  bool // chunks holds the full layout as of loading
	// fresh holds the chunks this daemon placed that no write has landed
	// in yet: they may still move (their server refuses them or is down).
	// placing holds the fresh chunks a write is under way to (the channel
	// closes when it ends): one write at a time goes to a fresh chunk, so
	// it never moves away from bytes another write left in it.
	fresh   map[uint64]bool
	placing map[uint64]chan struct{}
	// refused holds, for a fresh chunk, the server that refused its last
	// write (full or down) when the chunk could not be moved at once (a
	// truncate came in between): the next write moves it first.
	refused map[uint64]uint64
	// adopted: the state was built without an open through this daemon
	// (e.g. after it restarted), so dirty may miss writes of an earlier
	// incarnation: fsync then syncs every server holding the file.
	adopted bool
	dirty   map[uint64]bool // data servers written since the last fsync
	opens   int
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
		bw: throttle.New(mbps*1e6, mbps*1e6/20, cfg.Now), ops: throttle.New(iops, iops/20, cfg.Now)}
	s.meta = rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "metadata service " + cfg.Meta})
	for c := range s.queues {
		s.queues[c] = make(chan *rpc.Request, 4096)
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.met = newMetrics(reg, s)
	return s
}

// Listen binds the daemon's socket.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
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
	for c := range s.queues {
		for i := 0; i < s.cfg.Workers[c]; i++ {
			go s.worker(ctx, wire.Class(c))
		}
	}
	s.mem = &member.Member{Meta: s.meta, IDFile: idFile, Log: s.log, Info: func() wire.ServerInfo {
		return wire.ServerInfo{Role: "fwd", Addr: s.addr, Node: s.cfg.Node}
	}}
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
	if s.cfg.Monitor != nil {
		beaconrpc.Ship(ctx, s.cfg.Monitor, s.meta, s.log)
	}
	srv := rpc.NewServer(s.cfg.Secret, s, s.log)
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

// Handle implements rpc.Handler: it only classifies and queues.
func (s *Server) Handle(r *rpc.Request) {
	c := wire.ClassOf(r.Msg)
	s.Depth[c].Add(1)
	s.queues[c] <- r
}

func (s *Server) worker(ctx context.Context, c wire.Class) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-s.queues[c]:
			s.Depth[c].Add(-1)
			begin := time.Now() // service starts (an injected slowness is service time)
			if d := s.stall.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if f := s.slow.Load(); f > 100 {
				time.Sleep(time.Duration(s.svc[c].Load() * (f - 100) / 100))
			}
			s.ops.Wait(ctx, 1) // the emulated node's request rate: service time
			start := time.Now()
			m, n := r.Msg, len(r.Payload)
			if m.Op == wire.OpRead {
				n = int(m.Size)
			}
			s.serve(ctx, r)
			s.met.observe(c, m, time.Since(start), n)
			if mon := s.cfg.Monitor; mon != nil {
				if name := beaconrpc.OpName(m.Op); name != "" {
					mon.Add(beacon.Op{Start: begin, Job: m.Job, Rank: m.Rank, Node: m.Node, Name: name,
						Ino: m.Ino, Off: m.Offset, Size: uint64(n), Lat: time.Since(begin), Wait: begin.Sub(r.At),
						N: uint32(opsIn(m))})
				}
			}
			d := time.Since(start).Nanoseconds()
			s.svc[c].Store((s.svc[c].Load()*7 + d) / 8)
			s.Served[c].Add(1)
		}
	}
}

func (s *Server) serve(ctx context.Context, r *rpc.Request) {
	m := r.Msg
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout+5*time.Second)
	defer cancel()
	switch m.Op {
	case wire.OpJobStats, wire.OpPing, wire.OpFault, wire.OpRead, wire.OpBeacon:
		// reads are counted with the bytes they returned, below
	default:
		s.jobs.record(m, uint64(len(r.Payload)))
	}
	switch m.Op {
	case wire.OpJobStats:
		r.Reply(&wire.Msg{Entries: EncodeJobs(s.jobs.snapshot())}, nil)
	case wire.OpWrite:
		gen, err := s.write(ctx, m, r.Payload)
		r.Reply(rpc.ToMsg(&wire.Msg{Size: uint64(len(r.Payload)), Trunc: gen}, err), nil)
	case wire.OpRead:
		if m.Size > wire.MaxPayload {
			r.ReplyErr(rpc.Errorf(syscall.EINVAL, "read too large"))
			return
		}
		rp, err := s.planRead(ctx, m)
		if err == nil && s.cfg.ZeroCopy {
			var relayed bool
			if relayed, err = s.relayRead(ctx, r, rp); relayed {
				s.jobs.record(m, uint64(rp.n))
				return
			}
		}
		buf := bufpool.Get(int(rp.n))
		if err == nil {
			err = s.readPlanned(ctx, m, rp, buf)
		}
		if err != nil {
			r.ReplyErr(err)
		} else {
			s.jobs.record(m, uint64(rp.n))
			r.Reply(&wire.Msg{Size: uint64(rp.n)}, buf)
		}
		bufpool.Put(buf)
	case wire.OpFsync:
		err := s.sizeHint(ctx, m.Ino, m.Size, m.Trunc)
		if err == nil {
			err = s.fsync(ctx, m.Ino)
		}
		r.Reply(rpc.ToMsg(&wire.Msg{}, err), nil)
	case wire.OpFlush:
		err := s.sizeHint(ctx, m.Ino, m.Size, m.Trunc)
		if err == nil {
			err = s.flushSizes(ctx, m.Ino, false)
		}
		r.Reply(rpc.ToMsg(&wire.Msg{}, err), nil)
	case wire.OpFault:
		r.Reply(rpc.ToMsg(&wire.Msg{}, s.fault(m)), nil)
	case wire.OpPing:
		r.Reply(&wire.Msg{ID: s.mem.ID()}, nil)
	case wire.OpBeacon:
		// monitoring records and questions from clients: relayed
		resp, p, err := s.meta.Call(ctx, m, r.Payload, nil)
		if resp == nil {
			resp = &wire.Msg{}
		}
		r.Reply(rpc.ToMsg(resp, err), p)
		if p != nil {
			bufpool.Put(p)
		}
	default:
		resp, err := s.metaOp(ctx, m)
		if resp == nil {
			resp = &wire.Msg{}
		}
		r.Reply(rpc.ToMsg(resp, err), nil)
	}
}

func (s *Server) fault(m *wire.Msg) error {
	switch m.Name {
	case "stall":
		s.stall.Store(int64(time.Duration(m.Size) * time.Millisecond))
	case "slow":
		s.slow.Store(int64(m.Size))
		s.bw.SetSlowdown(float64(m.Size) / 100)
	default:
		return rpc.Errorf(syscall.EINVAL, "unknown fault %q", m.Name)
	}
	s.log.Warn("fault injected", "fault", m.Name, "value", m.Size)
	return nil
}

// metaOp forwards a namespace operation, keeping the file table in step.
func (s *Server) metaOp(ctx context.Context, m *wire.Msg) (*wire.Msg, error) {
	switch m.Op {
	case wire.OpRelease:
		if err := s.flushSizes(ctx, m.Ino, false); err != nil {
			s.log.Warn("size report at close failed", "ino", m.Ino, "err", err)
		}
		s.release(m.Ino)
	}
	resp, _, err := s.meta.Call(ctx, m, nil, nil)
	if err != nil {
		return resp, err
	}
	if a := resp.Attr; a != nil {
		switch {
		case m.Op == wire.OpOpen, m.Op == wire.OpMknod && m.Flags&wire.CreateOpen != 0:
			s.opened(a)
		case m.Op == wire.OpGetattr, m.Op == wire.OpLookup, m.Op == wire.OpSetattr:
			s.mergeAttr(a)
		}
	}
	return resp, nil
}

func (s *Server) lookupFile(ino uint64) *file {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.files[ino]
}

func (s *Server) opened(a *wire.Attr) {
	s.fmu.Lock()
	f := s.files[a.Ino]
	if f == nil {
		f = newFile(a)
		s.files[a.Ino] = f
	}
	s.fmu.Unlock()
	f.mu.Lock()
	f.opens++
	f.adoptLocked(a)
	f.mu.Unlock()
}

func newFile(a *wire.Attr) *file {
	f := &file{chunkSize: int64(a.ChunkSize), stripeUnit: int64(a.StripeUnit), size: a.Size, gen: a.Trunc,
		chunks: map[uint64]wire.ChunkLoc{}, dirty: map[uint64]bool{}, placing: map[uint64]chan struct{}{},
		fresh: map[uint64]bool{}, refused: map[uint64]uint64{}}
	if f.chunkSize <= 0 {
		f.chunkSize = layout.DefaultChunkSize
	}
	if f.stripeUnit <= 0 || f.stripeUnit > f.chunkSize {
		f.stripeUnit = f.chunkSize
	}
	return f
}

func (s *Server) release(ino uint64) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[ino]
	if f == nil {
		return
	}
	f.mu.Lock()
	f.opens--
	// chunks that may still move (and writes to them) keep the state
	drop := f.opens <= 0 && !f.pending && len(f.dirty) == 0 && len(f.fresh) == 0 && len(f.placing) == 0
	f.mu.Unlock()
	if drop {
		delete(s.files, ino)
	}
}

// adoptLocked brings the state up to date with attributes the metadata
// service returned. A newer truncation generation means a truncate came
// after every write this daemon knows of: their growth not yet reported
// was cut by it. Caller holds f.mu.
func (f *file) adoptLocked(a *wire.Attr) {
	switch {
	case a.Trunc > f.gen:
		f.gen, f.size, f.pending = a.Trunc, a.Size, false
	case a.Trunc == f.gen && a.Size > f.size:
		f.size = a.Size
	}
}

// mergeAttr adopts attributes the metadata service returned and raises
// the reported size to what local writes of the same generation reached.
func (s *Server) mergeAttr(a *wire.Attr) {
	f := s.lookupFile(a.Ino)
	if f == nil {
		return
	}
	f.mu.Lock()
	f.adoptLocked(a)
	if a.Trunc == f.gen {
		a.Size = f.size
		if f.pending && f.mtime > a.Mtime {
			a.Mtime = f.mtime
		}
	}
	f.mu.Unlock()
}

// refresh learns the file's attributes from the metadata service after a
// data server or the service refused a request of generation stale: a
// truncate came in between. It fails if the generation did not move.
func (s *Server) refresh(ctx context.Context, ino uint64, f *file, stale uint64, cause error) error {
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: ino}, nil, nil)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.adoptLocked(resp.Attr)
	moved := f.gen > stale
	f.mu.Unlock()
	if !moved {
		return rpc.Errorf(syscall.EIO, "inode %d: refused as truncated, but the metadata service knows no newer truncation: %v", ino, cause)
	}
	return nil
}

// fileFor returns the file state, loading attributes when the daemon has
// none (a client that opened the file through another daemon).
func (s *Server) fileFor(ctx context.Context, ino uint64) (*file, error) {
	if f := s.lookupFile(ino); f != nil {
		return f, nil
	}
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: ino}, nil, nil)
	if err != nil {
		return nil, err
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[ino]
	if f == nil {
		f = newFile(resp.Attr)
		f.adopted = true
		s.files[ino] = f
	}
	return f, nil
}

func (s *Server) backend(ctx context.Context, id uint64) (*backend, error) {
	s.bmu.Lock()
	b := s.backends[id]
	s.bmu.Unlock()
	if b != nil {
		return b, nil
	}
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpServers}, nil, nil)
	if err != nil {
		return nil, err
	}
	s.bmu.Lock()
	defer s.bmu.Unlock()
	for _, si := range resp.Servers {
		if si.Role != "data" {
			continue
		}
		if old := s.backends[si.ID]; old != nil && old.c.Addr() == si.Addr {
			continue
		} else if old != nil {
			old.c.Close()
		}
		b := &backend{c: rpc.NewClient(si.Addr, s.cfg.Secret, rpc.ClientOptions{Timeout: s.cfg.Timeout,
			Name: fmt.Sprintf("data server %d (%s, %s)", si.ID, si.Tier, si.Addr)})}
		for i := range b.sem {
			b.sem[i] = make(chan struct{}, s.cfg.BackendInflight)
		}
		s.backends[si.ID] = b
	}
	if b = s.backends[id]; b == nil {
		return nil, rpc.Errorf(syscall.EIO, "data server %d is not registered", id)
	}
	return b, nil
}

func (s *Server) callData(ctx context.Context, id uint64, m *wire.Msg, payload, into []byte) error {
	return s.callDataWith(ctx, id, m, func(c *rpc.Client) error {
		_, _, err := c.Call(ctx, m, payload, into)
		return err
	})
}

// callDataSink is callData for a read whose answer goes to sink.
func (s *Server) callDataSink(ctx context.Context, id uint64, m *wire.Msg, sink rpc.Sink) error {
	return s.callDataWith(ctx, id, m, func(c *rpc.Client) error {
		_, err := c.CallSink(ctx, m, nil, sink)
		return err
	})
}

// callDataWith runs call on data server id's client within the server's
// in-flight bound for m's class, bounded by the timeout (the request has
// a little more: a write refused by a dead server can still move its
// chunk).
func (s *Server) callDataWith(ctx context.Context, id uint64, m *wire.Msg, call func(c *rpc.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	b, err := s.backend(ctx, id)
	if err != nil {
		return err
	}
	sem := b.sem[wire.ClassOf(m)]
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return &rpc.TransportError{Server: b.c.Name(), Err: ctx.Err()}
	}
	defer func() { <-sem }()
	err = call(b.c)
	var te *rpc.TransportError
	if errors.As(err, &te) {
		s.log.Error("data server failed", "err", err)
	}
	return err
}

// chunk returns chunk idx's location for a read; ok is false for a hole.
// An unknown chunk is looked up again: another daemon may have placed it
// since the layout was loaded.
func (s *Server) chunk(ctx context.Context, ino uint64, f *file, idx uint64) (wire.ChunkLoc, bool, error) {
	if loc, ok := f.lookup(idx); ok {
		return loc, true, nil
	}
	if err := s.loadLayout(ctx, ino, f); err != nil {
		return wire.ChunkLoc{}, false, err
	}
	loc, ok := f.lookup(idx)
	return loc, ok, nil
}

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

// placed ends a write to fresh chunk idx; landed says the write's bytes
// are in it, which fixes its place.
func (s *Server) placed(f *file, idx uint64, landed bool) {
	f.mu.Lock()
	if landed {
		delete(f.fresh, idx)
	}
	if ch := f.placing[idx]; ch != nil {
		close(ch)
		delete(f.placing, idx)
	}
	f.mu.Unlock()
}

func (f *file) lookup(idx uint64) (wire.ChunkLoc, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	loc, ok := f.chunks[idx]
	return loc, ok
}

func (s *Server) loadLayout(ctx context.Context, ino uint64, f *file) error {
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpLayout, Ino: ino}, nil, nil)
	if err != nil {
		return err
	}
	f.mu.Lock()
	for _, c := range resp.Chunks {
		f.chunks[c.Idx] = c
	}
	f.loaded = true
	f.mu.Unlock()
	return nil
}

// alloc asks the metadata service for chunk idx's location, placing it
// (away from server exclude, if set) when it has none; placed says
// whether this call placed it.
func (s *Server) alloc(ctx context.Context, ino uint64, f *file, idx, exclude, gen uint64) (loc wire.ChunkLoc, placed bool, err error) {
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpAlloc, Ino: ino, Idx: idx, ID: exclude, Trunc: gen}, nil, nil)
	if err != nil {
		return wire.ChunkLoc{}, false, err
	}
	if len(resp.Chunks) != 1 {
		return wire.ChunkLoc{}, false, rpc.Errorf(syscall.EIO, "metadata service answered an allocation with %d chunks", len(resp.Chunks))
	}
	loc = resp.Chunks[0]
	f.mu.Lock()
	f.chunks[idx] = loc
	f.mu.Unlock()
	return loc, resp.Flags&wire.AllocPlaced != 0, nil
}

// write stores p at m.Offset of file m.Ino and returns the truncation
// generation it landed in. A write refused because a truncate came in
// between (ESTALE from a data server or the metadata service) is made
// again in the new generation, after the truncate.
func (s *Server) write(ctx context.Context, m *wire.Msg, p []byte) (uint64, error) {
	if uint64(len(p)) != m.Size {
		return 0, rpc.Errorf(syscall.EINVAL, "payload %d bytes, header says %d", len(p), m.Size)
	}
	if err := s.bw.Wait(ctx, float64(len(p))); err != nil {
		return 0, err
	}
	f, err := s.fileFor(ctx, m.Ino)
	if err != nil {
		return 0, err
	}
	spans := layout.Spans(int64(m.Offset), int64(len(p)), f.chunkSize)
	for attempt := 0; ; attempt++ {
		f.mu.Lock()
		gen := f.gen
		f.mu.Unlock()
		err = s.parallel(len(spans), func(i int) error {
			sp := spans[i]
			return s.writeSpan(ctx, m, f, sp, p[sp.BufOff:sp.BufOff+sp.Len], gen)
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
		end := m.Offset + uint64(len(p))
		f.mu.Lock()
		// a truncate adopted meanwhile came after this write: the write's
		// growth is void (its bytes past the new size were cut)
		if f.gen == gen {
			if end > f.size {
				f.size = end
			}
			f.mtime = s.cfg.Now().UnixNano()
			f.pending = true
		}
		f.mu.Unlock()
		return gen, nil
	}
}

func (s *Server) writeSpan(ctx context.Context, m *wire.Msg, f *file, sp layout.Span, p []byte, gen uint64) (err error) {
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
	for attempt := 0; ; attempt++ {
		g := len(loc.Servers)
		pieces := layout.Pieces(sp.Off, sp.Len, g, f.stripeUnit)
		err = s.parallel(len(pieces), func(i int) error {
			pc := pieces[i]
			id := loc.Servers[pc.Member]
			req := &wire.Msg{Op: wire.OpChunkWrite, Ino: m.Ino, Idx: sp.Idx, ChunkSize: uint32(f.chunkSize),
				Offset: uint64(pc.LocalOff), Size: uint64(pc.Len),
				Cap:   uint64(layout.LocalSize(pc.Member, g, f.stripeUnit, f.chunkSize)),
				Trunc: gen, Job: m.Job, Rank: m.Rank, Node: m.Node}
			err := s.callData(ctx, id, req, p[pc.BufOff:pc.BufOff+pc.Len], nil)
			if err == nil {
				f.mu.Lock()
				f.dirty[id] = true
				f.mu.Unlock()
				return nil
			}
			// only a write to a fresh chunk may move it: nothing of
			// anyone else's is in it yet
			var te *rpc.TransportError
			if placer && (rpc.Errno(err) == syscall.ENOSPC || errors.As(err, &te)) {
				return &refusedErr{id: id, err: err}
			}
			return err
		})
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

// refusedErr: a data server could not take a new chunk.
type refusedErr struct {
	id  uint64
	err error
}

func (e *refusedErr) Error() string { return e.err.Error() }
func (e *refusedErr) Unwrap() error { return e.err }

// readPlan is a read clamped to the end of the file.
type readPlan struct {
	f     *file
	gen   uint64 // the truncation generation the size is of
	n     int64  // bytes to return
	spans []layout.Span
}

// planRead charges the emulated link for m's read and clamps it to the end
// of the file.
func (s *Server) planRead(ctx context.Context, m *wire.Msg) (readPlan, error) {
	if err := s.bw.Wait(ctx, float64(m.Size)); err != nil {
		return readPlan{}, err
	}
	f, err := s.fileFor(ctx, m.Ino)
	if err != nil {
		return readPlan{}, err
	}
	f.mu.Lock()
	size, gen := f.size, f.gen
	f.mu.Unlock()
	if m.Offset+m.Size > size {
		// the file may have grown through another daemon
		resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: m.Ino}, nil, nil)
		if err != nil {
			return readPlan{}, err
		}
		s.mergeAttr(resp.Attr)
		f.mu.Lock()
		size, gen = f.size, f.gen
		f.mu.Unlock()
	}
	if m.Offset >= size {
		return readPlan{f: f, gen: gen}, nil
	}
	n := int64(m.Size)
	if rem := int64(size - m.Offset); rem < n {
		n = rem
	}
	return readPlan{f: f, gen: gen, n: n, spans: layout.Spans(int64(m.Offset), n, f.chunkSize)}, nil
}

// readPlanned fills buf (rp.n bytes) with the planned read.
func (s *Server) readPlanned(ctx context.Context, m *wire.Msg, rp readPlan, buf []byte) error {
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
		g := len(loc.Servers)
		pieces := layout.Pieces(sp.Off, sp.Len, g, f.stripeUnit)
		return s.parallel(len(pieces), func(j int) error {
			pc := pieces[j]
			into := dst[pc.BufOff : pc.BufOff+pc.Len]
			return s.callData(ctx, loc.Servers[pc.Member], s.chunkRead(m, rp, sp, pc), nil, into)
		})
	})
}

func (s *Server) chunkRead(m *wire.Msg, rp readPlan, sp layout.Span, pc layout.Piece) *wire.Msg {
	return &wire.Msg{Op: wire.OpChunkRead, Ino: m.Ino, Idx: sp.Idx, ChunkSize: uint32(rp.f.chunkSize),
		Offset: uint64(pc.LocalOff), Size: uint64(pc.Len), Trunc: rp.gen, Job: m.Job, Rank: m.Rank, Node: m.Node}
}

// relayRead answers a read that one data server serves whole by splicing
// the server's answer into the reply (zerocopy.Relay): the payload never
// enters this process. relayed is false, with nothing sent, when the read
// is not of that shape (end of file, a hole, stripes, several chunks) or
// the data server answered with an error, which is then returned.
func (s *Server) relayRead(ctx context.Context, r *rpc.Request, rp readPlan) (relayed bool, err error) {
	if len(rp.spans) != 1 {
		return false, nil
	}
	m, sp := r.Msg, rp.spans[0]
	loc, ok, err := s.chunk(ctx, m.Ino, rp.f, sp.Idx)
	if err != nil || !ok {
		return false, err
	}
	pieces := layout.Pieces(sp.Off, sp.Len, len(loc.Servers), rp.f.stripeUnit)
	if len(pieces) != 1 {
		return false, nil
	}
	err = s.callDataSink(ctx, loc.Servers[pieces[0].Member], s.chunkRead(m, rp, sp, pieces[0]),
		func(_ *wire.Msg, n int, prefix []byte, conn net.Conn) error {
			if int64(n) != rp.n {
				return fmt.Errorf("data server answered %d bytes for a read of %d", n, rp.n)
			}
			relayed = true
			return r.ReplySend(&wire.Msg{Size: uint64(n)}, n, func(c net.Conn) error {
				return zerocopy.Relay(c, prefix, conn, n)
			})
		})
	if relayed && err != nil {
		s.log.Warn("relayed read cut short; client connection closed", "ino", m.Ino, "err", err)
	}
	return relayed, err
}

// parallel runs fn(0..n-1), concurrently when n > 1, and returns the first
// error.
func (s *Server) parallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = fn(i)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sizeHint applies the client's account of how far its writes of
// truncation generation gen reached: it covers writes acknowledged by an
// earlier incarnation of this daemon whose growth was never reported. An
// account of an older generation is void (a truncate came after those
// writes).
func (s *Server) sizeHint(ctx context.Context, ino, end, gen uint64) error {
	if end == 0 {
		return nil
	}
	f, err := s.fileFor(ctx, ino)
	if err != nil {
		return err
	}
	f.mu.Lock()
	behind := gen > f.gen
	f.mu.Unlock()
	if behind {
		// the client saw a truncate this daemon has not: learn it
		resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: ino}, nil, nil)
		if err != nil {
			return err
		}
		s.mergeAttr(resp.Attr)
	}
	f.mu.Lock()
	if gen == f.gen && end > f.size {
		f.size = end
		f.pending = true
		f.mtime = s.cfg.Now().UnixNano()
	}
	f.mu.Unlock()
	return nil
}

// fsync makes the file's data and size durable: its data servers sync the
// chunks written since the last fsync, then the size goes to the metadata
// service with a synchronous commit.
func (s *Server) fsync(ctx context.Context, ino uint64) error {
	f := s.lookupFile(ino)
	if f != nil {
		f.mu.Lock()
		ids := make([]uint64, 0, len(f.dirty))
		for id := range f.dirty {
			ids = append(ids, id)
		}
		adopted := f.adopted
		f.mu.Unlock()
		if adopted {
			resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpLayout, Ino: ino}, nil, nil)
			if err != nil {
				return err
			}
			seen := map[uint64]bool{}
			for _, id := range ids {
				seen[id] = true
			}
			for _, c := range resp.Chunks {
				for _, id := range c.Servers {
					if !seen[id] {
						seen[id] = true
						ids = append(ids, id)
					}
				}
			}
		}
		err := s.parallel(len(ids), func(i int) error {
			return s.callData(ctx, ids[i], &wire.Msg{Op: wire.OpChunkSync, Ino: ino}, nil, nil)
		})
		if len(ids) > 0 && err != nil {
			return err
		}
		f.mu.Lock()
		for _, id := range ids {
			delete(f.dirty, id)
		}
		f.mu.Unlock()
	}
	return s.flushSizes(ctx, ino, true)
}

// flushSizes reports unreported growth of ino (or of every file when ino is
// 0). With sync the metadata service commits durably.
func (s *Server) flushSizes(ctx context.Context, ino uint64, sync bool) error {
	s.fmu.Lock()
	var inos []uint64
	var fs []*file
	if ino != 0 {
		if f := s.files[ino]; f != nil {
			inos, fs = append(inos, ino), append(fs, f)
		}
	} else {
		for i, f := range s.files {
			inos, fs = append(inos, i), append(fs, f)
		}
	}
	s.fmu.Unlock()
	var errs []error
	reported := false
	for i, f := range fs {
		// one report of a file at a time: a close or fsync that finds
		// nothing pending must not return while the growth is still on
		// its way in another report (the periodic one, retrying against
		// a restarting metadata service)
		f.report.Lock()
		f.mu.Lock()
		pending, size, mtime, gen := f.pending, f.size, f.mtime, f.gen
		f.pending = false
		f.mu.Unlock()
		if !pending {
			f.report.Unlock()
			continue
		}
		reported = true
		resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpExtend, Ino: inos[i], Size: size, Mtime: mtime, Trunc: gen, Sync: sync}, nil, nil)
		f.mu.Lock()
		if err != nil {
			if f.gen == gen {
				f.pending = true
			}
			errs = append(errs, err)
		} else {
			f.adoptLocked(resp.Attr)
		}
		f.mu.Unlock()
		f.report.Unlock()
	}
	if sync && !reported && len(errs) == 0 {
		_, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpFsync}, nil, nil)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Server) flushLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.SizeFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.flushSizes(ctx, 0, false); err != nil && ctx.Err() == nil {
				s.log.Warn("size report failed", "err", err)
			}
		}
	}
}
