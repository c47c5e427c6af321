package vfs

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Coherent caching of lookups and attributes. The kernel may keep what a
// lookup or getattr returned for MetaCache (default 60 s) instead of the
// short AttrTimeout, because the mount follows the metadata service's
// change feed (meta/feed.go) and drops from the kernel's caches every name
// and inode another node changes, a few hundred microseconds after the
// change. Replies carry the feed's position when they were served; a reply
// older than an invalidation already sent may describe what was just
// invalidated, so it is cached for the short timeouts only. When the feed
// cannot be followed (metadata service unreachable), new replies get the
// short timeouts until it can; changes missed meanwhile are fetched when
// it comes back (the feed keeps the last 65,536).
//
// When changes are lost for good (the metadata service restarted, or this
// mount fell more than the feed's length behind), every name and inode
// the kernel may hold for the long timeout is invalidated: the mount
// remembers them (longCached) until the next loss. The memory is bounded:
// at the bound, what it holds is invalidated in the background and it
// starts again.

// longCachedMax bounds the names and inodes remembered as cached for long.
const longCachedMax = 1 << 18

type dentry struct {
	parent uint64
	name   string
}

// longCached is what the kernel may hold for the long timeout since the
// feed last lost changes.
type longCached struct {
	mu    sync.Mutex // guards inos, names
	inos  map[uint64]struct{}
	names map[dentry]struct{}
}

// note remembers an inode (and the name it was looked up by, if any)
// served with the long timeout. At the bound, what was remembered is
// handed back to be invalidated (spill), so the set starts again: the
// kernel then looks those names up once more, instead of the mount giving
// up long timeouts for good.
func (c *longCached) note(ino uint64, d *dentry) (spillInos map[uint64]struct{}, spillNames map[dentry]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.inos)+len(c.names) >= longCachedMax {
		spillInos, spillNames = c.inos, c.names
		c.inos, c.names = nil, nil
	}
	if c.inos == nil {
		c.inos, c.names = map[uint64]struct{}{}, map[dentry]struct{}{}
	}
	c.inos[ino] = struct{}{}
	if d != nil {
		c.names[*d] = struct{}{}
	}
	return spillInos, spillNames
}

// take returns and forgets everything remembered.
func (c *longCached) take() (map[uint64]struct{}, map[dentry]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inos, names := c.inos, c.names
	c.inos, c.names = nil, nil
	return inos, names
}

// ttl returns the timeout for a reply about ino (looked up by d, if not
// nil) served at feed position gen: the long one when the feed makes it
// safe (the mount can then invalidate it later), else 0.
func (v *FS) ttl(gen, ino uint64, d *dentry) time.Duration {
	n := v.notify.Load()
	if n == nil || !v.dc.Fresh(gen) {
		return 0
	}
	if inos, names := v.long.note(ino, d); inos != nil {
		go v.invalidate(n, inos, names) // not from inside a request
	}
	return v.cfg.MetaCache
}

// TTL is how long the kernel may keep a name (Entry) and an inode's
// attributes (Attr) it was answered.
type TTL struct {
	Entry, Attr time.Duration
}

// entryTTL is how long the kernel may keep name in parent, inode ino,
// answered as of feed position gen.
func (v *FS) entryTTL(gen, parent uint64, name string, ino uint64) TTL {
	var d *dentry
	if name != "" {
		d = &dentry{parent, name}
	}
	if t := v.ttl(gen, ino, d); t > 0 {
		return TTL{t, t}
	}
	return TTL{v.cfg.EntryTimeout, v.cfg.AttrTimeout}
}

// attrTTL is how long the kernel may keep ino's attributes answered as of
// feed position gen.
func (v *FS) attrTTL(gen, ino uint64) time.Duration {
	if t := v.ttl(gen, ino, nil); t > 0 {
		return t
	}
	return v.cfg.AttrTimeout
}

// invalidate drops the given names and inodes from the kernel's caches.
func (v *FS) invalidate(n *notifier, inos map[uint64]struct{}, names map[dentry]struct{}) {
	for d := range names {
		n.EntryNotify(d.parent, d.name)
	}
	for ino := range inos {
		n.AttrNotify(ino)
	}
}

// invalidateLong drops from the kernel's caches everything it may hold for
// the long timeout (changes to it may have been lost).
func (v *FS) invalidateLong(n *notifier) {
	inos, names := v.long.take()
	v.invalidate(n, inos, names)
	if k := len(inos) + len(names); k > 0 {
		v.log.Info("invalidated the kernel's long-cached names and attributes after lost changes", "inodes", len(inos), "names", len(names))
	}
}

// Join takes the change feed's current position, before the mount
// serves its first request: from then on the directory cache and the
// creates answered here work, and Follow goes on from that position.
// Without it the mount served requests before Follow's first answer, with
// nothing cached and creates sent to the service, and that answer (from
// position 0: changes lost) emptied what had been cached meanwhile. An
// unreachable service leaves it to Follow.
func (v *FS) Join(ctx context.Context) {
	if v.mc == nil || v.cfg.MetaCache <= 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	// from position 0 the feed answers at once, with its position
	resp, err := rpc.Do(cctx, v.mc, ns.Watch, &ns.WatchReq{Client: v.dc.ID()})
	if err != nil {
		return
	}
	v.dc.Advance(resp.Feed, false, nil)
	v.dc.Applied(resp.Feed)
	v.bc.Applied(resp.Feed)
	v.joined = resp.Feed
	v.log.Info("following the metadata change feed", "cache", v.cfg.MetaCache)
}

// Follow follows the metadata service's change feed until ctx ends,
// dropping from the kernel's caches (the Notifier, which must be set) the
// names and attributes that other nodes change. Without it (or with
// MetaCache 0) the mount caches for the short timeouts only.
func (v *FS) Follow(ctx context.Context) {
	n := v.notify.Load()
	if v.mc == nil || v.cfg.MetaCache <= 0 || n == nil {
		return
	}
	wait := min(v.cfg.Timeout/2, 10*time.Second)
	seen := v.joined
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, wait+v.cfg.Timeout)
		resp, err := rpc.Do(rpc.LongPoll(cctx), v.mc, ns.Watch, &ns.WatchReq{Client: v.dc.ID(), Seen: seen, Wait: wait})
		cancel()
		if err != nil {
			v.wb.DropAll()
			v.bc.Unfollowed()
			if v.dc.Unfollowed() {
				v.log.Warn("metadata change feed unreachable: short cache timeouts until it is back", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if v.cfg.FeedDelay > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(v.cfg.FeedDelay):
			}
		}
		lost := resp.Lost
		if lost && seen != 0 {
			v.log.Warn("metadata change feed lost changes (metadata service restarted, or this mount fell behind): names and attributes cached before may be stale for up to the cache timeout",
				"timeout", v.cfg.MetaCache)
		}
		// the position first (DirCache.Advance): a reply served before
		// these changes must not be cached for long once their
		// invalidations may be out.
		if lost {
			v.invalidateLong(n)
			v.st.DropAllReadahead()
			v.bc.DropAll()
		}
		wasLive := v.dc.Advance(resp.Feed, lost, resp.Changes)
		if lost {
			// a recall may have been among the lost changes; and the
			// service may have restarted, knowing none of the handles
			// open here (after the creates that open some)
			go func() {
				v.wb.DropAll()
				v.reclaim(ctx)
				v.reclaimLocks()
			}()
		}
		v.wb.Recall(resp.Changes)
		for _, e := range resp.Changes {
			switch e.Kind {
			case ns.ChangeEntry:
				n.EntryNotify(e.Ino, e.Name)
			case ns.ChangeAttr:
				n.AttrNotify(e.Ino)
				// another node wrote the file (its close or fsync
				// reported it): bytes fetched ahead or kept may be old
				v.st.DropReadahead(e.Ino)
				v.bc.Drop(e.Ino)
			case ns.ChangeAtime:
				n.AttrNotify(e.Ino) // its names and bytes are as they were
			}
		}
		v.dc.Applied(resp.Feed)
		v.bc.Applied(resp.Feed)
		seen = resp.Feed
		if !wasLive && !lost {
			v.log.Info("following the metadata change feed", "cache", v.cfg.MetaCache)
		}
	}
}

// reclaim sends the mount's open handles to the metadata service
// (Handles.Reclaim), which may have restarted or changed.
func (v *FS) reclaim(ctx context.Context) {
	n, err := v.handles.Reclaim(ctx, v.mc, v.dc.ID(), v.cfg.Timeout)
	if err != nil {
		v.log.Warn("reclaiming the open handles from the metadata service failed: files unlinked while open here may be removed", "files", n, "err", err)
		return
	}
	if n > 0 {
		v.log.Info("reclaimed the open handles from the metadata service", "files", n)
	}
}
