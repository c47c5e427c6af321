package vfs

import (
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// The operations on names, attributes and directories.

// Entry answers an operation that names an inode: its attributes and how
// long the kernel may keep the name and them.
type Entry struct {
	Attr wire.Attr
	TTL  TTL
}

// Attr answers a getattr or setattr: the attributes and how long the
// kernel may keep them.
type Attr struct {
	Attr wire.Attr
	TTL  time.Duration
}

// SetAttr is a change of attributes: Mask (ns.SetMode…) selects the
// fields; AtimeNow and MtimeNow set those times to now.
type SetAttr struct {
	Mask               uint32
	Mode, Uid, Gid     uint32
	Size               uint64
	Atime, Mtime       int64
	AtimeNow, MtimeNow bool
}

// noteAttr remembers whether a is a file with S_ISUID or S_ISGID set
// (every attribute the kernel sees passes here): a write by an
// unprivileged caller must clear them.
func (v *FS) noteAttr(a *wire.Attr) {
	if a.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 && a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		v.pmu.Lock()
		v.priv[a.Ino] = true
		v.pmu.Unlock()
	}
}

// entry is the answer about name in parent, inode a, as of feed position
// gen.
func (v *FS) entry(parent uint64, name string, a *wire.Attr, gen uint64) Entry {
	v.noteAttr(a)
	v.at.seen(a)
	return Entry{Attr: *a, TTL: v.entryTTL(gen, parent, name, a.Ino)}
}

// attr is the answer about inode a, a reply of the service, as of feed
// position gen.
func (v *FS) attr(a *wire.Attr, gen uint64) Attr {
	v.noteAttr(a)
	v.at.seen(a)
	return Attr{Attr: *a, TTL: v.attrTTL(gen, a.Ino)}
}

// cachedAttr is the answer about inode a, kept here (DirCache), as of
// feed position gen: with the access time of this mount's reads since.
func (v *FS) cachedAttr(a *wire.Attr, gen uint64) Attr {
	v.noteAttr(a)
	v.at.cached(a)
	return Attr{Attr: *a, TTL: v.attrTTL(gen, a.Ino)}
}

// Lookup answers name in directory parent.
func (v *FS) Lookup(c Cred, parent uint64, name string) (Entry, error) {
	if len(name) > wire.NameMax {
		return Entry{}, syscall.ENAMETOOLONG // the kernel leaves NAME_MAX to the file system
	}
	if name == "." || name == ".." {
		// an inode known by number only (open_by_handle_at): asked of
		// the service, not cached as a name
		resp, err := v.lookup(c, parent, name)
		if err != nil {
			return Entry{}, err
		}
		v.noteAttr(resp.Attr)
		v.at.seen(resp.Attr)
		return Entry{Attr: *resp.Attr, TTL: TTL{v.cfg.EntryTimeout, v.cfg.AttrTimeout}}, nil
	}
	if v.dc.Absent(parent, name) {
		v.answered(c, ns.OpLookup, parent, v.cfg.Now(), true)
		return Entry{}, syscall.ENOENT
	}
	resp, err := v.lookup(c, parent, name)
	if err == nil && v.st.HasWrites(resp.Attr.Ino) {
		// this node's writes change the size: look again once they landed
		v.st.WaitWrites(resp.Attr.Ino, 0, 0)
		resp, err = v.lookup(c, parent, name)
	}
	if err != nil {
		return Entry{}, err
	}
	e := v.entry(parent, name, resp.Attr, resp.Feed)
	v.dc.NoteAttr(resp.Attr, resp.Feed)
	return e, nil
}

// lookup asks for name in directory parent.
func (v *FS) lookup(c Cred, parent uint64, name string) (*ns.EntryRep, error) {
	resp, err := call(v, c, ns.Lookup, &ns.NameReq{Parent: parent, Name: name})
	if err == nil && resp.Attr == nil {
		return nil, syscall.EIO // a redirect the forwarding daemon did not follow
	}
	return resp, err
}

// Forget drops what the mount keeps of ino for the kernel (its blocks).
func (v *FS) Forget(ino uint64) { v.bc.Forget(ino) }

// GetAttr answers inode ino's attributes.
func (v *FS) GetAttr(c Cred, ino uint64) (Attr, error) {
	if a, ok := v.dc.DirAttr(ino); ok {
		v.answered(c, ns.OpGetattr, ino, v.cfg.Now(), false)
		return v.cachedAttr(&a, v.dc.Sent()), nil
	}
	if a, ok := v.dc.FileAttr(ino); ok {
		v.answered(c, ns.OpGetattr, ino, v.cfg.Now(), false)
		return v.cachedAttr(&a, v.dc.Sent()), nil
	}
	v.st.WaitWrites(ino, 0, 0)
	resp, err := call(v, c, ns.Getattr, &ns.InoReq{Ino: ino})
	if rpc.Errno(err) == syscall.ENOENT {
		v.dmu.Lock()
		gone, ok := v.goneDirs[ino]
		v.dmu.Unlock()
		if ok {
			return Attr{Attr: gone}, nil // no caching: the kernel asks again
		}
	}
	if err != nil {
		return Attr{}, err
	}
	a := v.attr(resp.Attr, resp.Feed)
	v.dc.NoteAttr(resp.Attr, resp.Feed)
	return a, nil
}

// openDirVictim returns the attributes of name in parent if it is a
// directory this mount has open (about to be removed or replaced: see
// goneDirs), else false. ino is the name's inode if the directory cache
// knows it; if not, the service is asked, only while a directory handle
// other than those of dirs (the directories changed) is open here.
func (v *FS) openDirVictim(c Cred, parent uint64, name string, ino uint64, dirs ...uint64) (wire.Attr, bool) {
	if ino != 0 {
		if !v.dirOpen(func(o uint64) bool { return o == ino }) {
			return wire.Attr{}, false
		}
		a, err := v.GetAttr(c, ino)
		return a.Attr, err == nil
	}
	if !v.dirOpen(func(o uint64) bool { return !slices.Contains(dirs, o) }) {
		return wire.Attr{}, false
	}
	resp, err := v.lookup(c, parent, name)
	if err != nil || resp.Attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return wire.Attr{}, false
	}
	a := *resp.Attr
	return a, v.dirOpen(func(o uint64) bool { return o == a.Ino })
}

// dirOpen says whether a directory handle of an inode that is(ino)
// holds is open here.
func (v *FS) dirOpen(is func(ino uint64) bool) bool {
	v.dmu.Lock()
	defer v.dmu.Unlock()
	for _, es := range v.dirs {
		if is(es[0].Ino) {
			return true
		}
	}
	return false
}

// dirGone keeps a, the attributes of an open directory just removed or
// replaced, with no links, for its handles' fstat.
func (v *FS) dirGone(a wire.Attr) {
	a.Nlink = 0
	a.Ctime = v.cfg.Now().UnixNano()
	v.dmu.Lock()
	defer v.dmu.Unlock()
	for _, es := range v.dirs {
		if es[0].Ino == a.Ino {
			v.goneDirs[a.Ino] = a
			return
		}
	}
}

// SetAttr changes inode ino's attributes (a truncate among them).
func (v *FS) SetAttr(c Cred, ino uint64, in SetAttr) (Attr, error) {
	v.dc.ForgetFile(ino)
	v.st.WaitWrites(ino, 0, 0)
	truncate := in.Mask&ns.SetSize != 0
	if truncate {
		v.st.DropReadahead(ino)
		v.own.Disown(ino)
		v.bc.Drop(ino)
	}
	now := v.cfg.Now().UnixNano()
	q := &ns.SetattrReq{Ino: ino, Mask: in.Mask, Mode: in.Mode, Uid: in.Uid, Gid: in.Gid, Size: in.Size, Atime: in.Atime, Mtime: in.Mtime}
	if in.AtimeNow {
		q.Atime = now
	}
	if in.MtimeNow {
		q.Mtime = now
	}
	resp, err := call(v, c, ns.Setattr, q)
	if err != nil {
		v.dc.ForgetDir(ino)
		return Attr{}, err
	}
	if truncate {
		v.st.Truncated(ino, resp.Attr.Trunc)
		v.app.Truncated(ino, in.Size)
		v.bc.Drop(ino) // again: a fetch made meanwhile is not kept
	}
	a := v.attr(resp.Attr, resp.Feed)
	v.dc.NoteAttr(resp.Attr, resp.Feed)
	return a, nil
}

// create makes a new inode (name in parent) owned by the caller.
func create[Q any, PQ nsRequest[Q]](v *FS, c Cred, d wire.Def[Q, ns.EntryRep], q PQ, parent uint64, name string) (Entry, error) {
	resp, err := nsCall(v, c, d, q, parent, name)
	if err != nil {
		return Entry{}, err
	}
	return v.entry(parent, name, resp.Attr, resp.Feed), nil
}

// nsCall sends a change of name in directory parent and keeps the
// directory cache in step with it.
func nsCall[Q any, PQ nsRequest[Q]](v *FS, c Cred, d wire.Def[Q, ns.EntryRep], q PQ, parent uint64, name string) (*ns.EntryRep, error) {
	resp, err := call(v, c, d, q)
	if err == nil && resp.Attr == nil && d.Op != ns.OpUnlink && d.Op != ns.OpRmdir {
		err = syscall.EIO // a redirect the forwarding daemon did not follow
	}
	if err != nil {
		v.dc.ForgetDir(parent)
		return resp, err
	}
	added := d.Op != ns.OpUnlink && d.Op != ns.OpRmdir
	var made *wire.Attr
	if d.Op == ns.OpMkdir {
		made = resp.Attr
	}
	var ino uint64
	if resp.Attr != nil {
		ino = resp.Attr.Ino
	}
	v.dc.Changed(parent, name, ino, added, resp.Parent, resp.Feed, made)
	return resp, nil
}

// Mknod makes a regular file, FIFO, socket or device file (whose data
// never reaches sluice: the kernel serves them) with mode (type and
// permission bits; c.Umask not applied yet).
func (v *FS) Mknod(c Cred, parent uint64, name string, mode, rdev uint32) (Entry, error) {
	switch mode & syscall.S_IFMT {
	case 0, syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return Entry{}, syscall.EINVAL
	}
	return create(v, c, ns.Mknod, &ns.MknodReq{Parent: parent, Name: name, Mode: mode &^ c.Umask, Unmasked: mode & 0o7777, Rdev: rdev, Excl: true, Uid: c.Uid, Gid: c.Gid},
		parent, name)
}

// Mkdir makes a directory with permission bits mode (c.Umask not applied
// yet): answered here in a directory this mount holds the delegation
// of (write-back, Creates).
func (v *FS) Mkdir(c Cred, parent uint64, name string, mode uint32) (Entry, error) {
	start := v.cfg.Now()
	who := func() ident.ID { return v.ident(c, ns.OpMkdir) }
	if a, ok := v.wb.Mkdir(who, parent, name, mode&^c.Umask, c.Uid, c.Gid); ok {
		v.Counts.WritebackCreates.Add(1)
		v.answered(c, ns.OpMkdir, parent, start, false)
		return v.entry(parent, name, a, v.dc.Sent()), nil
	}
	return create(v, c, ns.Mkdir, &ns.MkdirReq{Parent: parent, Name: name, Mode: mode &^ c.Umask, Unmasked: mode, Uid: c.Uid, Gid: c.Gid}, parent, name)
}

// Symlink makes name in parent a symbolic link to target.
func (v *FS) Symlink(c Cred, parent uint64, name, target string) (Entry, error) {
	return create(v, c, ns.Symlink, &ns.SymlinkReq{Parent: parent, Name: name, Target: target, Uid: c.Uid, Gid: c.Gid}, parent, name)
}

// Link makes name in parent another name of ino.
func (v *FS) Link(c Cred, ino, parent uint64, name string) (Entry, error) {
	v.dc.ForgetFile(ino)
	v.own.Disown(ino) // reachable from another directory
	return create(v, c, ns.Link, &ns.LinkReq{Ino: ino, NewParent: parent, NewName: name}, parent, name)
}

// Readlink answers a symbolic link's target.
func (v *FS) Readlink(c Cred, ino uint64) (string, error) {
	resp, err := call(v, c, ns.Readlink, &ns.InoReq{Ino: ino})
	if err != nil {
		return "", err
	}
	return resp.Target, nil
}

// Unlink removes name from parent: answered here in a directory this
// mount holds the delegation of, for a file it knows (Creates).
func (v *FS) Unlink(c Cred, parent uint64, name string) error {
	start := v.cfg.Now()
	v.dc.ForgetFiles() // the file's link count and ctime change
	v.own.DisownName(parent, name)
	if v.wb.Unlink(func() ident.ID { return v.ident(c, ns.OpUnlink) }, parent, name) {
		v.Counts.WritebackUnlinks.Add(1)
		v.answered(c, ns.OpUnlink, parent, start, false)
		return nil
	}
	_, err := nsCall(v, c, ns.Unlink, &ns.NameReq{Parent: parent, Name: name}, parent, name)
	return err
}

// Rmdir removes directory name from parent: answered here for an empty
// directory this mount made and holds (Creates).
func (v *FS) Rmdir(c Cred, parent uint64, name string) error {
	start := v.cfg.Now()
	child, _ := v.dc.Present(parent, name)
	open, isOpen := v.openDirVictim(c, parent, name, child, parent)
	if v.wb.Rmdir(func() ident.ID { return v.ident(c, ns.OpRmdir) }, parent, name) {
		v.Counts.WritebackUnlinks.Add(1)
		v.answered(c, ns.OpRmdir, parent, start, false)
		if isOpen {
			v.dirGone(open)
		}
		return nil
	}
	_, err := nsCall(v, c, ns.Rmdir, &ns.NameReq{Parent: parent, Name: name}, parent, name)
	if err == nil && child != 0 {
		v.wb.Removed(child)
	}
	if err == nil && isOpen {
		v.dirGone(open)
	}
	return err
}

// Rename renames name in parent to newName in newParent (flags: as
// renameat2's).
func (v *FS) Rename(c Cred, parent uint64, name string, newParent uint64, newName string, flags uint32) error {
	v.dc.ForgetFiles() // the files' ctime (and a replaced one's links) change
	v.own.DisownName(parent, name)
	v.own.DisownName(newParent, newName)
	replaced, _ := v.dc.Present(newParent, newName)
	open, isOpen := v.openDirVictim(c, newParent, newName, replaced, parent, newParent)
	_, err := call(v, c, ns.Rename, &ns.RenameReq{Parent: parent, Name: name, NewParent: newParent, NewName: newName, Flags: flags})
	if err != nil {
		v.dc.ForgetDir(parent)
		v.dc.ForgetDir(newParent)
		return err
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0
	if replaced != 0 && !exchange && (parent != newParent || name != newName) {
		v.wb.Removed(replaced) // a directory replaced: its delegation ended with it
	}
	if isOpen && !exchange && (parent != newParent || name != newName) {
		v.dirGone(open)
	}
	v.dc.Renamed(parent, name, newParent, newName, exchange)
	return nil
}

// OpenDir opens directory ino and returns its handle. Its listing is
// taken at the handle's first read and at every read from the start
// again (Listing), so a rewinddir(3) sees the names added since, as POSIX
// requires.
func (v *FS) OpenDir(c Cred, ino uint64) (uint64, error) {
	fh := v.nextFh.Add(1)
	v.dmu.Lock()
	v.dirs[fh] = dotEntries(ino)
	v.dmu.Unlock()
	return fh, nil
}

// dotEntries is a listing of directory ino before its names: "." and
// "..".
func dotEntries(ino uint64) []wire.DirEntry {
	return []wire.DirEntry{{Name: ".", Ino: ino, Mode: syscall.S_IFDIR}, {Name: "..", Ino: 1, Mode: syscall.S_IFDIR}}
}

// list asks for directory ino's listing (".", ".." first).
func (v *FS) list(c Cred, ino uint64) ([]wire.DirEntry, error) {
	entries := dotEntries(ino)
	after := ""
	first, gen := true, uint64(0) // a listing of one reply is complete as of gen
	for {
		resp, err := call(v, c, ns.Readdir, &ns.ReaddirReq{Ino: ino, After: after, Max: 4096})
		if err != nil {
			return nil, err
		}
		if resp.Redirect != nil {
			return nil, syscall.EIO // a redirect the forwarding daemon did not follow
		}
		entries = append(entries, resp.Entries...)
		if after == "" {
			gen = resp.Feed
		}
		if len(resp.Entries) < 4096 {
			break
		}
		first = false
		after = resp.Entries[len(resp.Entries)-1].Name
	}
	if first {
		v.dc.Listed(ino, entries[2:], gen)
	}
	return entries, nil
}

// Listing is the listing of directory handle fh (".", ".." first) for a
// read at offset off: taken now if off is 0 (the handle's first read,
// or a rewind) or none was taken yet, else the one the handle's reads
// from the start took.
func (v *FS) Listing(c Cred, fh, off uint64) ([]wire.DirEntry, error) {
	v.dmu.Lock()
	es, taken := v.dirs[fh], v.listed[fh]
	v.dmu.Unlock()
	if len(es) == 0 {
		return nil, syscall.EBADF
	}
	ino := es[0].Ino
	if off == 0 || !taken {
		fresh, err := v.list(c, ino)
		if err != nil {
			return nil, err
		}
		v.dmu.Lock()
		if _, open := v.dirs[fh]; open {
			v.dirs[fh], v.listed[fh] = fresh, true
		}
		v.dmu.Unlock()
		es = fresh
	}
	v.at.read(ino, true)
	return es, nil
}

// ReleaseDir forgets directory handle fh's listing.
func (v *FS) ReleaseDir(fh uint64) {
	v.dmu.Lock()
	defer v.dmu.Unlock()
	es := v.dirs[fh]
	delete(v.dirs, fh)
	delete(v.listed, fh)
	if es == nil {
		return
	}
	for _, o := range v.dirs {
		if o[0].Ino == es[0].Ino {
			return
		}
	}
	delete(v.goneDirs, es[0].Ino)
}

// FsyncDir makes directory ino's changes durable.
func (v *FS) FsyncDir(c Cred, ino uint64) error {
	_, err := call(v, c, ns.Fsync, &ns.SizeReq{Ino: ino})
	return err
}

// Statfs answers the tiers' total capacity and use, in bytes.
func (v *FS) Statfs(c Cred) (capacity, used uint64, err error) {
	resp, err := call(v, c, ns.Statfs, &ns.PingReq{})
	if err != nil {
		return 0, 0, err
	}
	return resp.Capacity, resp.Used, nil
}
