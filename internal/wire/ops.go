package wire

import "time"

// Op numbers every operation of the protocol. Values are part of the wire
// format within a major version: append, never renumber. Each service's
// package numbers its own (internal/wire/chunk: 100-149); the operations
// below still speak Msg (Spec.Legacy). A blank is a number an operation
// left when it moved to its service's package: not used again in this
// major version.
type Op uint16

// The operations that still speak Msg.
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
	_             // layout: ns.OpLayout
	_             // alloc: ns.OpAlloc
	_             // extend: ns.OpExtend
	_             // register: api.OpRegister
	_             // servers: api.OpServers
	OpSetLayout   // set a directory's chunk size and striping
	_             // chunk-write: chunk.OpWrite
	_             // chunk-read: chunk.OpRead
	_             // chunk-trunc: chunk.OpTrunc
	_             // chunk-delete: chunk.OpDelete
	_             // chunk-sync: chunk.OpSync
	_             // pfs-link: chunk.OpPfsLink
	_             // pfs-rename: chunk.OpPfsRename
	_             // pfs-unlink: chunk.OpPfsUnlink
	_             // stat: unused, gone
	_             // fault: api.OpFault
	_             // job-stats: api.OpJobStats
	_             // beacon: beaconrpc's operations
	_             // job: fwdmap's operations
	_             // watch: ns.OpWatch
	_             // delegate: ns.OpDelegate
	_             // undelegate: ns.OpUndelegate
	OpCreateBatch // a delegation holder's creates and removals in directory Parent, in order: Entries (Name, Ino, Mode with CreateOpen, CreateOwned or BatchRemove), Uid, Gid, Mtime; reply Entries refused (errno in Mode), Attr the directory's when an entry had CreateOpen
	_             // trims: ns.OpTrims
	_             // trims-done: ns.OpTrimsDone
	_             // pfs-grow: chunk.OpPfsGrow
	_             // activity: ns.OpActivity
	_             // move-begin: chunk.OpMoveBegin
	_             // move-stop: chunk.OpMoveStop
	_             // move-end: chunk.OpMoveEnd
	_             // move-copy: chunk.OpMoveCopy
	_             // move-state: ns.OpMoveState
	_             // migrate: api.OpMigrate
	_             // budget: api.OpBudget
	_             // degrade: ns.OpDegrade
	_             // access: ns.OpAccess
	_             // dirty: ns.OpDirty
	_             // bb: api.OpBBGrant…
	_             // bb-server: api.OpBBServer
	_             // pool: api.OpPool…
	_             // qos: api.OpQoS…
	_             // chunk-fence: chunk.OpFence
	_             // chunk-settle: chunk.OpSettle
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

// Fields implements Message.
func (a *Activity) Fields(c *Codec) {
	c.Int(1, &a.Open)
	c.Uint64(2, &a.Opened)
	c.Int64(3, &a.LastOpen)
	c.Int64(4, &a.LastClose)
	c.Duration(5, &a.MeanTco)
	c.Duration(6, &a.MeanToc)
	c.Int64(7, &a.LastAccess)
}

var opNames = [...]string{
	"invalid", "ping", "lookup", "getattr", "setattr", "mknod", "mkdir", "unlink", "rmdir",
	"rename", "link", "symlink", "readlink", "readdir", "open", "release", "read", "write",
	"fsync", "flush", "statfs", "", "", "", "", "",
	"setlayout", "", "", "", "", "",
	"", "", "", "", "", "", "", "", "",
	"", "", "create-batch", "", "", "", "",
	"", "", "", "", "", "", "",
	"", "", "", "", "", "", "", "", "",
}

// String is the operation's registered name ("op?" if there is none).
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	if s := SpecOf(o); s != nil {
		return s.Name
	}
	return "op?"
}

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

// ClassOf returns the pipeline class of a request that speaks Msg.
func ClassOf(m *Msg) Class { return classOf(m.Op, m.Size) }

// Class implements Classed.
func (m *Msg) Class() Class { return ClassOf(m) }

func classOf(op Op, size uint64) Class {
	switch op {
	case OpRead, OpWrite:
		return IOClass(size)
	case OpFsync, OpFlush:
		return ClassSmall
	}
	return ClassMeta
}

// IOClass is the pipeline class of a read or write of size bytes.
func IOClass(size uint64) Class {
	if size > SmallIOMax {
		return ClassBulk
	}
	return ClassSmall
}

// Classed is implemented by the requests whose pipeline class is not
// ClassMeta: reads, writes and syncs.
type Classed interface {
	Class() Class
}

// OfFile is implemented by requests about one file's data: a connection
// of bulk requests is picked by the file.
type OfFile interface {
	FileIno() uint64
}

// Classify returns the pipeline class of request m of operation op.
func Classify(op Op, m Message) Class {
	switch r := m.(type) {
	case *Msg:
		return classOf(op, r.Size)
	case Classed:
		return r.Class()
	}
	return ClassMeta
}

// LaneKey returns the file a request is about (0: none), which picks its
// bulk connection.
func LaneKey(m Message) uint64 {
	switch r := m.(type) {
	case *Msg:
		return r.Ino
	case OfFile:
		return r.FileIno()
	}
	return 0
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

// MigrationJob is the job migration traffic and the tiering manager's
// decisions are recorded under in Beacon.
const MigrationJob = "sluice-migration"

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
