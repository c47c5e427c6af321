package meta

import (
	"encoding/binary"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// Open handles, and reclaiming them after a restart or a takeover.
//
// The service counts each file's open handles per client (a mount's id;
// 0 for callers without one), in memory: an unlinked file that is still
// open stays (an orphan, 'O' in the engine) until its last release. A
// server that starts on an engine another process used (a restart, or a
// standby taking over) knows none of the handles the mounts hold, so it
// keeps a grace period of ReclaimWait, as an NFSv4 server does: every
// mount, told by the change feed that it lost changes, sends its whole
// table (ns.Reclaim), which replaces what the server counted for it;
// meanwhile no file the old server may have known open is removed (an
// orphan stays; an unlink of a file with no handle known yet leaves an
// orphan, not garbage). When the grace period ends, the orphans nobody
// reclaimed are garbage. A mount that never reclaims (dead, or not
// following the feed) loses its handles' protection then, as a crashed
// client's are.

// ReclaimWait is how long a restarted metadata server waits for mounts
// to reclaim what they held (open handles) before it removes the files
// unlinked while open that nobody reclaimed: a change-feed watch, which
// tells each mount of the restart, and 10 s.
const ReclaimWait = FeedWait + 10*time.Second

// openTable is the open handles per inode, in total and per client.
// Guarded by Service.mu.
type openTable struct {
	total map[uint64]int
	by    map[uint64]map[uint64]int // client → inode → handles
}

func (o *openTable) init() {
	o.total, o.by = map[uint64]int{}, map[uint64]map[uint64]int{}
}

// open counts a handle of client on ino; it reports whether ino was
// closed before.
func (o *openTable) open(client, ino uint64) (first bool) {
	if o.by[client] == nil {
		o.by[client] = map[uint64]int{}
	}
	o.by[client][ino]++
	o.total[ino]++
	return o.total[ino] == 1
}

// release drops a handle of client on ino; it reports whether that was
// the last handle anyone held. A release of a handle the table does not
// know (one opened before a restart and not reclaimed yet) changes
// nothing.
func (o *openTable) release(client, ino uint64) (last bool) {
	c := o.by[client]
	if c[ino] == 0 {
		return false
	}
	if c[ino]--; c[ino] == 0 {
		delete(c, ino)
		if len(c) == 0 {
			delete(o.by, client)
		}
	}
	if o.total[ino]--; o.total[ino] > 0 {
		return false
	}
	delete(o.total, ino)
	return true
}

// replace makes client's handles those of held; it returns the inodes it
// held before that nobody holds now.
func (o *openTable) replace(client uint64, held map[uint64]int) (closed []uint64) {
	for ino, n := range o.by[client] {
		if o.total[ino] -= n; o.total[ino] <= 0 {
			delete(o.total, ino)
			if held[ino] == 0 {
				closed = append(closed, ino)
			}
		}
	}
	delete(o.by, client)
	for ino, n := range held {
		if n <= 0 {
			continue
		}
		if o.by[client] == nil {
			o.by[client] = map[uint64]int{}
		}
		o.by[client][ino] = n
		o.total[ino] += n
	}
	return closed
}

// inGrace reports whether the server still waits for mounts to
// reclaim handles or locks on ino: an inode numbered before this process
// started, within ReclaimWait of the start (grace is set once, in New).
func (s *Service) inGrace(ino uint64) bool {
	return ino <= s.grace.lastIno && s.now().Before(s.grace.until)
}

// Reclaim replaces client's open handles by held (inode → handles), as a
// mount sends them after a restart or a takeover; files it no longer
// holds that are unlinked go as at their last release. Inodes that no
// longer exist are left out.
func (s *Service) Reclaim(client uint64, held map[uint64]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	known := map[uint64]int{}
	for ino, n := range held {
		if _, err := s.getInode(ino); err == nil && n > 0 {
			known[ino] = n
		}
	}
	now := s.now()
	for ino := range known {
		if s.opens.total[ino] == 0 {
			s.openedLocked(ino, now)
		}
	}
	closed := s.opens.replace(client, known)
	s.log.Info("open handles reclaimed", "client", client, "files", len(known), "given up", len(closed))
	for _, ino := range closed {
		s.closedLocked(ino, now)
		if err := s.dropOrphanLocked(ino); err != nil {
			return err
		}
	}
	return nil
}

// dropOrphanLocked makes ino garbage if it is an orphan nobody holds,
// unless mounts may still reclaim it. Caller holds mu.
func (s *Service) dropOrphanLocked(ino uint64) error {
	if s.opens.total[ino] > 0 || s.inGrace(ino) {
		return nil
	}
	if _, err := s.e.Get(orphanKey(ino)); err != nil {
		return nil
	}
	var b engine.Batch
	b.Del(orphanKey(ino))
	b.Del(inodeKey(ino))
	b.Set(garbageKey(ino), nil)
	if err := s.e.Apply(&b, false); err != nil {
		return err
	}
	s.kickGC()
	return nil
}

// sweepOrphans, once the grace period is over, makes garbage of the
// orphans nobody reclaimed; it reports whether it is done (false: still
// in the grace period, or the engine failed).
func (s *Service) sweepOrphans() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.now().Before(s.grace.until) {
		return false
	}
	var orphans []uint64
	s.e.Scan([]byte{pOrphan}, nil, func(k, _ []byte) bool {
		orphans = append(orphans, binary.BigEndian.Uint64(k[1:]))
		return true
	})
	n := 0
	for _, ino := range orphans {
		if s.opens.total[ino] > 0 {
			continue
		}
		if err := s.dropOrphanLocked(ino); err != nil {
			s.log.Warn("removing files unlinked while open that nobody reclaimed", "err", err)
			return false
		}
		n++
	}
	s.log.Info("the mounts' time to reclaim open handles is over: removed the files unlinked while open that none reclaimed", "files", n, "open", len(s.opens.total))
	return true
}
