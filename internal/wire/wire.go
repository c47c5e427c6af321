package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Magic starts every frame ("SLC2": the frames of protocol major version
// 2).
const Magic uint32 = 0x534c4332

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
	// FlagError, on a response, says that its body is a Status: the
	// request failed and there is no reply message.
	FlagError uint8 = 1 << 1
)

// Header is a decoded frame header: the frame's kind and flags, the
// operation (a response carries its request's), the request's id on the
// connection, and the lengths of the body (an encoded Message) and of the
// raw payload after it.
type Header struct {
	Kind       uint8
	Flags      uint8
	Op         Op
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
	binary.BigEndian.PutUint16(b[6:8], uint16(h.Op))
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
		Op:         Op(binary.BigEndian.Uint16(b[6:8])),
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
	// carry the generation of the location they were sent to (chunk.At),
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
	// a namespace request's credentials for a new file are its own).
	User, Group uint32
}

// Fields implements Message.
func (w *Who) Fields(c *Codec) {
	c.String(1, &w.Job)
	c.Int32(2, &w.Rank)
	c.String(3, &w.Node)
	c.String(4, &w.App)
	c.Uint32(5, &w.User)
	c.Uint32(6, &w.Group)
}

// Fields implements Message.
func (a *Attr) Fields(c *Codec) {
	c.Uint64(1, &a.Ino)
	c.Uint32(2, &a.Mode)
	c.Uint32(3, &a.Nlink)
	c.Uint32(4, &a.Uid)
	c.Uint32(5, &a.Gid)
	c.Uint64(6, &a.Size)
	c.Int64(7, &a.Atime)
	c.Int64(8, &a.Mtime)
	c.Int64(9, &a.Ctime)
	c.Uint32(10, &a.ChunkSize)
	c.Uint32(11, &a.StripeCnt)
	c.Uint32(12, &a.StripeUnit)
	c.Uint32(13, &a.Rdev)
	c.Uint64(14, &a.Trunc)
}

// Fields implements Message.
func (t *Trim) Fields(c *Codec) {
	c.Uint64(1, &t.Ino)
	c.Uint64(2, &t.Idx)
	c.Uint64(3, &t.Keep)
	c.Uint64(4, &t.Gen)
	c.Uint32(5, &t.ChunkSize)
}

// Fields implements Message.
func (d *DirEntry) Fields(c *Codec) {
	c.String(1, &d.Name)
	c.Uint64(2, &d.Ino)
	c.Uint32(3, &d.Mode)
}

// Fields implements Message.
func (l *ChunkLoc) Fields(c *Codec) {
	c.Uint64(1, &l.Idx)
	c.String(2, &l.Tier)
	c.Uint64s(3, &l.Servers)
	c.Uint64(4, &l.Gen)
	c.Uint64s(5, &l.Replicas)
	c.Uint64s(6, &l.Home)
}

// Fields implements Message.
func (s *ServerInfo) Fields(c *Codec) {
	c.Uint64(1, &s.ID)
	c.String(2, &s.Role)
	c.String(3, &s.Tier)
	c.String(4, &s.Addr)
	c.Uint64(5, &s.Capacity)
	c.Uint64(6, &s.Used)
	c.String(7, &s.Node)
	c.Bool(8, &s.Alive)
	c.Uint32(9, &s.Rank)
	c.Uint64(10, &s.WriteBW)
	c.Uint64(11, &s.ReadBW)
	c.String(12, &s.Domain)
	c.Uint64(13, &s.MaxPerf)
	c.Uint64(14, &s.Pending)
	c.Uint64(15, &s.Written)
}

// Status is the body of an error reply (a frame with FlagError): the
// errno a file system call should return and a message for people.
type Status struct {
	Errno uint32
	Msg   string
}

// Fields implements Message.
func (s *Status) Fields(c *Codec) {
	c.Uint32(1, &s.Errno)
	c.String(2, &s.Msg)
}
