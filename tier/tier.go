// Package tier owns the chunk stores of the storage tiers and the registry
// that chooses one by kind: "mem" (a tmpfs directory under a byte budget),
// "ssd" and "hdd" (directories), and "pfs" (plain files at their namespace
// path in an existing parallel file system mount). A store keeps chunks of
// files on one data server; it knows nothing of the namespace beyond what
// the pfs view is told, of other servers or of the network.
package tier

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// ChunkID names one chunk of one file on one data server.
type ChunkID struct {
	Ino       uint64
	Idx       uint64
	ChunkSize uint32 // the file's chunk size (the pfs store needs it)
}

// Store keeps chunks.
type Store interface {
	// Write stores p at off within the chunk's local object. Creating a
	// chunk reserves reserve bytes of the budget; if they do not fit,
	// Write fails with syscall.ENOSPC and stores nothing. The part of a
	// reservation past the chunk's bytes is a loan: once the chunk has
	// gone unwritten for Config.ReclaimAfter, a chunk that needs the room
	// may take it (a 4 KiB file does not hold a 4 MiB chunk's room for
	// ever); writes into an existing chunk never fail for room, and what
	// they grow it by is charged again.
	Write(id ChunkID, off int64, p []byte, reserve int64) error
	// Read fills p from off; bytes never written read as zeros.
	Read(id ChunkID, off int64, p []byte) error
	// Truncate cuts the chunk's local object to at most size bytes (it
	// never grows it; a chunk that does not exist stays so).
	Truncate(id ChunkID, size int64) error
	// DeleteFile removes every chunk of ino.
	DeleteFile(ino uint64) error
	// Sync makes every chunk of ino durable on the medium.
	Sync(ino uint64) error
	// Usage reports the budget and the bytes reserved by chunks (a
	// reservation idle for Config.ReclaimAfter counts at its bytes).
	Usage() (capacity, used int64)
	// SetCapacity changes the budget (fault injection: a tier that fills).
	SetCapacity(c int64)
	Close() error
}

// Settler is implemented by stores that lend the room a new chunk
// reserves (see Store.Write): Settle gives back at once what chunk id
// reserved past its bytes, when its writer is known to be done (the file
// was closed); later growth is charged again.
type Settler interface {
	Settle(id ChunkID)
}

// Holder is implemented by stores that can tell, without touching the
// medium, whether a chunk exists (holds its room): a data server counts
// the room of new chunks whose first write is still queued at it.
type Holder interface {
	Holds(id ChunkID) bool
}

// PathView is implemented by stores that keep a namespace view (pfs).
type PathView interface {
	Link(ino uint64, path string) error
	// Grow makes the file's plain file at least size bytes long (a
	// truncate up; a store never grows chunks by truncation).
	Grow(ino uint64, size int64) error
	Rename(oldPath, newPath string) error
	Unlink(path string) error
}

// AttrSetter is implemented by stores whose files are visible as plain
// files (the pfs tier): a drained file keeps its owner, mode and times.
type AttrSetter interface {
	SetAttrs(ino uint64, mode, uid, gid uint32, atime, mtime int64) error
}

// Discarder is implemented by stores where cutting a chunk to nothing is
// not the same as dropping it: the pfs store keeps a file's chunks in one
// object, where Truncate(id, 0) would cut every later chunk too. Discard
// drops only the chunk's own bytes (a migration's copy that was
// abandoned, or the source's copy after a move).
type Discarder interface {
	Discard(id ChunkID) error
}

// Sizer is implemented by stores that can tell a chunk's local size
// (bytes held, 0 for a chunk never written): a migration copies that much.
type Sizer interface {
	LocalSize(id ChunkID) (int64, error)
}

// Discard drops one chunk from st: Discarder's way if it has one, else a
// truncation to nothing.
func Discard(st Store, id ChunkID) error {
	if d, ok := st.(Discarder); ok {
		return d.Discard(id)
	}
	return st.Truncate(id, 0)
}

// ChunkFiles is implemented by stores whose chunks are files, so a data
// server can answer a read with sendfile rather than copy the bytes
// through its memory.
type ChunkFiles interface {
	// ChunkFile returns the chunk's open file, or nil for a chunk never
	// written. The store may close the file when it evicts it; a caller
	// that then sees os.ErrClosed asks again.
	ChunkFile(id ChunkID) (*os.File, error)
}

// Source is a payload held outside the process (a pipe: zerocopy.Pipe)
// that can be written into a file without passing through the process.
type Source interface {
	Len() int
	// WriteToFile writes bytes [off, off+n) of the payload into f at
	// position at.
	WriteToFile(f *os.File, at int64, off, n int) error
}

// SourceWriter is implemented by stores whose chunks are files, so a data
// server can write a payload it received into a pipe straight into the
// chunk (one copy, by the file system) instead of through its memory.
type SourceWriter interface {
	// WriteFrom is Store.Write with the bytes in src.
	WriteFrom(id ChunkID, off int64, src Source, reserve int64) error
}

// Config is what every store kind is opened with.
type Config struct {
	Dir      string
	Capacity int64 // bytes; 0 means the file system's size
	// Now is the clock (time.Now when nil); ReclaimAfter is how long a
	// chunk's tail must go unwritten before the room it reserved beyond
	// its bytes may be given to other chunks (DefaultReclaimAfter when 0).
	Now          func() time.Time
	ReclaimAfter time.Duration
	// KeepFreed is how long a directory store keeps a deleted chunk's
	// file, for its pages, before it gives them back to the system (0:
	// the kind's default, DefaultKeepFreed for mem and none for the
	// others; < 0: none). See DirStore.
	KeepFreed time.Duration
}

// DefaultKeepFreed is Config.KeepFreed's default for the mem tier: a
// checkpoint every few minutes finds the room the last one's demotion
// gave back still in memory.
const DefaultKeepFreed = 10 * time.Minute

// FreedKeeper is implemented by stores that keep deleted chunks' pages
// (Config.KeepFreed): KeptFreed is the bytes kept, outside Usage's used
// and within its capacity.
type FreedKeeper interface {
	KeptFreed() int64
}

// DefaultReclaimAfter is Config.ReclaimAfter's default: a writer that
// pauses longer than this in the middle of a chunk on a tier that has
// filled meanwhile may find the chunk's room taken.
const DefaultReclaimAfter = time.Second

// ranks orders the tier kinds from the fastest (0) down: new data lands on
// the fastest tier with room, and flows down.
var ranks = map[string]uint32{"mem": 0, "ssd": 1, "hdd": 2, "pfs": 3}

// Rank returns a tier kind's rank (lower is faster); ok is false for an
// unknown kind.
func Rank(kind string) (rank uint32, ok bool) {
	rank, ok = ranks[kind]
	return rank, ok
}

// Opener opens a store of one kind.
type Opener func(cfg Config) (Store, error)

var (
	regMu sync.Mutex // guards kinds
	kinds = map[string]Opener{}
)

// Register makes a store kind available by name.
func Register(kind string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := kinds[kind]; dup {
		panic("tier: duplicate kind " + kind)
	}
	kinds[kind] = open
}

// Open opens a store of the named kind.
func Open(kind string, cfg Config) (Store, error) {
	regMu.Lock()
	open, ok := kinds[kind]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown tier kind %q (have %v)", kind, Kinds())
	}
	return open(cfg)
}

// Kinds lists registered store kinds.
func Kinds() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var out []string
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
