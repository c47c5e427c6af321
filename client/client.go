// Package client is the compute-node side of sluice (LWFS-Client): a FUSE
// file system (go-fuse raw API) that forwards every request to its
// forwarding node, tagged with the caller's job id, rank and node. File
// data bypasses the kernel's page cache (direct I/O); instead the client
// streams: writes go to the forwarding node in the background within a
// bounded window (errors surface at the next write, close or fsync, which
// wait for them), and sequential readers get data fetched ahead
// (stream.go). Names and attributes are cached by the kernel and, for
// directories, by the mount itself, kept coherent by the metadata service's
// change feed (feed.go, dircache.go). In a directory whose delegation it
// holds, the mount creates files by itself and sends them in batches
// (wbcreate.go). Permission checks are the kernel's (default_permissions)
// against the caller's uid and gid.
//
// Requests go to the mount's home forwarding node (the fixed mapping), or,
// for a job registered with the forwarding-map manager, to the job's
// forwarding nodes (route.go).
//
// It holds no durable state and never talks to data servers. It talks to
// the metadata service directly only to discover forwarding nodes, to
// follow the change feed, and to take and give back delegations.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
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
	// CreateFlush bounds how long such a create waits before it is sent
	// (default 10 ms).
	CreateFlush time.Duration
	// Readahead is how far ahead of a sequential reader data is fetched,
	// per open file (default 8 MiB; negative: no readahead).
	Readahead int64
	// Monitor records every operation as the application saw it, for
	// Beacon (nil: off); Ship sends its windows through the forwarding
	// node.
	Monitor *beacon.Collector
	// Metrics receives the client's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	Debug   bool
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

	// mc reaches the metadata daemon's forwarding-map manager (nil with a
	// fixed --fwd); rt routes each job's requests (route.go).
	mc *rpc.Client
	rt router
	// met are the Prometheus series (operations as the application saw
	// them, streaming state).
	met clientMetrics
	// feed follows the metadata service's change feed (feed.go).
	feed feedState
	// dc answers directories' getattrs and lookups of absent names
	// (dircache.go).
	dc dirCache
	// wb holds delegations and creates not yet sent (wbcreate.go).
	wb wbState

	pmu sync.Mutex // guards priv
	// priv holds the inodes last seen with S_ISUID or S_ISGID set: a
	// write by an unprivileged caller clears them (HANDLE_KILLPRIV_V2),
	// which costs a round trip only for these.
	priv map[uint64]bool

	nextFh atomic.Uint64
	dmu    sync.Mutex // guards dirs
	dirs   map[uint64][]wire.DirEntry
	hmu    sync.Mutex // guards written and the extents in it
	// written maps each open file handle that wrote since its last flush
	// to how far its acknowledged writes reached. Closing any other handle
	// costs no round trip (and cannot block a process in execve closing
	// inherited descriptors). Flush and fsync send the extent along, so the
	// file's size survives a restart of the forwarding node in between.
	written map[uint64]*extent

	iomu   sync.Mutex // guards io, wbBytes, raBytes and the state under io
	iocond *sync.Cond // on iomu: a background write or fetch ended
	io     map[uint64]*inodeIO
	// wbBytes is the write-behind data in flight; raBytes the readahead
	// buffers held (at most raMax).
	wbBytes, raBytes, raMax int64
}

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
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), cfg: cfg, log: cfg.Log,
		ids: ident.Resolver{JobVar: cfg.JobVar}, attr: cfg.AttrTimeout, ent: cfg.EntryTimeout,
		dirs: map[uint64][]wire.DirEntry{}, written: map[uint64]*extent{},
		io: map[uint64]*inodeIO{}, raMax: 8 * cfg.Readahead, feed: newFeedState(),
		dc: dirCache{dirs: map[uint64]*dirState{}}, priv: map[uint64]bool{}}
	if fs.raMax < 64<<20 {
		fs.raMax = 64 << 20
	}
	fs.iocond = sync.NewCond(&fs.iomu)
	fs.wb.init()
	fs.met = newClientMetrics(cfg.Metrics, fs)
	fs.rt = router{routes: map[string]*route{}, conns: map[string]*rpc.Client{}}
	addr := cfg.Fwd
	if addr == "" {
		fs.mc = rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Timeout: cfg.Timeout, Name: "metadata service " + cfg.Meta})
		// the home node: the manager's fixed mapping of this node
		_, p, err := fs.mc.Call(ctx, &wire.Msg{Op: wire.OpJob, Name: fwdmap.CallMap, Node: cfg.Node}, nil, nil)
		var pl fwdmap.Placement
		if err == nil {
			err = json.Unmarshal(p, &pl)
		}
		if err != nil || len(pl.Fwds) == 0 {
			fs.mc.Close()
			return nil, fmt.Errorf("no forwarding node for %s: %v", cfg.Node, err)
		}
		addr = pl.Fwds[0].Addr
		cfg.Log.Info("home forwarding node chosen by fixed mapping", "fwd", pl.Fwds[0].ID, "addr", addr)
	}
	fs.fwd = fs.conn(addr)
	if _, _, err := fs.fwd.Call(ctx, &wire.Msg{Op: wire.OpPing}, nil, nil); err != nil {
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

// record adds one operation to the monitor.
func (fs *FS) record(h *fuse.InHeader, id ident.ID, name string, ino, off, size uint64, start time.Time, failed bool) {
	if name == "" {
		return
	}
	fs.met.requests.WithLabelValues(name).Inc()
	fs.met.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if fs.cfg.Monitor == nil {
		return
	}
	fs.cfg.Monitor.Add(beacon.Op{Start: start, Job: id.Job, App: id.App, Uid: h.Uid, Rank: id.Rank, Node: fs.node(id),
		Name: name, Ino: ino, Off: off, Size: size, Lat: time.Since(start), Err: failed})
}

// answered records an operation the mount answered itself (directory
// cache): the application asked for it, so Beacon counts it.
func (fs *FS) answered(h *fuse.InHeader, op wire.Op, ino uint64, start time.Time, failed bool) {
	fs.met.local.Inc()
	fs.record(h, fs.ident(h, op), beaconrpc.OpName(op), ino, 0, 0, start, failed)
}

// Close sends the creates not yet sent and drops the connections.
func (fs *FS) Close() {
	fs.wbDropAll()
	fs.rt.mu.Lock()
	for _, c := range fs.rt.conns {
		c.Close()
	}
	fs.rt.mu.Unlock()
	if fs.mc != nil {
		fs.mc.Close()
	}
}

func (fs *FS) String() string { return "sluice" }

// node is the compute node a caller runs on: its own SLURMD_NODENAME, else
// the mount's node.
func (fs *FS) node(id ident.ID) string {
	if id.Node != "" {
		return id.Node
	}
	return fs.cfg.Node
}

// ident returns the identity of the caller of a request.
func (fs *FS) ident(h *fuse.InHeader, op wire.Op) ident.ID {
	switch op {
	case wire.OpFlush, wire.OpRelease:
		// sent from close(), possibly inside the caller's execve
		return fs.ids.Cached(h.Pid)
	}
	return fs.ids.Lookup(h.Pid)
}

// call sends one request tagged with the caller's identity.
func (fs *FS) call(cancel <-chan struct{}, h *fuse.InHeader, m *wire.Msg, payload, into []byte) (*wire.Msg, []byte, fuse.Status) {
	return fs.callAs(h, fs.ident(h, m.Op), m, payload, into)
}

// callAs sends one request for a caller already identified. Reads and
// writes are recorded for Beacon by Read and Write (with the latency the
// application saw), everything else here.
func (fs *FS) callAs(h *fuse.InHeader, id ident.ID, m *wire.Msg, payload, into []byte) (*wire.Msg, []byte, fuse.Status) {
	m.Job, m.Rank, m.Node, m.Client = id.Job, id.Rank, fs.node(id), fs.feed.id
	fs.wbSettleFor(m)
	// The kernel interrupts a request when the caller gets any signal (Go
	// programs get SIGURG all the time); the request is still bounded by
	// the timeout, so it is not abandoned half-way.
	ctx := context.Background()
	start := time.Now()
	resp, p, err := fs.pick(id, m.Ino|m.Parent).Call(ctx, m, payload, into)
	if m.Op != wire.OpRead && m.Op != wire.OpWrite {
		fs.record(h, id, beaconrpc.OpName(m.Op), m.Ino, 0, 0, start, err != nil)
	}
	if err != nil {
		if rpc.Errno(err) == syscall.EIO {
			fs.log.Error("request failed", "op", m.Op, "ino", m.Ino, "err", err)
		}
		return resp, p, fuse.Status(rpc.Errno(err))
	}
	return resp, p, fuse.OK
}

// toAttr fills attributes for the kernel (every attribute the kernel
// sees passes here).
func (fs *FS) toAttr(a *wire.Attr, out *fuse.Attr) {
	if a.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 && a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		fs.pmu.Lock()
		fs.priv[a.Ino] = true
		fs.pmu.Unlock()
	}
	out.Ino = a.Ino
	out.Size = a.Size
	out.Blocks = (a.Size + 511) / 512
	out.Atime, out.Atimensec = uint64(a.Atime/1e9), uint32(a.Atime%1e9)
	out.Mtime, out.Mtimensec = uint64(a.Mtime/1e9), uint32(a.Mtime%1e9)
	out.Ctime, out.Ctimensec = uint64(a.Ctime/1e9), uint32(a.Ctime%1e9)
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.Uid, a.Gid
	out.Rdev = a.Rdev
	out.Blksize = 1 << 20
}

// entry fills an entry reply from a metadata reply.
func (fs *FS) entry(resp *wire.Msg, out *fuse.EntryOut) {
	a := resp.Attr
	out.NodeId = a.Ino
	out.Generation = 1
	fs.entryTimeouts(resp.Gen, out)
	fs.toAttr(a, &out.Attr)
}

// Lookup implements fuse.RawFileSystem.
func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if len(name) > wire.NameMax {
		return fuse.Status(syscall.ENAMETOOLONG) // the kernel leaves NAME_MAX to the file system
	}
	if fs.absent(h.NodeId, name) {
		fs.answered(h, wire.OpLookup, h.NodeId, time.Now(), true)
		return fuse.ENOENT
	}
	resp, _, st := fs.call(cancel, h, &wire.Msg{Op: wire.OpLookup, Parent: h.NodeId, Name: name}, nil, nil)
	if st == fuse.OK && fs.hasWrites(resp.Attr.Ino) {
		// this node's writes change the size: look again once they landed
		fs.waitWrites(resp.Attr.Ino, 0, 0)
		resp, _, st = fs.call(cancel, h, &wire.Msg{Op: wire.OpLookup, Parent: h.NodeId, Name: name}, nil, nil)
	}
	if st != fuse.OK {
		return st
	}
	fs.entry(resp, out)
	fs.noteAttr(resp.Attr, resp.Gen)
	return fuse.OK
}

// Forget implements fuse.RawFileSystem: node ids are inode numbers, so
// there is nothing to forget.
func (fs *FS) Forget(nodeid, nlookup uint64) {}

// GetAttr implements fuse.RawFileSystem.
func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if a, ok := fs.dirAttr(in.NodeId); ok {
		fs.toAttr(&a, &out.Attr)
		out.SetTimeout(fs.cfg.MetaCache)
		fs.answered(&in.InHeader, wire.OpGetattr, in.NodeId, time.Now(), false)
		return fuse.OK
	}
	fs.waitWrites(in.NodeId, 0, 0)
	resp, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpGetattr, Ino: in.NodeId}, nil, nil)
	if st != fuse.OK {
		return st
	}
	fs.toAttr(resp.Attr, &out.Attr)
	fs.attrTimeout(resp.Gen, out)
	fs.noteAttr(resp.Attr, resp.Gen)
	return fuse.OK
}

// SetAttr implements fuse.RawFileSystem.
func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	m := &wire.Msg{Op: wire.OpSetattr, Ino: in.NodeId}
	fs.waitWrites(in.NodeId, 0, 0)
	if in.Valid&fuse.FATTR_SIZE != 0 {
		fs.iomu.Lock()
		fs.dropReadaheadLocked(in.NodeId, 0)
		fs.iomu.Unlock()
	}
	now := time.Now().UnixNano()
	if in.Valid&fuse.FATTR_MODE != 0 {
		m.Mask |= wire.SetMode
		m.Mode = in.Mode
	}
	if in.Valid&fuse.FATTR_UID != 0 {
		m.Mask |= wire.SetUid
		m.Uid = in.Owner.Uid
	}
	if in.Valid&fuse.FATTR_GID != 0 {
		m.Mask |= wire.SetGid
		m.Gid = in.Owner.Gid
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		m.Mask |= wire.SetSize
		m.Size = in.Size
	}
	if in.Valid&fuse.FATTR_ATIME != 0 {
		m.Mask |= wire.SetAtime
		m.Atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
		if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
			m.Atime = now
		}
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		m.Mask |= wire.SetKillPriv
	}
	if in.Valid&fuse.FATTR_MTIME != 0 {
		m.Mask |= wire.SetMtime
		m.Mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
		if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
			m.Mtime = now
		}
	}
	resp, _, st := fs.call(cancel, &in.InHeader, m, nil, nil)
	if st != fuse.OK {
		fs.forgetDir(in.NodeId)
		return st
	}
	if m.Mask&wire.SetSize != 0 {
		fs.truncated(in.NodeId, resp.Attr.Trunc)
	}
	fs.toAttr(resp.Attr, &out.Attr)
	fs.attrTimeout(resp.Gen, out)
	fs.noteAttr(resp.Attr, resp.Gen)
	return fuse.OK
}

// create makes a new inode owned by the caller.
func (fs *FS) create(cancel <-chan struct{}, h *fuse.InHeader, m *wire.Msg, out *fuse.EntryOut) fuse.Status {
	m.Uid, m.Gid = h.Uid, h.Gid
	resp, st := fs.nsCall(cancel, h, m)
	if st != fuse.OK {
		return st
	}
	fs.entry(resp, out)
	return fuse.OK
}

// nsCall sends a change of a name in a directory and keeps the directory
// cache in step with it.
func (fs *FS) nsCall(cancel <-chan struct{}, h *fuse.InHeader, m *wire.Msg) (*wire.Msg, fuse.Status) {
	parent, name := m.Parent, m.Name
	if m.Op == wire.OpLink {
		parent, name = m.NewParent, m.NewName
	}
	resp, _, st := fs.call(cancel, h, m, nil, nil)
	if st != fuse.OK {
		fs.forgetDir(parent)
		return resp, st
	}
	added := m.Op != wire.OpUnlink && m.Op != wire.OpRmdir
	var made *wire.Attr
	if m.Op == wire.OpMkdir {
		made = resp.Attr
	}
	var ino uint64
	if resp.Attr != nil {
		ino = resp.Attr.Ino
	}
	fs.changed(parent, name, ino, added, resp.ParentAttr, resp.Gen, made)
	return resp, st
}

// Mknod implements fuse.RawFileSystem: regular files, FIFOs, sockets and
// device files (whose data never reaches sluice: the kernel serves them).
func (fs *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	switch in.Mode & syscall.S_IFMT {
	case 0, syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return fuse.EINVAL
	}
	return fs.create(cancel, &in.InHeader, &wire.Msg{Op: wire.OpMknod, Parent: in.NodeId, Name: name,
		Mode: in.Mode&syscall.S_IFMT | in.Mode&^in.Umask&0o7777, Rdev: in.Rdev, Flags: syscall.O_EXCL}, out)
}

// Mkdir implements fuse.RawFileSystem.
func (fs *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return fs.create(cancel, &in.InHeader, &wire.Msg{Op: wire.OpMkdir, Parent: in.NodeId, Name: name,
		Mode: in.Mode &^ in.Umask & 0o7777}, out)
}

// Symlink implements fuse.RawFileSystem.
func (fs *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return fs.create(cancel, h, &wire.Msg{Op: wire.OpSymlink, Parent: h.NodeId, Name: name, Path: target}, out)
}

// Link implements fuse.RawFileSystem.
func (fs *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return fs.create(cancel, &in.InHeader, &wire.Msg{Op: wire.OpLink, Ino: in.Oldnodeid, NewParent: in.NodeId, NewName: name}, out)
}

// Readlink implements fuse.RawFileSystem.
func (fs *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	resp, _, st := fs.call(cancel, h, &wire.Msg{Op: wire.OpReadlink, Ino: h.NodeId}, nil, nil)
	if st != fuse.OK {
		return nil, st
	}
	return []byte(resp.Path), fuse.OK
}

// Unlink implements fuse.RawFileSystem.
func (fs *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	start := time.Now()
	if fs.wbUnlink(h, h.NodeId, name) {
		fs.met.wbUnlinks.Inc()
		fs.answered(h, wire.OpUnlink, h.NodeId, start, false)
		return fuse.OK
	}
	_, st := fs.nsCall(cancel, h, &wire.Msg{Op: wire.OpUnlink, Parent: h.NodeId, Name: name})
	return st
}

// Rmdir implements fuse.RawFileSystem.
func (fs *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	_, st := fs.nsCall(cancel, h, &wire.Msg{Op: wire.OpRmdir, Parent: h.NodeId, Name: name})
	return st
}

// Rename implements fuse.RawFileSystem.
func (fs *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	_, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpRename, Parent: in.NodeId, Name: oldName,
		NewParent: in.Newdir, NewName: newName, Flags: in.Flags}, nil, nil)
	if st != fuse.OK {
		fs.forgetDir(in.NodeId)
		fs.forgetDir(in.Newdir)
		return st
	}
	fs.renamed(in.NodeId, oldName, in.Newdir, newName, in.Flags&unix.RENAME_EXCHANGE != 0)
	return st
}

// Access implements fuse.RawFileSystem; the kernel checks permissions
// (default_permissions), so only existence is left.
func (fs *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return fuse.OK
}

func (fs *FS) openFlags() uint32 {
	if fs.cfg.CacheData {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
}

// Create implements fuse.RawFileSystem.
func (fs *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	start := time.Now()
	if a, ok := fs.wbCreate(in, name); ok {
		fs.met.wbLocal.Inc()
		fs.answered(&in.InHeader, wire.OpMknod, in.NodeId, start, false)
		fs.entry(&wire.Msg{Attr: a, Gen: fs.feed.sent.Load()}, &out.EntryOut)
		out.Fh = fs.nextFh.Add(1)
		out.OpenFlags = fs.openFlags()
		return fuse.OK
	}
	flags := wire.CreateOpen
	if in.Flags&syscall.O_EXCL != 0 {
		flags |= syscall.O_EXCL
	}
	resp, st := fs.nsCall(cancel, &in.InHeader, &wire.Msg{Op: wire.OpMknod, Parent: in.NodeId, Name: name,
		Mode: in.Mode &^ in.Umask & 0o7777, Flags: flags, Uid: in.Uid, Gid: in.Gid})
	if st != fuse.OK {
		return st
	}
	fs.entry(resp, &out.EntryOut)
	out.Fh = fs.nextFh.Add(1)
	out.OpenFlags = fs.openFlags()
	return fuse.OK
}

// Open implements fuse.RawFileSystem.
func (fs *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	_, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpOpen, Ino: in.NodeId, Flags: in.Flags}, nil, nil)
	if st != fuse.OK {
		return st
	}
	out.Fh = fs.nextFh.Add(1)
	out.OpenFlags = fs.openFlags()
	return fuse.OK
}

// Read implements fuse.RawFileSystem: from a readahead buffer, or
// directly into buf.
func (fs *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	start := time.Now()
	id := fs.ident(&in.InHeader, wire.OpRead)
	fs.wbSettle(in.NodeId)
	// writes in flight that end past the read's start change what it
	// returns: their bytes, or the size it is clamped to
	fs.waitWrites(in.NodeId, in.Offset, ^uint64(0))
	if fs.cfg.Readahead > 0 {
		if rr := fs.readahead(id, in.NodeId, in.Fh, in.Offset, int(in.Size)); rr != nil {
			fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(rr.Size()), start, false)
			return rr, fuse.OK
		}
	}
	_, p, st := fs.callAs(&in.InHeader, id, &wire.Msg{Op: wire.OpRead, Ino: in.NodeId, Offset: in.Offset, Size: uint64(in.Size)}, nil, buf[:in.Size])
	fs.record(&in.InHeader, id, beacon.OpRead, in.NodeId, in.Offset, uint64(len(p)), start, st != fuse.OK)
	if st != fuse.OK {
		return nil, st
	}
	if fs.cfg.Readahead > 0 {
		fs.readPast(in.NodeId, in.Fh, in.Offset+uint64(len(p)))
	}
	return fuse.ReadResultData(p), fuse.OK
}

// Write implements fuse.RawFileSystem: in the background (write-behind)
// unless that is off.
func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	var st fuse.Status
	start := time.Now()
	id := fs.ident(&in.InHeader, wire.OpWrite)
	fs.wbSettle(in.NodeId)
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		if st := fs.killPriv(&in.InHeader, in.NodeId); st != fuse.OK {
			return 0, st
		}
	}
	fs.writing(in.Fh, in.NodeId)
	if fs.cfg.WriteBehind > 0 {
		st = fs.writeBehind(id, in.NodeId, in.Fh, in.Offset, data)
	} else {
		var resp *wire.Msg
		resp, _, st = fs.callAs(&in.InHeader, id, &wire.Msg{Op: wire.OpWrite, Ino: in.NodeId, Offset: in.Offset, Size: uint64(len(data))}, data, nil)
		if st == fuse.OK {
			fs.wrote(in.Fh, resp.Trunc, in.Offset+uint64(len(data)))
		}
	}
	fs.record(&in.InHeader, id, beacon.OpWrite, in.NodeId, in.Offset, uint64(len(data)), start, st != fuse.OK)
	if st != fuse.OK {
		return 0, st
	}
	return uint32(len(data)), fuse.OK
}

// killPriv clears the setuid and setgid bits of a file an unprivileged
// caller writes, if it was seen with them.
func (fs *FS) killPriv(h *fuse.InHeader, ino uint64) fuse.Status {
	fs.pmu.Lock()
	had := fs.priv[ino]
	delete(fs.priv, ino)
	fs.pmu.Unlock()
	if !had {
		return fuse.OK
	}
	_, _, st := fs.call(nil, h, &wire.Msg{Op: wire.OpSetattr, Ino: ino, Mask: wire.SetKillPriv}, nil, nil)
	return st
}

// extent is how far a handle's acknowledged writes reached, in the
// truncation generation they landed in (wire.Attr.Trunc): writes of an
// older generation than a truncate's do not count after it.
type extent struct{ ino, gen, end uint64 }

// writing notes that handle fh writes ino (before the write is sent, so
// its flush waits for it).
func (fs *FS) writing(fh, ino uint64) {
	fs.hmu.Lock()
	if fs.written[fh] == nil {
		fs.written[fh] = &extent{ino: ino}
	}
	fs.hmu.Unlock()
}

// wrote records an acknowledged write of handle fh that reached end in
// truncation generation gen.
func (fs *FS) wrote(fh, gen, end uint64) {
	fs.hmu.Lock()
	if e := fs.written[fh]; e != nil {
		switch {
		case gen > e.gen:
			e.gen, e.end = gen, end
		case gen == e.gen && end > e.end:
			e.end = end
		}
	}
	fs.hmu.Unlock()
}

// truncated voids the extents of ino's handles older than a truncate to
// generation gen made through this mount.
func (fs *FS) truncated(ino, gen uint64) {
	fs.hmu.Lock()
	for _, e := range fs.written {
		if e.ino == ino && gen > e.gen {
			e.gen, e.end = gen, 0
		}
	}
	fs.hmu.Unlock()
}

// extentOf returns handle fh's extent (ok false if it wrote nothing since
// its last flush).
func (fs *FS) extentOf(fh uint64) (extent, bool) {
	fs.hmu.Lock()
	defer fs.hmu.Unlock()
	if e := fs.written[fh]; e != nil {
		return *e, true
	}
	return extent{}, false
}

// Flush implements fuse.RawFileSystem: sizes are reported at close so
// another node that opens the file next sees them (close-to-open).
func (fs *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if _, w := fs.extentOf(in.Fh); !w {
		return fuse.OK
	}
	if st := fs.drain(in.NodeId); st != fuse.OK {
		return st
	}
	e, _ := fs.extentOf(in.Fh)
	_, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpFlush, Ino: in.NodeId, Size: e.end, Trunc: e.gen}, nil, nil)
	if st == fuse.OK {
		fs.hmu.Lock()
		if cur := fs.written[in.Fh]; cur != nil && *cur == e {
			delete(fs.written, in.Fh)
		}
		fs.hmu.Unlock()
	}
	return st
}

// Fsync implements fuse.RawFileSystem: durable on the tier's medium.
func (fs *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if st := fs.drain(in.NodeId); st != fuse.OK {
		return st
	}
	e, _ := fs.extentOf(in.Fh)
	_, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpFsync, Ino: in.NodeId, Size: e.end, Trunc: e.gen}, nil, nil)
	return st
}

// Release implements fuse.RawFileSystem.
func (fs *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	fs.waitWrites(in.NodeId, 0, 0)
	fs.iomu.Lock()
	fs.dropReadaheadLocked(in.NodeId, in.Fh)
	fs.iomu.Unlock()
	fs.hmu.Lock()
	delete(fs.written, in.Fh)
	fs.hmu.Unlock()
	if fs.wbRelease(in.NodeId) {
		return
	}
	fs.call(nil, &in.InHeader, &wire.Msg{Op: wire.OpRelease, Ino: in.NodeId}, nil, nil)
}

// OpenDir implements fuse.RawFileSystem: it snapshots the listing, which
// ReadDir then serves by offset.
func (fs *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	entries := []wire.DirEntry{{Name: ".", Ino: in.NodeId, Mode: syscall.S_IFDIR}, {Name: "..", Ino: 1, Mode: syscall.S_IFDIR}}
	after := ""
	first, gen := true, uint64(0) // a listing of one reply is complete as of gen
	for {
		resp, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpReaddir, Ino: in.NodeId, Name: after, Size: 4096}, nil, nil)
		if st != fuse.OK {
			return st
		}
		entries = append(entries, resp.Entries...)
		if after == "" {
			gen = resp.Gen
		}
		if len(resp.Entries) < 4096 {
			break
		}
		first = false
		after = resp.Entries[len(resp.Entries)-1].Name
	}
	if first {
		fs.listed(in.NodeId, entries[2:], gen)
	}
	fh := fs.nextFh.Add(1)
	fs.dmu.Lock()
	fs.dirs[fh] = entries
	fs.dmu.Unlock()
	out.Fh = fh
	return fuse.OK
}

// ReadDir implements fuse.RawFileSystem.
func (fs *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	fs.dmu.Lock()
	entries := fs.dirs[in.Fh]
	fs.dmu.Unlock()
	for i := int(in.Offset); i < len(entries); i++ {
		e := entries[i]
		if !out.AddDirEntry(fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode, Off: uint64(i + 1)}) {
			break
		}
	}
	return fuse.OK
}

// ReleaseDir implements fuse.RawFileSystem.
func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) {
	fs.dmu.Lock()
	delete(fs.dirs, in.Fh)
	fs.dmu.Unlock()
}

// FsyncDir implements fuse.RawFileSystem.
func (fs *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	_, _, st := fs.call(cancel, &in.InHeader, &wire.Msg{Op: wire.OpFsync, Ino: in.NodeId}, nil, nil)
	return st
}

// StatFs implements fuse.RawFileSystem: the tiers' total capacity.
func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	resp, _, st := fs.call(cancel, h, &wire.Msg{Op: wire.OpStatfs}, nil, nil)
	if st != fuse.OK {
		return st
	}
	const bs = 4096
	out.Bsize, out.Frsize = bs, bs
	out.Blocks = resp.Cap / bs
	free := uint64(0)
	if resp.Cap > resp.Used {
		free = (resp.Cap - resp.Used) / bs
	}
	out.Bfree, out.Bavail = free, free
	out.Files = 1 << 40
	out.Ffree = 1 << 40
	out.NameLen = 255
	return fuse.OK
}

type clientMetrics struct {
	requests  *prometheus.CounterVec   // op
	latency   *prometheus.HistogramVec // op
	local     prometheus.Counter       // answered from the directory cache
	wbLocal   prometheus.Counter       // creates answered here (write-back)
	wbUnlinks prometheus.Counter       // removals answered here (write-back)
}

func newClientMetrics(reg prometheus.Registerer, fs *FS) clientMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := clientMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_client_requests_total",
			Help: "File system operations served by the mount, as the application saw them."}, []string{"op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_client_request_duration_seconds",
			Help: "Latency of file system operations as the application saw them.", Buckets: prometheus.ExponentialBuckets(5e-6, 2, 22)}, []string{"op"}),
		local: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_dircache_hits_total",
			Help: "Directory getattrs and lookups of absent names answered by the mount without a round trip."}),
		wbLocal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_writeback_creates_total",
			Help: "Creates answered by the mount and sent to the metadata service in batches."}),
		wbUnlinks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_writeback_unlinks_total",
			Help: "Removals answered by the mount and sent to the metadata service in batches."}),
	}
	stream := func(name, help string, v func() int64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			fs.iomu.Lock()
			defer fs.iomu.Unlock()
			return float64(v())
		})
	}
	reg.MustRegister(m.requests, m.latency, m.local, m.wbLocal, m.wbUnlinks,
		stream("sluice_client_writebehind_bytes", "Bytes of writes in flight in the background.", func() int64 { return fs.wbBytes }),
		stream("sluice_client_readahead_bytes", "Bytes held in readahead buffers.", func() int64 { return fs.raBytes }))
	return m
}
