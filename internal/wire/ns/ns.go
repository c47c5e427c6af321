// Package ns is the protocol of the namespace service: the operations a
// mount sends about files and directories (through a forwarding daemon,
// which answers reads, writes and size reports itself), those the daemons
// send the metadata service (layouts, placements, size reports, trims),
// the change feed and delegations: their request and reply types and
// their numbers (400-499; docs/protocol.md). It must not know how the
// service keeps the namespace.
package ns

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// Operation numbers of the namespace service.
const (
	OpAccess      wire.Op = 400 + iota // a forwarding daemon's recent reads and writes of files
	OpActivity                         // a file's open/close history
	OpLayout                           // a file's chunk locations
	OpAlloc                            // place a chunk
	OpExtend                           // a writer's size report
	OpDegrade                          // give up a copy whose server cannot be reached
	OpDirty                            // give up a drained chunk's home before it is written
	OpTrims                            // truncations a data server has not applied
	OpTrimsDone                        // a data server applied truncations
	OpMoveState                        // how a migration a data server stopped for ended
	OpWatch                            // the change feed: changes after a position
	OpDelegate                         // a mount asks to create in a directory itself
	OpUndelegate                       // a mount gives a delegation back
	OpPing                             // is the server there (a forwarding daemon answers its id)
	OpLookup                           // a name in a directory
	OpGetattr                          // an inode's attributes
	OpSetattr                          // change attributes (chmod, chown, truncate, utimes)
	OpMknod                            // make a file (regular, FIFO, socket, device), or open one made
	OpMkdir                            // make a directory
	OpUnlink                           // remove a name of a file
	OpRmdir                            // remove an empty directory
	OpRename                           // rename (renameat2)
	OpLink                             // a hard link
	OpSymlink                          // make a symbolic link
	OpReadlink                         // a symbolic link's target
	OpReaddir                          // a directory's entries, in name order
	OpOpen                             // open a file
	OpRelease                          // close a file
	OpRead                             // read a file's bytes (through a forwarding daemon)
	OpWrite                            // write a file's bytes (through a forwarding daemon)
	OpFsync                            // make a file's writes durable
	OpFlush                            // a file's close: its size reported
	OpStatfs                           // the file system's capacity and use
	OpSetLayout                        // a directory's chunk size and striping, or its local mode
	OpCreateBatch                      // a delegation holder's creates and removals
	OpSync                             // commit the metadata service's state durably
)

// The operations, typed.
var (
	Access     = wire.Define[AccessReq, wire.Empty](OpAccess, "access", wire.Namespace)
	Activity   = wire.Define[FileReq, wire.Activity](OpActivity, "activity", wire.Namespace)
	Layout     = wire.Define[FileReq, LayoutRep](OpLayout, "layout", wire.Namespace)
	Alloc      = wire.Define[AllocReq, AllocRep](OpAlloc, "alloc", wire.Namespace)
	Extend     = wire.Define[ExtendReq, AttrRep](OpExtend, "extend", wire.Namespace)
	Degrade    = wire.Define[ChunkReq, ChunkRep](OpDegrade, "degrade", wire.Namespace)
	Dirty      = wire.Define[ChunkReq, ChunkRep](OpDirty, "dirty", wire.Namespace)
	Trims      = wire.Define[TrimsReq, TrimsRep](OpTrims, "trims", wire.Namespace)
	TrimsDone  = wire.Define[TrimsDoneReq, wire.Empty](OpTrimsDone, "trims-done", wire.Namespace)
	MoveState  = wire.Define[MoveStateReq, MoveStateRep](OpMoveState, "move-state", wire.Namespace)
	Watch      = wire.Define[WatchReq, WatchRep](OpWatch, "watch", wire.Namespace)
	Delegate   = wire.Define[DelegateReq, DelegateRep](OpDelegate, "delegate", wire.Namespace)
	Undelegate = wire.Define[DelegateReq, wire.Empty](OpUndelegate, "undelegate", wire.Namespace)

	Ping        = wire.Define[PingReq, PingRep](OpPing, "ping", wire.Namespace)
	Lookup      = wire.Define[NameReq, EntryRep](OpLookup, "lookup", wire.Namespace)
	Getattr     = wire.Define[InoReq, AttrRep](OpGetattr, "getattr", wire.Namespace)
	Setattr     = wire.Define[SetattrReq, AttrRep](OpSetattr, "setattr", wire.Namespace)
	Mknod       = wire.Define[MknodReq, EntryRep](OpMknod, "mknod", wire.Namespace)
	Mkdir       = wire.Define[MkdirReq, EntryRep](OpMkdir, "mkdir", wire.Namespace)
	Unlink      = wire.Define[NameReq, EntryRep](OpUnlink, "unlink", wire.Namespace)
	Rmdir       = wire.Define[NameReq, EntryRep](OpRmdir, "rmdir", wire.Namespace)
	Rename      = wire.Define[RenameReq, FeedRep](OpRename, "rename", wire.Namespace)
	Link        = wire.Define[LinkReq, EntryRep](OpLink, "link", wire.Namespace)
	Symlink     = wire.Define[SymlinkReq, EntryRep](OpSymlink, "symlink", wire.Namespace)
	Readlink    = wire.Define[InoReq, ReadlinkRep](OpReadlink, "readlink", wire.Namespace)
	Readdir     = wire.Define[ReaddirReq, ReaddirRep](OpReaddir, "readdir", wire.Namespace)
	Open        = wire.Define[OpenReq, AttrRep](OpOpen, "open", wire.Namespace)
	Release     = wire.Define[InoReq, FeedRep](OpRelease, "release", wire.Namespace)
	Read        = wire.Define[IOReq, IORep](OpRead, "read", wire.Namespace)
	Write       = wire.Define[IOReq, IORep](OpWrite, "write", wire.Namespace)
	Fsync       = wire.Define[SizeReq, FeedRep](OpFsync, "fsync", wire.Namespace)
	Flush       = wire.Define[SizeReq, AttrRep](OpFlush, "flush", wire.Namespace)
	Statfs      = wire.Define[PingReq, StatfsRep](OpStatfs, "statfs", wire.Namespace)
	SetLayout   = wire.Define[SetLayoutReq, SetLayoutRep](OpSetLayout, "setlayout", wire.Namespace)
	CreateBatch = wire.Define[BatchReq, BatchRep](OpCreateBatch, "create-batch", wire.Namespace)
	Sync        = wire.Define[wire.Empty, wire.Empty](OpSync, "sync", wire.Namespace)
)

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

// Change kinds (Change.Kind).
const (
	ChangeEntry  uint8 = 1 // a name in directory Ino appeared, went or moved
	ChangeAttr   uint8 = 2 // inode Ino's attributes changed
	ChangeRecall uint8 = 3 // the mount Holder is to give its delegation of directory Ino back (flushing its creates there first)
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

// Head is what every request of a mount carries, through its forwarding
// daemon: the application behind it (set once by the mount, read by
// every layer that schedules or records it), the mount (Client: the id it
// picked; its own changes are not echoed to it by the change feed, its
// delegations are its own), and, on an entry operation a forwarding
// daemon sends to the data server holding a local-mode directory's
// entry, Local.
type Head struct {
	Who    wire.Who
	Client uint64
	Local  bool
}

// Fields implements wire.Message.
func (h *Head) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &h.Who)
	c.Uint64(2, &h.Client)
	c.Bool(3, &h.Local)
}

// Header returns the request's head (every request type embeds one).
func (h *Head) Header() *Head { return h }

// Request is a request of the namespace service that a mount sends.
type Request interface {
	wire.Message
	Header() *Head
	// Inodes are the inodes the request names (0: none): its file, its
	// directory, the directory it moves a name to. A forwarding daemon
	// sends one that names a node-local inode to that inode's data
	// server.
	Inodes() (ino, parent, newParent uint64)
}

// PingReq asks nothing but an answer (Ping), or the capacity (Statfs).
type PingReq struct{ Head }

// Fields implements wire.Message.
func (r *PingReq) Fields(c *wire.Codec) { wire.Embed(c, 1, &r.Head) }

// Inodes implements Request.
func (r *PingReq) Inodes() (uint64, uint64, uint64) { return 0, 0, 0 }

// PingRep is the answering daemon's id (a forwarding daemon's; 0 from the
// others).
type PingRep struct{ ID uint64 }

// Fields implements wire.Message.
func (r *PingRep) Fields(c *wire.Codec) { c.Uint64(1, &r.ID) }

// InoReq names an inode.
type InoReq struct {
	Head
	Ino uint64
}

// Fields implements wire.Message.
func (r *InoReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
}

// Inodes implements Request.
func (r *InoReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// FileIno implements wire.OfFile.
func (r *InoReq) FileIno() uint64 { return r.Ino }

// NameReq names an entry: Name in directory Parent.
type NameReq struct {
	Head
	Parent uint64
	Name   string
}

// Fields implements wire.Message.
func (r *NameReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	c.String(3, &r.Name)
}

// Inodes implements Request.
func (r *NameReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, 0 }

// Setattr mask bits (SetattrReq.Mask).
const (
	SetMode uint32 = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	// SetKillPriv clears S_ISUID, and S_ISGID if group execution is
	// allowed, of a file that is not a directory (a write, truncate or
	// chown by an unprivileged caller, as Linux does).
	SetKillPriv
)

// SetattrReq changes inode Ino's attributes named by Mask.
type SetattrReq struct {
	Head
	Ino          uint64
	Mask         uint32
	Mode         uint32
	Uid, Gid     uint32
	Size         uint64
	Atime, Mtime int64
}

// Fields implements wire.Message.
func (r *SetattrReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint32(3, &r.Mask)
	c.Uint32(4, &r.Mode)
	c.Uint32(5, &r.Uid)
	c.Uint32(6, &r.Gid)
	c.Uint64(7, &r.Size)
	c.Int64(8, &r.Atime)
	c.Int64(9, &r.Mtime)
}

// Inodes implements Request.
func (r *SetattrReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// FileIno implements wire.OfFile.
func (r *SetattrReq) FileIno() uint64 { return r.Ino }

// MknodReq makes entry Name in directory Parent: a regular file (Mode's
// type bits 0 or S_IFREG) or a FIFO, socket or device file (Rdev), owned
// by Uid and Gid. Excl: an entry that exists is an error (else a regular
// file that exists is opened); Open also opens it (one round trip for
// open(O_CREAT)).
type MknodReq struct {
	Head
	Parent   uint64
	Name     string
	Mode     uint32
	Uid, Gid uint32
	Rdev     uint32
	Excl     bool
	Open     bool
}

// Fields implements wire.Message.
func (r *MknodReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	c.String(3, &r.Name)
	c.Uint32(4, &r.Mode)
	c.Uint32(5, &r.Uid)
	c.Uint32(6, &r.Gid)
	c.Uint32(7, &r.Rdev)
	c.Bool(8, &r.Excl)
	c.Bool(9, &r.Open)
}

// Inodes implements Request.
func (r *MknodReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, 0 }

// MkdirReq makes directory Name in Parent, with permission bits Mode,
// owned by Uid and Gid.
type MkdirReq struct {
	Head
	Parent   uint64
	Name     string
	Mode     uint32
	Uid, Gid uint32
}

// Fields implements wire.Message.
func (r *MkdirReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	c.String(3, &r.Name)
	c.Uint32(4, &r.Mode)
	c.Uint32(5, &r.Uid)
	c.Uint32(6, &r.Gid)
}

// Inodes implements Request.
func (r *MkdirReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, 0 }

// SymlinkReq makes symbolic link Name in Parent to Target, owned by Uid
// and Gid.
type SymlinkReq struct {
	Head
	Parent   uint64
	Name     string
	Target   string
	Uid, Gid uint32
}

// Fields implements wire.Message.
func (r *SymlinkReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	c.String(3, &r.Name)
	c.String(4, &r.Target)
	c.Uint32(5, &r.Uid)
	c.Uint32(6, &r.Gid)
}

// Inodes implements Request.
func (r *SymlinkReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, 0 }

// Rename flags (RenameReq.Flags), as renameat2(2).
const (
	RenameNoReplace uint32 = 1
	RenameExchange  uint32 = 2
)

// RenameReq moves entry Name of Parent to NewName in NewParent.
type RenameReq struct {
	Head
	Parent, NewParent uint64
	Name, NewName     string
	Flags             uint32
}

// Fields implements wire.Message.
func (r *RenameReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	c.String(3, &r.Name)
	c.Uint64(4, &r.NewParent)
	c.String(5, &r.NewName)
	c.Uint32(6, &r.Flags)
}

// Inodes implements Request.
func (r *RenameReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, r.NewParent }

// LinkReq makes NewName in NewParent another name of inode Ino.
type LinkReq struct {
	Head
	Ino       uint64
	NewParent uint64
	NewName   string
}

// Fields implements wire.Message.
func (r *LinkReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint64(3, &r.NewParent)
	c.String(4, &r.NewName)
}

// Inodes implements Request.
func (r *LinkReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, r.NewParent }

// ReaddirReq lists directory Ino's entries after name After, at most Max.
type ReaddirReq struct {
	Head
	Ino   uint64
	After string
	Max   int
}

// Fields implements wire.Message.
func (r *ReaddirReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.String(3, &r.After)
	c.Int(4, &r.Max)
}

// Inodes implements Request.
func (r *ReaddirReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// OpenReq opens file Ino with open(2) flags Flags.
type OpenReq struct {
	Head
	Ino   uint64
	Flags uint32
}

// Fields implements wire.Message.
func (r *OpenReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint32(3, &r.Flags)
}

// Inodes implements Request.
func (r *OpenReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// FileIno implements wire.OfFile.
func (r *OpenReq) FileIno() uint64 { return r.Ino }

// IOReq reads (Read; the reply's payload) or writes (Write; the request's
// payload) Len bytes of file Ino at Off.
type IOReq struct {
	Head
	Ino, Off, Len uint64
}

// Fields implements wire.Message.
func (r *IOReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint64(3, &r.Off)
	c.Uint64(4, &r.Len)
}

// Inodes implements Request.
func (r *IOReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// FileIno implements wire.OfFile.
func (r *IOReq) FileIno() uint64 { return r.Ino }

// Class implements wire.Classed.
func (r *IOReq) Class() wire.Class { return wire.IOClass(r.Len) }

// IORep is the bytes read (the payload's length) or written, and for a
// write the file's truncation generation it landed in.
type IORep struct {
	Len   uint64
	Trunc uint64
}

// Fields implements wire.Message.
func (r *IORep) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Len)
	c.Uint64(2, &r.Trunc)
}

// SizeReq is a file's fsync or close (flush) with the end of the
// caller's furthest write (Size) under truncation generation Trunc, so
// the size is reported even if the writes' own reports are on their way.
type SizeReq struct {
	Head
	Ino, Size, Trunc uint64
}

// Fields implements wire.Message.
func (r *SizeReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint64(3, &r.Size)
	c.Uint64(4, &r.Trunc)
}

// Inodes implements Request.
func (r *SizeReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// FileIno implements wire.OfFile.
func (r *SizeReq) FileIno() uint64 { return r.Ino }

// Class implements wire.Classed.
func (r *SizeReq) Class() wire.Class { return wire.ClassSmall }

// SetLayoutReq sets directory Ino's chunk size and striping (new files
// inherit them), or with Local puts it in node-local mode, its entries on
// the data servers of tier Tier ("": the fastest with servers), or with
// Global takes it out.
type SetLayoutReq struct {
	Head
	Ino                  uint64
	ChunkSize, StripeCnt uint32
	StripeUnit           uint32
	Local, Global        bool
	Tier                 string
}

// Fields implements wire.Message.
func (r *SetLayoutReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.Uint32(3, &r.ChunkSize)
	c.Uint32(4, &r.StripeCnt)
	c.Uint32(5, &r.StripeUnit)
	c.Bool(6, &r.Local)
	c.Bool(7, &r.Global)
	c.String(8, &r.Tier)
}

// Inodes implements Request.
func (r *SetLayoutReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// SetLayoutRep is the directory's attributes and the tier of its local
// entries ("": not in local mode).
type SetLayoutRep struct {
	Attr *wire.Attr
	Tier string
	Feed uint64
}

// Fields implements wire.Message.
func (r *SetLayoutRep) Fields(c *wire.Codec) {
	wire.Opt(c, 1, &r.Attr)
	c.String(2, &r.Tier)
	c.Uint64(3, &r.Feed)
}

// SetFeed sets the feed position the reply is as of.
func (r *SetLayoutRep) SetFeed(pos uint64) { r.Feed = pos }

// BatchEntry is one create or removal of a batch: a regular file or
// (Mode with S_IFDIR) a directory Name made with inode Ino (one the
// delegation handed out) and permission bits Mode, still open (Open), its
// bytes kept by the holder (Owned: it answers the file's read-only opens
// until another node needs them), or (Remove) the removal of Name. In a
// reply, Errno says why it was refused.
type BatchEntry struct {
	Name   string
	Ino    uint64
	Mode   uint32
	Open   bool
	Owned  bool
	Remove bool
	Errno  uint32
}

// Fields implements wire.Message.
func (e *BatchEntry) Fields(c *wire.Codec) {
	c.String(1, &e.Name)
	c.Uint64(2, &e.Ino)
	c.Uint32(3, &e.Mode)
	c.Bool(4, &e.Open)
	c.Bool(5, &e.Owned)
	c.Bool(6, &e.Remove)
	c.Uint32(7, &e.Errno)
}

// BatchReq is a delegation holder's creates and removals in directory
// Parent, in order, owned by Uid and Gid, at Mtime.
type BatchReq struct {
	Head
	Parent   uint64
	Entries  []BatchEntry
	Uid, Gid uint32
	Mtime    int64
}

// Fields implements wire.Message.
func (r *BatchReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	wire.List(c, 3, &r.Entries)
	c.Uint32(4, &r.Uid)
	c.Uint32(5, &r.Gid)
	c.Int64(6, &r.Mtime)
}

// Inodes implements Request.
func (r *BatchReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, 0 }

// Ops is how many file system operations the batch stands for.
func (r *BatchReq) Ops() int { return len(r.Entries) }

// BatchRep is the entries refused, the directory's attributes when an
// entry was created open (its layout, which the new files took), and its
// attributes after the batch (Parent).
type BatchRep struct {
	Failed []BatchEntry
	Dir    *wire.Attr
	Parent *wire.Attr
	Feed   uint64
}

// Fields implements wire.Message.
func (r *BatchRep) Fields(c *wire.Codec) {
	wire.List(c, 1, &r.Failed)
	wire.Opt(c, 2, &r.Dir)
	wire.Opt(c, 3, &r.Parent)
	c.Uint64(4, &r.Feed)
}

// SetFeed sets the feed position the reply is as of.
func (r *BatchRep) SetFeed(pos uint64) { r.Feed = pos }

// Redirect answers an entry operation on a local-mode directory: the
// entry lives on one of Servers, the directory's tier's data servers by
// id (the one wire.LocalPick names for the name; a listing has a part on
// each), Own says the directory has entries of its own at the metadata
// service (a name the servers do not know may be one of them), Entries
// are those entries (a listing).
type Redirect struct {
	Servers []wire.ServerInfo
	Own     bool
	Entries []wire.DirEntry
}

// Fields implements wire.Message.
func (r *Redirect) Fields(c *wire.Codec) {
	wire.List(c, 1, &r.Servers)
	c.Bool(2, &r.Own)
	wire.List(c, 3, &r.Entries)
}

// EntryRep answers an operation on an entry: the inode's attributes
// (none for a removal), the directory's after a change (Parent), the feed
// position, or where a local-mode directory's entry lives.
type EntryRep struct {
	Attr     *wire.Attr
	Parent   *wire.Attr
	Feed     uint64
	Redirect *Redirect
}

// Fields implements wire.Message.
func (r *EntryRep) Fields(c *wire.Codec) {
	wire.Opt(c, 1, &r.Attr)
	wire.Opt(c, 2, &r.Parent)
	c.Uint64(3, &r.Feed)
	wire.Opt(c, 4, &r.Redirect)
}

// SetFeed sets the feed position the reply is as of.
func (r *EntryRep) SetFeed(pos uint64) { r.Feed = pos }

// FeedRep is the feed position a reply with nothing else is as of.
type FeedRep struct{ Feed uint64 }

// Fields implements wire.Message.
func (r *FeedRep) Fields(c *wire.Codec) { c.Uint64(1, &r.Feed) }

// SetFeed sets the feed position the reply is as of.
func (r *FeedRep) SetFeed(pos uint64) { r.Feed = pos }

// ReadlinkRep is a symbolic link's target.
type ReadlinkRep struct {
	Target string
	Feed   uint64
}

// Fields implements wire.Message.
func (r *ReadlinkRep) Fields(c *wire.Codec) {
	c.String(1, &r.Target)
	c.Uint64(2, &r.Feed)
}

// SetFeed sets the feed position the reply is as of.
func (r *ReadlinkRep) SetFeed(pos uint64) { r.Feed = pos }

// ReaddirRep is a directory's entries, or where a local-mode directory's
// live.
type ReaddirRep struct {
	Entries  []wire.DirEntry
	Feed     uint64
	Redirect *Redirect
}

// Fields implements wire.Message.
func (r *ReaddirRep) Fields(c *wire.Codec) {
	wire.List(c, 1, &r.Entries)
	c.Uint64(2, &r.Feed)
	wire.Opt(c, 3, &r.Redirect)
}

// SetFeed sets the feed position the reply is as of.
func (r *ReaddirRep) SetFeed(pos uint64) { r.Feed = pos }

// StatfsRep is the file system's capacity and use, bytes.
type StatfsRep struct{ Capacity, Used uint64 }

// Fields implements wire.Message.
func (r *StatfsRep) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Capacity)
	c.Uint64(2, &r.Used)
}
