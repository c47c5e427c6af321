package meta

import (
	"fmt"
	"math"

	"github.com/sluice-hpc/sluice/internal/varbuf"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Stored records (inodes, chunk locations, daemons, migration intents)
// are encoded with the wire codec behind a one-byte mark, recordMark.
// Records written before it (protocol 1's message codec: a first byte
// that is one of its tags, below 0x80) are still read (decodeLegacy), and
// written again in the new form at their next change.
const recordMark = 0xc2

func encodeRecord(m wire.Message) []byte {
	return wire.Encode([]byte{recordMark}, m)
}

// decodeRecord fills m from b: a record in the new form, or else
// legacy(b), given the old message codec's decoding of b.
func decodeRecord(b []byte, m wire.Message, legacy func(*legacyMsg) error) error {
	if len(b) > 0 && b[0] == recordMark {
		if err := wire.Decode(b[1:], m); err != nil {
			return fmt.Errorf("%w: %v", errCorrupt, err)
		}
		return nil
	}
	lm, err := decodeLegacy(b)
	if err != nil {
		return fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return legacy(lm)
}

// Fields implements wire.Message: the inode record.
func (n *inode) Fields(c *wire.Codec) {
	a := &n.Attr
	wire.Embed(c, 1, a)
	c.String(2, &n.Target)
	c.Uint64(3, &n.Parent)
	c.String(4, &n.Name)
}

// chunkRecord is a chunk location's record.
type chunkRecord struct{ wire.ChunkLoc }

func (r *chunkRecord) Fields(c *wire.Codec) { wire.Embed(c, 1, &r.ChunkLoc) }

// serverRecord is a registered daemon's record.
type serverRecord struct{ wire.ServerInfo }

func (r *serverRecord) Fields(c *wire.Codec) { wire.Embed(c, 1, &r.ServerInfo) }

// Fields implements wire.Message: the migration intent record.
func (mi *MoveIntent) Fields(c *wire.Codec) {
	c.Uint64(1, &mi.Ino)
	c.Uint64(2, &mi.Idx)
	c.Uint64(3, &mi.Session)
	st := uint32(mi.State)
	c.Uint32(4, &st)
	mi.State = MoveState(st)
	wire.Embed(c, 5, &mi.From)
	wire.Embed(c, 6, &mi.To)
	c.Uint64(7, &mi.Trunc)
	c.Uint32(8, &mi.ChunkSize)
	c.Uint32(9, &mi.StripeUnit)
	c.Bool(10, &mi.Keep)
	c.Bool(11, &mi.Clean)
}

// legacyMsg holds the fields of protocol 1's message that records used.
type legacyMsg struct {
	Ino, Parent, Handle, Idx, Trunc uint64
	Name, Path                      string
	Flags, ChunkSize, StripeUnit    uint32
	Attr                            *wire.Attr
	Chunks                          []wire.ChunkLoc
	Servers                         []wire.ServerInfo
}

// Protocol 1's tags of the fields records used (its wire.Msg codec,
// frozen here to read records written by it).
const (
	lIno         = 4
	lParent      = 5
	lHandle      = 7
	lName        = 8
	lPath        = 10
	lFlags       = 14
	lIdx         = 18
	lChunkSize   = 19
	lStripeUnit  = 21
	lAttr        = 27
	lChunks      = 29
	lServers     = 30
	lTrunc       = 40
	lChunkGens   = 44
	lServerX     = 45
	lReplicas    = 46
	lHome        = 47
	lServerPerf  = 48
	legacyMaxTag = 49
)

// decodeLegacy reads a record written with protocol 1's message codec.
func decodeLegacy(b []byte) (*legacyMsg, error) {
	r := &legacyReader{Reader: varbuf.Reader{B: b, Bad: errCorrupt}, m: &legacyMsg{}}
	var last byte
	for len(r.B) > 0 && r.Err == nil {
		t := r.Byte()
		if t <= last || t > legacyMaxTag {
			return nil, fmt.Errorf("legacy record: tag %d", t)
		}
		last = t
		if !r.field(t) {
			return nil, fmt.Errorf("legacy record: tag %d not used by records", t)
		}
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return r.m, nil
}

// legacyReader reads a legacy record's fields into m.
type legacyReader struct {
	varbuf.Reader
	m *legacyMsg
}

func (r *legacyReader) u32() uint32 {
	v := r.Uvarint()
	if v > math.MaxUint32 {
		r.Fail()
	}
	return uint32(v)
}

// ids reads a list of server ids per chunk of m.Chunks into add.
func (r *legacyReader) ids(add func(*wire.ChunkLoc, uint64)) {
	if r.Count(1) != len(r.m.Chunks) {
		r.Fail()
	}
	for i := range r.m.Chunks {
		n := r.Count(1)
		for j := 0; j < n && r.Err == nil; j++ {
			add(&r.m.Chunks[i], r.Uvarint())
		}
	}
}

// field reads the value of the field tagged t; false: a tag records did
// not use.
func (r *legacyReader) field(t byte) bool {
	switch t {
	case lIno:
		r.m.Ino = r.Uvarint()
	case lParent:
		r.m.Parent = r.Uvarint()
	case lHandle:
		r.m.Handle = r.Uvarint()
	case lName:
		r.m.Name = r.Str()
	case lPath:
		r.m.Path = r.Str()
	case lFlags:
		r.m.Flags = r.u32()
	case lIdx:
		r.m.Idx = r.Uvarint()
	case lChunkSize:
		r.m.ChunkSize = r.u32()
	case lStripeUnit:
		r.m.StripeUnit = r.u32()
	case lAttr:
		r.m.Attr = &wire.Attr{Ino: r.Uvarint(), Mode: r.u32(), Nlink: r.u32(), Uid: r.u32(), Gid: r.u32(), Size: r.Uvarint(),
			Atime: r.Varint(), Mtime: r.Varint(), Ctime: r.Varint(), ChunkSize: r.u32(), StripeCnt: r.u32(),
			StripeUnit: r.u32(), Rdev: r.u32(), Trunc: r.Uvarint()}
	case lChunks:
		n := r.Count(3)
		for i := 0; i < n && r.Err == nil; i++ {
			c := wire.ChunkLoc{Idx: r.Uvarint(), Tier: r.Str()}
			k := r.Count(1)
			for j := 0; j < k && r.Err == nil; j++ {
				c.Servers = append(c.Servers, r.Uvarint())
			}
			r.m.Chunks = append(r.m.Chunks, c)
		}
	case lServers:
		n := r.Count(9)
		for i := 0; i < n && r.Err == nil; i++ {
			s := wire.ServerInfo{ID: r.Uvarint(), Role: r.Str(), Tier: r.Str(), Addr: r.Str(),
				Capacity: r.Uvarint(), Used: r.Uvarint(), Node: r.Str()}
			s.Alive = r.Uvarint() == 1
			s.Rank = r.u32()
			r.m.Servers = append(r.m.Servers, s)
		}
	case lTrunc:
		r.m.Trunc = r.Uvarint()
	case lChunkGens:
		if r.Count(1) != len(r.m.Chunks) {
			r.Fail()
		}
		for i := range r.m.Chunks {
			r.m.Chunks[i].Gen = r.Uvarint()
		}
	case lServerX:
		if r.Count(3) != len(r.m.Servers) {
			r.Fail()
		}
		for i := range r.m.Servers {
			r.m.Servers[i].WriteBW, r.m.Servers[i].ReadBW, r.m.Servers[i].Domain = r.Uvarint(), r.Uvarint(), r.Str()
		}
	case lReplicas:
		r.ids(func(c *wire.ChunkLoc, id uint64) { c.Replicas = append(c.Replicas, id) })
	case lHome:
		r.ids(func(c *wire.ChunkLoc, id uint64) { c.Home = append(c.Home, id) })
	case lServerPerf:
		if r.Count(3) != len(r.m.Servers) {
			r.Fail()
		}
		for i := range r.m.Servers {
			r.m.Servers[i].MaxPerf, r.m.Servers[i].Pending, r.m.Servers[i].Written = r.Uvarint(), r.Uvarint(), r.Uvarint()
		}
	default:
		return false
	}
	return true
}
