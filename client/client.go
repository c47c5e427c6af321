// Package client is the compute-node side of sluice (LWFS-Client): the
// go-fuse adapter (raw API) of a mount. It translates kernel requests into
// calls of the client core, package client/vfs, and tags each with the
// caller's identity (job, rank, node, application: wire.Who). File data
// bypasses the kernel's page cache (direct I/O); the core streams instead:
// writes go to the forwarding node in the background within a bounded
// window (errors surface at the next write, close or fsync, which wait for
// them), and sequential readers get data fetched ahead (vfs.Streams).
// Names and attributes are cached by the kernel and, for directories, by
// the core (vfs.DirCache), kept coherent by the metadata service's change
// feed, which this package follows (feed.go) because invalidating the
// kernel's caches is FUSE's business. In a directory whose delegation it
// holds, the mount creates files by itself and sends them in batches
// (vfs.Creates). Permission checks are the kernel's (default_permissions)
// against the caller's uid and gid. Requests go to the mount's home
// forwarding node (the fixed mapping), or, for a job registered with the
// forwarding-map manager, to the job's forwarding nodes (vfs.Router).
//
// Files: client.go (set-up, identity, the call path), namespace.go
// (lookups, attributes, names, directories), io.go (open, read, write,
// flush, fsync, release), feed.go, metrics.go.
//
// It holds no durable state and never talks to data servers. It talks to
// the metadata service directly only to discover forwarding nodes, to
// follow the change feed, and to take and give back delegations.
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/client/vfs"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
)

// Config configures a mount.
type Config struct {
	Mountpoint string
	// Fwd is the forwarding node address; empty: ask the metadata service
	// (Meta) and pick by the fixed mapping (hash of the node name).
	Fwd    string
	Meta   string
	Secret []byte
	Node   string
	JobVar string // environment variable holding the job id
	Log    *slog.Logger
	// Timeout bounds each request (an unreachable forwarding node gives
	// EIO after it). Default 30 s.
	Timeout time.Duration
	// AttrTimeout and EntryTimeout bound the kernel's caches when the
	// metadata change feed is not followed (default 1 s; negative: no
	// caching, every stat and lookup reaches the service).
	AttrTimeout, EntryTimeout time.Duration
	// MetaCache bounds them while the feed is followed (feed.go; default
	// 60 s; negative: do not follow the feed).
	MetaCache time.Duration
	// FeedDelay is a fault: each batch of the change feed reaches this
	// mount's caches and kernel this much later (a slow metadata service or
	// network), so tests can widen the window in which another node's
	// change is known to the service but not yet here. 0: none.
	FeedDelay time.Duration
	// WritebackDelay is a fault: with WritebackCloses, a write in the
	// background goes this much later (a slow forwarding node seen by
	// those writes alone, and so by the closes' reports that wait for
	// them; tests).
	WritebackDelay time.Duration
	// CacheData lets the kernel cache file data (no direct I/O). Off by
	// default: checkpoint semantics.
	CacheData bool
	// WriteBehind bounds the bytes of writes in flight in the background
	// (default 32 MiB; negative: every write waits for the forwarding node).
	WriteBehind int64
	// WritebackCreates answers creates in directories this mount holds
	// the delegation of by itself and sends them in batches
	// (wbcreate.go); needs the change feed.
	WritebackCreates bool
	// WritebackUnlinks also answers, in such directories, removals of
	// files the service knows and sends them with the creates, in order.
	WritebackUnlinks bool
	// OwnedCache bounds the bytes kept of files this mount created under
	// a delegation, which answer read-only opens and reads here
	// (vfs.Owned; default 64 MiB; negative: off). Needs WritebackCreates;
	// off with CacheData.
	OwnedCache int64
	// WritebackCloses bounds the closes of owned files that return before
	// their writes and size reach the service, which they then do in the
	// background (vfs.Owned.DeferClose; default 256; negative: every close
	// waits). With it a write of a file not yet sent does not wait for the
	// batch that creates it either.
	WritebackCloses int
	// CreateFlush bounds how long such a create waits before it is sent
	// (default 10 ms).
	CreateFlush time.Duration
	// Readahead is how far ahead of a sequential reader data is fetched,
	// per open file (default 8 MiB; negative: no readahead).
	Readahead int64
	// SpliceReads: a readahead fetch a read takes whole goes from the
	// forwarding node's socket into a pipe and from there into the FUSE
	// device, without passing through the mount's memory (one copy fewer
	// per byte read; vfs.StreamConfig.SpliceReads). Only where pipes can
	// hold a 1 MiB reply (zerocopy.BigPipes: CAP_SYS_RESOURCE, as a root
	// mount has); off otherwise.
	SpliceReads bool
	// ReadCache bounds the blocks of files kept for small reads
	// (vfs.BlockCache; 0 or negative: off, the default until it passes
	// the fsx model test's crash steps). Needs the change feed; off with
	// CacheData.
	ReadCache int64
	// Monitor records every operation as the application saw it, for
	// Beacon (nil: off); Ship sends its windows through the forwarding
	// node.
	Monitor *beacon.Collector
	// Metrics receives the client's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	Debug   bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// FS is the FUSE file system.
type FS struct {
	fuse.RawFileSystem
	cfg  Config
	log  *slog.Logger
	fwd  *rpc.Client
	ids  ident.Resolver
	attr time.Duration
	ent  time.Duration

	// byRef counts the payloads sent by reference by the clients of
	// forwarding nodes the router dialled (rpc.ClientOptions.ByRef).
	byRef atomic.Int64

	// mc reaches the metadata daemon (nil with a fixed --fwd); rt routes
	// each job's requests (vfs.Router); st is the streaming I/O
	// (vfs.Streams: write-behind, readahead, extents).
	mc *rpc.Client
	rt *vfs.Router
	st *vfs.Streams
	// met are the Prometheus series (operations as the application saw
	// them, streaming state).
	met clientMetrics
	// dc answers directories' getattrs and lookups of absent names and
	// holds the mount's place in the change feed (vfs.DirCache; feed.go
	// follows the feed).
	dc *vfs.DirCache
	// wb holds delegations and creates not yet sent (vfs.Creates).
	wb *vfs.Creates
	// own holds the files this mount owns (vfs.Owned; nil: none).
	own *vfs.Owned
	// bc keeps blocks of files for small reads (vfs.BlockCache; nil: off).
	bc *vfs.BlockCache
	// app places the writes of O_APPEND handles at the file's end
	// (vfs.Appends).
	app *vfs.Appends
	// long is what the kernel may cache for the long timeout (feed.go);
	// srv is the FUSE server that invalidates the kernel's caches (set by
	// Mount).
	long longCached
	srv  atomic.Pointer[fuse.Server]
	// joined is the feed position Join took (0: none), where Follow
	// begins; set before Follow starts.
	joined uint64

	pmu sync.Mutex // guards priv
	// priv holds the inodes last seen with S_ISUID or S_ISGID set: a
	// write by an unprivileged caller clears them (HANDLE_KILLPRIV_V2),
	// which costs a round trip only for these.
	priv map[uint64]bool

	nextFh atomic.Uint64
	dmu    sync.Mutex // guards dirs
	dirs   map[uint64][]wire.DirEntry
}

// blockCacheBlock is the block cache's block: what a small read that
// misses fetches. smallRead is the largest read the cache answers.
const (
	blockCacheBlock = 1 << 20
	smallRead       = 128 << 10
)

// The write-behind's buffers go to the forwarding node by reference.
var _ vfs.PageCaller = (*rpc.Client)(nil)

// New connects to the forwarding node.
func New(ctx context.Context, cfg Config) (*FS, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.AttrTimeout == 0 {
		cfg.AttrTimeout = time.Second
	}
	if cfg.CreateFlush <= 0 {
		cfg.CreateFlush = 10 * time.Millisecond
	}
	if cfg.EntryTimeout == 0 {
		cfg.EntryTimeout = time.Second
	}
	cfg.AttrTimeout, cfg.EntryTimeout = max(cfg.AttrTimeout, 0), max(cfg.EntryTimeout, 0)
	if cfg.MetaCache == 0 {
		cfg.MetaCache = 60 * time.Second
	}
	if cfg.WriteBehind == 0 {
		cfg.WriteBehind = 32 << 20
	}
	if cfg.Readahead == 0 {
		cfg.Readahead = 8 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), cfg: cfg, log: cfg.Log,
		ids: ident.Resolver{JobVar: cfg.JobVar, Node: cfg.Node, Now: cfg.Now}, attr: cfg.AttrTimeout, ent: cfg.EntryTimeout,
		dirs: map[uint64][]wire.DirEntry{}, dc: vfs.NewDirCache(cfg.MetaCache > 0), app: vfs.NewAppends(), priv: map[uint64]bool{}}
	fs.met = newClientMetrics(cfg.Metrics, fs)
	addr := cfg.Fwd
	if addr == "" {
		fs.mc = rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "metadata service " + cfg.Meta})
		// the home node: the manager's fixed mapping of this node
		pl, err := rpc.Do(ctx, fs.mc, fwdmap.Map, &fwdmap.MapReq{Node: cfg.Node})
		if err == nil && len(pl.Fwds) == 0 {
			err = errors.New("the fixed mapping names none")
		}
		if err != nil {
			fs.mc.Close()
			return nil, fmt.Errorf("no forwarding node for %s: %v", cfg.Node, err)
		}
		addr = pl.Fwds[0].Addr
		cfg.Log.Info("home forwarding node chosen by fixed mapping", "fwd", pl.Fwds[0].ID, "addr", addr)
	}
	dial := func(addr string) vfs.Caller { // a PageCaller too
		return rpc.NewClient(addr, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "forwarding node " + addr, ByRef: &fs.byRef})
	}
	fs.fwd = dial(addr).(*rpc.Client)
	rc := vfs.RouterConfig{Home: fs.fwd, HomeAddr: addr, Dial: dial, Now: cfg.Now, Log: fs.log}
	cc := vfs.CreatesConfig{Creates: cfg.WritebackCreates, Unlinks: cfg.WritebackUnlinks, Flush: cfg.CreateFlush,
		Timeout: cfg.Timeout, Dir: fs.dc, Now: cfg.Now, Log: fs.log}
	if fs.mc != nil {
		rc.Manager, cc.Meta = fs.mc, fs.mc
	}
	fs.rt = vfs.NewRouter(rc)
	cc.Route = fs.rt.Pick
	if cfg.OwnedCache >= 0 && !cfg.CacheData && cfg.WritebackCreates {
		fs.own = vfs.NewOwned(vfs.OwnedConfig{Budget: cfg.OwnedCache, Promote: fs.promote,
			MaxClosing: cfg.WritebackCloses, Log: fs.log})
		cc.Owned = fs.own
	}
	fs.wb = vfs.NewCreates(cc)
	if cfg.ReadCache > 0 && !cfg.CacheData && cfg.MetaCache > 0 {
		fs.bc = vfs.NewBlockCache(blockCacheBlock, cfg.ReadCache)
	}
	fs.st = vfs.NewStreams(vfs.StreamConfig{WriteBehind: cfg.WriteBehind, Readahead: cfg.Readahead,
		Route: fs.rt.Pick, Log: fs.log, SpliceReads: cfg.SpliceReads && zerocopy.BigPipes()})
	if _, err := rpc.Do(ctx, fs.fwd, ns.Ping, &ns.PingReq{}); err != nil {
		return nil, err
	}
	return fs, nil
}

// Mount mounts fs and returns the running server (Serve runs in the
// background; Wait blocks until unmount).
func (fs *FS) Mount() (*fuse.Server, error) {
	opts := &fuse.MountOptions{
		AllowOther:    true,
		Options:       []string{"default_permissions"},
		MaxWrite:      1 << 20,
		MaxBackground: 64,
		FsName:        "sluice",
		Name:          "sluice",
		Debug:         fs.cfg.Debug,
		DirectMount:   true,
		// replies come from memory buffers: writev them; splicing through
		// a pipe adds a copy and fails beyond the pipe's 1 MiB
		DisableSplice: true,
		// Every request goes through the daemon: no readdirplus (we list
		// names, attributes come from lookups) and no kernel passthrough.
		DisabledCapabilities: fuse.CAP_READDIRPLUS | fuse.CAP_PASSTHROUGH,
		// with direct I/O the kernel leaves clearing setuid/setgid on a
		// write by an unprivileged caller to the file system
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2,
	}
	srv, err := fuse.NewServer(fs, fs.cfg.Mountpoint, opts)
	if err != nil {
		return nil, err
	}
	fs.srv.Store(srv)
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	return srv, nil
}

// Ship sends the monitor's records through the forwarding node until ctx
// ends.
func (fs *FS) Ship(ctx context.Context) {
	if fs.cfg.Monitor != nil {
		beaconrpc.Ship(ctx, fs.cfg.Monitor, fs.fwd, fs.log)
	}
}

// Close sends the creates not yet sent and the closes' reports on their
// way, drops the connections and gives
// back the block cache's memory.
func (fs *FS) Close() {
	fs.wb.DropAll()
	fs.own.WaitAllClosed() // write-back closes: what DropAll's recalls did not wait for
	fs.bc.DropAll()
	fs.rt.Close()
	if fs.mc != nil {
		fs.mc.Close()
	}
}

func (fs *FS) String() string { return "sluice" }

// node is the compute node a caller runs on: its own SLURMD_NODENAME, else
// the mount's node.
// ident returns the identity of the caller of a request.
func (fs *FS) ident(h *fuse.InHeader, op wire.Op) ident.ID {
	var id ident.ID
	switch op {
	case ns.OpFlush, ns.OpRelease:
		// sent from close(), possibly inside the caller's execve
		id = fs.ids.Cached(h.Pid)
	default:
		id = fs.ids.Lookup(h.Pid)
	}
	id.User, id.Group = h.Uid, h.Gid
	return id
}

// call sends namespace request q (of operation d) tagged with the
// caller's identity.
func call[Q, R any, PQ nsRequest[Q], PR wire.Ptr[R]](fs *FS, h *fuse.InHeader, d wire.Def[Q, R], q PQ) (PR, fuse.Status) {
	rep, _, st := callAs[Q, R, PQ, PR](fs, h, fs.ident(h, d.Op), d, q, nil)
	return rep, st
}

// nsRequest is a pointer to a namespace request type Q.
type nsRequest[Q any] interface {
	wire.Ptr[Q]
	ns.Request
}

// callAs sends one request for a caller already identified (into: a
// read's buffer). Reads and writes are recorded for Beacon by Read and
// Write (with the latency the application saw), everything else here.
func callAs[Q, R any, PQ nsRequest[Q], PR wire.Ptr[R]](fs *FS, h *fuse.InHeader, id ident.ID, d wire.Def[Q, R], q PQ, into []byte) (PR, []byte, fuse.Status) {
	// a close of the file on its way goes first (write-back closes)
	ino, _, _ := q.Inodes()
	fs.own.WaitClosed(ino)
	return send[Q, R, PQ, PR](fs, h, id, d, q, into)
}

// send is callAs without waiting for the closes of q's file on their way
// (which is one of them).
func send[Q, R any, PQ nsRequest[Q], PR wire.Ptr[R]](fs *FS, h *fuse.InHeader, id ident.ID, d wire.Def[Q, R], q PQ, into []byte) (PR, []byte, fuse.Status) {
	rep := PR(new(R))
	p, st := fs.invoke(h, id, d.Op, q, rep, into)
	return rep, p, st
}

// invoke sends request q of operation op for caller id, its answer into
// rep.
func (fs *FS) invoke(h *fuse.InHeader, id ident.ID, op wire.Op, q ns.Request, rep wire.Message, into []byte) ([]byte, fuse.Status) {
	head := q.Header()
	head.Who, head.Client = id, fs.dc.ID()
	fs.wb.SettleFor(op, q)
	// The kernel interrupts a request when the caller gets any signal (Go
	// programs get SIGURG all the time); the request is still bounded by
	// the timeout, so it is not abandoned half-way.
	ctx := context.Background()
	start := fs.cfg.Now()
	ino, parent, _ := q.Inodes()
	p, err := fs.rt.Pick(id, ino|parent).Invoke(ctx, op, q, rep, nil, into)
	if op != ns.OpRead && op != ns.OpWrite {
		fs.record(h, id, beaconrpc.OpName(op), ino, 0, 0, start, err != nil)
	}
	if err != nil {
		if rpc.Errno(err) == syscall.EIO {
			fs.log.Error("request failed", "op", op, "ino", ino, "err", err)
		}
		return p, fuse.Status(rpc.Errno(err))
	}
	return p, fuse.OK
}
