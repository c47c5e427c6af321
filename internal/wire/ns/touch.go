package ns

import "github.com/sluice-hpc/sluice/internal/wire"

// TouchReq (since 2.6) gives the metadata service the access times of
// files and directories a mount read (read(2), readdir) under its atime
// rule (relatime, strictatime): Atimes[i] is when Inos[i] was last read.
// An access time only moves forward; nothing else of the inode changes
// (not its ctime), and a file the service does not know (removed since)
// is skipped. It is not a Request: a forwarding daemon relays it as it
// comes.
type TouchReq struct {
	Head
	Inos   []uint64
	Atimes []uint64 // nanoseconds since the epoch
}

// Fields implements wire.Message.
func (r *TouchReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64s(2, &r.Inos)
	c.Uint64s(3, &r.Atimes)
}
