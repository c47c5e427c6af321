package meta

import (
	"encoding/binary"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// Key schema (all integers big-endian so keys sort numerically):
//
//	'I' ino                → inode record
//	'D' parent name        → child ino (8 bytes) + mode (4 bytes)
//	'L' ino idx            → chunk location (tier, server ids)
//	'S' id                 → registered daemon
//	'O' ino                → orphan: unlinked while open
//	'G' ino                → garbage: deleted, chunks still to remove
//	'C' name               → counter
//	'T' server ino gen idx → pending trim: keep (8 bytes) + chunk size (4)
//	'M' ino idx            → chunk migration intent (move.go)
//	'R' ino idx server     → a given-up copy the server still has to drop (meta/drops)
//	'A' client req         → a mutation request committed, and when (replies.go)
//	'E' dir                → the client holding the directory's delegation (deleg.go)
//	'X' ino name           → an extended attribute's value (xattr.go)
//	'B' job                → a job's burst-buffer grant, JSON (meta/bbgrants)
//	'F' job                → a registered job and its forwarding nodes, JSON (meta/fwdjobs)
//	'Q' 'p' name           → a resource pool, JSON (meta/pools)
//	'Q' 'd' ino            → the pool a directory is bound to (meta/pools)
//	'Q' 'r'                → the QoS rules, JSON (meta/qosrules)
//	'Q' 'l' ino            → a local-mode directory's tier (meta/localdirs)
//	'Q' 'j' job            → the pool a job is bound to (meta/pools)
//	'P' ino                → a directory's tiering policy (meta/tierpolicy)
const (
	pInode   = 'I'
	pDentry  = 'D'
	pLayout  = 'L'
	pServer  = 'S'
	pOrphan  = 'O'
	pGarbage = 'G'
	pCounter = 'C'
	pTrim    = 'T'
	pMove    = 'M'
	pReply   = 'A'
	pDeleg   = 'E'
	pXattr   = 'X'
	pPool    = 'Q' // shared by services of the metadata daemon: the second byte says whose
)

func key1(p byte, a uint64) []byte {
	k := make([]byte, 9)
	k[0] = p
	binary.BigEndian.PutUint64(k[1:], a)
	return k
}

func inodeKey(ino uint64) []byte { return key1(pInode, ino) }

func dentryPrefix(parent uint64) []byte { return key1(pDentry, parent) }

func dentryKey(parent uint64, name string) []byte {
	return append(dentryPrefix(parent), name...)
}

func layoutPrefix(ino uint64) []byte { return key1(pLayout, ino) }

func layoutKey(ino, idx uint64) []byte {
	return binary.BigEndian.AppendUint64(layoutPrefix(ino), idx)
}

func serverKey(id uint64) []byte  { return key1(pServer, id) }
func orphanKey(ino uint64) []byte { return key1(pOrphan, ino) }
func garbageKey(ino uint64) []byte {
	return key1(pGarbage, ino)
}
func delegKey(dir uint64) []byte    { return key1(pDeleg, dir) }
func counterKey(name string) []byte { return append([]byte{pCounter}, name...) }

// inode is the stored record of a file, directory or symlink.
type inode struct {
	wire.Attr
	Target string // symlink target
	Parent uint64 // primary parent (the pfs tier uses it to name the file)
	Name   string // primary name
}

func (n *inode) encode() []byte { return encodeRecord(n) }

func decodeInode(b []byte) (*inode, error) {
	n := &inode{}
	err := decodeRecord(b, n, func(m *legacyMsg) error {
		if m.Attr == nil {
			return errCorrupt
		}
		*n = inode{Attr: *m.Attr, Target: m.Path, Parent: m.Parent, Name: m.Name}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

func encodeDentry(ino uint64, mode uint32) []byte {
	b := binary.BigEndian.AppendUint64(nil, ino)
	return binary.BigEndian.AppendUint32(b, mode)
}

func decodeDentry(b []byte) (uint64, uint32, error) {
	if len(b) != 12 {
		return 0, 0, errCorrupt
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), nil
}

func encodeChunk(c wire.ChunkLoc) []byte { return encodeRecord(&chunkRecord{c}) }

// cutMark is what a chunk's location becomes when a truncate cuts the
// whole chunk away: no servers, only its layout generation, so a place
// chosen for it again gets a higher one (the moved fences of its old
// places stay below it), and its tier (a chunk cut on the pfs tier leaves
// the file's plain file there: hasPfsData). Layout leaves cut chunks out.
func cutMark(c wire.ChunkLoc) wire.ChunkLoc {
	return wire.ChunkLoc{Idx: c.Idx, Gen: c.Gen, Tier: c.Tier}
}

// isCut reports whether c is a cut chunk's mark (cutMark).
func isCut(c wire.ChunkLoc) bool { return len(c.Servers) == 0 }

func decodeChunk(b []byte) (wire.ChunkLoc, error) {
	var r chunkRecord
	err := decodeRecord(b, &r, func(m *legacyMsg) error {
		if len(m.Chunks) != 1 {
			return errCorrupt
		}
		r.ChunkLoc = m.Chunks[0]
		return nil
	})
	return r.ChunkLoc, err
}

func encodeServer(s wire.ServerInfo) []byte { return encodeRecord(&serverRecord{s}) }

func decodeServer(b []byte) (wire.ServerInfo, error) {
	var r serverRecord
	err := decodeRecord(b, &r, func(m *legacyMsg) error {
		if len(m.Servers) != 1 {
			return errCorrupt
		}
		r.ServerInfo = m.Servers[0]
		return nil
	})
	return r.ServerInfo, err
}
