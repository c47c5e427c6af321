package ns

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// The daemons' operations: layouts, placements, size reports, copies
// given up, truncations, migrations' ends, accesses and activity.

// FileReq names a file.
type FileReq struct{ Ino uint64 }

// Fields implements wire.Message.
func (r *FileReq) Fields(c *wire.Codec) { c.Uint64(1, &r.Ino) }

// FileIno implements wire.OfFile.
func (r *FileReq) FileIno() uint64 { return r.Ino }

// AccessReq reports the files read or written through a forwarding
// daemon since its last report: each last accessed Ago before At (unix
// ns, the daemon's clock).
type AccessReq struct {
	At    int64
	Files []FileAccess
}

// Fields implements wire.Message.
func (r *AccessReq) Fields(c *wire.Codec) {
	c.Int64(1, &r.At)
	wire.List(c, 2, &r.Files)
}

// FileAccess is one file's last access.
type FileAccess struct {
	Ino uint64
	Ago time.Duration
}

// Fields implements wire.Message.
func (f *FileAccess) Fields(c *wire.Codec) {
	c.Uint64(1, &f.Ino)
	c.Duration(2, &f.Ago)
}

// LayoutRep is a file's chunk locations (the chunks with data).
type LayoutRep struct{ Chunks []wire.ChunkLoc }

// Fields implements wire.Message.
func (r *LayoutRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Chunks) }

// AllocReq asks where chunk Idx of file Ino goes (its place if another
// writer gave it one), for a writer working under the file's truncation
// generation Trunc, for job Job (its pool binding). Exclude is a data
// server that refused the chunk (it goes elsewhere, a lower tier if
// need be). MayWait: the writer can wait, up to Wait (at most a second),
// while the tier the chunk belongs on frees space. Empty: Exclude refused
// a write of the chunk, placed earlier, for room while holding nothing of
// it: move it if it holds nothing anywhere.
type AllocReq struct {
	Ino, Idx, Trunc uint64
	Exclude         uint64
	Job             string
	MayWait         bool
	Wait            time.Duration
	Empty           bool
}

// Fields implements wire.Message.
func (r *AllocReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	c.Uint64(2, &r.Idx)
	c.Uint64(3, &r.Trunc)
	c.Uint64(4, &r.Exclude)
	c.String(5, &r.Job)
	c.Bool(6, &r.MayWait)
	c.Duration(7, &r.Wait)
	c.Bool(8, &r.Empty)
}

// FileIno implements wire.OfFile.
func (r *AllocReq) FileIno() uint64 { return r.Ino }

// AllocRep is the chunk's place (nil when Stalled); Placed: this request
// placed it (or moved it off Exclude), else it is where another writer
// had it; Stalled: no place now, the tier is being freed (ask again, or
// without MayWait to spill to a lower tier); Waited: how long it was
// held.
type AllocRep struct {
	Chunk   *wire.ChunkLoc
	Placed  bool
	Stalled bool
	Waited  time.Duration
}

// Fields implements wire.Message.
func (r *AllocRep) Fields(c *wire.Codec) {
	wire.Opt(c, 1, &r.Chunk)
	c.Bool(2, &r.Placed)
	c.Bool(3, &r.Stalled)
	c.Duration(4, &r.Waited)
}

// ExtendReq reports file Ino's size (at least Size) and mtime as a
// writer working under truncation generation Trunc saw them, from mount
// Client (its own change is not echoed to it); Sync commits it durably,
// Close says the file is being closed (a tail chunk's room past its bytes
// may be given back).
type ExtendReq struct {
	Ino, Size uint64
	Mtime     int64
	Trunc     uint64
	Client    uint64
	Sync      bool
	Close     bool
}

// Fields implements wire.Message.
func (r *ExtendReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	c.Uint64(2, &r.Size)
	c.Int64(3, &r.Mtime)
	c.Uint64(4, &r.Trunc)
	c.Uint64(5, &r.Client)
	c.Bool(6, &r.Sync)
	c.Bool(7, &r.Close)
}

// FileIno implements wire.OfFile.
func (r *ExtendReq) FileIno() uint64 { return r.Ino }

// AttrRep is a file's attributes, as of change-feed position Feed: every
// change at or below it was applied before the reply was read, so a
// caller may cache the reply until it sees a later change.
type AttrRep struct {
	Attr *wire.Attr
	Feed uint64
}

// SetFeed sets the feed position the reply is as of.
func (r *AttrRep) SetFeed(pos uint64) { r.Feed = pos }

// Fields implements wire.Message.
func (r *AttrRep) Fields(c *wire.Codec) {
	wire.Opt(c, 1, &r.Attr)
	c.Uint64(2, &r.Feed)
}

// ChunkReq names chunk Idx of file Ino at layout generation Layout, and
// for Degrade the data server (Server) holding a copy of it that cannot be
// reached.
type ChunkReq struct {
	Ino, Idx, Layout uint64
	Server           uint64
}

// Fields implements wire.Message.
func (r *ChunkReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	c.Uint64(2, &r.Idx)
	c.Uint64(3, &r.Layout)
	c.Uint64(4, &r.Server)
}

// FileIno implements wire.OfFile.
func (r *ChunkReq) FileIno() uint64 { return r.Ino }

// ChunkRep is a chunk's location now.
type ChunkRep struct{ Chunk wire.ChunkLoc }

// Fields implements wire.Message.
func (r *ChunkRep) Fields(c *wire.Codec) { wire.Embed(c, 1, &r.Chunk) }

// TrimsReq asks, for data server Server, the truncations it has not
// applied, of file Ino (0: of every file).
type TrimsReq struct{ Server, Ino uint64 }

// Fields implements wire.Message.
func (r *TrimsReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Server)
	c.Uint64(2, &r.Ino)
}

// TrimsRep is the truncations and, for one file, its truncation
// generation.
type TrimsRep struct {
	Trims []wire.Trim
	Trunc uint64
}

// Fields implements wire.Message.
func (r *TrimsRep) Fields(c *wire.Codec) {
	wire.List(c, 1, &r.Trims)
	c.Uint64(2, &r.Trunc)
}

// TrimsDoneReq says data server Server applied Trims: the service forgets
// them.
type TrimsDoneReq struct {
	Server uint64
	Trims  []wire.Trim
}

// Fields implements wire.Message.
func (r *TrimsDoneReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Server)
	wire.List(c, 2, &r.Trims)
}

// MoveStateReq asks, for data server Server, how migration Session of
// chunk Idx of file Ino, which it stopped, ended.
type MoveStateReq struct {
	Server, Ino, Idx, Session uint64
}

// Fields implements wire.Message.
func (r *MoveStateReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Server)
	c.Uint64(2, &r.Ino)
	c.Uint64(3, &r.Idx)
	c.Uint64(4, &r.Session)
}

// Migration states (MoveStateRep.State).
const (
	MovePending   uint8 = iota // not decided yet; ask again
	MoveCommitted              // the chunk's location is the destination now (Layout its generation)
	MoveAborted                // the chunk stays where it was
)

// MoveStateRep is how the migration ended (State), whether the chunk was
// copied rather than moved (Keep: the source keeps it and fences only
// older generations), the committed layout generation, and the file's
// chunk size.
type MoveStateRep struct {
	State     uint8
	Keep      bool
	Layout    uint64
	ChunkSize uint32
}

// Fields implements wire.Message.
func (r *MoveStateRep) Fields(c *wire.Codec) {
	c.Uint8(1, &r.State)
	c.Bool(2, &r.Keep)
	c.Uint64(3, &r.Layout)
	c.Uint32(4, &r.ChunkSize)
}
