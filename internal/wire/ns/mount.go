package ns

import (
	"github.com/sluice-hpc/sluice/internal/wire"
)

// A mount's operations: lookups, creates, removals, attributes,
// listings, opens, reads and writes (through a forwarding daemon).

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
	// Req numbers the request among its client's (0: not numbered; since
	// protocol 2.1). Sent again after its answer was lost, a request
	// keeps its number, and the service answers a mutation it has
	// committed under that number as made (meta/replies.go).
	Req uint64
}

// Fields implements wire.Message.
func (h *Head) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &h.Who)
	c.Uint64(2, &h.Client)
	c.Bool(3, &h.Local)
	c.Uint64(4, &h.Req)
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
	// SetKillSgid (since 2.6), with SetKillPriv, clears S_ISGID whatever
	// the group execution (an unprivileged fallocate by a caller outside
	// the file's group, as Linux's setattr_should_drop_sgid).
	SetKillSgid
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
// open(O_CREAT)). Mode's permission bits have the caller's umask
// applied; Unmasked (since 2.4; 0: as Mode) are those asked for before it,
// which a directory with a default ACL uses instead.
type MknodReq struct {
	Head
	Parent   uint64
	Name     string
	Mode     uint32
	Uid, Gid uint32
	Rdev     uint32
	Excl     bool
	Open     bool
	Unmasked uint32
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
	c.Uint32(10, &r.Unmasked)
}

// Inodes implements Request.
func (r *MknodReq) Inodes() (uint64, uint64, uint64) { return 0, r.Parent, 0 }

// MkdirReq makes directory Name in Parent, with permission bits Mode,
// owned by Uid and Gid (Unmasked as MknodReq's).
type MkdirReq struct {
	Head
	Parent   uint64
	Name     string
	Mode     uint32
	Uid, Gid uint32
	Unmasked uint32
}

// Fields implements wire.Message.
func (r *MkdirReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Parent)
	c.String(3, &r.Name)
	c.Uint32(4, &r.Mode)
	c.Uint32(5, &r.Uid)
	c.Uint32(6, &r.Gid)
	c.Uint32(7, &r.Unmasked)
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
