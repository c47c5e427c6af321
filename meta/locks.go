package meta

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/locktable"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// File locks across mounts.
//
// The service holds every mount's POSIX record locks, OFD locks and flock
// locks of the global namespace (internal/locktable), in memory: a lock
// taken through one node's mount conflicts with the locks of every other
// node's. A blocking request (F_SETLKW, flock without LOCK_NB) waits here
// up to its Wait, woken the moment a lock of its file is released, and is
// sent again by the mount until granted or interrupted (ns.LockCancel
// ends a wait at once). A POSIX request that would wait for an owner that
// itself waits, directly or through others, for the requester gets
// EDEADLK (Linux detects the same cycles for its own POSIX locks; flock
// and OFD waits are not checked, as in Linux).
//
// Every lock has a lease: a mount's locks go when the mount has sent no
// lock request or renewal (ns.LockRenew) for LockLease, so a dead or cut
// off node's locks are released then; a renewal after that is answered
// ENOLCK and the mount tells its log that its locks were lost. A server
// that starts (a restart, or a standby taking over) knows no lock: during
// the grace period of open handles (opens.go) mounts send their locks
// again (LockReq.Reclaim) and nothing else is granted on the files that
// existed before the start.

// The lease and the longest wait are the protocol's.
const (
	LockLease   = ns.LockLease
	LockWaitMax = ns.LockWaitMax
)

// lockState is the service's file locks. Its fields are guarded by mu.
type lockState struct {
	mu      sync.Mutex
	t       locktable.Table
	waiting map[locktable.Owner]*lockWaiter // who waits, for what
	byIno   map[uint64][]*lockWaiter
	seen    map[uint64]time.Time // mount → its last lock request or renewal
	expired map[uint64]bool      // mounts whose locks went with their lease
}

// lockWaiter is a blocked lock request.
type lockWaiter struct {
	ino       uint64
	l         locktable.Lock
	wake      chan struct{} // closed (once: woken) when a lock of ino is released, or cancelled
	woken     bool
	cancelled bool
}

// wakeUp closes w.wake unless it is closed.
func (w *lockWaiter) wakeUp() {
	if !w.woken {
		w.woken = true
		close(w.wake)
	}
}

func (ls *lockState) init() {
	ls.waiting = map[locktable.Owner]*lockWaiter{}
	ls.byIno = map[uint64][]*lockWaiter{}
	ls.seen = map[uint64]time.Time{}
	ls.expired = map[uint64]bool{}
}

// serveLocks adds the lock operations. A lock request is admitted like
// any request on its file (another mount's delegation that owns the file
// is recalled first), then waits without holding the delegations' lock.
func (s *Service) serveLocks(t *rpc.Table) {
	rpc.On(t, ns.Lock, func(ctx context.Context, q *ns.LockReq) (*ns.LockRep, error) {
		s.admit(ctx, q.Client, func() ([]uint64, uint64) { return nil, q.Ino })
		s.deleg.grantMu.RUnlock()
		return s.Lock(ctx, q)
	})
	rpc.On(t, ns.LockCancel, func(_ context.Context, q *ns.LockReq) (*wire.Empty, error) {
		s.LockCancel(q)
		return &wire.Empty{}, nil
	})
	rpc.On(t, ns.LockRenew, func(_ context.Context, q *ns.LockReq) (*wire.Empty, error) {
		return &wire.Empty{}, s.LockRenew(q.Client)
	})
}

// lockOf is the lock q asks for.
func lockOf(q *ns.LockReq) locktable.Lock {
	l := locktable.Lock{Owner: locktable.Owner{Client: q.Client, ID: q.Owner}, Kind: locktable.Kind(q.Kind),
		Type: locktable.Type(q.Type), Start: q.Start, End: min(q.End, locktable.MaxEnd), Pid: q.Pid}
	if l.Kind == locktable.Flock {
		l.Start, l.End = 0, locktable.MaxEnd
	}
	return l
}

// Lock serves a lock request (ns.Lock): a test, an unlock, or a lock
// granted now, after waiting up to q.Wait, or not.
func (s *Service) Lock(ctx context.Context, q *ns.LockReq) (*ns.LockRep, error) {
	if q.Kind > ns.LockFlock || q.Type > ns.LockUnlock || q.Start > q.End {
		return nil, errno(syscall.EINVAL, "lock of inode %d: kind %d, type %d, range %d-%d", q.Ino, q.Kind, q.Type, q.Start, q.End)
	}
	if q.Client == 0 {
		return nil, errno(syscall.EINVAL, "lock of inode %d from no mount", q.Ino)
	}
	if !wire.IsLocal(q.Ino) && q.Type != ns.LockUnlock {
		if _, err := s.getInode(q.Ino); err != nil {
			return nil, err
		}
	}
	ls := &s.locks
	l := lockOf(q)
	deadline := s.now().Add(min(time.Duration(q.Wait), LockWaitMax))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	s.expireLocksLocked()
	ls.seen[q.Client] = s.now()
	delete(ls.expired, q.Client)
	if q.Type == ns.LockUnlock {
		if ls.t.Unlock(q.Ino, l.Kind, l.Owner, l.Start, l.End) {
			s.wakeLocked(q.Ino)
		}
		return &ns.LockRep{Granted: true}, nil
	}
	if q.Test {
		rep := &ns.LockRep{Type: ns.LockUnlock}
		if c, ok := ls.t.Conflict(q.Ino, l); ok {
			rep = conflictRep(q, c)
		}
		return rep, nil
	}
	if !q.Reclaim && s.inGrace(q.Ino) {
		return &ns.LockRep{Grace: true}, nil
	}
	for {
		c, ok := ls.t.Conflict(q.Ino, l)
		if !ok {
			ls.t.Set(q.Ino, l)
			return &ns.LockRep{Granted: true}, nil
		}
		if q.Reclaim {
			// two mounts reclaim what cannot both have been held: the
			// first keeps it
			return nil, errno(syscall.ENOLCK, "lock of inode %d reclaimed by mount %d conflicts with mount %d's", q.Ino, q.Client, c.Client)
		}
		if q.Wait <= 0 || !s.now().Before(deadline) {
			rep := conflictRep(q, c)
			rep.Blocked = q.Wait > 0
			return rep, nil
		}
		if l.Kind == locktable.Posix && s.deadlockLocked(l.Owner, q.Ino, l) {
			return nil, errno(syscall.EDEADLK, "lock of inode %d by mount %d owner %x would wait for itself", q.Ino, q.Client, q.Owner)
		}
		w := &lockWaiter{ino: q.Ino, l: l, wake: make(chan struct{})}
		ls.waiting[l.Owner] = w
		ls.byIno[q.Ino] = append(ls.byIno[q.Ino], w)
		ls.mu.Unlock()
		t := time.NewTimer(deadline.Sub(s.now()))
		select {
		case <-w.wake:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		ls.mu.Lock()
		s.unwaitLocked(w)
		if w.cancelled || ctx.Err() != nil {
			return &ns.LockRep{Blocked: true}, nil
		}
		s.expireLocksLocked()
		ls.seen[q.Client] = s.now()
	}
}

// conflictRep describes lock c, in the way of q.
func conflictRep(q *ns.LockReq, c locktable.Lock) *ns.LockRep {
	return &ns.LockRep{Type: uint8(c.Type), Start: c.Start, End: c.End, Pid: c.Pid, Remote: c.Client != q.Client}
}

// LockCancel ends the wait of q's owner for a lock of q.Ino, if it waits
// (ns.LockCancel: the caller was interrupted).
func (s *Service) LockCancel(q *ns.LockReq) {
	ls := &s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if w := ls.waiting[locktable.Owner{Client: q.Client, ID: q.Owner}]; w != nil && w.ino == q.Ino {
		w.cancelled = true
		w.wakeUp()
	}
}

// LockRenew extends the lease of mount client's locks (ns.LockRenew); it
// fails with ENOLCK if they went with an earlier lease.
func (s *Service) LockRenew(client uint64) error {
	ls := &s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	s.expireLocksLocked()
	if ls.expired[client] {
		delete(ls.expired, client)
		return errno(syscall.ENOLCK, "mount %d's locks were released: it sent nothing for %v", client, LockLease)
	}
	ls.seen[client] = s.now()
	return nil
}

// Locks returns every lock held now.
func (s *Service) Locks() []locktable.Held {
	ls := &s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.t.Of(0)
}

// expireLocksLocked releases the locks of mounts whose lease ran out.
// Caller holds locks.mu.
func (s *Service) expireLocksLocked() {
	ls := &s.locks
	now := s.now()
	for client, at := range ls.seen {
		if now.Sub(at) < LockLease {
			continue
		}
		delete(ls.seen, client)
		inos := ls.t.DropClient(client)
		if len(inos) == 0 {
			continue
		}
		ls.expired[client] = true
		s.log.Warn("a mount's file locks released: its lease ran out", "client", client, "files", len(inos))
		for _, ino := range inos {
			s.wakeLocked(ino)
		}
	}
}

// wakeLocked wakes the requests waiting for a lock of ino. Caller holds
// locks.mu.
func (s *Service) wakeLocked(ino uint64) {
	for _, w := range s.locks.byIno[ino] {
		w.wakeUp()
	}
}

// unwaitLocked forgets waiter w. Caller holds locks.mu.
func (s *Service) unwaitLocked(w *lockWaiter) {
	ls := &s.locks
	if ls.waiting[w.l.Owner] == w {
		delete(ls.waiting, w.l.Owner)
	}
	ws := ls.byIno[w.ino]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(ls.byIno, w.ino)
	} else {
		ls.byIno[w.ino] = ws
	}
}

// deadlockLocked reports whether owner, waiting for l on ino, would wait
// for itself: an owner in its way waits, directly or through others,
// for a lock owner holds. Caller holds locks.mu.
func (s *Service) deadlockLocked(owner locktable.Owner, ino uint64, l locktable.Lock) bool {
	ls := &s.locks
	seen := map[locktable.Owner]bool{}
	var in func(ino uint64, l locktable.Lock) bool
	in = func(ino uint64, l locktable.Lock) bool {
		for _, b := range ls.t.Blockers(ino, l) {
			if b == owner {
				return true
			}
			if seen[b] {
				continue
			}
			seen[b] = true
			if w := ls.waiting[b]; w != nil && w.l.Kind == locktable.Posix && in(w.ino, w.l) {
				return true
			}
		}
		return false
	}
	return in(ino, l)
}
