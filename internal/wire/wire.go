package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sluice-hpc/sluice/internal/varbuf"
)

// Magic starts every frame ("SLC1").
const Magic uint32 = 0x534c4331

// HeaderSize is the size of a frame header in bytes.
const HeaderSize = 24

// Limits on frame parts. A frame over them is malformed and closes the
// connection.
const (
	MaxBody    = 4 << 20
	MaxPayload = 64 << 20
)

// Frame kinds.
const (
	KindRequest  uint8 = 1
	KindResponse uint8 = 2
)

// Frame flags.
const (
	// FlagPagesKept, on a response, says that the server, or a server it
	// relayed the request's payload to by reference, may still hold
	// references to the payload's pages after this answer (an attempt of
	// its own failed after sending them): a client that sent them by
	// reference (zerocopy.SendPages) must not write into them again
	// before detaching them (zerocopy.Detach).
	FlagPagesKept uint8 = 1 << 0
)

// Header is a decoded frame header.
type Header struct {
	Kind       uint8
	Flags      uint8
	ReqID      uint64
	BodyLen    uint32
	PayloadLen uint32
}

// ErrMalformed is returned for any frame or body that does not decode.
var ErrMalformed = errors.New("wire: malformed frame")

// PutHeader writes h into b[:HeaderSize].
func PutHeader(b []byte, h Header) {
	binary.BigEndian.PutUint32(b[0:4], Magic)
	b[4] = h.Kind
	b[5] = h.Flags
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint64(b[8:16], h.ReqID)
	binary.BigEndian.PutUint32(b[16:20], h.BodyLen)
	binary.BigEndian.PutUint32(b[20:24], h.PayloadLen)
}

// ParseHeader decodes and validates a frame header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrMalformed
	}
	if binary.BigEndian.Uint32(b[0:4]) != Magic {
		return Header{}, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	h := Header{
		Kind:       b[4],
		Flags:      b[5],
		ReqID:      binary.BigEndian.Uint64(b[8:16]),
		BodyLen:    binary.BigEndian.Uint32(b[16:20]),
		PayloadLen: binary.BigEndian.Uint32(b[20:24]),
	}
	if h.Kind != KindRequest && h.Kind != KindResponse {
		return Header{}, fmt.Errorf("%w: bad kind %d", ErrMalformed, h.Kind)
	}
	if h.BodyLen > MaxBody || h.PayloadLen > MaxPayload {
		return Header{}, fmt.Errorf("%w: frame too large", ErrMalformed)
	}
	return h, nil
}

// Attr is a file's attributes as the metadata service reports them.
type Attr struct {
	Ino        uint64
	Mode       uint32 // type bits and permission bits, as in stat(2)
	Nlink      uint32
	Uid, Gid   uint32
	Size       uint64
	Atime      int64 // nanoseconds since the epoch
	Mtime      int64
	Ctime      int64
	ChunkSize  uint32
	StripeCnt  uint32
	StripeUnit uint32
	// Rdev is the device number of a block or character device file.
	Rdev uint32
	// Trunc is the file's truncation generation: the metadata service
	// raises it at every change of the size by setattr (truncate). A size
	// reported by a writer is applied only under the generation the
	// writer worked in, and data servers refuse writes of an older one,
	// so a truncate is ordered against every write path.
	Trunc uint64
}

// Trim is one truncation of one chunk on one data server: keep Keep bytes
// of the server's local object of chunk Idx of file Ino (0 deletes it),
// as the file's truncation generation Gen demands. Trims not yet applied
// by a server that could not be reached are kept by the metadata service
// until the server applies them (data/fence.go).
type Trim struct {
	Ino, Idx  uint64
	Keep      uint64
	Gen       uint64
	ChunkSize uint32
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32
}

// ChunkLoc says where one chunk of a file lives: its tier and the group of
// data servers its stripes are spread over.
type ChunkLoc struct {
	Idx     uint64
	Tier    string
	Servers []uint64
	// Gen is the chunk's layout generation: it rises every time the chunk
	// moves (tier migration, a fresh chunk placed again). Chunk requests
	// carry the generation of the location they were sent to (Msg.Gen),
	// and a data server the chunk moved away from refuses older ones
	// (data/move.go).
	Gen uint64
	// Replicas is a second group of servers of the same tier holding a
	// full copy of the chunk, member i mirroring Servers[i] (mem-tier
	// replicas; empty: one copy). Writes go to both groups, reads to
	// either.
	Replicas []uint64
	// Home is the pfs-tier server holding a clean copy of the chunk, as
	// of the drain that made it (`--keep-cache`): the chunk's group is a
	// cache that can be dropped with nothing to copy. A write to the chunk
	// gives the home up first (OpDirty). Not among All: it is not written
	// or synced with the copies.
	Home []uint64
}

// All returns every server holding a copy of the chunk: Servers, then
// Replicas (a new slice).
func (c ChunkLoc) All() []uint64 {
	return append(append(make([]uint64, 0, len(c.Servers)+len(c.Replicas)), c.Servers...), c.Replicas...)
}

// ServerInfo describes a registered daemon (data server or forwarding node).
type ServerInfo struct {
	ID       uint64
	Role     string // "data", "fwd", "client"
	Tier     string // data servers only
	Addr     string
	Capacity uint64
	Used     uint64
	Node     string
	Alive    bool
	Rank     uint32 // tier rank: lower is faster
	// WriteBW and ReadBW are a data server's recent bandwidths (bytes/s
	// over its last heartbeat periods, 0: idle or not measured); Domain
	// its failure domain label ("cabinet" in ONFS).
	WriteBW, ReadBW uint64
	Domain          string
	// MaxPerf is a data server's bandwidth for placement, bytes/s: what
	// it measured writing (a probe, raised by the rate it has sustained
	// since while saturated; data/perf.go) or was configured with; 0: not
	// known. Pending is the bytes the
	// metadata service has placed on it and estimates it has not
	// written yet (its load for placement; in replies only); Written
	// the bytes a data server has written since it started (in
	// heartbeats).
	MaxPerf, Pending, Written uint64
}

// Who identifies the application behind a request: the client fills it
// once from the calling process (internal/ident), and every layer that
// forwards the request (forwarding node, data server) or records it
// (Beacon) reads it from here.
type Who struct {
	Job  string // batch job id ("" outside any job)
	Rank int32  // MPI rank; -1 when unknown
	Node string // compute node the caller runs on
	// App names the application: "tag:<SLUICE_APP>" when the process set
	// that variable, else its executable's name.
	App string
	// User and Group are the caller's uid and gid (QoS rules match them;
	// Msg.Uid and Msg.Gid are a namespace request's credentials).
	User, Group uint32
}

// Msg is the one message type of the protocol. Each operation uses a subset
// of the fields; zero fields are not sent.
type Msg struct {
	Op     Op
	Errno  uint32 // response status: 0 or a syscall errno
	ErrMsg string // human-readable detail for a non-zero Errno

	Ino, Parent, NewParent, Handle uint64
	Name, NewName, Path            string
	Mode, Uid, Gid, Flags, Mask    uint32
	Offset, Size, Idx              uint64
	ChunkSize, StripeCnt           uint32
	StripeUnit                     uint32
	Atime, Mtime                   int64

	// Who is the application behind the request, set once by the client
	// and carried unchanged by every daemon that forwards or records it.
	// (Uid and Gid above are the caller's credentials, or a setattr's new
	// owner.)
	Who

	Attr    *Attr
	Entries []DirEntry
	Chunks  []ChunkLoc
	Servers []ServerInfo
	Sync    bool
	Tier    string
	Addr    string
	ID      uint64
	Used    uint64
	Cap     uint64
	// Gen is the metadata service's change-feed position: in a reply, the
	// feed's position when the request was served; in OpWatch, the
	// position the caller has seen. In a chunk request it is the layout
	// generation (ChunkLoc.Gen) of the location the request was sent to.
	Gen uint64
	// Client identifies the mount that sent a namespace request (a random
	// id it picks), so the change feed does not echo its own changes.
	Client uint64
	// ParentAttr is, in the reply to a change inside a directory (create,
	// mkdir, symlink, link, unlink, rmdir), the directory's attributes
	// after it, so the client need not ask for them.
	ParentAttr *Attr
	// Trunc is the truncation generation (Attr.Trunc) a request was made
	// under: chunk reads and writes, allocations and size reports carry
	// it, write replies return the generation the data landed in.
	Trunc uint64
	// Trims are chunk truncations (OpChunkTrunc, OpTrims, OpTrimsDone).
	Trims []Trim
	// Rdev is the device number of a device file OpMknod creates.
	Rdev uint32
}

// field tags
const (
	tOp byte = iota + 1
	tErrno
	tErrMsg
	tIno
	tParent
	tNewParent
	tHandle
	tName
	tNewName
	tPath
	tMode
	tUid
	tGid
	tFlags
	tMask
	tOffset
	tSize
	tIdx
	tChunkSize
	tStripeCnt
	tStripeUnit
	tAtime
	tMtime
	tJob
	tRank
	tNode
	tAttr
	tEntries
	tChunks
	tServers
	tSync
	tTier
	tAddr
	tID
	tUsed
	tCap
	tGen
	tClient
	tParentAttr
	tTrunc
	tTrims
	tRdev
	tApp
	tChunkGens  // ChunkLoc.Gen of each of Chunks, in order (added after tChunks, which stays as it was)
	tServerX    // WriteBW, ReadBW and Domain of each of Servers, in order
	tReplicas   // ChunkLoc.Replicas of each of Chunks, in order
	tHome       // ChunkLoc.Home of each of Chunks, in order
	tServerPerf // MaxPerf, Pending and Written of each of Servers, in order
	tUser       // Who.User
	tGroup      // Who.Group
)

// Encoder appends tagged fields to a byte slice.
type encoder struct{ b []byte }

func (e *encoder) uv(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) sv(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string) { e.b = varbuf.AppendStr(e.b, s) }
func (e *encoder) tag(t byte)   { e.b = append(e.b, t) }

// attr appends a tagged attribute record (nothing when a is nil).
func (e *encoder) attr(t byte, a *Attr) {
	if a == nil {
		return
	}
	e.tag(t)
	e.uv(a.Ino)
	e.uv(uint64(a.Mode))
	e.uv(uint64(a.Nlink))
	e.uv(uint64(a.Uid))
	e.uv(uint64(a.Gid))
	e.uv(a.Size)
	e.sv(a.Atime)
	e.sv(a.Mtime)
	e.sv(a.Ctime)
	e.uv(uint64(a.ChunkSize))
	e.uv(uint64(a.StripeCnt))
	e.uv(uint64(a.StripeUnit))
	e.uv(uint64(a.Rdev))
	e.uv(a.Trunc)
}
func (e *encoder) u(t byte, v uint64) {
	if v != 0 {
		e.tag(t)
		e.uv(v)
	}
}
func (e *encoder) s(t byte, v int64) {
	if v != 0 {
		e.tag(t)
		e.sv(v)
	}
}
func (e *encoder) st(t byte, v string) {
	if v != "" {
		e.tag(t)
		e.str(v)
	}
}

// Append encodes m and appends it to b.
func (m *Msg) Append(b []byte) []byte {
	e := encoder{b: b}
	e.u(tOp, uint64(m.Op))
	e.u(tErrno, uint64(m.Errno))
	e.st(tErrMsg, m.ErrMsg)
	e.u(tIno, m.Ino)
	e.u(tParent, m.Parent)
	e.u(tNewParent, m.NewParent)
	e.u(tHandle, m.Handle)
	e.st(tName, m.Name)
	e.st(tNewName, m.NewName)
	e.st(tPath, m.Path)
	e.u(tMode, uint64(m.Mode))
	e.u(tUid, uint64(m.Uid))
	e.u(tGid, uint64(m.Gid))
	e.u(tFlags, uint64(m.Flags))
	e.u(tMask, uint64(m.Mask))
	e.u(tOffset, m.Offset)
	e.u(tSize, m.Size)
	e.u(tIdx, m.Idx)
	e.u(tChunkSize, uint64(m.ChunkSize))
	e.u(tStripeCnt, uint64(m.StripeCnt))
	e.u(tStripeUnit, uint64(m.StripeUnit))
	e.s(tAtime, m.Atime)
	e.s(tMtime, m.Mtime)
	e.st(tJob, m.Job)
	e.s(tRank, int64(m.Rank))
	e.st(tNode, m.Node)
	e.attr(tAttr, m.Attr)
	if len(m.Entries) > 0 {
		e.tag(tEntries)
		e.uv(uint64(len(m.Entries)))
		for _, d := range m.Entries {
			e.str(d.Name)
			e.uv(d.Ino)
			e.uv(uint64(d.Mode))
		}
	}
	if len(m.Chunks) > 0 {
		e.tag(tChunks)
		e.uv(uint64(len(m.Chunks)))
		for _, c := range m.Chunks {
			e.uv(c.Idx)
			e.str(c.Tier)
			e.uv(uint64(len(c.Servers)))
			for _, s := range c.Servers {
				e.uv(s)
			}
		}
	}
	if len(m.Servers) > 0 {
		e.tag(tServers)
		e.uv(uint64(len(m.Servers)))
		for _, s := range m.Servers {
			e.uv(s.ID)
			e.str(s.Role)
			e.str(s.Tier)
			e.str(s.Addr)
			e.uv(s.Capacity)
			e.uv(s.Used)
			e.str(s.Node)
			if s.Alive {
				e.uv(1)
			} else {
				e.uv(0)
			}
			e.uv(uint64(s.Rank))
		}
	}
	if m.Sync {
		e.tag(tSync)
	}
	e.st(tTier, m.Tier)
	e.st(tAddr, m.Addr)
	e.u(tID, m.ID)
	e.u(tUsed, m.Used)
	e.u(tCap, m.Cap)
	e.u(tGen, m.Gen)
	e.u(tClient, m.Client)
	e.attr(tParentAttr, m.ParentAttr)
	e.u(tTrunc, m.Trunc)
	if len(m.Trims) > 0 {
		e.tag(tTrims)
		e.uv(uint64(len(m.Trims)))
		for _, t := range m.Trims {
			e.uv(t.Ino)
			e.uv(t.Idx)
			e.uv(t.Keep)
			e.uv(t.Gen)
			e.uv(uint64(t.ChunkSize))
		}
	}
	e.u(tRdev, uint64(m.Rdev))
	e.st(tApp, m.App) // tags go in increasing order
	if chunkGens(m.Chunks) {
		e.tag(tChunkGens)
		e.uv(uint64(len(m.Chunks)))
		for _, c := range m.Chunks {
			e.uv(c.Gen)
		}
	}
	if serverX(m.Servers) {
		e.tag(tServerX)
		e.uv(uint64(len(m.Servers)))
		for _, s := range m.Servers {
			e.uv(s.WriteBW)
			e.uv(s.ReadBW)
			e.str(s.Domain)
		}
	}
	if anyIDs(m.Chunks, func(c ChunkLoc) []uint64 { return c.Replicas }) {
		e.chunkIDs(tReplicas, m.Chunks, func(c ChunkLoc) []uint64 { return c.Replicas })
	}
	if anyIDs(m.Chunks, func(c ChunkLoc) []uint64 { return c.Home }) {
		e.chunkIDs(tHome, m.Chunks, func(c ChunkLoc) []uint64 { return c.Home })
	}
	if serverPerf(m.Servers) {
		e.tag(tServerPerf)
		e.uv(uint64(len(m.Servers)))
		for _, s := range m.Servers {
			e.uv(s.MaxPerf)
			e.uv(s.Pending)
			e.uv(s.Written)
		}
	}
	e.u(tUser, uint64(m.User))
	e.u(tGroup, uint64(m.Group))
	return e.b
}

// decoder reads tagged fields; the first error sticks.
type decoder struct{ varbuf.Reader }

func (d *decoder) attr() *Attr {
	a := &Attr{}
	a.Ino = d.Uvarint()
	a.Mode = d.u32()
	a.Nlink = d.u32()
	a.Uid = d.u32()
	a.Gid = d.u32()
	a.Size = d.Uvarint()
	a.Atime = d.Varint()
	a.Mtime = d.Varint()
	a.Ctime = d.Varint()
	a.ChunkSize = d.u32()
	a.StripeCnt = d.u32()
	a.StripeUnit = d.u32()
	a.Rdev = d.u32()
	a.Trunc = d.Uvarint()
	return a
}

func newDecoder(b []byte) decoder { return decoder{varbuf.Reader{B: b, Bad: ErrMalformed}} }

func (d *decoder) u32() uint32 {
	v := d.Uvarint()
	if v > math.MaxUint32 {
		d.Fail()
		return 0
	}
	return uint32(v)
}

// Decode parses an encoded Msg. Unknown tags are an error: both ends are the
// same binary version within a cluster.
func Decode(b []byte) (*Msg, error) {
	m := &Msg{}
	d := newDecoder(b)
	var last byte
	for len(d.B) > 0 && d.Err == nil {
		t := d.B[0]
		d.B = d.B[1:]
		if t <= last {
			return nil, fmt.Errorf("%w: tag %d out of order", ErrMalformed, t)
		}
		last = t
		switch t {
		case tOp:
			v := d.Uvarint()
			if v > math.MaxUint16 {
				d.Fail()
			}
			m.Op = Op(v)
		case tErrno:
			m.Errno = d.u32()
		case tErrMsg:
			m.ErrMsg = d.Str()
		case tIno:
			m.Ino = d.Uvarint()
		case tParent:
			m.Parent = d.Uvarint()
		case tNewParent:
			m.NewParent = d.Uvarint()
		case tHandle:
			m.Handle = d.Uvarint()
		case tName:
			m.Name = d.Str()
		case tNewName:
			m.NewName = d.Str()
		case tPath:
			m.Path = d.Str()
		case tMode:
			m.Mode = d.u32()
		case tUid:
			m.Uid = d.u32()
		case tGid:
			m.Gid = d.u32()
		case tFlags:
			m.Flags = d.u32()
		case tMask:
			m.Mask = d.u32()
		case tOffset:
			m.Offset = d.Uvarint()
		case tSize:
			m.Size = d.Uvarint()
		case tIdx:
			m.Idx = d.Uvarint()
		case tChunkSize:
			m.ChunkSize = d.u32()
		case tStripeCnt:
			m.StripeCnt = d.u32()
		case tStripeUnit:
			m.StripeUnit = d.u32()
		case tAtime:
			m.Atime = d.Varint()
		case tMtime:
			m.Mtime = d.Varint()
		case tJob:
			m.Job = d.Str()
		case tRank:
			v := d.Varint()
			if v < math.MinInt32 || v > math.MaxInt32 {
				d.Fail()
			}
			m.Rank = int32(v)
		case tNode:
			m.Node = d.Str()
		case tApp:
			m.App = d.Str()
		case tAttr:
			m.Attr = d.attr()
		case tParentAttr:
			m.ParentAttr = d.attr()
		case tEntries:
			n := d.Count(3)
			m.Entries = make([]DirEntry, 0, n)
			for i := 0; i < n && d.Err == nil; i++ {
				m.Entries = append(m.Entries, DirEntry{Name: d.Str(), Ino: d.Uvarint(), Mode: d.u32()})
			}
		case tChunks:
			n := d.Count(3)
			m.Chunks = make([]ChunkLoc, 0, n)
			for i := 0; i < n && d.Err == nil; i++ {
				c := ChunkLoc{Idx: d.Uvarint(), Tier: d.Str()}
				k := d.Count(1)
				for j := 0; j < k && d.Err == nil; j++ {
					c.Servers = append(c.Servers, d.Uvarint())
				}
				m.Chunks = append(m.Chunks, c)
			}
		case tServers:
			n := d.Count(9)
			m.Servers = make([]ServerInfo, 0, n)
			for i := 0; i < n && d.Err == nil; i++ {
				s := ServerInfo{ID: d.Uvarint(), Role: d.Str(), Tier: d.Str(), Addr: d.Str(),
					Capacity: d.Uvarint(), Used: d.Uvarint(), Node: d.Str()}
				s.Alive = d.Uvarint() == 1
				s.Rank = d.u32()
				m.Servers = append(m.Servers, s)
			}
		case tSync:
			m.Sync = true
		case tTier:
			m.Tier = d.Str()
		case tAddr:
			m.Addr = d.Str()
		case tID:
			m.ID = d.Uvarint()
		case tUsed:
			m.Used = d.Uvarint()
		case tCap:
			m.Cap = d.Uvarint()
		case tGen:
			m.Gen = d.Uvarint()
		case tClient:
			m.Client = d.Uvarint()
		case tTrunc:
			m.Trunc = d.Uvarint()
		case tTrims:
			n := d.Count(5)
			m.Trims = make([]Trim, 0, n)
			for i := 0; i < n && d.Err == nil; i++ {
				m.Trims = append(m.Trims, Trim{Ino: d.Uvarint(), Idx: d.Uvarint(), Keep: d.Uvarint(),
					Gen: d.Uvarint(), ChunkSize: d.u32()})
			}
		case tRdev:
			m.Rdev = d.u32()
		case tChunkGens:
			if d.Count(1) != len(m.Chunks) {
				d.Fail()
			}
			for i := range m.Chunks {
				m.Chunks[i].Gen = d.Uvarint()
			}
		case tServerX:
			if d.Count(3) != len(m.Servers) {
				d.Fail()
			}
			for i := range m.Servers {
				m.Servers[i].WriteBW, m.Servers[i].ReadBW, m.Servers[i].Domain = d.Uvarint(), d.Uvarint(), d.Str()
			}
		case tReplicas:
			d.chunkIDs(m.Chunks, func(c *ChunkLoc, id uint64) { c.Replicas = append(c.Replicas, id) })
		case tHome:
			d.chunkIDs(m.Chunks, func(c *ChunkLoc, id uint64) { c.Home = append(c.Home, id) })
		case tServerPerf:
			if d.Count(3) != len(m.Servers) {
				d.Fail()
			}
			for i := range m.Servers {
				m.Servers[i].MaxPerf, m.Servers[i].Pending, m.Servers[i].Written = d.Uvarint(), d.Uvarint(), d.Uvarint()
			}
		case tUser, tGroup:
			v := d.Uvarint()
			if v > math.MaxUint32 {
				d.Fail()
			}
			if t == tUser {
				m.User = uint32(v)
			} else {
				m.Group = uint32(v)
			}
		default:
			return nil, fmt.Errorf("%w: unknown tag %d", ErrMalformed, t)
		}
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return m, nil
}

// chunkGens reports whether any location has a layout generation to send
// (records written before generations existed decode with 0).
func chunkGens(cs []ChunkLoc) bool {
	for _, c := range cs {
		if c.Gen != 0 {
			return true
		}
	}
	return false
}

// anyIDs reports whether any location has a list of server ids (of) to
// send.
func anyIDs(cs []ChunkLoc, of func(ChunkLoc) []uint64) bool {
	for _, c := range cs {
		if len(of(c)) > 0 {
			return true
		}
	}
	return false
}

// chunkIDs appends field t: a list of server ids (of) per location.
func (e *encoder) chunkIDs(t byte, cs []ChunkLoc, of func(ChunkLoc) []uint64) {
	e.tag(t)
	e.uv(uint64(len(cs)))
	for _, c := range cs {
		ids := of(c)
		e.uv(uint64(len(ids)))
		for _, id := range ids {
			e.uv(id)
		}
	}
}

// chunkIDs reads a field written by encoder.chunkIDs into cs (decoded
// already: the counts must match), adding each id with add.
func (d *decoder) chunkIDs(cs []ChunkLoc, add func(*ChunkLoc, uint64)) {
	if d.Count(1) != len(cs) {
		d.Fail()
	}
	for i := range cs {
		n := d.Count(1)
		for j := 0; j < n && d.Err == nil; j++ {
			add(&cs[i], d.Uvarint())
		}
	}
}

func serverPerf(ss []ServerInfo) bool {
	for _, s := range ss {
		if s.MaxPerf != 0 || s.Pending != 0 || s.Written != 0 {
			return true
		}
	}
	return false
}

func serverX(ss []ServerInfo) bool {
	for _, s := range ss {
		if s.WriteBW != 0 || s.ReadBW != 0 || s.Domain != "" {
			return true
		}
	}
	return false
}
