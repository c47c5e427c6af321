// Package client is the compute-node side of sluice (LWFS-Client): the
// go-fuse adapter (raw API) of a mount. Each go-fuse method translates the
// kernel's request into one call of the client core (client/vfs.FS: the
// caller's credentials, the operation's arguments) and its answer into
// the kernel's reply; the core does the work (streams, caches, write-back
// creates and closes, routing, the change feed). The adapter owns what is
// the kernel's business: the mount and its options, the kernel's cache
// invalidations (a vfs.Notifier over the FUSE server), the replies that
// splice from a pipe, and the operations' metrics and Beacon records.
// Permission checks are the kernel's (default_permissions) against the
// caller's uid and gid.
//
// Files: client.go (set-up), serve.go (a mount served until it ends), ops.go
// (the go-fuse methods), locks.go (file locks), xattr.go, metrics.go.
//
// It holds no durable state and never talks to data servers.
package client

import (
	"cmp"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/client/vfs"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Config configures a mount: the core's configuration and the adapter's.
type Config struct {
	vfs.Config
	Mountpoint string
	// Monitor records every operation as the application saw it, for
	// Beacon (nil: off); Ship sends its windows through the forwarding
	// node.
	Monitor *beacon.Collector
	// Metrics receives the client's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	Debug   bool
	// Source is the mount's source as the mount table shows it (its
	// fsname; default "sluice"): mount(8), findmnt -S and fstab find the
	// mount by it.
	Source string
	// Options are mount options for the kernel: ro, dev, suid, exec and
	// their negations (default: rw, nodev, nosuid).
	Options []string
}

// FS is the FUSE file system.
type FS struct {
	fuse.RawFileSystem
	cfg Config
	log *slog.Logger
	v   *vfs.FS
	met clientMetrics
	// srv is the FUSE server (set by Mount)
	srv atomic.Pointer[fuse.Server]
}

// New connects to the forwarding node.
func New(ctx context.Context, cfg Config) (*FS, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	fs := &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), cfg: cfg, log: cfg.Log}
	fs.met = newClientMetrics(cfg.Metrics)
	core := cfg.Config
	core.Record = fs.record
	if core.ReadOnly == nil && cfg.Mountpoint != "" {
		core.ReadOnly = readOnly(cfg.Mountpoint)
	}
	v, err := vfs.New(ctx, core)
	if err != nil {
		return nil, err
	}
	fs.v = v
	fs.met.register(cfg.Metrics, v)
	return fs, nil
}

// Join takes the change feed's position before the mount serves its
// first request (vfs.FS.Join; call it before Mount).
func (fs *FS) Join(ctx context.Context) { fs.v.Join(ctx) }

// Follow follows the metadata service's change feed until ctx ends,
// dropping from the kernel's caches what other nodes change
// (vfs.FS.Follow).
func (fs *FS) Follow(ctx context.Context, srv *fuse.Server) {
	fs.v.SetNotifier(kernel{srv})
	fs.v.Follow(ctx)
}

// kernel drops entries of the kernel's caches through the FUSE server.
type kernel struct{ srv *fuse.Server }

func (k kernel) EntryNotify(parent uint64, name string) { k.srv.EntryNotify(parent, name) }
func (k kernel) AttrNotify(ino uint64)                  { k.srv.InodeNotify(ino, -1, 0) }
func (k kernel) DataNotify(ino uint64)                  { k.srv.InodeNotify(ino, 0, 0) }

var _ vfs.Notifier = kernel{}

// Mount mounts fs and returns the running server (Serve runs in the
// background; Wait blocks until unmount).
func (fs *FS) Mount() (*fuse.Server, error) {
	opts := &fuse.MountOptions{
		AllowOther:    true,
		Options:       append([]string{"default_permissions"}, fs.cfg.Options...),
		MaxWrite:      1 << 20,
		MaxBackground: 64,
		FsName:        cmp.Or(fs.cfg.Source, "sluice"),
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
		// write by an unprivileged caller to the file system; mappings of
		// files opened with direct I/O go through the page cache
		// (docs/architecture.md "Memory-mapped files")
		// (docs/architecture.md "Memory-mapped files"); the umask is
		// the file system's to apply (a default ACL replaces it)
		// (SETXATTR_EXT: the kernel says when an ACL's setting clears
		// set-group-ID; EXPORT_SUPPORT: file handles, which the kernel
		// resolves by looking up "." and ".." of an inode number)
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_DONT_MASK | fuse.CAP_SETXATTR_EXT |
			fuse.CAP_EXPORT_SUPPORT,
		// POSIX ACLs: the kernel checks permissions against them, the
		// metadata service keeps them (meta/acl.go)
		EnableAcl: true,
		// POSIX, OFD and flock locks are the metadata service's, across
		// mounts (client/locks.go)
		EnableLocks: true,
	}
	srv, err := fuse.NewServer(fs, fs.cfg.Mountpoint, opts)
	if err != nil {
		return nil, err
	}
	fs.srv.Store(srv)
	fs.v.SetNotifier(kernel{srv})
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	if !fs.cfg.CacheData && srv.KernelSettings().Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP == 0 {
		fs.log.Warn("this kernel cannot map files opened with direct I/O (FUSE's DIRECT_IO_ALLOW_MMAP, Linux 6.6): mmap of a file fails with ENODEV; mount with --cache-data to map files")
	}
	return srv, nil
}

// Ship sends the monitor's records through the forwarding node until ctx
// ends.
func (fs *FS) Ship(ctx context.Context) {
	if fs.cfg.Monitor != nil {
		beaconrpc.Ship(ctx, fs.cfg.Monitor, fs.v.Home(), fs.log)
	}
}

// Close sends the creates not yet sent and the closes' reports on their
// way, drops the connections and gives back the block cache's memory.
func (fs *FS) Close() { fs.v.Close() }

func (fs *FS) String() string { return "sluice" }

// record counts an operation as the application saw it and gives it to
// the monitor (vfs.Config.Record).
func (fs *FS) record(c vfs.Cred, id ident.ID, op wire.Op, ino, off, size uint64, start time.Time, failed bool) {
	name := beaconrpc.OpName(op)
	if name == "" {
		return
	}
	lat := fs.cfg.Now().Sub(start)
	fs.met.requests.WithLabelValues(name).Inc()
	fs.met.latency.WithLabelValues(name).Observe(lat.Seconds())
	if fs.cfg.Monitor == nil {
		return
	}
	fs.cfg.Monitor.Add(beacon.Op{Start: start, Who: id, Uid: c.Uid,
		Name: name, Ino: ino, Off: off, Size: size, Lat: lat, Err: failed})
}
