package ns

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// The change feed and delegations.

// Change kinds (Change.Kind).
const (
	ChangeEntry  uint8 = 1 // a name in directory Ino appeared, went or moved
	ChangeAttr   uint8 = 2 // inode Ino's attributes changed
	ChangeRecall uint8 = 3 // the mount Holder is to give its delegation of directory Ino back (flushing its creates there first)
	ChangeAtime  uint8 = 4 // inode Ino's access time changed (since 2.6): its attributes, not its names or bytes
)

// Change is one change of the namespace, as the change feed carries it:
// a mount drops what it cached of the name or inode (docs/metadata.md).
type Change struct {
	Kind   uint8
	Ino    uint64
	Name   string
	Holder uint64
}

// Fields implements wire.Message.
func (ch *Change) Fields(c *wire.Codec) {
	c.Uint8(1, &ch.Kind)
	c.Uint64(2, &ch.Ino)
	c.String(3, &ch.Name)
	c.Uint64(4, &ch.Holder)
}

// WatchReq asks mount Client's changes of the feed after position Seen
// (0: just the position), waiting up to Wait (at most the service's
// bound) for one; a mount's own changes are not sent back to it.
type WatchReq struct {
	Client, Seen uint64
	Wait         time.Duration
}

// Fields implements wire.Message.
func (r *WatchReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Client)
	c.Uint64(2, &r.Seen)
	c.Duration(3, &r.Wait)
}

// WatchRep is the changes after the position asked, the feed's position
// now, and whether changes after the one asked are no longer kept (or it
// is from before a restart): the mount drops everything it cached.
type WatchRep struct {
	Changes []Change
	Feed    uint64
	Lost    bool
}

// Fields implements wire.Message.
func (r *WatchRep) Fields(c *wire.Codec) {
	wire.List(c, 1, &r.Changes)
	c.Uint64(2, &r.Feed)
	c.Bool(3, &r.Lost)
}

// DelegateReq asks (Delegate) or gives back (Undelegate) mount Client's
// delegation of directory Dir: the mount creates files there itself, with
// inode numbers handed to it, and sends them in batches.
type DelegateReq struct{ Client, Dir uint64 }

// Fields implements wire.Message.
func (r *DelegateReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Client)
	c.Uint64(2, &r.Dir)
}

// DelegateRep grants Count inode numbers from First; every change made to
// the directory before the grant is at or below feed position Feed (the
// mount waits for its feed to get there before it lists the directory
// from its cache).
type DelegateRep struct {
	First, Count uint64
	Feed         uint64
}

// Fields implements wire.Message.
func (r *DelegateRep) Fields(c *wire.Codec) {
	c.Uint64(1, &r.First)
	c.Uint64(2, &r.Count)
	c.Uint64(3, &r.Feed)
}

// ReclaimReq is mount Client's open handles (each file's count), sent
// whole when the change feed tells it the metadata service restarted or
// another server took over (meta/opens.go): they replace what the
// service counted for the mount.
type ReclaimReq struct {
	Client uint64
	Opens  []OpenCount
}

// Fields implements wire.Message.
func (r *ReclaimReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Client)
	wire.List(c, 2, &r.Opens)
}

// OpenCount is how many handles of file Ino a mount holds.
type OpenCount struct {
	Ino uint64
	N   uint32
}

// Fields implements wire.Message.
func (o *OpenCount) Fields(c *wire.Codec) {
	c.Uint64(1, &o.Ino)
	c.Uint32(2, &o.N)
}
