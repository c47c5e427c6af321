// Package ns is the protocol of the namespace service: the operations a
// mount sends about files and directories (through a forwarding daemon,
// which answers reads, writes and size reports itself), those the daemons
// send the metadata service (layouts, placements, size reports, trims),
// the change feed and delegations: their request and reply types and
// their numbers (400-499; docs/protocol.md). It must not know how the
// service keeps the namespace.
package ns

import (
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
	OpReclaim                          // a mount's open handles, after a restart or takeover (since 2.3)
	OpGetxattr                         // an extended attribute's value (since 2.3)
	OpSetxattr                         // set an extended attribute (since 2.3)
	OpListxattr                        // the names of an inode's extended attributes (since 2.3)
	OpRemovexattr                      // remove an extended attribute (since 2.3)
	OpLock                             // take, test or give up a file lock (since 2.4)
	OpLockCancel                       // give up waiting for a file lock (since 2.4)
	OpLockRenew                        // extend the lease of a mount's file locks (since 2.4)
	OpTouch                            // files and directories read: their access times (since 2.6)
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
	Reclaim     = wire.Define[ReclaimReq, wire.Empty](OpReclaim, "reclaim", wire.Namespace)
	Getxattr    = wire.Define[XattrReq, XattrRep](OpGetxattr, "getxattr", wire.Namespace)
	Setxattr    = wire.Define[XattrReq, XattrRep](OpSetxattr, "setxattr", wire.Namespace)
	Listxattr   = wire.Define[XattrReq, XattrRep](OpListxattr, "listxattr", wire.Namespace)
	Removexattr = wire.Define[XattrReq, XattrRep](OpRemovexattr, "removexattr", wire.Namespace)
	Lock        = wire.Define[LockReq, LockRep](OpLock, "lock", wire.Namespace)
	LockCancel  = wire.Define[LockReq, wire.Empty](OpLockCancel, "lock-cancel", wire.Namespace)
	LockRenew   = wire.Define[LockReq, wire.Empty](OpLockRenew, "lock-renew", wire.Namespace)
	Touch       = wire.Define[TouchReq, wire.Empty](OpTouch, "touch", wire.Namespace)
)
