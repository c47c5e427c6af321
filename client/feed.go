package client

import (
	"context"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

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
func (fs *FS) ttl(gen, ino uint64, d *dentry) time.Duration {
	srv := fs.srv.Load()
	if srv == nil || !fs.dc.Fresh(gen) {
		return 0
	}
	if inos, names := fs.long.note(ino, d); inos != nil {
		go fs.invalidate(srv, inos, names) // not from inside a request
	}
	return fs.cfg.MetaCache
}

// entryTimeouts sets the timeouts of an entry reply for name in parent.
func (fs *FS) entryTimeouts(gen, parent uint64, name string, out *fuse.EntryOut) {
	var d *dentry
	if name != "" {
		d = &dentry{parent, name}
	}
	if t := fs.ttl(gen, out.NodeId, d); t > 0 {
		out.SetEntryTimeout(t)
		out.SetAttrTimeout(t)
		return
	}
	out.SetEntryTimeout(fs.ent)
	out.SetAttrTimeout(fs.attr)
}

// attrTimeout sets an attribute reply's timeout.
func (fs *FS) attrTimeout(gen, ino uint64, out *fuse.AttrOut) {
	if t := fs.ttl(gen, ino, nil); t > 0 {
		out.SetTimeout(t)
		return
	}
	out.SetTimeout(fs.attr)
}

// invalidate drops the given names and inodes from the kernel's caches.
func (fs *FS) invalidate(srv *fuse.Server, inos map[uint64]struct{}, names map[dentry]struct{}) {
	for d := range names {
		srv.EntryNotify(d.parent, d.name)
	}
	for ino := range inos {
		srv.InodeNotify(ino, -1, 0)
	}
}

// invalidateLong drops from the kernel's caches everything it may hold for
// the long timeout (changes to it may have been lost).
func (fs *FS) invalidateLong(srv *fuse.Server) {
	inos, names := fs.long.take()
	fs.invalidate(srv, inos, names)
	if n := len(inos) + len(names); n > 0 {
		fs.log.Info("invalidated the kernel's long-cached names and attributes after lost changes", "inodes", len(inos), "names", len(names))
	}
}

// Join takes the change feed's current position, before the mount
// serves its first request (call it before Mount): from then on the
// directory cache and the creates answered here work, and Follow goes on
// from that position. Without it the mount served requests before
// Follow's first answer, with nothing cached and creates sent to the
// service, and that answer (from position 0: changes lost) emptied what
// had been cached meanwhile. An unreachable service leaves it to Follow.
func (fs *FS) Join(ctx context.Context) {
	if fs.mc == nil || fs.cfg.MetaCache <= 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, fs.cfg.Timeout)
	defer cancel()
	// from position 0 the feed answers at once, with its position
	resp, err := rpc.Do(cctx, fs.mc, ns.Watch, &ns.WatchReq{Client: fs.dc.ID()})
	if err != nil {
		return
	}
	fs.dc.Advance(resp.Feed, false, nil)
	fs.dc.Applied(resp.Feed)
	fs.bc.Applied(resp.Feed)
	fs.joined = resp.Feed
	fs.log.Info("following the metadata change feed", "cache", fs.cfg.MetaCache)
}

// Follow follows the metadata service's change feed until ctx ends,
// invalidating the kernel's cached names and attributes that other nodes
// change. Without it (or with MetaCache 0) the mount caches for the short
// timeouts only.
func (fs *FS) Follow(ctx context.Context, srv *fuse.Server) {
	if fs.mc == nil || fs.cfg.MetaCache <= 0 {
		return
	}
	wait := min(fs.cfg.Timeout/2, 10*time.Second)
	seen := fs.joined
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, wait+fs.cfg.Timeout)
		resp, err := rpc.Do(cctx, fs.mc, ns.Watch, &ns.WatchReq{Client: fs.dc.ID(), Seen: seen, Wait: wait})
		cancel()
		if err != nil {
			fs.wb.DropAll()
			fs.bc.Unfollowed()
			if fs.dc.Unfollowed() {
				fs.log.Warn("metadata change feed unreachable: short cache timeouts until it is back", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if fs.cfg.FeedDelay > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(fs.cfg.FeedDelay):
			}
		}
		lost := resp.Lost
		if lost && seen != 0 {
			fs.log.Warn("metadata change feed lost changes (metadata service restarted, or this mount fell behind): names and attributes cached before may be stale for up to the cache timeout",
				"timeout", fs.cfg.MetaCache)
		}
		// the position first (vfs.DirCache.Advance): a reply served
		// before these changes must not be cached for long once their
		// invalidations may be out.
		if lost {
			fs.invalidateLong(srv)
			fs.st.DropAllReadahead()
			fs.bc.DropAll()
		}
		wasLive := fs.dc.Advance(resp.Feed, lost, resp.Changes)
		if lost {
			// a recall may have been among the lost changes
			go fs.wb.DropAll()
		}
		fs.wb.Recall(resp.Changes)
		for _, e := range resp.Changes {
			switch e.Kind {
			case ns.ChangeEntry:
				srv.EntryNotify(e.Ino, e.Name)
			case ns.ChangeAttr:
				srv.InodeNotify(e.Ino, -1, 0)
				// another node wrote the file (its close or fsync
				// reported it): bytes fetched ahead or kept may be old
				fs.st.DropReadahead(e.Ino)
				fs.bc.Drop(e.Ino)
			}
		}
		fs.dc.Applied(resp.Feed)
		fs.bc.Applied(resp.Feed)
		seen = resp.Feed
		if !wasLive && !lost {
			fs.log.Info("following the metadata change feed", "cache", fs.cfg.MetaCache)
		}
	}
}
