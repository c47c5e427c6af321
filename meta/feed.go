package meta

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// The change feed lets mounts cache lookups and attributes for long and
// still see other nodes' changes at once: every namespace change (a name
// appearing, going or moving; an inode's attributes changing) gets the next
// position; a mount long-polls the feed (OpWatch) and tells its kernel to
// drop what it cached about each changed name and inode. A mount's own
// changes are not sent back to it (its kernel already knows them).
//
// Changes travel as ns.Change: ns.ChangeEntry with Ino the parent
// directory and Name the name, ns.ChangeAttr with Ino the inode, or
// ns.ChangeRecall (deleg.go).

// feedCap is how many changes the feed keeps for mounts that fall behind;
// a mount further behind is told it lost changes.
const feedCap = 1 << 16

// FeedWait bounds how long a watch (ns.Watch) waits for a change.
const FeedWait = 30 * time.Second

type change struct {
	pos    uint64
	client uint64
	e      ns.Change
}

type feed struct {
	mu   sync.Mutex // guards pos, ring, wake
	base uint64     // position before the first change (positions do not repeat across restarts)
	pos  uint64
	ring []change      // change at position p is ring[p%feedCap]
	wake chan struct{} // closed and replaced at every change
}

func (f *feed) init(now time.Time) {
	f.base = uint64(now.UnixNano())
	f.pos = f.base
	f.ring = make([]change, feedCap)
	f.wake = make(chan struct{})
}

// position returns the feed's current position.
func (f *feed) position() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

// add appends changes made by client (0: not a mount, e.g. a forwarding
// node reporting sizes).
func (f *feed) add(client uint64, es ...ns.Change) {
	f.mu.Lock()
	for _, e := range es {
		f.pos++
		f.ring[f.pos%feedCap] = change{pos: f.pos, client: client, e: e}
	}
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

// lastOther returns the position of the newest change kept to a name in
// directory dir that client (never 0) did not make, or 0 if there is none: what a
// mount must have seen to know every name there (its own it knows).
func (f *feed) lastOther(client, dir uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := f.pos; p > f.base && f.pos-p < feedCap; p-- {
		c := f.ring[p%feedCap]
		if c.e.Kind == ns.ChangeEntry && c.e.Ino == dir && c.client != client {
			return p
		}
	}
	return 0
}

// since returns the changes after position seen that client did not make,
// the current position, and whether changes after seen are no longer kept
// (or seen is from before a restart).
func (f *feed) since(seen, client uint64) ([]ns.Change, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seen > f.pos || seen < f.base || f.pos-seen > feedCap {
		return nil, f.pos, true
	}
	var out []ns.Change
	for p := seen + 1; p <= f.pos; p++ {
		if c := f.ring[p%feedCap]; c.client == 0 || c.client != client {
			out = append(out, c.e)
		}
	}
	return out, f.pos, false
}

// watch waits until the feed moves past seen with a change client did not
// make (or wait passes, or ctx ends) and returns what since returns.
func (f *feed) watch(ctx context.Context, seen, client uint64, wait time.Duration) ([]ns.Change, uint64, bool) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		f.mu.Lock()
		pos, wake := f.pos, f.wake
		f.mu.Unlock()
		if pos != seen {
			es, p, lost := f.since(seen, client)
			if len(es) > 0 || lost {
				return es, p, lost
			}
			seen = p // only our own changes: keep waiting
		}
		select {
		case <-wake:
		case <-t.C:
			return f.since(seen, client)
		case <-ctx.Done():
			return f.since(seen, client)
		}
	}
}

func entryChange(parent uint64, name string) ns.Change {
	return ns.Change{Kind: ns.ChangeEntry, Ino: parent, Name: name}
}

func attrChange(ino uint64) ns.Change { return ns.Change{Kind: ns.ChangeAttr, Ino: ino} }
