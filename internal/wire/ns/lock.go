package ns

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// LockReq is a file-lock request of a mount (since 2.4; meta/locks.go):
// owner Owner of mount Client (Head.Client) takes, tests or gives up a
// lock of Kind (LockPosix, LockFlock) and Type (LockRead, LockWrite,
// LockUnlock) over [Start, End] of Ino. Wait, if set, is how long the
// service may hold the request while another owner's lock conflicts (a
// blocking F_SETLKW or flock, sent again after each wait); Test asks
// only what would conflict (F_GETLK). LockRenew's request carries only
// Head: it extends the lease of every lock of the mount.
type LockReq struct {
	Head
	Ino        uint64
	Owner      uint64
	Kind       uint8
	Type       uint8
	Start, End uint64
	Pid        uint32
	Wait       int64 // nanoseconds
	Test       bool
	Reclaim    bool // held before a restart or takeover (during the grace period)
}

// LockLease is how long a mount's locks outlive its last lock request or
// renewal at the metadata service; a mount holding locks renews them
// every LockLease/3.
const LockLease = 15 * time.Second

// LockWaitMax bounds one wait of a blocking lock request at the service
// (the mount sends it again), below every caller's request timeout.
const LockWaitMax = 5 * time.Second

// Lock kinds and types, as LockReq carries them.
const (
	LockPosix = 0 // fcntl and OFD record locks
	LockFlock = 1 // flock(2)

	LockRead   = 0
	LockWrite  = 1
	LockUnlock = 2
)

// Fields implements wire.Message.
func (r *LockReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint64(3, &r.Owner)
	c.Uint8(4, &r.Kind)
	c.Uint8(5, &r.Type)
	c.Uint64(6, &r.Start)
	c.Uint64(7, &r.End)
	c.Uint32(8, &r.Pid)
	c.Int64(9, &r.Wait)
	c.Bool(10, &r.Test)
	c.Bool(11, &r.Reclaim)
}

// Inodes implements Request.
func (r *LockReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// LockRep answers a LockReq: Granted, or the lock in the way (Type
// LockUnlock if none: a test that would succeed) with its holder's
// process id and whether it is on another mount. Blocked means the wait
// ended without the lock (sent again, or given up when the caller was
// interrupted). Grace means the service has just started and still takes
// back the locks mounts held before (meta/locks.go): only those are
// granted on the file until the grace period ends; the mount asks again.
type LockRep struct {
	Granted    bool
	Blocked    bool
	Type       uint8
	Start, End uint64
	Pid        uint32
	Remote     bool
	Grace      bool
}

// Fields implements wire.Message.
func (r *LockRep) Fields(c *wire.Codec) {
	c.Bool(1, &r.Granted)
	c.Bool(2, &r.Blocked)
	c.Uint8(3, &r.Type)
	c.Uint64(4, &r.Start)
	c.Uint64(5, &r.End)
	c.Uint32(6, &r.Pid)
	c.Bool(7, &r.Remote)
	c.Bool(8, &r.Grace)
}
