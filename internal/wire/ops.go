package wire

import "time"

// Op numbers every operation of the protocol. Values are part of the wire
// format: append, never renumber.
type Op uint16

// Client ↔ forwarding node and forwarding node ↔ metadata service.
const (
	OpInvalid Op = iota
	OpPing
	OpLookup
	OpGetattr
	OpSetattr
	OpMknod // create a regular file (Mode without type bits, or S_IFREG) or a FIFO, socket or device file (Rdev)
	OpMkdir
	OpUnlink
	OpRmdir
	OpRename
	OpLink
	OpSymlink
	OpReadlink
	OpReaddir
	OpOpen
	OpRelease
	OpRead
	OpWrite
	OpFsync
	OpFlush
	OpStatfs
	OpLayout    // get chunk locations of a file
	OpAlloc     // allocate a chunk (meta)
	OpExtend    // raise a file's size to at least Size (meta)
	OpRegister  // a daemon registers/heartbeats with meta; reply ID its id, Handle the version of the QoS rules (OpQos)
	OpServers   // list registered daemons
	OpSetLayout // set a directory's chunk size and striping
	OpChunkWrite
	OpChunkRead
	OpChunkTrunc
	OpChunkDelete
	OpChunkSync
	OpPfsLink   // pfs tier: make a namespace path point at an object (Size: grow it to the file size; Attr: give it the file's mode, owner, times)
	OpPfsRename // pfs tier: rename a namespace path
	OpPfsUnlink // pfs tier: remove a namespace path
	OpStat      // data server: capacity and usage
	OpFault     // inject a fault: Name "slow" (Size = factor ×100), "fill" (Size = capacity), "stall" (Size = ms)
	OpJobStats  // forwarding node: per-job request counters (Entries: one per job)
	OpBeacon    // monitoring store (in the metadata daemon): Name is the call, payload its argument (beacon/beaconrpc is the contract, manager/monitor the service)
	OpJob       // forwarding-map manager (in the metadata daemon): Name is the call (fwdmap)
	OpWatch     // metadata change feed: Gen = position seen; reply Gen = new position, Entries = changes (see meta.Feed)
	OpDelegate  // a mount asks to create files in directory Ino itself (reply Size = inode numbers granted from ID); see meta/deleg.go
	OpUndelegate
	OpCreateBatch // a delegation holder's creates and removals in directory Parent, in order: Entries (Name, Ino, Mode with CreateOpen, CreateOwned or BatchRemove), Uid, Gid, Mtime; reply Entries refused (errno in Mode), Attr the directory's when an entry had CreateOpen
	OpTrims       // a data server (ID) asks for the truncations it has not applied (of Ino, or of every file if 0); reply Trims and, for one file, Trunc = its generation
	OpTrimsDone   // a data server (ID) applied Trims: the metadata service forgets them
	OpPfsGrow     // pfs tier: make file Ino's plain file at least Size bytes (a truncate up)
	OpActivity    // a file's open/close history in the metadata service (reply: ActivityMsg)
	// Chunk migration (data/move.go, meta/move.go, manager/tiering). Handle
	// is the migration's session id throughout.
	OpMoveBegin   // source data server: start noting writes and cuts of chunk Idx of Ino; reply Size = its local size
	OpMoveStop    // source: stop serving the chunk (durably) until OpMoveEnd; reply Entries: the local ranges written since OpMoveBegin (Ino the offset, Mode the length), Size = local size, Flags MoveCut if it was truncated
	OpMoveEnd     // source or destination: the migration ended; Flags MoveCommitted (Gen = the new layout generation) or not (aborted)
	OpMoveCopy    // destination data server (the mover): copy chunk Idx of Ino from Chunks[0] to Chunks[1]; Servers = the addresses of both groups
	OpMoveState   // a data server asks how the migration of chunk Idx of Ino it stopped for ended; reply Flags MoveCommitted/MoveAborted/MovePending, Gen
	OpMigrate     // tiering manager (in the metadata daemon): move file Ino to tier Tier (Flags MoveWait: answer when done)
	OpBudget      // data server: lend memory to the node (Size = the budget now, at most the configured one) or take it back (Name "release"); reply Cap, Used
	OpDegrade     // metadata service: data server ID, holding a copy of chunk Idx of Ino at layout generation Gen, cannot be reached: give that copy up (meta/replica.go); reply Chunks: the chunk's location now
	OpAccess      // metadata service: a forwarding daemon's recent accesses: Entries Ino read or written Mode milliseconds before Mtime (unix ns)
	OpDirty       // metadata service: chunk Idx of Ino (layout generation Gen) is about to be written: give its home on the PFS up (meta/keepcache.go); reply Chunks: the chunk's location now
	OpBB          // metadata service: burst-buffer grants (meta/bbgrant.go): Name "grant" (payload a grant, JSON; reply payload the admission), "release" (Who.Job's), "pools" (reply payload pools and grants), "status" (the buffer manager's state)
	OpBBServer    // data server of a burst-buffer pool: payload BBControl (JSON; none: leave the controls as they are); reply payload BBServerState (JSON)
	OpPool        // metadata service: resource pools (meta/pool.go): Name "create", "rm", "bind", "unbind", "list"; payload and reply JSON
	OpQos         // metadata service: QoS rules (meta/qos.go): Name "add", "rm", "list", payload and reply JSON, reply Handle the rules' version; forwarding daemon or data server: Name "stats", reply payload its flows (JSON)
	OpChunkFence  // data server: fence chunk Idx of Ino at layout generation Gen if it holds no byte of it here (EEXIST if it does); Flags FenceUndo: lower a fence this op raised to Gen back to Offset (meta/alloc.go, relocating an empty chunk)
	OpChunkSettle // data server: give back the room chunks reserved past their bytes (Entries: Ino and, in Mode, the chunk index; meta/settle.go)
	opMax
)

// Activity is a file's open/close history as the metadata service saw it
// since it started (ONFS §6.3: T_co and T_oc are the metadata service's),
// the input of file coolness (policy/tiering). Times are unix ns (0:
// never); means are over the service's lifetime.
type Activity struct {
	Open      int    // handles open now
	Opened    uint64 // times it went from closed to open
	LastOpen  int64
	LastClose int64
	MeanTco   time.Duration // close → next open
	MeanToc   time.Duration // open → close
	// LastAccess is the last read or write as the forwarding daemons
	// report them (OpAccess, about every half second; 0: none reported)
	LastAccess int64
}

// ActivityMsg is the reply to OpActivity: ID handles open now, Size times
// opened, Atime and Mtime the last open and close, Offset and Idx the mean
// T_co and T_oc in ns, Gen the last access.
func ActivityMsg(a Activity) *Msg {
	return &Msg{ID: uint64(a.Open), Size: a.Opened, Atime: a.LastOpen, Mtime: a.LastClose,
		Offset: uint64(a.MeanTco), Idx: uint64(a.MeanToc), Gen: uint64(a.LastAccess)}
}

// ActivityOf reads an OpActivity reply.
func ActivityOf(m *Msg) Activity {
	return Activity{Open: int(m.ID), Opened: m.Size, LastOpen: m.Atime, LastClose: m.Mtime,
		MeanTco: time.Duration(m.Offset), MeanToc: time.Duration(m.Idx), LastAccess: int64(m.Gen)}
}

// Change kinds of the metadata change feed, in DirEntry.Mode of an OpWatch
// reply: a name in a directory (Ino the directory), an inode's attributes,
// or a delegation recalled.
const (
	ChangeEntry = 1
	ChangeAttr  = 2
	// ChangeRecall asks the mount whose client id is in Name to give back
	// its delegation of directory Ino (flush its creates there first).
	ChangeRecall = 3
)

var opNames = [...]string{
	"invalid", "ping", "lookup", "getattr", "setattr", "mknod", "mkdir", "unlink", "rmdir",
	"rename", "link", "symlink", "readlink", "readdir", "open", "release", "read", "write",
	"fsync", "flush", "statfs", "layout", "alloc", "extend", "register", "servers",
	"setlayout", "chunk-write", "chunk-read", "chunk-trunc", "chunk-delete", "chunk-sync",
	"pfs-link", "pfs-rename", "pfs-unlink", "stat", "fault", "job-stats", "beacon", "job", "watch",
	"delegate", "undelegate", "create-batch", "trims", "trims-done", "pfs-grow", "activity",
	"move-begin", "move-stop", "move-end", "move-copy", "move-state", "migrate", "budget",
	"degrade", "access", "dirty", "bb", "bb-server", "pool", "qos", "chunk-fence", "chunk-settle",
}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Valid reports whether o is a known operation.
func (o Op) Valid() bool { return o > OpInvalid && o < opMax }

// Class is the forwarding pipeline queue a request belongs to.
type Class uint8

// Pipeline classes.
const (
	ClassMeta Class = iota
	ClassSmall
	ClassBulk
	NumClasses
)

// SmallIOMax is the largest read or write that still counts as small I/O.
const SmallIOMax = 64 << 10

// ClassOf returns the pipeline class of a request.
func ClassOf(m *Msg) Class {
	switch m.Op {
	case OpRead, OpChunkRead:
		if m.Size > SmallIOMax {
			return ClassBulk
		}
		return ClassSmall
	case OpWrite, OpChunkWrite:
		if m.Size > SmallIOMax {
			return ClassBulk
		}
		return ClassSmall
	case OpFsync, OpFlush, OpChunkSync:
		return ClassSmall
	}
	return ClassMeta
}

func (c Class) String() string {
	switch c {
	case ClassMeta:
		return "meta"
	case ClassSmall:
		return "small"
	case ClassBulk:
		return "bulk"
	}
	return "class?"
}

// Setattr mask bits (Msg.Mask of OpSetattr).
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

// CreateOpen in Msg.Flags of OpMknod also opens the new file (one round
// trip for open(O_CREAT)). Bit 31 is unused by open(2) flags.
const CreateOpen uint32 = 1 << 31

// ExtendClose in Msg.Flags of OpExtend: the size is reported as the file
// is closed (flush or release), so the room its new tail chunk reserved
// past its bytes may be given back (meta/settle.go).
const ExtendClose uint32 = 1

// BatchRemove in the Mode of an OpCreateBatch entry makes it the removal
// of Name (a file, inode Ino) instead of a create; entries apply in order.
// An entry the service refuses comes back with its errno in Mode (and
// this bit kept for a removal).
const BatchRemove uint32 = 1 << 30

// CreateOwned in the Mode of an OpCreateBatch entry of a regular file: the
// delegation holder keeps the file's bytes and answers its read-only
// opens and reads by itself while it holds the directory's delegation
// (client/vfs/owned.go). The service then recalls the delegation before
// another client opens the file for writing or changes its size
// (meta/deleg.go).
const CreateOwned uint32 = 1 << 29

// Rename flags (Msg.Flags of OpRename), as renameat2(2).
const (
	RenameNoReplace uint32 = 1
	RenameExchange  uint32 = 2
)

// ChunkDeleteAll in the Flags of OpChunkDelete removes every chunk of the
// inode on that server.
const ChunkDeleteAll = 1

// Delegations of directories to mounts (meta/deleg.go, client/wbcreate.go).
const (
	// DelegCooldown is how long a recalled or refused directory is not
	// delegated again (and a mount does not ask again).
	DelegCooldown = time.Second
	// DelegInos is how many inode numbers a delegation hands out.
	DelegInos = 1024
	// RecallWait bounds how long a request waits for a recalled
	// delegation to come back (the holder may be dead).
	RecallWait = 3 * time.Second
)

// RegisterHasTrims in the Flags of an OpRegister reply tells a data server
// that truncations it has not applied are waiting for it (OpTrims).
const RegisterHasTrims uint32 = 1

// MigrationJob is the job migration traffic and the tiering manager's
// decisions are recorded under in Beacon.
const MigrationJob = "sluice-migration"

// Migration flags (Msg.Flags of the OpMove* operations and OpMigrate).
const (
	MoveCommitted uint32 = 1 << iota // OpMoveEnd, OpMoveState: the chunk's location is the destination now
	MoveAborted                      // OpMoveState: the chunk stays where it was
	MovePending                      // OpMoveState: not decided yet; ask again
	MoveCut                          // OpMoveStop reply: the chunk was truncated during the copy
	MoveRead                         // OpChunkRead: the mover's read of a stopped chunk (Handle: its session)
	MoveWait                         // OpMigrate: reply when the file has moved
	MoveKeep                         // OpMoveEnd, OpMoveState with MoveCommitted: the chunk was copied (re-replication, a drain with --keep-cache), not moved: the source keeps it and fences only older generations
	MoveClean                        // OpMoveCopy: the destination holds the chunk's bytes already (its home): copy only what is written during the move
)

// AllocPlaced in the Flags of an OpAlloc reply says the chunk was placed
// by this call (it had no location, or it was moved off the excluded
// server); otherwise the reply is the location another writer chose.
const AllocPlaced uint32 = 1

// OpAlloc flags. AllocMayWait in a request: the writer can wait while the
// tier the chunk belongs on frees space, and the metadata service may hold
// the request for up to Size milliseconds (at most a second) waiting; the
// reply's Size is how many milliseconds it waited. AllocStalled in the reply: it
// must (no chunk is placed; ask again, or without AllocMayWait to spill
// to a lower tier).
const (
	AllocMayWait uint32 = 1 << 1
	AllocStalled uint32 = 1 << 2
	// AllocEmpty in a request: data server ID refused a write of the
	// chunk, placed earlier, for room, holding nothing of it: move it
	// if it holds nothing anywhere (fenced first). The reply is its
	// location (AllocPlaced if moved; otherwise where to write again).
	AllocEmpty uint32 = 1 << 3
)

// FenceUndo in the Flags of an OpChunkFence request lowers the fence.
const FenceUndo uint32 = 1

// NameMax is the longest name of a directory entry, in bytes (NAME_MAX).
const NameMax = 255

// BBControl is what the burst-buffer manager (manager/bbos) sets on a data
// server of its pool (OpBBServer), from the BBOS period plan: the
// checkpoint write cap and the demotion read cap of its token buckets, and
// the I/O scheduler (internal/iosched).
type BBControl struct {
	// WriteCap caps the writes of jobs (checkpoints), DemoteCap the
	// reads of migrations (demotion to the PFS) while jobs write, and
	// IdleDemoteCap while none does, in bytes/s; 0: no cap.
	WriteCap, DemoteCap, IdleDemoteCap float64
	// DemoteHold: migrations' reads wait while jobs write (demotion
	// only while the server is idle).
	DemoteHold bool
	// Idle is how long after its jobs' last write the server is idle
	// (0: the server's default, 20 ms).
	// Sched turns the I/O scheduler on: one queue per job, the I/O
	// phases of different jobs do not overlap on the server. Gap ends a
	// phase, MaxWait bounds a wait (0: the server's defaults).
	Sched        bool
	Gap, MaxWait time.Duration
	Idle         time.Duration
}

// BBServerState is a data server's answer to OpBBServer: its controls and
// what its jobs wrote.
type BBServerState struct {
	BBControl
	// JobWritten counts the bytes of jobs' writes served since the server
	// started (migrations not counted); LastJobWrite is when the last one
	// ended (unix ns; 0: none yet).
	JobWritten   uint64
	LastJobWrite int64
	// Capacity and Used are the store's, now.
	Capacity, Used uint64
	// The scheduler's figures: phases begun and cut short, requests that
	// waited and their waits summed, the job whose phase runs.
	Phases, Preempted, Waited uint64
	WaitedTotal               time.Duration
	Active                    string
}
