package client

import (
	"context"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/sluice-hpc/sluice/internal/wire"
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

// ttl returns the entry and attribute timeouts for a reply served at feed
// position gen.
func (fs *FS) ttl(gen uint64) time.Duration {
	if fs.dc.Fresh(gen) {
		return fs.cfg.MetaCache
	}
	return 0
}

// entryTimeouts sets an entry reply's timeouts.
func (fs *FS) entryTimeouts(gen uint64, out *fuse.EntryOut) {
	if t := fs.ttl(gen); t > 0 {
		out.SetEntryTimeout(t)
		out.SetAttrTimeout(t)
		return
	}
	out.SetEntryTimeout(fs.ent)
	out.SetAttrTimeout(fs.attr)
}

// attrTimeout sets an attribute reply's timeout.
func (fs *FS) attrTimeout(gen uint64, out *fuse.AttrOut) {
	if t := fs.ttl(gen); t > 0 {
		out.SetTimeout(t)
		return
	}
	out.SetTimeout(fs.attr)
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
	var seen uint64
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, wait+fs.cfg.Timeout)
		resp, _, err := fs.mc.Call(cctx, &wire.Msg{Op: wire.OpWatch, Gen: seen, Client: fs.dc.ID(),
			Size: uint64(wait / time.Millisecond)}, nil, nil)
		cancel()
		if err != nil {
			fs.wb.DropAll()
			if fs.dc.Unfollowed() {
				fs.log.Warn("metadata change feed unreachable: short cache timeouts until it is back", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		lost := resp.Flags&1 != 0
		if lost && seen != 0 {
			fs.log.Warn("metadata change feed lost changes (metadata service restarted, or this mount fell behind): names and attributes cached before may be stale for up to the cache timeout",
				"timeout", fs.cfg.MetaCache)
		}
		// the position first (vfs.DirCache.Advance): a reply served
		// before these changes must not be cached for long once their
		// invalidations may be out.
		wasLive := fs.dc.Advance(resp.Gen, lost, resp.Entries)
		if lost {
			// a recall may have been among the lost changes
			go fs.wb.DropAll()
		}
		fs.wb.Recall(resp.Entries)
		for _, e := range resp.Entries {
			switch e.Mode {
			case wire.ChangeEntry:
				srv.EntryNotify(e.Ino, e.Name)
			case wire.ChangeAttr:
				srv.InodeNotify(e.Ino, -1, 0)
			}
		}
		seen = resp.Gen
		if !wasLive && !lost {
			fs.log.Info("following the metadata change feed", "cache", fs.cfg.MetaCache)
		}
	}
}
