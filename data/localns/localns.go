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

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
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

// Handles says whether request q is for the local namespace: it names a
// local inode, or it is an entry operation the metadata service
// redirected here (its directory is a local-mode directory: Local).
func Handles(q ns.Request) bool {
	ino, parent, newParent := q.Inodes()
	if wire.IsLocal(ino) || wire.IsLocal(parent) || wire.IsLocal(newParent) {
		return true
	}
	switch q.(type) {
	case *ns.NameReq, *ns.MknodReq, *ns.MkdirReq, *ns.SymlinkReq, *ns.ReaddirReq:
		return q.Header().Local
	}
	return false
}

// Op is one operation of the local namespace: its answer to request q
// (payload: a write's data; out: a read's).
type Op func(q ns.Request, payload []byte) (rep wire.Message, out []byte, err error)

// Ops are the operations the local namespace answers, by number.
func (n *NS) Ops() map[wire.Op]Op {
	getattr := func(q *ns.InoReq) (*ns.AttrRep, error) { return n.Getattr(q.Ino) }
	open := func(q *ns.OpenReq) (*ns.AttrRep, error) { return n.Getattr(q.Ino) }
	none := func(ns.Request) (*ns.FeedRep, error) { return &ns.FeedRep{}, nil }
	return map[wire.Op]Op{
		ns.OpLookup:   op(n.Lookup),
		ns.OpGetattr:  op(getattr),
		ns.OpOpen:     op(open),
		ns.OpSetattr:  op(n.Setattr),
		ns.OpMknod:    op(n.Mknod),
		ns.OpMkdir:    op(n.Mkdir),
		ns.OpSymlink:  op(n.Symlink),
		ns.OpLink:     op(n.Link),
		ns.OpReadlink: op(n.Readlink),
		ns.OpUnlink:   op(func(q *ns.NameReq) (*ns.EntryRep, error) { return n.Remove(q, false) }),
		ns.OpRmdir:    op(func(q *ns.NameReq) (*ns.EntryRep, error) { return n.Remove(q, true) }),
		ns.OpRename:   op(n.Rename),
		ns.OpReaddir:  op(n.Readdir),
		ns.OpRelease:  op(none),
		ns.OpFlush:    op(func(*ns.SizeReq) (*ns.AttrRep, error) { return &ns.AttrRep{}, nil }),
		ns.OpFsync:    op(n.Fsync),
		ns.OpRead: func(q ns.Request, _ []byte) (wire.Message, []byte, error) {
			r, out, err := n.Read(q.(*ns.IOReq))
			return r, out, err
		},
		ns.OpWrite: func(q ns.Request, payload []byte) (wire.Message, []byte, error) {
			r, err := n.Write(q.(*ns.IOReq), payload)
			return r, nil, err
		},
	}
}

// op makes an Op of a typed answer to requests of type Q.
func op[Q ns.Request, R wire.Message](f func(Q) (R, error)) Op {
	return func(q ns.Request, _ []byte) (wire.Message, []byte, error) {
		typed, ok := q.(Q)
		if !ok {
			return nil, nil, rpc.Errorf(syscall.EINVAL, "local namespace: a request of type %T", q)
		}
		r, err := f(typed)
		if err != nil {
			return nil, nil, err
		}
		return r, nil, nil
	}
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
func own(p string, uid, gid uint32) error {
	return errno(unix.Lchown(p, int(uid), int(gid)))
}

// Lookup answers ns.Lookup.
func (n *NS) Lookup(q *ns.NameReq) (*ns.EntryRep, error) {
	p, err := n.entry(q.Parent, q.Name)
	if err != nil {
		return nil, err
	}
	a, err := n.attr(p)
	return &ns.EntryRep{Attr: a}, err
}

// Getattr answers ns.Getattr (and ns.Open: nothing to open here).
func (n *NS) Getattr(ino uint64) (*ns.AttrRep, error) {
	p, err := n.path(ino)
	if err != nil {
		return nil, err
	}
	a, err := n.attr(p)
	return &ns.AttrRep{Attr: a}, err
}

// Setattr answers ns.Setattr.
func (n *NS) Setattr(q *ns.SetattrReq) (*ns.AttrRep, error) {
	p, err := n.path(q.Ino)
	if err == nil {
		err = n.writable(q.Who, p)
	}
	if err != nil {
		return nil, err
	}
	return n.setattr(p, q)
}

// Mknod answers ns.Mknod: a regular file, FIFO, socket or device file,
// with the mode as asked (no umask).
func (n *NS) Mknod(q *ns.MknodReq) (*ns.EntryRep, error) {
	perm := q.Mode & 0o7777
	return n.create(q.Who, q.Parent, q.Name, q.Uid, q.Gid, func(p string) error {
		typ := q.Mode & syscall.S_IFMT
		if typ != 0 && typ != syscall.S_IFREG {
			if err := unix.Mknod(p, typ|perm, int(q.Rdev)); err != nil {
				return err
			}
			return unix.Chmod(p, perm)
		}
		flags := unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC
		if q.Excl {
			flags |= unix.O_EXCL
		}
		fd, err := unix.Open(p, flags, perm)
		if err != nil {
			return err
		}
		unix.Close(fd)
		return unix.Chmod(p, perm)
	})
}

// Mkdir answers ns.Mkdir, with the mode as asked (no umask).
func (n *NS) Mkdir(q *ns.MkdirReq) (*ns.EntryRep, error) {
	return n.create(q.Who, q.Parent, q.Name, q.Uid, q.Gid, func(p string) error {
		if err := unix.Mkdir(p, q.Mode&0o7777); err != nil {
			return err
		}
		return unix.Chmod(p, q.Mode&0o7777)
	})
}

// Symlink answers ns.Symlink.
func (n *NS) Symlink(q *ns.SymlinkReq) (*ns.EntryRep, error) {
	return n.create(q.Who, q.Parent, q.Name, q.Uid, q.Gid, func(p string) error { return unix.Symlink(q.Target, p) })
}

// Link answers ns.Link.
func (n *NS) Link(q *ns.LinkReq) (*ns.EntryRep, error) {
	src, err := n.path(q.Ino)
	if err != nil {
		return nil, err
	}
	if err := n.writableDir(q.Who, q.NewParent); err != nil {
		return nil, err
	}
	p, err := n.entry(q.NewParent, q.NewName)
	if err != nil {
		return nil, err
	}
	if err := os.Link(src, p); err != nil {
		return nil, errno(err)
	}
	a, err := n.attr(p)
	return &ns.EntryRep{Attr: a}, err
}

// Readlink answers ns.Readlink.
func (n *NS) Readlink(q *ns.InoReq) (*ns.ReadlinkRep, error) {
	p, err := n.path(q.Ino)
	if err != nil {
		return nil, err
	}
	t, err := os.Readlink(p)
	return &ns.ReadlinkRep{Target: t}, errno(err)
}

// Remove answers ns.Unlink and (dir) ns.Rmdir. Removing is left to the
// permissions, so that post-processing can clean up a private directory.
func (n *NS) Remove(q *ns.NameReq, dir bool) (*ns.EntryRep, error) {
	p, err := n.entry(q.Parent, q.Name)
	if err != nil {
		return nil, err
	}
	e := stat(p)
	if dir {
		err = unix.Rmdir(p)
	} else {
		err = unix.Unlink(p)
	}
	if err != nil {
		return nil, errno(err)
	}
	n.forget(p, e)
	if !wire.IsLocal(q.Parent) {
		n.dropOwner(p)
	}
	return &ns.EntryRep{}, nil
}

// Readdir answers ns.Readdir.
func (n *NS) Readdir(q *ns.ReaddirReq) (*ns.ReaddirRep, error) {
	es, err := n.readdir(q.Ino, q.After, q.Max)
	if err != nil {
		return nil, err
	}
	return &ns.ReaddirRep{Entries: es}, nil
}

// Fsync answers ns.Fsync.
func (n *NS) Fsync(q *ns.SizeReq) (*ns.FeedRep, error) {
	p, err := n.path(q.Ino)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, errno(err)
	}
	defer f.Close()
	return &ns.FeedRep{}, errno(f.Sync())
}

// create makes entry name in directory parent with mk, owned by uid and
// gid. An entry made in a local directory is a change of what it is in
// (writable); one made in a local-mode directory of the global namespace
// is a new private directory, open to all, and belongs to who's job (or
// node).
func (n *NS) create(who wire.Who, parent uint64, name string, uid, gid uint32, mk func(p string) error) (*ns.EntryRep, error) {
	if wire.IsLocal(parent) {
		if err := n.writableDir(who, parent); err != nil {
			return nil, err
		}
	}
	p, err := n.entry(parent, name)
	if err != nil {
		return nil, err
	}
	if err := mk(p); err != nil {
		return nil, errno(err)
	}
	if err := own(p, uid, gid); err != nil {
		return nil, err
	}
	if o := ownerOf(who); !wire.IsLocal(parent) && o != "" {
		// a private directory: the job (or node) that made it owns it
		if err := n.setOwner(p, o); err != nil {
			return nil, err
		}
	}
	a, err := n.attr(p)
	return &ns.EntryRep{Attr: a}, err
}

func (n *NS) setattr(p string, m *ns.SetattrReq) (*ns.AttrRep, error) {
	if m.Mask&ns.SetSize != 0 {
		if err := unix.Truncate(p, int64(m.Size)); err != nil {
			return nil, errno(err)
		}
	}
	if m.Mask&(ns.SetUid|ns.SetGid) != 0 {
		uid, gid := -1, -1
		if m.Mask&ns.SetUid != 0 {
			uid = int(m.Uid)
		}
		if m.Mask&ns.SetGid != 0 {
			gid = int(m.Gid)
		}
		if err := unix.Lchown(p, uid, gid); err != nil {
			return nil, errno(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return nil, errno(err)
	}
	mode, setMode := m.Mode&0o7777, m.Mask&ns.SetMode != 0
	if m.Mask&ns.SetKillPriv != 0 && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
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
			return nil, errno(err)
		}
	}
	if m.Mask&(ns.SetAtime|ns.SetMtime) != 0 {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if m.Mask&ns.SetAtime != 0 {
			ts[0] = unix.NsecToTimespec(m.Atime)
		}
		if m.Mask&ns.SetMtime != 0 {
			ts[1] = unix.NsecToTimespec(m.Mtime)
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, errno(err)
		}
	}
	a, err := n.attr(p)
	return &ns.AttrRep{Attr: a}, err
}

// Rename answers ns.Rename within this server's local namespace.
func (n *NS) Rename(m *ns.RenameReq) (*ns.FeedRep, error) {
	if !wire.IsLocal(m.Parent) || !wire.IsLocal(m.NewParent) || wire.LocalServer(m.Parent) != wire.LocalServer(m.NewParent) {
		// across servers or into the global namespace: mv copies
		return nil, rpc.Errorf(syscall.EXDEV, "local namespace: rename across servers")
	}
	if err := n.writableDir(m.Who, m.Parent); err != nil {
		return nil, err
	}
	if err := n.writableDir(m.Who, m.NewParent); err != nil {
		return nil, err
	}
	from, err := n.entry(m.Parent, m.Name)
	if err != nil {
		return nil, err
	}
	to, err := n.entry(m.NewParent, m.NewName)
	if err != nil {
		return nil, err
	}
	var flags uint
	if m.Flags&ns.RenameNoReplace != 0 {
		flags |= unix.RENAME_NOREPLACE
	}
	if m.Flags&ns.RenameExchange != 0 {
		flags |= unix.RENAME_EXCHANGE
	}
	src, dst := stat(from), stat(to)
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, flags); err != nil {
		return nil, errno(err)
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
	return &ns.FeedRep{}, nil
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

// Read answers ns.Read: the bytes there are.
func (n *NS) Read(m *ns.IOReq) (*ns.IORep, []byte, error) {
	p, err := n.path(m.Ino)
	if err != nil {
		return nil, nil, err
	}
	if m.Len > wire.MaxPayload {
		return nil, nil, rpc.Errorf(syscall.EINVAL, "read too large")
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, errno(err)
	}
	defer f.Close()
	buf := make([]byte, m.Len)
	k, err := f.ReadAt(buf, int64(m.Off))
	if err != nil && err != io.EOF {
		return nil, nil, errno(err)
	}
	return &ns.IORep{Len: uint64(k)}, buf[:k], nil
}

// Write answers ns.Write.
func (n *NS) Write(m *ns.IOReq, data []byte) (*ns.IORep, error) {
	p, err := n.path(m.Ino)
	if err == nil {
		err = n.writable(m.Who, p)
	}
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return nil, errno(err)
	}
	defer f.Close()
	k, err := f.WriteAt(data, int64(m.Off))
	if err != nil {
		return nil, errno(err)
	}
	return &ns.IORep{Len: uint64(k)}, nil
}
