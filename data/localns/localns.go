// Package localns is a data server's node-local namespace
// (docs/nodelocal.md): the entries of local-mode directories that hash to
// this server, and everything under them, kept as plain directories and
// files in the server's own file system. It answers the namespace and data
// operations a forwarding daemon relays for local inodes (wire.IsLocal)
// with the replies the metadata service would give, so the mount treats
// them like any other file; no request for them reaches the metadata
// service.
//
// It owns that directory tree and the map from its inode numbers to
// paths; it must not touch the tier's chunk store or call other servers.
// Permissions are the kernel's (the mount uses default_permissions):
// files are created with the caller's uid and gid, and their attributes
// are what the file system holds. On top of them a private directory
// belongs to the job (or node) that made it and is read-only to everyone
// else (writable); it owns those owner records too.
package localns

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Beside is where a data server whose chunk store is in dir keeps its
// local namespace: a sibling directory (DIR-local), so it never mixes with
// the store's files.
func Beside(dir string) string { return filepath.Clean(dir) + "-local" }

// NS is one data server's local namespace.
type NS struct {
	root string
	id   func() uint64 // the server's id, which its inode numbers carry

	mu sync.Mutex
	// paths maps a file's number (wire.LocalNum) to its path under root,
	// learnt from every reply that names it; guarded by mu.
	paths map[uint64]string
	// owners caches the owner of each private directory (by its key,
	// "DIRINO/NAME"; "" when none is recorded), read from and written to
	// the owners directory beside the tree; guarded by mu.
	owners map[string]string
}

// ownersDir holds the owner of every private directory (a file per
// directory, OWNERS/DIRINO/NAME, holding ownerOf of its maker): beside
// the local-mode directories, whose names are inode numbers.
const ownersDir = ".owners"

// ownerOf is who owns what request m makes: its batch job ("job:ID") when
// it runs in one — every node of the job, a replacement node or the job
// requeued under the same id writes there — else its compute node
// ("node:NAME"); "" when the request names neither.
func ownerOf(m *wire.Msg) string {
	switch {
	case m.Job != "":
		return "job:" + m.Job
	case m.Node != "":
		return "node:" + m.Node
	}
	return ""
}

// New opens the namespace kept under root. The
// files already there are numbered again as before (their inode numbers
// in the server's file system), so a mount's inodes stay valid across a
// restart of the server.
// The directory is made when the first local entry is (a server no
// local-mode directory uses leaves nothing behind).
func New(root string, id func() uint64) (*NS, error) {
	n := &NS{root: root, id: id, paths: map[uint64]string{}, owners: map[string]string{}}
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return n, nil
	}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		if d.IsDir() && d.Name() == ownersDir && filepath.Dir(p) == root {
			return filepath.SkipDir
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			n.paths[st.Ino&(1<<48-1)] = p
		}
		return nil
	})
	return n, err
}

// Handles says whether request m is for the local namespace: it names a
// local inode, or it is an entry operation the metadata service
// redirected here (its directory is a local-mode directory).
func Handles(m *wire.Msg) bool {
	return wire.IsLocal(m.Ino) || wire.IsLocal(m.Parent) || m.Flags&wire.LocalRedirect != 0 && namesEntry(m.Op)
}

func namesEntry(op wire.Op) bool {
	switch op {
	case wire.OpLookup, wire.OpMknod, wire.OpMkdir, wire.OpSymlink, wire.OpUnlink, wire.OpRmdir, wire.OpReaddir:
		return true
	}
	return false
}

// errno makes an rpc error of a file system error.
func errno(err error) error {
	if err == nil {
		return nil
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return rpc.Errorf(e, "local namespace: %v", err)
	}
	return rpc.Errorf(syscall.EIO, "local namespace: %v", err)
}

// dir is the path of directory ino: a local inode's, or the top of a
// local-mode directory of the global namespace (made on first use).
func (n *NS) dir(ino uint64) (string, error) {
	if !wire.IsLocal(ino) {
		p := filepath.Join(n.root, strconv.FormatUint(ino, 10))
		return p, os.MkdirAll(p, 0o755)
	}
	return n.path(ino)
}

// path is the path of local inode ino.
func (n *NS) path(ino uint64) (string, error) {
	if s := wire.LocalServer(ino); s != n.id() {
		return "", rpc.Errorf(syscall.EXDEV, "local inode %#x is served by data server %d, not %d", ino, s, n.id())
	}
	n.mu.Lock()
	p, ok := n.paths[wire.LocalNum(ino)]
	n.mu.Unlock()
	if !ok {
		return "", rpc.Errorf(syscall.ESTALE, "local inode %#x unknown here (the server restarted?): look it up again", ino)
	}
	return p, nil
}

// entry is path name in directory ino, refusing names that leave it.
func (n *NS) entry(ino uint64, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return "", rpc.Errorf(syscall.EINVAL, "local namespace: bad name %q", name)
	}
	d, err := n.dir(ino)
	if err != nil {
		return "", errno(err)
	}
	return filepath.Join(d, name), nil
}

// attr stats p and remembers its number.
func (n *NS) attr(p string) (*wire.Attr, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil, errno(err)
	}
	num := st.Ino & (1<<48 - 1)
	// a file known by another name that is still it (a hard link) keeps
	// that name: removing this one then leaves the file's number valid
	n.mu.Lock()
	cur, known := n.paths[num]
	n.mu.Unlock()
	if !known || cur != p && stat(cur) != (entryOf{num: num, dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR, ok: true}) {
		n.mu.Lock()
		n.paths[num] = p
		n.mu.Unlock()
	}
	return &wire.Attr{Ino: wire.LocalIno(n.id(), num), Mode: st.Mode, Nlink: uint32(st.Nlink), Uid: st.Uid, Gid: st.Gid,
		Size: uint64(st.Size), Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
		ChunkSize: 1 << 20, StripeCnt: 1, Rdev: uint32(st.Rdev)}, nil
}

// entryOf is what the map holds of path p: its number and whether it is
// a directory (ok false: p does not exist).
type entryOf struct {
	num uint64
	dir bool
	ok  bool
}

func stat(p string) entryOf {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return entryOf{}
	}
	return entryOf{num: st.Ino & (1<<48 - 1), dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR, ok: true}
}

// forget drops removed entry e, once at p, from the map: a file or an
// empty directory (rmdir, or a rename's target), so only its own number
// (kept if the map knows it by another name, a hard link).
func (n *NS) forget(p string, e entryOf) {
	if !e.ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paths[e.num] == p {
		delete(n.paths, e.num)
	}
}

// moved renames entry e from from to to in the map: its own number, and
// for a directory every path under it.
func (n *NS) moved(from, to string, e entryOf) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !e.dir {
		if e.ok && n.paths[e.num] == from {
			n.paths[e.num] = to
		}
		return
	}
	for k, q := range n.paths {
		if q == from || strings.HasPrefix(q, from+"/") {
			n.paths[k] = to + q[len(from):]
		}
	}
}

// own gives p the caller's owner (the server runs as root).
func own(p string, m *wire.Msg) error {
	return errno(unix.Lchown(p, int(m.Uid), int(m.Gid)))
}

// Serve answers request m (payload: a write's data). The reply's payload
// is a read's data.
func (n *NS) Serve(m *wire.Msg, payload []byte) (*wire.Msg, []byte, error) {
	if err := n.writable(m); err != nil {
		return nil, nil, err
	}
	switch m.Op {
	case wire.OpLookup:
		p, err := n.entry(m.Parent, m.Name)
		if err != nil {
			return nil, nil, err
		}
		a, err := n.attr(p)
		return &wire.Msg{Attr: a}, nil, err
	case wire.OpGetattr, wire.OpOpen:
		p, err := n.path(m.Ino)
		if err != nil {
			return nil, nil, err
		}
		a, err := n.attr(p)
		return &wire.Msg{Attr: a}, nil, err
	case wire.OpSetattr:
		return n.setattr(m)
	case wire.OpMknod, wire.OpMkdir, wire.OpSymlink:
		return n.create(m)
	case wire.OpLink:
		src, err := n.path(m.Ino)
		if err != nil {
			return nil, nil, err
		}
		p, err := n.entry(m.NewParent, m.NewName)
		if err != nil {
			return nil, nil, err
		}
		if err := os.Link(src, p); err != nil {
			return nil, nil, errno(err)
		}
		a, err := n.attr(p)
		return &wire.Msg{Attr: a}, nil, err
	case wire.OpReadlink:
		p, err := n.path(m.Ino)
		if err != nil {
			return nil, nil, err
		}
		t, err := os.Readlink(p)
		return &wire.Msg{Path: t}, nil, errno(err)
	case wire.OpUnlink, wire.OpRmdir:
		p, err := n.entry(m.Parent, m.Name)
		if err != nil {
			return nil, nil, err
		}
		e := stat(p)
		if m.Op == wire.OpUnlink {
			err = unix.Unlink(p)
		} else {
			err = unix.Rmdir(p)
		}
		if err != nil {
			return nil, nil, errno(err)
		}
		n.forget(p, e)
		if !wire.IsLocal(m.Parent) {
			n.dropOwner(p)
		}
		return &wire.Msg{}, nil, nil
	case wire.OpRename:
		return n.rename(m)
	case wire.OpReaddir:
		es, err := n.readdir(m.Ino, m.Name, int(m.Size))
		return &wire.Msg{Entries: es}, nil, err
	case wire.OpRelease, wire.OpFlush:
		return &wire.Msg{}, nil, nil
	case wire.OpRead:
		return n.read(m)
	case wire.OpWrite:
		return n.write(m, payload)
	case wire.OpFsync:
		p, err := n.path(m.Ino)
		if err != nil {
			return nil, nil, err
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, nil, errno(err)
		}
		defer f.Close()
		return &wire.Msg{}, nil, errno(f.Sync())
	}
	return nil, nil, rpc.Errorf(syscall.ENOTSUP, "local namespace: %s not supported", m.Op)
}

func (n *NS) create(m *wire.Msg) (*wire.Msg, []byte, error) {
	p, err := n.entry(m.Parent, m.Name)
	if err != nil {
		return nil, nil, err
	}
	perm := m.Mode & 0o7777
	switch m.Op {
	case wire.OpMkdir:
		err = unix.Mkdir(p, perm)
	case wire.OpSymlink:
		err = unix.Symlink(m.Path, p)
	default:
		typ := m.Mode & syscall.S_IFMT
		if typ == 0 || typ == syscall.S_IFREG {
			flags := unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC
			if m.Flags&syscall.O_EXCL != 0 {
				flags |= unix.O_EXCL
			}
			var fd int
			if fd, err = unix.Open(p, flags, perm); err == nil {
				unix.Close(fd)
			}
		} else {
			err = unix.Mknod(p, typ|perm, int(m.Rdev))
		}
	}
	if err != nil {
		return nil, nil, errno(err)
	}
	// the mode as asked (no umask), the caller's owner
	if m.Op != wire.OpSymlink {
		if err := unix.Chmod(p, perm); err != nil {
			return nil, nil, errno(err)
		}
	}
	if err := own(p, m); err != nil {
		return nil, nil, err
	}
	if o := ownerOf(m); !wire.IsLocal(m.Parent) && o != "" {
		// a private directory: the job (or node) that made it owns it
		if err := n.setOwner(p, o); err != nil {
			return nil, nil, err
		}
	}
	a, err := n.attr(p)
	return &wire.Msg{Attr: a}, nil, err
}

// key is the private directory path p is in ("DIRINO/NAME" of its entry
// in a local-mode directory), "" for a local-mode directory itself.
func (n *NS) key(p string) string {
	rel, err := filepath.Rel(n.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	parts := strings.SplitN(rel, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// owner is the node owning private directory key ("": none recorded).
func (n *NS) owner(key string) string {
	n.mu.Lock()
	o, ok := n.owners[key]
	n.mu.Unlock()
	if ok {
		return o
	}
	b, err := os.ReadFile(filepath.Join(n.root, ownersDir, key))
	if err == nil {
		o = string(b)
	}
	n.mu.Lock()
	n.owners[key] = o
	n.mu.Unlock()
	return o
}

// setOwner records owner (ownerOf) for the private directory at p.
func (n *NS) setOwner(p, owner string) error {
	key := n.key(p)
	f := filepath.Join(n.root, ownersDir, key)
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return errno(err)
	}
	// the temporary file beside the DIRINO directories, where no name is
	// taken for a directory's
	if err := atomicfile.WriteVia(filepath.Join(n.root, ownersDir), f, []byte(owner), 0o600); err != nil {
		return errno(err)
	}
	n.mu.Lock()
	n.owners[key] = owner
	n.mu.Unlock()
	return nil
}

// dropOwner forgets the owner of the private directory at p (removed).
func (n *NS) dropOwner(p string) {
	key := n.key(p)
	os.Remove(filepath.Join(n.root, ownersDir, key))
	n.mu.Lock()
	delete(n.owners, key)
	n.mu.Unlock()
}

// writable refuses request m if it would change what a private directory
// holds from outside its owner (the job, or the node, that made it): to
// everyone else a private directory is a read-only view (listing, stat,
// read; docs/nodelocal.md). Removing (unlink, rmdir) is left to the
// permissions, so that post-processing can clean up; root may do
// anything; a directory made by a request naming no job and no node has
// no owner and is not protected.
func (n *NS) writable(m *wire.Msg) error {
	who := ownerOf(m)
	if m.User == 0 || who == "" { // the caller's uid (m.Uid is a setattr's new owner)
		return nil
	}
	var p string
	var err error
	switch m.Op {
	case wire.OpSetattr, wire.OpWrite:
		p, err = n.path(m.Ino)
	case wire.OpMknod, wire.OpMkdir, wire.OpSymlink:
		if !wire.IsLocal(m.Parent) {
			return nil // a new private directory: open to all
		}
		p, err = n.path(m.Parent)
	case wire.OpLink:
		p, err = n.path(m.NewParent)
	case wire.OpRename:
		if p, err = n.path(m.Parent); err == nil && n.owner(n.key(p)) == who {
			p, err = n.path(m.NewParent)
		}
	default:
		return nil
	}
	if err != nil {
		return nil // the operation reports it
	}
	if o := n.owner(n.key(p)); o != "" && o != who {
		return rpc.Errorf(syscall.EROFS, "local namespace: %s belongs to %s: read-only to %s", n.key(p), o, who)
	}
	return nil
}

func (n *NS) setattr(m *wire.Msg) (*wire.Msg, []byte, error) {
	p, err := n.path(m.Ino)
	if err != nil {
		return nil, nil, err
	}
	if m.Mask&wire.SetSize != 0 {
		if err := unix.Truncate(p, int64(m.Size)); err != nil {
			return nil, nil, errno(err)
		}
	}
	if m.Mask&(wire.SetUid|wire.SetGid) != 0 {
		uid, gid := -1, -1
		if m.Mask&wire.SetUid != 0 {
			uid = int(m.Uid)
		}
		if m.Mask&wire.SetGid != 0 {
			gid = int(m.Gid)
		}
		if err := unix.Lchown(p, uid, gid); err != nil {
			return nil, nil, errno(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil, nil, errno(err)
	}
	mode, setMode := m.Mode&0o7777, m.Mask&wire.SetMode != 0
	if m.Mask&wire.SetKillPriv != 0 && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		if !setMode {
			mode, setMode = st.Mode&0o7777, true
		}
		mode &^= syscall.S_ISUID
		if mode&0o010 != 0 {
			mode &^= syscall.S_ISGID
		}
	}
	if setMode && st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		if err := unix.Chmod(p, mode); err != nil {
			return nil, nil, errno(err)
		}
	}
	if m.Mask&(wire.SetAtime|wire.SetMtime) != 0 {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if m.Mask&wire.SetAtime != 0 {
			ts[0] = unix.NsecToTimespec(m.Atime)
		}
		if m.Mask&wire.SetMtime != 0 {
			ts[1] = unix.NsecToTimespec(m.Mtime)
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, nil, errno(err)
		}
	}
	a, err := n.attr(p)
	return &wire.Msg{Attr: a}, nil, err
}

func (n *NS) rename(m *wire.Msg) (*wire.Msg, []byte, error) {
	if !wire.IsLocal(m.Parent) || !wire.IsLocal(m.NewParent) || wire.LocalServer(m.Parent) != wire.LocalServer(m.NewParent) {
		// across servers or into the global namespace: mv copies
		return nil, nil, rpc.Errorf(syscall.EXDEV, "local namespace: rename across servers")
	}
	from, err := n.entry(m.Parent, m.Name)
	if err != nil {
		return nil, nil, err
	}
	to, err := n.entry(m.NewParent, m.NewName)
	if err != nil {
		return nil, nil, err
	}
	var flags uint
	if m.Flags&wire.RenameNoReplace != 0 {
		flags |= unix.RENAME_NOREPLACE
	}
	if m.Flags&wire.RenameExchange != 0 {
		flags |= unix.RENAME_EXCHANGE
	}
	src, dst := stat(from), stat(to)
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, flags); err != nil {
		return nil, nil, errno(err)
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		tmp := to + "\x00"
		n.moved(to, tmp, dst)
		n.moved(from, to, src)
		n.moved(tmp, from, dst)
	} else {
		n.forget(to, dst)
		n.moved(from, to, src)
	}
	return &wire.Msg{}, nil, nil
}

// readdir lists directory ino after name after, in name order, at most
// max entries (4096 when 0), as the metadata service does.
func (n *NS) readdir(ino uint64, after string, max int) ([]wire.DirEntry, error) {
	d, err := n.dir(ino)
	if err != nil {
		return nil, errno(err)
	}
	f, err := os.Open(d)
	if err != nil {
		return nil, errno(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, errno(err)
	}
	sort.Strings(names)
	if max <= 0 || max > 4096 {
		max = 4096
	}
	i := sort.SearchStrings(names, after)
	if i < len(names) && names[i] == after {
		i++
	}
	var out []wire.DirEntry
	for ; i < len(names) && len(out) < max; i++ {
		a, err := n.attr(filepath.Join(d, names[i]))
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, wire.DirEntry{Name: names[i], Ino: a.Ino, Mode: a.Mode})
	}
	return out, nil
}

func (n *NS) read(m *wire.Msg) (*wire.Msg, []byte, error) {
	p, err := n.path(m.Ino)
	if err != nil {
		return nil, nil, err
	}
	if m.Size > wire.MaxPayload {
		return nil, nil, rpc.Errorf(syscall.EINVAL, "read too large")
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, errno(err)
	}
	defer f.Close()
	buf := make([]byte, m.Size)
	k, err := f.ReadAt(buf, int64(m.Offset))
	if err != nil && err != io.EOF {
		return nil, nil, errno(err)
	}
	return &wire.Msg{Size: uint64(k)}, buf[:k], nil
}

func (n *NS) write(m *wire.Msg, data []byte) (*wire.Msg, []byte, error) {
	p, err := n.path(m.Ino)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, errno(err)
	}
	defer f.Close()
	k, err := f.WriteAt(data, int64(m.Offset))
	if err != nil {
		return nil, nil, errno(err)
	}
	return &wire.Msg{Size: uint64(k)}, nil, nil
}
