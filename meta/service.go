package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/faultpoint"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/layout"
	"github.com/sluice-hpc/sluice/meta/dirtree"
	"github.com/sluice-hpc/sluice/meta/drops"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/localdirs"
	"github.com/sluice-hpc/sluice/meta/qosrules"
	"github.com/sluice-hpc/sluice/policy/place"
)

// RootIno is the inode number of the root directory.
const RootIno = api.RootIno

var errCorrupt = errors.New("meta: corrupt record")

// Config configures a Service.
type Config struct {
	Engine engine.Engine
	Log    *slog.Logger
	Now    func() time.Time
	Secret []byte // to reach data servers
	// Holds, if set, says whether this server's term is on (an engine
	// several metadata servers share: engine.Elector); off, it sends
	// nothing to data servers, so one stopped past its lease that runs
	// again does not act on them before it stops.
	Holds func() bool
	// Defaults for the root directory; new files inherit their parent's.
	ChunkSize, StripeCnt, StripeUnit uint32
	// Timeout for calls to data servers (default 30 s).
	Timeout time.Duration
	// HeartbeatTTL: a daemon not heard from for this long is dead.
	HeartbeatTTL time.Duration
	// Metrics receives the service's Prometheus series (nil: not exported).
	Metrics prometheus.Registerer
	// Copies is how many copies new chunks keep per tier, by tier name
	// (missing or below 2: one; "mem": 2 is `--mem-replicas 2`). Two is
	// the most kept today.
	Copies map[string]int
	// Placement ranks a tier's servers for a new chunk (policy/place;
	// default perf).
	Placement place.Policy
	// MaxOps caps the namespace operations served per second (0: none):
	// an emulated metadata server's capacity, for experiments that make
	// it the scarce resource (docs/nodelocal.md).
	MaxOps float64
	// ReclaimWait is how long after its start the service waits for
	// mounts to reclaim their open handles before it removes files
	// unlinked while open that nobody reclaimed (opens.go; default
	// ReclaimWait).
	ReclaimWait time.Duration
}

// Service implements the metadata operations.
type Service struct {
	cfg Config
	e   engine.Engine
	log *slog.Logger
	now func() time.Time

	// mu serialises every namespace mutation (read-modify-write of several
	// keys committed as one batch). Reads go to the engine without it:
	// batches are atomic, so readers see all of a mutation or none.
	mu    sync.Mutex
	opens openTable // guarded by mu: open handles per inode and client (opens.go)
	// grace is the period after the start in which mounts reclaim their
	// handles (opens.go): until when, for the inodes numbered before the
	// start. Set in New.
	grace struct {
		until   time.Time
		lastIno uint64
	}
	// faults are the pause points crash tests arm (OpFault)
	faults faultpoint.Points
	// activity is each file's open/close history (activity.go). Guarded
	// by mu.
	activity map[uint64]*activity
	// moving holds the chunk migrations this process coordinates now
	// (move.go). Guarded by mu.
	moving map[chunkRef]bool

	reg registry
	met serviceMetrics
	// typed answers the typed operations (handler.go Serve), set once in New
	typed *rpc.Table

	// stalledMu guards stalled, the chunk allocations waiting now for
	// room per tier and file (alloc.go waitStalled), and onStall.
	stalledMu sync.Mutex
	stalled   map[string]map[uint64]int
	onStall   func(tier string)
	// drops is the replica drops owed to data servers (meta/drops), on
	// the same engine, committed with the layout changes that owe them
	drops *drops.Drops
	// dropMu is held while drops are delivered (replica.go deliverDrops).
	dropMu sync.Mutex
	// shortMu guards shortFrom, the chunk location the next ShortChunks
	// reads from (nil: the first).
	shortMu   sync.Mutex
	shortFrom []byte
	// qos is the cluster's QoS rules (meta/qosrules), on the same engine
	qos *qosrules.Rules

	gcKick chan struct{}
	feed   feed             // changes for mounts' caches (feed.go)
	deleg  delegs           // directories whose creates a mount makes itself (deleg.go)
	locks  lockState        // file locks across mounts (locks.go)
	ops    *throttle.Bucket // MaxOps (nil: none)
	local  *localdirs.Dirs  // local-mode directories (meta/localdirs)
}

// New opens the service on cfg.Engine, creating the root directory on first
// use.
func New(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = layout.DefaultChunkSize
	}
	if cfg.StripeCnt == 0 {
		cfg.StripeCnt = 1
	}
	if cfg.Placement == "" {
		cfg.Placement = place.Perf
	}
	if cfg.StripeUnit == 0 {
		cfg.StripeUnit = layout.DefaultStripeUnit
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.HeartbeatTTL == 0 {
		cfg.HeartbeatTTL = 5 * time.Second
	}
	if cfg.ReclaimWait == 0 {
		cfg.ReclaimWait = ReclaimWait
	}
	s := &Service{cfg: cfg, e: cfg.Engine, log: cfg.Log, now: cfg.Now,
		activity: map[uint64]*activity{}, moving: map[chunkRef]bool{}, stalled: map[string]map[uint64]int{}, gcKick: make(chan struct{}, 1), met: newServiceMetrics(cfg.Metrics)}
	s.drops = drops.Open(cfg.Engine)
	s.opens.init()
	s.locks.init()
	s.reg.init(s)
	s.feed.init(s.now())
	s.deleg.dir, s.deleg.cool = map[uint64]*delegation{}, map[uint64]time.Time{}
	if _, err := s.getInode(RootIno); errors.Is(err, syscall.ENOENT) {
		t := s.now().UnixNano()
		root := &inode{Attr: wire.Attr{Ino: RootIno, Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
			Atime: t, Mtime: t, Ctime: t, ChunkSize: cfg.ChunkSize, StripeCnt: cfg.StripeCnt,
			StripeUnit: cfg.StripeUnit}}
		var b engine.Batch
		b.Set(inodeKey(RootIno), root.encode())
		b.Set(counterKey("ino"), binary.BigEndian.AppendUint64(nil, RootIno))
		if err := s.e.Apply(&b, true); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	var err error
	if s.qos, err = qosrules.Open(s.e); err != nil {
		return nil, err
	}
	if err := s.restoreDelegs(); err != nil {
		return nil, err
	}
	s.local = localdirs.Open(localdirs.Config{Engine: s.e, Dir: s.Dir, Servers: s.Servers})
	if cfg.MaxOps > 0 {
		s.ops = throttle.New(cfg.MaxOps, cfg.MaxOps/20, cfg.Now)
	}
	if err := s.reg.load(); err != nil {
		return nil, err
	}
	// the files mounts may hold open from before the start (orphans
	// among them) wait for the mounts' reclaims (opens.go)
	v, err := s.e.Get(counterKey("ino"))
	if err != nil {
		return nil, err
	}
	s.grace.lastIno, s.grace.until = binary.BigEndian.Uint64(v), s.now().Add(cfg.ReclaimWait)
	s.typed = &rpc.Table{Name: "metadata service", Observe: s.met.observe}
	s.Serve(s.typed)
	return s, nil
}

// Invoke serves a typed operation of the service in the caller's process
// (rpc.Table.Invoke): code in the metadata daemon, and tests, call the
// service as a remote caller does.
func (s *Service) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	return s.typed.Invoke(ctx, op, req, rep, payload, into)
}

var _ rpc.Invoker = (*Service)(nil)

// fault arms or releases a pause point (api.Fault; crash tests): "move-committed" holds a migration after its
// commit, before the servers hear of it.
func (s *Service) fault(f *api.FaultReq) error {
	switch f.Kind {
	case api.FaultPause:
		s.faults.Arm(f.Point)
	case api.FaultResume:
		s.faults.Release(f.Point)
	default:
		return errno(syscall.EINVAL, "unknown fault %q for the metadata service", f.Kind)
	}
	s.log.Warn("fault injected", "fault", f.Kind, "point", f.Point)
	return nil
}

func errno(e syscall.Errno, format string, args ...any) error {
	return rpc.Errorf(e, format, args...)
}

func (s *Service) getInode(ino uint64) (*inode, error) {
	b, err := s.e.Get(inodeKey(ino))
	if errors.Is(err, engine.ErrNotFound) {
		return nil, errno(syscall.ENOENT, "inode %d not found", ino)
	}
	if err != nil {
		return nil, err
	}
	return decodeInode(b)
}

func (s *Service) lookupEntry(parent uint64, name string) (uint64, uint32, error) {
	b, err := s.e.Get(dentryKey(parent, name))
	if errors.Is(err, engine.ErrNotFound) {
		return 0, 0, errno(syscall.ENOENT, "%q not found in directory %d", name, parent)
	}
	if err != nil {
		return 0, 0, err
	}
	return decodeDentry(b)
}

func (s *Service) getDir(ino uint64) (*inode, error) {
	d, err := s.getInode(ino)
	if err != nil {
		return nil, err
	}
	if d.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, errno(syscall.ENOTDIR, "inode %d is not a directory", ino)
	}
	return d, nil
}

// nextInoLocked allocates an inode number. Caller holds mu and commits b.
func (s *Service) nextInoLocked(b *engine.Batch) (uint64, error) {
	v, err := s.e.Get(counterKey("ino"))
	if err != nil {
		return 0, err
	}
	ino := binary.BigEndian.Uint64(v) + 1
	b.Set(counterKey("ino"), binary.BigEndian.AppendUint64(nil, ino))
	return ino, nil
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return errno(syscall.EINVAL, "invalid name %q", name)
	}
	if len(name) > wire.NameMax {
		return errno(syscall.ENAMETOOLONG, "name too long")
	}
	return nil
}

func isDir(mode uint32) bool { return mode&syscall.S_IFMT == syscall.S_IFDIR }

// Lookup resolves name in parent.
func (s *Service) Lookup(parent uint64, name string) (*wire.Attr, error) {
	if len(name) > wire.NameMax {
		return nil, errno(syscall.ENAMETOOLONG, "name too long")
	}
	if name == "." || name == ".." {
		// the kernel asks so for an inode known only by number (a file
		// handle: open_by_handle_at, an NFS re-export)
		return s.lookupDots(parent, name)
	}
	ino, _, err := s.lookupEntry(parent, name)
	if err != nil {
		return nil, err
	}
	n, err := s.getInode(ino)
	if err != nil {
		return nil, err
	}
	return &n.Attr, nil
}

// lookupDots answers "." (ino itself) and ".." (its parent directory) of
// directory or file ino.
func (s *Service) lookupDots(ino uint64, name string) (*wire.Attr, error) {
	n, err := s.getInode(ino)
	if err != nil || name == "." {
		if err != nil {
			return nil, errno(syscall.ESTALE, "inode %d is gone", ino)
		}
		return &n.Attr, nil
	}
	if !isDir(n.Mode) {
		return nil, errno(syscall.ENOTDIR, "inode %d is not a directory", ino)
	}
	p := n.Parent
	if ino == RootIno || p == 0 {
		p = RootIno
	}
	pn, err := s.getInode(p)
	if err != nil {
		return nil, errno(syscall.ESTALE, "the parent of inode %d is gone", ino)
	}
	return &pn.Attr, nil
}

// Getattr returns an inode's attributes.
func (s *Service) Getattr(ino uint64) (*wire.Attr, error) {
	n, err := s.getInode(ino)
	if err != nil {
		return nil, err
	}
	return &n.Attr, nil
}

// Create makes a file, directory, symlink, FIFO, socket or device file
// (rdev) named name in parent. For a regular file without excl an existing
// file is returned instead.
func (s *Service) Create(parent uint64, name string, mode, uid, gid uint32, target string, excl bool, rdev uint32, reply ...*engine.Batch) (*wire.Attr, error) {
	return s.CreateUnmasked(parent, name, mode, mode, uid, gid, target, excl, rdev, reply...)
}

// CreateUnmasked is Create with the permission bits asked for before the
// caller's umask (unmasked): a directory with a default ACL gives its
// new entries that ACL cut to them instead of mode's (acl.go).
func (s *Service) CreateUnmasked(parent uint64, name string, mode, unmasked, uid, gid uint32, target string, excl bool, rdev uint32, reply ...*engine.Batch) (*wire.Attr, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.getDir(parent)
	if err != nil {
		return nil, err
	}
	if ino, m, err := s.lookupEntry(parent, name); err == nil {
		if excl || mode&syscall.S_IFMT != syscall.S_IFREG || m&syscall.S_IFMT != syscall.S_IFREG {
			return nil, errno(syscall.EEXIST, "%q exists", name)
		}
		n, err := s.getInode(ino)
		if err != nil {
			return nil, err
		}
		return &n.Attr, nil
	} else if !errors.Is(err, syscall.ENOENT) {
		return nil, err
	}
	var b engine.Batch
	ino, err := s.nextInoLocked(&b)
	if err != nil {
		return nil, err
	}
	t := s.now().UnixNano()
	n := &inode{Attr: wire.Attr{Ino: ino, Mode: mode, Nlink: 1, Uid: uid, Gid: gid,
		Atime: t, Mtime: t, Ctime: t, ChunkSize: dir.ChunkSize, StripeCnt: dir.StripeCnt,
		StripeUnit: dir.StripeUnit}, Parent: parent, Name: name}
	if dir.Mode&syscall.S_ISGID != 0 {
		n.Gid = dir.Gid
		if isDir(mode) {
			n.Mode |= syscall.S_ISGID
		}
	}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		n.Nlink = 2
		dir.Nlink++
	case syscall.S_IFLNK:
		n.Target = target
		n.Size = uint64(len(target))
		n.Mode = syscall.S_IFLNK | 0o777
	case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK:
	case syscall.S_IFCHR, syscall.S_IFBLK:
		n.Rdev = rdev
	default:
		return nil, errno(syscall.EPERM, "unsupported file type %o", mode&syscall.S_IFMT)
	}
	if err := s.inheritACLLocked(&b, parent, n, unmasked); err != nil {
		return nil, err
	}
	dir.Mtime, dir.Ctime = t, t
	b.Set(inodeKey(ino), n.encode())
	b.Set(dentryKey(parent, name), encodeDentry(ino, n.Mode))
	b.Set(inodeKey(parent), dir.encode())
	withReply(&b, reply)
	if err := s.e.Apply(&b, false); err != nil {
		return nil, err
	}
	return &n.Attr, nil
}

// dropLinkLocked removes one link of n in batch b; when the last link goes
// the inode becomes an orphan (still open) or garbage.
func (s *Service) dropLinkLocked(b *engine.Batch, n *inode, t int64) {
	if isDir(n.Mode) {
		n.Nlink = 0
	} else if n.Nlink > 0 {
		n.Nlink--
	}
	n.Ctime = t
	if n.Nlink > 0 {
		b.Set(inodeKey(n.Ino), n.encode())
		return
	}
	if s.opens.total[n.Ino] > 0 || !isDir(n.Mode) && s.inGrace(n.Ino) {
		b.Set(inodeKey(n.Ino), n.encode())
		b.Set(orphanKey(n.Ino), nil)
		return
	}
	b.Del(inodeKey(n.Ino))
	b.Set(garbageKey(n.Ino), nil)
}

// Remove unlinks a file (dir false) or removes an empty directory (dir
// true). reply, if any, is committed with it (replies.go).
func (s *Service) Remove(parent uint64, name string, dir bool, reply ...*engine.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd, err := s.getDir(parent)
	if err != nil {
		return err
	}
	ino, _, err := s.lookupEntry(parent, name)
	if err != nil {
		return err
	}
	n, err := s.getInode(ino)
	if err != nil {
		return err
	}
	if dir && !isDir(n.Mode) {
		return errno(syscall.ENOTDIR, "%q is not a directory", name)
	}
	if !dir && isDir(n.Mode) {
		return errno(syscall.EISDIR, "%q is a directory", name)
	}
	if dir {
		if s.hasEntries(ino) {
			return errno(syscall.ENOTEMPTY, "directory %q not empty", name)
		}
		pd.Nlink--
	}
	oldPath := s.pfsPathLocked(ino, parent, name)
	t := s.now().UnixNano()
	var b engine.Batch
	b.Del(dentryKey(parent, name))
	if dir {
		b.Del(delegKey(ino)) // a delegation of it ends with it
	}
	pd.Mtime, pd.Ctime = t, t
	s.dropLinkLocked(&b, n, t)
	b.Set(inodeKey(parent), pd.encode())
	withReply(&b, reply)
	if err := s.e.Apply(&b, false); err != nil {
		return err
	}
	if dir {
		s.dropDeleg(ino) // a delegation of it ends with it
	}
	s.pfsUnlink(oldPath)
	s.kickGC()
	return nil
}

func (s *Service) hasEntries(ino uint64) bool {
	found := false
	s.e.Scan(dentryPrefix(ino), nil, func(_, _ []byte) bool {
		found = true
		return false
	})
	return found
}

// Link adds newParent/newName as another name of ino. reply, if any, is
// committed with it (replies.go).
func (s *Service) Link(ino, newParent uint64, newName string, reply ...*engine.Batch) (*wire.Attr, error) {
	if err := validName(newName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.getDir(newParent)
	if err != nil {
		return nil, err
	}
	n, err := s.getInode(ino)
	if err != nil {
		return nil, err
	}
	if isDir(n.Mode) {
		return nil, errno(syscall.EPERM, "cannot hard-link a directory")
	}
	if n.Nlink == 0 {
		return nil, errno(syscall.ENOENT, "inode %d was deleted", ino)
	}
	if _, _, err := s.lookupEntry(newParent, newName); err == nil {
		return nil, errno(syscall.EEXIST, "%q exists", newName)
	}
	t := s.now().UnixNano()
	n.Nlink++
	n.Ctime = t
	dir.Mtime, dir.Ctime = t, t
	var b engine.Batch
	b.Set(inodeKey(ino), n.encode())
	b.Set(dentryKey(newParent, newName), encodeDentry(ino, n.Mode))
	b.Set(inodeKey(newParent), dir.encode())
	withReply(&b, reply)
	if err := s.e.Apply(&b, false); err != nil {
		return nil, err
	}
	return &n.Attr, nil
}

// Readlink returns a symlink's target.
func (s *Service) Readlink(ino uint64) (string, error) {
	n, err := s.getInode(ino)
	if err != nil {
		return "", err
	}
	if n.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", errno(syscall.EINVAL, "inode %d is not a symlink", ino)
	}
	return n.Target, nil
}

// Readdir lists up to max entries of a directory after the name after.
func (s *Service) Readdir(ino uint64, after string, max int) ([]wire.DirEntry, error) {
	if _, err := s.getDir(ino); err != nil {
		return nil, err
	}
	if max <= 0 || max > 4096 {
		max = 4096
	}
	pre := dentryPrefix(ino)
	var start []byte
	if after != "" {
		start = append(dentryKey(ino, after), 0)
	}
	var out []wire.DirEntry
	var derr error
	s.e.Scan(pre, start, func(k, v []byte) bool {
		cino, mode, err := decodeDentry(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, wire.DirEntry{Name: string(k[len(pre):]), Ino: cino, Mode: mode})
		return len(out) < max
	})
	return out, derr
}

// Open records an open handle of client (a mount's id, or 0) on ino, so
// an unlink keeps its data until the last Release.
func (s *Service) Open(client, ino uint64) (*wire.Attr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.getInode(ino)
	if err != nil {
		return nil, err
	}
	if s.opens.open(client, ino) {
		s.openedLocked(ino, s.now())
	}
	return &n.Attr, nil
}

// Release drops an open handle of client; the last one of an unlinked
// file frees it.
func (s *Service) Release(client, ino uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opens.release(client, ino) {
		return nil
	}
	s.closedLocked(ino, s.now())
	return s.dropOrphanLocked(ino)
}

// Sync makes every acknowledged metadata change durable on the medium.
func (s *Service) Sync() error { return s.e.Sync() }

var _ dirtree.Namespace = (*Service)(nil)

// Dir fails unless ino is a directory (ENOENT, ENOTDIR): the namespace as
// the metadata daemon's other services see it (meta/dirtree).
func (s *Service) Dir(ino uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.getDir(ino)
	return err
}

// Parent is ino's primary parent (0 for the root).
func (s *Service) Parent(ino uint64) (uint64, error) {
	if ino == RootIno {
		return 0, nil
	}
	n, err := s.getInode(ino)
	if err != nil {
		return 0, err
	}
	return n.Parent, nil
}
