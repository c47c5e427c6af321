package vfs

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// The directory cache answers, without a round trip, the two requests the
// kernel sends before every create and unlink in a directory: GETATTR of
// the directory (the kernel drops a directory's attributes after each change
// in it, and default_permissions needs its mode) and, for a create, LOOKUP
// of the new name. It holds directories' attributes — from replies, and
// from the directory's attributes that the metadata service returns with
// each change inside it (ns.EntryRep.Parent) — and the complete list of
// names of directories this mount created (empty then, kept up to date by
// its own changes). Like the kernel's caches it is kept coherent by the
// change feed (feed.go): a change by another node to a directory drops its
// attributes and its names, and nothing is kept while the feed is not
// followed. Only directories: a file's size moves with writes that reach
// the metadata service late.
//
// The cache also holds the mount's place in the change feed (its origin id,
// the position whose invalidations may have reached the kernel, whether the
// feed is followed): the adapter's feed follower moves it (Advance,
// Unfollowed) and decides from it how long the kernel may cache a reply
// (Fresh).

// DirCacheMax bounds the directories and names held; past it, the cache
// starts again empty (it only saves round trips).
const DirCacheMax = 1 << 20

type dirState struct {
	attr  *wire.Attr        // nil: unknown
	names map[string]uint64 // complete listing: name → inode; nil: unknown
}

// DirCache is a mount's directory cache and its place in the change feed.
type DirCache struct {
	enabled bool   // the mount caches metadata (Config.MetaCache > 0)
	id      uint64 // this mount's origin id in the feed (random, odd)

	sent    atomic.Uint64 // feed position whose invalidations may have reached the kernel
	applied atomic.Uint64 // feed position whose invalidations have all been sent (Applied)
	live    atomic.Bool   // the feed is followed

	mu    sync.Mutex // guards dirs, names, files, fileEpoch; held by Advance around each batch
	dirs  map[uint64]*dirState
	names int // names held in all listings
	// files are regular files' attributes as this mount's own size
	// report at close left them (NoteFileAttr): a stat after a close is
	// answered here. fileEpoch counts this mount's changes to files
	// (ForgetFile, ForgetFiles); changed is the count at each file's last
	// change (ForgetFile; at most FileCacheMax, then cleared), allChanged
	// at the last change of them all: a report that a change to its file
	// overtook is not kept.
	files      map[uint64]wire.Attr
	fileEpoch  uint64
	changed    map[uint64]uint64
	allChanged uint64
}

// FileCacheMax bounds the files' attributes held; past it they are dropped.
const FileCacheMax = 1 << 16

// NewDirCache returns an empty cache; a disabled one never holds anything.
func NewDirCache(enabled bool) *DirCache {
	var b [8]byte
	rand.Read(b[:])
	return &DirCache{enabled: enabled, id: binary.LittleEndian.Uint64(b[:])>>1 | 1, dirs: map[uint64]*dirState{},
		files: map[uint64]wire.Attr{}, changed: map[uint64]uint64{}}
}

// ID is the mount's origin id in the change feed.
func (c *DirCache) ID() uint64 { return c.id }

// Sent is the feed position whose invalidations may have reached the kernel.
func (c *DirCache) Sent() uint64 { return c.sent.Load() }

// Fresh says whether a reply served at feed position gen may be cached
// for long: the feed is followed and no invalidation newer than the reply
// has gone out yet.
func (c *DirCache) Fresh(gen uint64) bool { return c.followed() && gen >= c.sent.Load() }

// Advance moves the cache to feed position gen, dropping the directories
// the changes es touch (everything if changes were lost); it reports
// whether the feed was followed before.
func (c *DirCache) Advance(gen uint64, lost bool, es []ns.Change) (wasLive bool) {
	// the position first, under the lock: a reply served before these
	// changes must not be cached once their invalidations may be out,
	// and one older than them cannot slip in after (validLocked)
	c.mu.Lock()
	c.sent.Store(gen)
	if lost {
		c.resetLocked()
	}
	for _, e := range es {
		if e.Kind == ns.ChangeAtime {
			c.dropAttrLocked(e.Ino) // a listing stays whole
			continue
		}
		c.dropLocked(e.Ino)
	}
	c.mu.Unlock()
	return c.live.Swap(true)
}

// Applied says every invalidation of the feed's changes up to position gen
// has been sent to the kernel (after Advance to gen and its notifies).
func (c *DirCache) Applied(gen uint64) {
	for {
		old := c.applied.Load()
		if gen <= old || c.applied.CompareAndSwap(old, gen) {
			return
		}
	}
}

// Opened notes an open of file ino at the service, answered at feed
// position gen. It reports whether this mount is behind that answer: the
// feed is not followed, or changes up to gen (another node's close just
// before the open) have not all been applied here. Then what the kernel
// holds of the file may predate them, and so may the attributes kept here
// (NoteFileAttr), which go: close-to-open.
func (c *DirCache) Opened(ino, gen uint64) (behind bool) {
	if c.followed() && gen <= c.applied.Load() {
		return false
	}
	c.ForgetFile(ino)
	return true
}

// Unfollowed says the feed cannot be followed: the cache empties and
// holds nothing until Advance. It reports whether the feed was followed.
func (c *DirCache) Unfollowed() (wasLive bool) {
	if !c.live.Swap(false) {
		return false
	}
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
	return true
}

// validLocked says whether a reply served at feed position gen may be
// cached: the feed is followed and no invalidation newer than the reply
// has gone out yet (a later one will reach the cache through dropLocked).
func (c *DirCache) validLocked(gen uint64) bool { return c.Fresh(gen) }

// followed says whether the change feed is being followed, so what the
// cache holds is current.
func (c *DirCache) followed() bool { return c.enabled && c.live.Load() }

func (c *DirCache) stateLocked(ino uint64) *dirState {
	d := c.dirs[ino]
	if d == nil {
		if len(c.dirs) >= DirCacheMax {
			c.resetLocked()
		}
		d = &dirState{}
		c.dirs[ino] = d
	}
	return d
}

func (c *DirCache) resetLocked() {
	c.dirs = map[uint64]*dirState{}
	c.names = 0
	c.files = map[uint64]wire.Attr{}
}

// dropLocked forgets what is known of inode ino (another node changed
// it).
func (c *DirCache) dropLocked(ino uint64) {
	if d := c.dirs[ino]; d != nil {
		c.names -= len(d.names)
		delete(c.dirs, ino)
	}
	delete(c.files, ino)
}

// dropAttrLocked forgets the attributes of inode ino, not its names
// (another node changed its access time).
func (c *DirCache) dropAttrLocked(ino uint64) {
	if d := c.dirs[ino]; d != nil {
		d.attr = nil
	}
	delete(c.files, ino)
}

// FileEpoch is the count of this mount's changes to files so far: a size
// report sent after reading it is kept by NoteFileAttr only if no change
// came in between.
func (c *DirCache) FileEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fileEpoch
}

// NoteFileAttr keeps a regular file's attributes that this mount's size
// report at close returned (served at feed position gen), unless a change
// of this mount's to that file (since epoch FileEpoch) or of another
// node's (the feed) came after it. The metadata service leaves that report's own change out
// of this mount's feed (its origin is this mount), so the entry lives
// until the file changes again.
func (c *DirCache) NoteFileAttr(a *wire.Attr, gen, epoch uint64) {
	if a == nil || a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.validLocked(gen) || c.allChanged > epoch || c.changed[a.Ino] > epoch {
		return
	}
	if len(c.files) >= FileCacheMax {
		c.files = map[uint64]wire.Attr{}
	}
	c.files[a.Ino] = *a
}

// FileAttr returns a regular file's attributes kept by NoteFileAttr.
func (c *DirCache) FileAttr(ino uint64) (wire.Attr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.files[ino]
	return a, ok && c.followed()
}

// ForgetFile drops file ino's attributes: this mount is changing it (a
// write, a truncate, a setattr).
func (c *DirCache) ForgetFile(ino uint64) {
	c.mu.Lock()
	c.fileEpoch++
	delete(c.files, ino)
	if len(c.changed) >= FileCacheMax {
		c.changed = map[uint64]uint64{}
		c.allChanged = c.fileEpoch
	}
	c.changed[ino] = c.fileEpoch
	c.mu.Unlock()
}

// ForgetFiles drops every file's attributes: this mount changed a name
// whose inode it may not know (a removal, a rename or a link changes its
// link count or ctime).
func (c *DirCache) ForgetFiles() {
	c.mu.Lock()
	c.fileEpoch++
	c.allChanged = c.fileEpoch
	if len(c.files) > 0 {
		c.files = map[uint64]wire.Attr{}
	}
	c.mu.Unlock()
}

// NoteAttr records the attributes of an inode from a reply served at gen,
// if it is a directory.
func (c *DirCache) NoteAttr(a *wire.Attr, gen uint64) {
	if a == nil || a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.validLocked(gen) {
		c.dropLocked(a.Ino)
		return
	}
	cp := *a
	c.stateLocked(a.Ino).attr = &cp
}

// DirAttr returns a directory's cached attributes.
func (c *DirCache) DirAttr(ino uint64) (wire.Attr, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.dirs[ino]; d != nil && d.attr != nil && c.followed() {
		return *d.attr, true
	}
	return wire.Attr{}, false
}

// Absent says the name is known not to exist in directory parent.
func (c *DirCache) Absent(parent uint64, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[parent]
	if d == nil || d.names == nil || !c.followed() {
		return false
	}
	_, ok := d.names[name]
	return !ok
}

// Present returns the inode that name has in directory parent, if the
// complete listing there is known.
func (c *DirCache) Present(parent uint64, name string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[parent]
	if d == nil || d.names == nil || !c.followed() {
		return 0, false
	}
	ino, ok := d.names[name]
	return ino, ok
}

// Empty says directory ino is known to have no entries (its complete
// listing is held and empty).
func (c *DirCache) Empty(ino uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[ino]
	return d != nil && d.names != nil && len(d.names) == 0 && c.followed()
}

// Changed records this mount's own change of name in directory parent
// (added, as inode ino, or removed), answered at gen with the directory's
// new attributes. A new directory made here starts with a complete, empty
// listing.
func (c *DirCache) Changed(parent uint64, name string, ino uint64, added bool, pattr *wire.Attr, gen uint64, newDir *wire.Attr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.validLocked(gen) || pattr == nil {
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
			if c.names >= DirCacheMax {
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

// Renamed records this mount's rename: names move between the two
// directories' listings; attributes are dropped (both directories and, for
// a directory moved, its own ctime and parent change; its inode is not
// known here), so the next getattr asks.
func (c *DirCache) Renamed(parent uint64, name string, newParent uint64, newName string, exchange bool) {
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

// Listed records a directory's complete listing (its names other than "."
// and ".."), read in one reply served at gen.
func (c *DirCache) Listed(ino uint64, es []wire.DirEntry, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.validLocked(gen) {
		c.dropLocked(ino)
		return
	}
	d := c.stateLocked(ino)
	if c.names+len(es)-len(d.names) > DirCacheMax {
		return
	}
	c.names -= len(d.names)
	d.names = make(map[string]uint64, len(es))
	for _, e := range es {
		d.names[e.Name] = e.Ino
	}
	c.names += len(d.names)
}

// ForgetDir drops what is known of a directory (a change in it failed, so
// its state is uncertain).
func (c *DirCache) ForgetDir(ino uint64) {
	c.mu.Lock()
	c.dropLocked(ino)
	c.mu.Unlock()
}
