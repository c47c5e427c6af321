package vfs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/locktable"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// File locks: the metadata service holds them for every mount
// (meta/locks.go); the mount keeps a copy of those granted to its
// processes, so that a close sends an unlock only when its owner holds a
// lock, the locks are renewed while any is held (ns.LockLease), and they
// are reclaimed from a restarted or new metadata server.
//
// A lock orders access to the file's bytes across nodes, as NFS makes it
// do: before a lock is given up, this mount's writes to the file reach
// the forwarding node and the size they reached is reported (as a close
// does); once a lock is granted, what this mount cached of the file (its
// blocks, readahead and attributes) is dropped, so the holder reads what
// the last holder wrote. Programs that order their I/O by locks (SQLite's
// rollback journal, ROMIO's data sieving, HDF5) then see each other's
// writes on any node.

// LockArgs is a lock as the kernel asks for it.
type LockArgs struct {
	Flock      bool   // flock(2), not a record lock
	Type       uint8  // ns.LockRead, ns.LockWrite, ns.LockUnlock
	Start, End uint64 // inclusive
	Pid        uint32
}

// locks is the mount's copy of its granted locks.
type locks struct {
	mu sync.Mutex
	t  locktable.Table // guarded by mu
	// ofd is, per open file handle, the record-lock owners that locked
	// through it: an OFD lock's owner is the open file, whose locks go at
	// its release (a process's record locks went at its flush already).
	// Guarded by mu.
	ofd map[uint64]map[uint64]bool
}

// kindOf is the kind of a flock (true) or record lock.
func kindOf(flock bool) locktable.Kind {
	if flock {
		return locktable.Flock
	}
	return locktable.Posix
}

// holds reports whether owner holds a lock of kind on ino here.
func (ls *locks) holds(ino uint64, k locktable.Kind, owner uint64, client uint64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.t.Holds(ino, k, locktable.Owner{Client: client, ID: owner})
}

// granted copies what the service granted (or unlocked) into the table.
func (ls *locks) granted(ino, fh uint64, q *ns.LockReq) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	o := locktable.Owner{Client: q.Client, ID: q.Owner}
	k := locktable.Kind(q.Kind)
	if q.Type == ns.LockUnlock {
		ls.t.Unlock(ino, k, o, q.Start, q.End)
		return
	}
	ls.t.Set(ino, locktable.Lock{Owner: o, Kind: k, Type: locktable.Type(q.Type), Start: q.Start, End: q.End, Pid: q.Pid})
	if k == locktable.Posix && fh != 0 {
		if ls.ofd == nil {
			ls.ofd = map[uint64]map[uint64]bool{}
		}
		if ls.ofd[fh] == nil {
			ls.ofd[fh] = map[uint64]bool{}
		}
		ls.ofd[fh][q.Owner] = true
	}
}

// GetLock answers F_GETLK: the lock in the way of a, or a lock of type
// ns.LockUnlock if there is none. A holder on another node has pid 0
// (its pid means nothing here).
func (v *FS) GetLock(c Cred, ino, owner uint64, a LockArgs) (LockArgs, error) {
	q := v.lockReq(ino, owner, a)
	q.Test = true
	rep, err := call(v, c, ns.Lock, q)
	if err != nil {
		return LockArgs{}, err
	}
	out := LockArgs{Flock: a.Flock, Type: rep.Type, Start: rep.Start, End: rep.End, Pid: rep.Pid}
	if rep.Remote {
		out.Pid = 0
	}
	return out, nil
}

func (v *FS) lockReq(ino, owner uint64, a LockArgs) *ns.LockReq {
	q := &ns.LockReq{Ino: ino, Owner: owner, Type: a.Type, Start: a.Start, End: min(a.End, locktable.MaxEnd), Pid: a.Pid}
	if a.Flock {
		q.Kind = ns.LockFlock
	}
	q.Client = v.dc.ID()
	return q
}

// SetLock takes or gives up a lock for owner through open file fh (F_SETLK,
// F_SETLKW with wait, flock). A blocking request waits at the service,
// sent again after each wait, until granted or cancel is closed (the
// caller got a signal: EINTR, which the kernel restarts).
func (v *FS) SetLock(c Cred, ino, fh, owner uint64, a LockArgs, wait bool, cancel <-chan struct{}) error {
	q := v.lockReq(ino, owner, a)
	if a.Type == ns.LockUnlock && !v.locks.holds(ino, kindOf(a.Flock), owner, q.Client) {
		return nil // nothing held: nothing to tell the service
	}
	if a.Type == ns.LockUnlock {
		if err := v.publish(c, ino); err != nil {
			return err
		}
	}
	if wait {
		q.Wait = int64(ns.LockWaitMax)
	}
	id := v.ident(c, ns.OpLock)
	for {
		q.Req = 0 // each try a request of its own
		type result struct {
			rep *ns.LockRep
			err error
		}
		done := make(chan result, 1)
		go func() {
			rep, _, err := callAs[ns.LockReq, ns.LockRep](v, c, id, ns.Lock, q, nil)
			done <- result{rep, err}
		}()
		var r result
		interrupted := false
		select {
		case r = <-done:
		case <-cancel:
			interrupted = true
			// end the wait at the service, then take its answer: a
			// lock granted meanwhile is the caller's
			cq := *q
			cq.Req = 0
			if _, _, err := send[ns.LockReq, wire.Empty](v, c, id, ns.LockCancel, &cq, nil); err != nil {
				v.log.Warn("giving up a lock wait failed", "ino", ino, "err", err)
			}
			r = <-done
		}
		if r.err != nil {
			return r.err
		}
		if r.rep.Granted {
			v.locks.granted(ino, fh, q)
			if a.Type != ns.LockUnlock {
				v.revalidate(ino)
			}
			return nil
		}
		if interrupted {
			return syscall.EINTR
		}
		if r.rep.Grace {
			// the service takes back the locks held before it started:
			// a blocking request waits for the grace period to end, a
			// non-blocking one is told the lock is busy (it may be)
			if !wait {
				return syscall.EAGAIN
			}
			select {
			case <-cancel:
				return syscall.EINTR
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if !wait {
			return syscall.EAGAIN
		}
	}
}

// publish makes this mount's writes to ino visible to the next holder of
// a lock on it: they reach the forwarding node, and the size each
// handle's writes reached is reported, as at a close.
func (v *FS) publish(c Cred, ino uint64) error {
	if err := v.st.Drain(ino); err != nil {
		return err
	}
	id := v.ident(c, ns.OpFlush)
	for _, fh := range v.st.WrittenHandles(ino) {
		if err := v.flush(c, id, ino, fh, v.dc.FileEpoch()); err != nil {
			return err
		}
	}
	return nil
}

// revalidate drops what this mount cached of ino's bytes and attributes:
// a lock was granted on it, and the last holder may have written it on
// another node.
func (v *FS) revalidate(ino uint64) {
	v.bc.Drop(ino)
	v.st.DropReadahead(ino)
	v.dc.ForgetFile(ino)
	if n := v.notify.Load(); n != nil {
		n.AttrNotify(ino) // the kernel's size (O_APPEND, SEEK_END, stat)
	}
}

// ReleaseLocks gives up the locks that end with a close: owner's record
// locks on ino at a flush (POSIX: any close by the process); at the
// release of handle fh, its flock lock (flockOwner, if the kernel says
// the handle had one) and the OFD locks taken through it.
func (v *FS) ReleaseLocks(c Cred, ino, fh uint64, flush bool, owner uint64, flock bool) {
	v.locks.mu.Lock()
	none := v.locks.t.Len() == 0 && len(v.locks.ofd) == 0
	v.locks.mu.Unlock()
	if none {
		return // the common close: this mount holds no lock at all
	}
	var owners []uint64
	if flush {
		owners = []uint64{owner}
	} else {
		v.locks.mu.Lock()
		for o := range v.locks.ofd[fh] {
			owners = append(owners, o)
		}
		delete(v.locks.ofd, fh)
		v.locks.mu.Unlock()
		if flock {
			if err := v.SetLock(c, ino, 0, owner, LockArgs{Flock: true, Type: ns.LockUnlock, End: locktable.MaxEnd}, false, nil); err != nil {
				v.log.Warn("releasing a flock lock at close failed", "ino", ino, "err", err)
			}
		}
	}
	for _, o := range owners {
		if err := v.SetLock(c, ino, 0, o, LockArgs{Type: ns.LockUnlock, End: locktable.MaxEnd}, false, nil); err != nil {
			v.log.Warn("releasing record locks at close failed", "ino", ino, "err", err)
		}
	}
}

// RenewLocks renews the mount's locks at the metadata service every
// ns.LockLease/3 while it holds any, until ctx ends. If the service
// answers that they went with their lease (the mount was cut off or
// stalled for longer), the mount forgets them and says so.
func (v *FS) RenewLocks(ctx context.Context) {
	t := time.NewTicker(ns.LockLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v.locks.mu.Lock()
		n := v.locks.t.Len()
		v.locks.mu.Unlock()
		if n == 0 {
			continue
		}
		q := &ns.LockReq{}
		q.Client = v.dc.ID()
		_, _, err := send[ns.LockReq, wire.Empty](v, Cred{}, ident.ID{}, ns.LockRenew, q, nil)
		if rpc.Errno(err) == syscall.ENOLCK {
			v.log.Error("this mount's file locks were released by the metadata service (its lease ran out): the processes holding them no longer do", "locks", n, "err", err)
			v.locks.mu.Lock()
			v.locks.t.DropClient(q.Client)
			v.locks.mu.Unlock()
		} else if err != nil {
			v.log.Warn("renewing the file locks' lease failed", "err", err)
		}
	}
}

// reclaimLocks sends the mount's locks to a metadata service that may
// have restarted (it knows none during its grace period); a lock it
// refuses is dropped here, and said.
func (v *FS) reclaimLocks() {
	v.locks.mu.Lock()
	held := v.locks.t.Of(v.dc.ID())
	v.locks.mu.Unlock()
	n := 0
	for _, h := range held {
		q := &ns.LockReq{Ino: h.Ino, Owner: h.ID, Kind: uint8(h.Kind), Type: uint8(h.Type), Start: h.Start, End: h.End, Pid: h.Pid, Reclaim: true}
		q.Client = h.Client
		rep, _, err := send[ns.LockReq, ns.LockRep](v, Cred{}, ident.ID{}, ns.Lock, q, nil)
		if err == nil && rep.Granted {
			n++
			continue
		}
		v.log.Error("a file lock held here could not be reclaimed from the metadata service: its holder no longer has it", "ino", h.Ino, "err", err)
		v.locks.mu.Lock()
		v.locks.t.Unlock(h.Ino, h.Kind, h.Owner, h.Start, h.End)
		v.locks.mu.Unlock()
	}
	if n > 0 {
		v.log.Info("reclaimed the file locks from the metadata service", "locks", n)
	}
}
