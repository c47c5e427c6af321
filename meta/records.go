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
	m := &legacyMsg{}
	d := varbuf.Reader{B: b, Bad: errCorrupt}
	u32 := func() uint32 {
		v := d.Uvarint()
		if v > math.MaxUint32 {
			d.Fail()
		}
		return uint32(v)
	}
	ids := func(add func(*wire.ChunkLoc, uint64)) {
		if d.Count(1) != len(m.Chunks) {
			d.Fail()
		}
		for i := range m.Chunks {
			n := d.Count(1)
			for j := 0; j < n && d.Err == nil; j++ {
				add(&m.Chunks[i], d.Uvarint())
			}
		}
	}
	var last byte
	for len(d.B) > 0 && d.Err == nil {
		t := d.Byte()
		if t <= last || t > legacyMaxTag {
			return nil, fmt.Errorf("legacy record: tag %d", t)
		}
		last = t
		switch t {
		case lIno:
			m.Ino = d.Uvarint()
		case lParent:
			m.Parent = d.Uvarint()
		case lHandle:
			m.Handle = d.Uvarint()
		case lName:
			m.Name = d.Str()
		case lPath:
			m.Path = d.Str()
		case lFlags:
			m.Flags = u32()
		case lIdx:
			m.Idx = d.Uvarint()
		case lChunkSize:
			m.ChunkSize = u32()
		case lStripeUnit:
			m.StripeUnit = u32()
		case lAttr:
			m.Attr = &wire.Attr{Ino: d.Uvarint(), Mode: u32(), Nlink: u32(), Uid: u32(), Gid: u32(), Size: d.Uvarint(),
				Atime: d.Varint(), Mtime: d.Varint(), Ctime: d.Varint(), ChunkSize: u32(), StripeCnt: u32(),
				StripeUnit: u32(), Rdev: u32(), Trunc: d.Uvarint()}
		case lChunks:
			n := d.Count(3)
			for i := 0; i < n && d.Err == nil; i++ {
				c := wire.ChunkLoc{Idx: d.Uvarint(), Tier: d.Str()}
				k := d.Count(1)
				for j := 0; j < k && d.Err == nil; j++ {
					c.Servers = append(c.Servers, d.Uvarint())
				}
				m.Chunks = append(m.Chunks, c)
			}
		case lServers:
			n := d.Count(9)
			for i := 0; i < n && d.Err == nil; i++ {
				s := wire.ServerInfo{ID: d.Uvarint(), Role: d.Str(), Tier: d.Str(), Addr: d.Str(),
					Capacity: d.Uvarint(), Used: d.Uvarint(), Node: d.Str()}
				s.Alive = d.Uvarint() == 1
				s.Rank = u32()
				m.Servers = append(m.Servers, s)
			}
		case lTrunc:
			m.Trunc = d.Uvarint()
		case lChunkGens:
			if d.Count(1) != len(m.Chunks) {
				d.Fail()
			}
			for i := range m.Chunks {
				m.Chunks[i].Gen = d.Uvarint()
			}
		case lServerX:
			if d.Count(3) != len(m.Servers) {
				d.Fail()
			}
			for i := range m.Servers {
				m.Servers[i].WriteBW, m.Servers[i].ReadBW, m.Servers[i].Domain = d.Uvarint(), d.Uvarint(), d.Str()
			}
		case lReplicas:
			ids(func(c *wire.ChunkLoc, id uint64) { c.Replicas = append(c.Replicas, id) })
		case lHome:
			ids(func(c *wire.ChunkLoc, id uint64) { c.Home = append(c.Home, id) })
		case lServerPerf:
			if d.Count(3) != len(m.Servers) {
				d.Fail()
			}
			for i := range m.Servers {
				m.Servers[i].MaxPerf, m.Servers[i].Pending, m.Servers[i].Written = d.Uvarint(), d.Uvarint(), d.Uvarint()
			}
		default:
			return nil, fmt.Errorf("legacy record: tag %d not used by records", t)
		}
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return m, nil
}
