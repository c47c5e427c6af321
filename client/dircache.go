package client

import (
	"sync"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// The directory cache answers, without a round trip, the two requests the
// kernel sends before every create and unlink in a directory: GETATTR of
// the directory (the kernel drops a directory's attributes after each change
// in it, and default_permissions needs its mode) and, for a create, LOOKUP
// of the new name. It holds directories' attributes — from replies, and
// from the directory's attributes that the metadata service returns with
// each change inside it (wire.Msg.ParentAttr) — and the complete list of
// names of directories this mount created (empty then, kept up to date by
// its own changes). Like the kernel's caches it is kept coherent by the
// change feed (feed.go): a change by another node to a directory drops its
// attributes and its names, and nothing is kept while the feed is not
// followed. Only directories: a file's size moves with writes that reach
// the metadata service late.

// dirCacheMax bounds the directories and names held; past it, the cache
// starts again empty (it only saves round trips).
const dirCacheMax = 1 << 20

type dirState struct {
	attr  *wire.Attr        // nil: unknown
	names map[string]uint64 // complete listing: name → inode; nil: unknown
}

type dirCache struct {
	mu    sync.Mutex // guards dirs, names; taken by the feed follower around each batch
	dirs  map[uint64]*dirState
	names int // names held in all listings
}

// validLocked says whether a reply served at feed position gen may be
// cached: the feed is followed and no invalidation newer than the reply
// has gone out yet (a later one will reach the cache through dropLocked).
func (fs *FS) validLocked(gen uint64) bool {
	return fs.followed() && gen >= fs.feed.sent.Load()
}

// followed says whether the change feed is being followed, so what the
// cache holds is current.
func (fs *FS) followed() bool { return fs.cfg.MetaCache > 0 && fs.feed.live.Load() }

func (c *dirCache) stateLocked(ino uint64) *dirState {
	d := c.dirs[ino]
	if d == nil {
		if len(c.dirs) >= dirCacheMax {
			c.resetLocked()
		}
		d = &dirState{}
		c.dirs[ino] = d
	}
	return d
}

func (c *dirCache) resetLocked() {
	c.dirs = map[uint64]*dirState{}
	c.names = 0
}

// dropLocked forgets what is known of directory ino (another node changed
// it).
func (c *dirCache) dropLocked(ino uint64) {
	if d := c.dirs[ino]; d != nil {
		c.names -= len(d.names)
		delete(c.dirs, ino)
	}
}

// noteAttr records the attributes of an inode from a reply served at gen,
// if it is a directory.
func (fs *FS) noteAttr(a *wire.Attr, gen uint64) {
	if a == nil || a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return
	}
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fs.validLocked(gen) {
		c.dropLocked(a.Ino)
		return
	}
	cp := *a
	c.stateLocked(a.Ino).attr = &cp
}

// dirAttr returns a directory's cached attributes.
func (fs *FS) dirAttr(ino uint64) (wire.Attr, bool) {
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.dirs[ino]; d != nil && d.attr != nil && fs.followed() {
		return *d.attr, true
	}
	return wire.Attr{}, false
}

// absent says the name is known not to exist in directory parent.
func (fs *FS) absent(parent uint64, name string) bool {
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[parent]
	if d == nil || d.names == nil || !fs.followed() {
		return false
	}
	_, ok := d.names[name]
	return !ok
}

// present returns the inode that name has in directory parent, if the
// complete listing there is known.
func (fs *FS) present(parent uint64, name string) (uint64, bool) {
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[parent]
	if d == nil || d.names == nil || !fs.followed() {
		return 0, false
	}
	ino, ok := d.names[name]
	return ino, ok
}

// changed records this mount's own change of name in directory parent
// (added, as inode ino, or removed), answered at gen with the directory's
// new attributes. A new directory made here starts with a complete, empty
// listing.
func (fs *FS) changed(parent uint64, name string, ino uint64, added bool, pattr *wire.Attr, gen uint64, newDir *wire.Attr) {
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fs.validLocked(gen) || pattr == nil {
		c.dropLocked(parent)
		return
	}
	d := c.stateLocked(parent)
	cp := *pattr
	d.attr = &cp
	if d.names != nil {
		_, had := d.names[name]
		switch {
		case added && !had:
			if c.names >= dirCacheMax {
				c.resetLocked()
				return
			}
			d.names[name] = ino
			c.names++
		case !added && had:
			delete(d.names, name)
			c.names--
		}
	}
	if newDir != nil && newDir.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		nd := c.stateLocked(newDir.Ino)
		cp := *newDir
		nd.attr, nd.names = &cp, map[string]uint64{}
	}
}

// renamed records this mount's rename: names move between the two
// directories' listings; attributes are dropped (both directories and, for
// a directory moved, its own ctime and parent change; its inode is not
// known here), so the next getattr asks.
func (fs *FS) renamed(parent uint64, name string, newParent uint64, newName string, exchange bool) {
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.dirs {
		d.attr = nil
	}
	from, to := c.dirs[parent], c.dirs[newParent]
	if exchange { // both names exist before and after: their inodes swap
		var a, b uint64 // 0: not known here
		if from != nil && from.names != nil {
			a = from.names[name]
		}
		if to != nil && to.names != nil {
			b = to.names[newName]
			to.names[newName] = a
		}
		if from != nil && from.names != nil {
			from.names[name] = b
		}
		return
	}
	var ino uint64 // 0: not known here
	if from != nil && from.names != nil {
		if i, ok := from.names[name]; ok {
			ino = i
			delete(from.names, name)
			c.names--
		}
	}
	if to != nil && to.names != nil {
		if _, ok := to.names[newName]; !ok {
			c.names++
		}
		to.names[newName] = ino
	}
}

// listed records a directory's complete listing (its names other than "."
// and ".."), read in one reply served at gen.
func (fs *FS) listed(ino uint64, es []wire.DirEntry, gen uint64) {
	c := &fs.dc
	c.mu.Lock()
	defer c.mu.Unlock()
	if !fs.validLocked(gen) {
		c.dropLocked(ino)
		return
	}
	d := c.stateLocked(ino)
	if c.names+len(es)-len(d.names) > dirCacheMax {
		return
	}
	c.names -= len(d.names)
	d.names = make(map[string]uint64, len(es))
	for _, e := range es {
		d.names[e.Name] = e.Ino
	}
	c.names += len(d.names)
}

// forgetDir drops what is known of a directory (a change in it failed, so
// its state is uncertain).
func (fs *FS) forgetDir(ino uint64) {
	fs.dc.mu.Lock()
	fs.dc.dropLocked(ino)
	fs.dc.mu.Unlock()
}

// forget drops directories whose entries or attributes another node
// changed; called by the feed follower with c.mu held.
func (c *dirCache) forgetLocked(es []wire.DirEntry) {
	for _, e := range es {
		c.dropLocked(e.Ino)
	}
}
