// Package chunk is the protocol of the chunk service: the operations a
// data server answers about the chunks it stores (reads and writes,
// truncations, deletion, syncs, fences, settling a new chunk's room,
// migration sessions and copies, the pfs tier's namespace view),
// their request and reply types and their numbers (100-149). The
// forwarding daemons, the metadata service, the managers and the data
// servers' own movers call them; package data serves them. It must not
// know how a server stores or places chunks.
package chunk

import (
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Operation numbers of the chunk service.
const (
	OpWrite     wire.Op = 100 + iota // payload: the bytes
	OpRead                           // reply payload: the bytes
	OpTrunc                          // apply truncations
	OpDelete                         // drop every chunk of a file
	OpSync                           // make a file's chunks durable
	OpFence                          // fence an empty chunk at a layout generation
	OpSettle                         // give back new chunks' unused room
	OpMoveBegin                      // open a migration session at a source
	OpMoveStop                       // stop a source for the switch
	OpMoveEnd                        // end a migration at a source or destination
	OpMoveCopy                       // copy a chunk from its sources (the destination's mover)
	OpPfsLink                        // pfs tier: a namespace path for a file's object
	OpPfsRename                      // pfs tier: rename a namespace path
	OpPfsUnlink                      // pfs tier: remove a namespace path
	OpPfsGrow                        // pfs tier: grow a file's object
)

// The operations, typed.
var (
	Write     = wire.Define[WriteReq, wire.Empty](OpWrite, "chunk-write", wire.Chunks)
	Read      = wire.Define[ReadReq, ReadRep](OpRead, "chunk-read", wire.Chunks)
	Trunc     = wire.Define[TruncReq, wire.Empty](OpTrunc, "chunk-trunc", wire.Chunks)
	Delete    = wire.Define[DeleteReq, wire.Empty](OpDelete, "chunk-delete", wire.Chunks)
	Sync      = wire.Define[SyncReq, wire.Empty](OpSync, "chunk-sync", wire.Chunks)
	Fence     = wire.Define[FenceReq, FenceRep](OpFence, "chunk-fence", wire.Chunks)
	Settle    = wire.Define[SettleReq, wire.Empty](OpSettle, "chunk-settle", wire.Chunks)
	MoveBegin = wire.Define[MoveReq, MoveBeginRep](OpMoveBegin, "move-begin", wire.Chunks)
	MoveStop  = wire.Define[MoveReq, MoveStopRep](OpMoveStop, "move-stop", wire.Chunks)
	MoveEnd   = wire.Define[MoveEndReq, wire.Empty](OpMoveEnd, "move-end", wire.Chunks)
	MoveCopy  = wire.Define[MoveCopyReq, MoveCopyRep](OpMoveCopy, "move-copy", wire.Chunks)
	PfsLink   = wire.Define[PfsLinkReq, wire.Empty](OpPfsLink, "pfs-link", wire.Chunks)
	PfsRename = wire.Define[PfsRenameReq, wire.Empty](OpPfsRename, "pfs-rename", wire.Chunks)
	PfsUnlink = wire.Define[PfsUnlinkReq, wire.Empty](OpPfsUnlink, "pfs-unlink", wire.Chunks)
	PfsGrow   = wire.Define[PfsGrowReq, wire.Empty](OpPfsGrow, "pfs-grow", wire.Chunks)
)

// ID names one chunk: chunk Idx of file Ino, whose chunks are ChunkSize
// bytes (a server's local object of it holds its stripes).
type ID struct {
	Ino, Idx  uint64
	ChunkSize uint32
}

// Fields implements wire.Message.
func (id *ID) Fields(c *wire.Codec) {
	c.Uint64(1, &id.Ino)
	c.Uint64(2, &id.Idx)
	c.Uint32(3, &id.ChunkSize)
}

// At is where a read or write goes and under what it was made: bytes
// [Off, Off+Len) of the server's local object of chunk ID, at the chunk's
// layout generation Layout (a server the chunk moved away from refuses
// older ones: EREMCHG) and the file's truncation generation Trunc (a
// write of an older one is refused: ESTALE).
type At struct {
	ID
	Off, Len      uint64
	Layout, Trunc uint64
}

// Fields implements wire.Message.
func (a *At) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &a.ID)
	c.Uint64(2, &a.Off)
	c.Uint64(3, &a.Len)
	c.Uint64(4, &a.Layout)
	c.Uint64(5, &a.Trunc)
}

// WriteReq writes its payload (Len bytes) at At. Reserve is the room
// the chunk's local object may grow to (charged against the server's
// budget when the write creates it).
type WriteReq struct {
	At
	Reserve uint64
	Who     wire.Who
}

// Fields implements wire.Message.
func (r *WriteReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.At)
	c.Uint64(2, &r.Reserve)
	wire.Embed(c, 3, &r.Who)
}

// ReadReq reads Len bytes at At; the reply's payload is what there is
// (less at the end of the chunk). Session names the migration whose mover
// reads a stopped chunk (0: an ordinary read, which waits while the chunk
// is stopped).
type ReadReq struct {
	At
	Session uint64
	Who     wire.Who
}

// Fields implements wire.Message.
func (r *ReadReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.At)
	c.Uint64(2, &r.Session)
	wire.Embed(c, 3, &r.Who)
}

// ReadRep says how many bytes the payload holds.
type ReadRep struct{ Len uint64 }

// Fields implements wire.Message.
func (r *ReadRep) Fields(c *wire.Codec) { c.Uint64(1, &r.Len) }

// IO is implemented by the requests that move chunk data.
type IO interface {
	wire.Message
	Where() *At
	Identity() wire.Who
	IsWrite() bool
}

func (r *WriteReq) Where() *At         { return &r.At }
func (r *WriteReq) Identity() wire.Who { return r.Who }
func (r *WriteReq) IsWrite() bool      { return true }
func (r *WriteReq) Class() wire.Class  { return wire.IOClass(r.Len) }
func (r *WriteReq) FileIno() uint64    { return r.Ino }
func (r *ReadReq) Where() *At          { return &r.At }
func (r *ReadReq) Identity() wire.Who  { return r.Who }
func (r *ReadReq) IsWrite() bool       { return false }
func (r *ReadReq) Class() wire.Class   { return wire.IOClass(r.Len) }
func (r *ReadReq) FileIno() uint64     { return r.Ino }
func (r *SyncReq) Identity() wire.Who  { return r.Who }
func (r *SyncReq) Class() wire.Class   { return wire.ClassSmall }
func (r *SyncReq) FileIno() uint64     { return r.Ino }
func (r *TruncReq) FileIno() uint64    { return r.Ino }
func (r *DeleteReq) FileIno() uint64   { return r.Ino }
func (r *FenceReq) FileIno() uint64    { return r.Ino }
func (r *MoveReq) FileIno() uint64     { return r.Ino }
func (r *MoveEndReq) FileIno() uint64  { return r.Ino }
func (r *MoveCopyReq) FileIno() uint64 { return r.Ino }
func (r *PfsLinkReq) FileIno() uint64  { return r.Ino }
func (r *PfsGrowReq) FileIno() uint64  { return r.Ino }
func (r *MoveReq) Identity() wire.Who  { return r.Who }

var (
	_ IO = (*WriteReq)(nil)
	_ IO = (*ReadReq)(nil)
)

// TruncReq applies truncations of file Ino.
type TruncReq struct {
	Ino   uint64
	Trims []wire.Trim
}

// Fields implements wire.Message.
func (r *TruncReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	wire.List(c, 2, &r.Trims)
}

// DeleteReq drops every chunk of file Ino the server holds (the file was
// deleted).
type DeleteReq struct{ Ino uint64 }

// Fields implements wire.Message.
func (r *DeleteReq) Fields(c *wire.Codec) { c.Uint64(1, &r.Ino) }

// SyncReq makes what the server holds of file Ino durable.
type SyncReq struct {
	Ino uint64
	Who wire.Who
}

// Fields implements wire.Message.
func (r *SyncReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	wire.Embed(c, 2, &r.Who)
}

// FenceReq fences chunk ID at layout generation Layout if the server
// holds no byte of it (EEXIST if it does, EBUSY while it migrates): the
// metadata service then places it elsewhere. With Undo, a fence this
// operation raised to Layout goes back down to UndoTo (the move was given
// up).
type FenceReq struct {
	ID
	Layout uint64
	Undo   bool
	UndoTo uint64
}

// Fields implements wire.Message.
func (r *FenceReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.ID)
	c.Uint64(2, &r.Layout)
	c.Bool(3, &r.Undo)
	c.Uint64(4, &r.UndoTo)
}

// FenceRep is the chunk's fence before the request.
type FenceRep struct{ Before uint64 }

// Fields implements wire.Message.
func (r *FenceRep) Fields(c *wire.Codec) { c.Uint64(1, &r.Before) }

// SettleReq gives back the room the listed chunks reserved past their
// bytes (their files were closed).
type SettleReq struct{ Chunks []ID }

// Fields implements wire.Message.
func (r *SettleReq) Fields(c *wire.Codec) { wire.List(c, 1, &r.Chunks) }

// MoveReq opens (MoveBegin) or stops (MoveStop) migration Session of
// chunk ID at a source member; Who is the mover's identity.
type MoveReq struct {
	ID
	Session uint64
	Who     wire.Who
}

// Fields implements wire.Message.
func (r *MoveReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.ID)
	c.Uint64(2, &r.Session)
	wire.Embed(c, 3, &r.Who)
}

// MoveBeginRep is the length of the source's local object of the chunk.
type MoveBeginRep struct{ Len uint64 }

// Fields implements wire.Message.
func (r *MoveBeginRep) Fields(c *wire.Codec) { c.Uint64(1, &r.Len) }

// Run is a range of a local object.
type Run struct{ Off, Len uint64 }

// Fields implements wire.Message.
func (r *Run) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Off)
	c.Uint64(2, &r.Len)
}

// MoveStopRep is the length of the stopped source's local object and the
// ranges written since the session began; Cut says the chunk was
// truncated meanwhile (the copy is void).
type MoveStopRep struct {
	Len     uint64
	Written []Run
	Cut     bool
}

// Fields implements wire.Message.
func (r *MoveStopRep) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Len)
	wire.List(c, 2, &r.Written)
	c.Bool(3, &r.Cut)
}

// MoveEndReq ends migration Session of chunk ID at a member: a source
// (Source) fences and drops the chunk if the move was Committed at layout
// generation Layout (Keep: it was copied, not moved; only older
// generations are fenced), and serves it again if not; a destination
// drops its copy if the move was not committed. Session 0 ends no session:
// a source's copy given up (replicas).
type MoveEndReq struct {
	ID
	Session   uint64
	Source    bool
	Committed bool
	Keep      bool
	Layout    uint64
}

// Fields implements wire.Message.
func (r *MoveEndReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.ID)
	c.Uint64(2, &r.Session)
	c.Bool(3, &r.Source)
	c.Bool(4, &r.Committed)
	c.Bool(5, &r.Keep)
	c.Uint64(6, &r.Layout)
}

// MoveCopyReq asks a destination member's mover to copy chunk ID of
// stripe unit StripeUnit, under migration Session and the file's
// truncation generation Trunc, from group From to group To (Servers:
// their addresses). Clean: To holds the chunk's bytes already (its home on
// the PFS); only what is written during the move is copied.
type MoveCopyReq struct {
	ID
	StripeUnit uint32
	Session    uint64
	Trunc      uint64
	From, To   wire.ChunkLoc
	Servers    []wire.ServerInfo
	Clean      bool
}

// Fields implements wire.Message.
func (r *MoveCopyReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.ID)
	c.Uint32(2, &r.StripeUnit)
	c.Uint64(3, &r.Session)
	c.Uint64(4, &r.Trunc)
	wire.Embed(c, 5, &r.From)
	wire.Embed(c, 6, &r.To)
	wire.List(c, 7, &r.Servers)
	c.Bool(8, &r.Clean)
}

// MoveCopyRep is the chunk's length, or with Clean the bytes copied.
type MoveCopyRep struct{ Len uint64 }

// Fields implements wire.Message.
func (r *MoveCopyRep) Fields(c *wire.Codec) { c.Uint64(1, &r.Len) }

// PfsLinkReq makes namespace path Path point at file Ino's object, as
// long as Size; with Attr, the plain file gets the file's mode, owner
// and times.
type PfsLinkReq struct {
	Ino  uint64
	Path string
	Size uint64
	Attr *wire.Attr
}

// Fields implements wire.Message.
func (r *PfsLinkReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	c.String(2, &r.Path)
	c.Uint64(3, &r.Size)
	wire.Opt(c, 4, &r.Attr)
}

// PfsRenameReq renames namespace path From to To.
type PfsRenameReq struct{ From, To string }

// Fields implements wire.Message.
func (r *PfsRenameReq) Fields(c *wire.Codec) {
	c.String(1, &r.From)
	c.String(2, &r.To)
}

// PfsUnlinkReq removes namespace path Path.
type PfsUnlinkReq struct{ Path string }

// Fields implements wire.Message.
func (r *PfsUnlinkReq) Fields(c *wire.Codec) { c.String(1, &r.Path) }

// PfsGrowReq makes file Ino's object at least Size bytes long.
type PfsGrowReq struct {
	Ino  uint64
	Size uint64
}

// Fields implements wire.Message.
func (r *PfsGrowReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	c.Uint64(2, &r.Size)
}
