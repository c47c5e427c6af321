package vfs

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Access times. The kernel sends a FUSE file system every read and
// readdir and marks the inode's atime stale after each, so the next stat
// asks; updating it is the file system's work. The mount applies its
// rule (AtimeRule: Linux's relatime by default, strictatime, noatime;
// NoDiratime for directories; none on a read-only mount) to the times it
// last saw of the inode, answers its own stats with the new access time
// at once, and sends the access times to the metadata service in the
// background, a batch a second (ns.Touch), as lazytime does: another
// node sees them within a second or so, and a mount that dies loses at
// most that second's. A read answered from the mount's own bytes (an
// owned file, the block cache, readahead) is a read like any other.

// AtimeRule is when a read updates an inode's access time (mount(8)'s
// relatime, strictatime and noatime).
type AtimeRule string

// The rules.
const (
	// Relatime updates it when it is not after the modification or
	// change time, or is a day old (Linux's default).
	Relatime AtimeRule = "relatime"
	// Strictatime updates it at every read.
	Strictatime AtimeRule = "strictatime"
	// Noatime never updates it.
	Noatime AtimeRule = "noatime"
)

// ParseAtimeRule returns the rule named s ("" is relatime).
func ParseAtimeRule(s string) (AtimeRule, error) {
	switch r := AtimeRule(s); r {
	case "":
		return Relatime, nil
	case Relatime, Strictatime, Noatime:
		return r, nil
	}
	return "", fmt.Errorf("atime rule %q: relatime, strictatime or noatime", s)
}

const (
	// atimeEvery is how often access times are sent to the service.
	atimeEvery = time.Second
	// atimeBatch bounds the access times sent in one request.
	atimeBatch = 1024
	// atimeKnownMax bounds the inodes whose times are remembered; past
	// it they are forgotten, and the next read of each sends its time
	// for the service to judge (atimes.due).
	atimeKnownMax = 1 << 16
	// relatimeAge is how old an access time relatime updates anyway.
	relatimeAge = 24 * time.Hour
)

type inoTimes struct{ atime, mtime, ctime int64 }

// atimes applies a mount's atime rule and keeps the access times not yet
// sent.
type atimes struct {
	rule  AtimeRule
	noDir bool
	// readOnly says whether the mount is read-only now (nil: never)
	readOnly func() bool
	now      func() time.Time

	mu sync.Mutex // guards known, due
	// known are the times last seen of inodes (at most atimeKnownMax)
	known map[uint64]inoTimes
	// due are the access times to send; while here, this mount's stats
	// answer them
	due map[uint64]int64
}

func newAtimes(rule AtimeRule, noDir bool, readOnly func() bool, now func() time.Time) *atimes {
	return &atimes{rule: rule, noDir: noDir, readOnly: readOnly, now: now,
		known: map[uint64]inoTimes{}, due: map[uint64]int64{}}
}

// seen notes a's times (a reply of the service), and answers this mount's
// access time of a's inode if it is later and not sent yet.
func (t *atimes) seen(a *wire.Attr) { t.note(a, true) }

// cached gives a, the attributes of an inode kept by this mount since a
// reply of the service (DirCache), the access time of this mount's
// reads since: the service's replies are the times seen (another node's
// change drops the kept attributes, and the next reply brings it), these
// are not.
func (t *atimes) cached(a *wire.Attr) { t.note(a, false) }

// note is seen (fresh: a reply of the service) or cached.
func (t *atimes) note(a *wire.Attr, fresh bool) {
	if t == nil || a == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.due[a.Ino]; ok && at > a.Atime {
		a.Atime = at
	}
	if k, ok := t.known[a.Ino]; ok && !fresh {
		a.Atime = max(a.Atime, k.atime)
		return
	}
	if len(t.known) >= atimeKnownMax {
		clear(t.known)
	}
	t.known[a.Ino] = inoTimes{a.Atime, a.Mtime, a.Ctime}
}

// wrote notes a write of ino through this mount: its modification time
// is now, so relatime updates the access time at the next read.
func (t *atimes) wrote(ino uint64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.known[ino]; ok {
		k.mtime = t.now().UnixNano()
		t.known[ino] = k
	}
}

// read notes a read of ino (dir: a listing) and says whether its access
// time changes.
func (t *atimes) read(ino uint64, dir bool) bool {
	if t == nil || t.rule == Noatime || dir && t.noDir {
		return false
	}
	now := t.now().UnixNano()
	t.mu.Lock()
	k, known := t.known[ino]
	if known && !t.dueLocked(k, now) {
		t.mu.Unlock()
		return false
	}
	t.mu.Unlock()
	if t.readOnly != nil && t.readOnly() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if now > t.due[ino] {
		t.due[ino] = now
	}
	if known {
		k.atime = max(k.atime, now)
		t.known[ino] = k
	}
	return true
}

// dueLocked says whether the rule updates an access time of times k at
// now. Caller holds mu.
func (t *atimes) dueLocked(k inoTimes, now int64) bool {
	switch {
	case now <= k.atime:
		return false
	case t.rule == Strictatime:
		return true
	}
	return k.atime <= k.mtime || k.atime <= k.ctime || time.Duration(now-k.atime) >= relatimeAge
}

// take returns up to atimeBatch access times to send.
func (t *atimes) take() (inos, at []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ino, a := range t.due {
		if len(inos) == atimeBatch {
			break
		}
		inos, at = append(inos, ino), append(at, uint64(a))
	}
	return inos, at
}

// sent forgets the access times sent, unless read again meanwhile.
func (t *atimes) sent(inos, at []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, ino := range inos {
		if t.due[ino] == int64(at[i]) {
			delete(t.due, ino)
		}
	}
}

// pending is how many access times wait to be sent.
func (t *atimes) pending() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.due)
}

// SendAtimes sends the access times of reads to the metadata service
// every second until ctx ends (Close sends the last ones).
func (v *FS) SendAtimes(ctx context.Context) {
	if v.at == nil {
		return
	}
	tick := time.NewTicker(atimeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			v.sendAtimes(ctx)
		}
	}
}

// sendAtimes sends the access times waiting, in batches; a batch that
// fails stays for the next round.
func (v *FS) sendAtimes(ctx context.Context) {
	for v.at.pending() > 0 {
		inos, at := v.at.take()
		// after the creates and removals they depend on, as every
		// request that leaves the mount
		v.wb.Settle(inos...)
		to := rpc.Invoker(v.home)
		if v.mc != nil {
			to = v.mc
		}
		c, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
		_, err := rpc.Do(c, to, ns.Touch, &ns.TouchReq{Head: ns.Head{Client: v.dc.ID()}, Inos: inos, Atimes: at})
		cancel()
		if rpc.Errno(err) == syscall.ENOSYS {
			// a metadata service older than 2.6 keeps no access times
			v.log.Warn("the metadata service does not keep access times (protocol before 2.6)")
			v.at.sent(inos, at)
			continue
		}
		if err != nil {
			v.log.Warn("sending access times failed; they wait for the next round", "files", len(inos), "err", err)
			return
		}
		v.at.sent(inos, at)
	}
}
