// Package drops keeps the replica drops the metadata service owes data
// servers (docs/tiering.md, "Mem-tier replicas"): when a chunk's copy on
// a server is given up (its group was unreachable, a cached copy was
// evicted, a replica group was replaced), that server must fence the
// chunk at the new layout generation and delete its copy, now or when it
// comes back. A drop is recorded in the same batch as the layout change
// that gives the copy up (Add on the caller's batch), so that neither is
// ever committed without the other, and goes once the server has
// acknowledged it (Forget).
//
// It owns the drops' keys ('R' ino idx server → generation) on the
// metadata daemon's engine and nothing else: it must not touch layouts
// or talk to data servers (the metadata service delivers the drops).
package drops

import (
	"encoding/binary"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// Prefix is the first byte of the drops' engine keys; the metadata
// daemon's key schema (meta/schema.go) reserves it.
const Prefix = 'R'

// Drop is one copy a server still has to drop: chunk Idx of Ino, given
// up at layout generation Gen.
type Drop struct{ Ino, Idx, Server, Gen uint64 }

// Drops is the drops kept on an engine.
type Drops struct{ e engine.Engine }

// Open returns the drops kept in e.
func Open(e engine.Engine) *Drops { return &Drops{e: e} }

// chunkPrefix is the keys of chunk idx of ino's drops.
func chunkPrefix(ino, idx uint64) []byte {
	k := make([]byte, 1, 25)
	k[0] = Prefix
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(k, ino), idx)
}

func key(ino, idx, server uint64) []byte {
	return binary.BigEndian.AppendUint64(chunkPrefix(ino, idx), server)
}

// Add records in b that server owes chunk idx of ino the drop of
// generation gen (replacing one it owed at an older generation).
func (d *Drops) Add(b *engine.Batch, ino, idx, server, gen uint64) {
	b.Set(key(ino, idx, server), binary.BigEndian.AppendUint64(nil, gen))
}

// Forget records in b that server dropped its copy of chunk idx of ino.
func (d *Drops) Forget(b *engine.Batch, ino, idx, server uint64) {
	b.Del(key(ino, idx, server))
}

// Owes says whether server still owes chunk idx of ino the drop of
// generation gen.
func (d *Drops) Owes(ino, idx, server, gen uint64) bool {
	v, err := d.e.Get(key(ino, idx, server))
	return err == nil && len(v) == 8 && binary.BigEndian.Uint64(v) == gen
}

// Servers lists the servers that still owe chunk idx of ino a drop.
func (d *Drops) Servers(ino, idx uint64) []uint64 {
	var out []uint64
	for _, dr := range d.scan(chunkPrefix(ino, idx)) {
		out = append(out, dr.Server)
	}
	return out
}

// Of lists chunk idx of ino's drops.
func (d *Drops) Of(ino, idx uint64) []Drop { return d.scan(chunkPrefix(ino, idx)) }

// All lists every drop owed, in key order.
func (d *Drops) All() []Drop { return d.scan([]byte{Prefix}) }

func (d *Drops) scan(prefix []byte) []Drop {
	var out []Drop
	d.e.Scan(prefix, nil, func(k, v []byte) bool {
		if len(k) == 25 && len(v) == 8 {
			out = append(out, Drop{Ino: binary.BigEndian.Uint64(k[1:]), Idx: binary.BigEndian.Uint64(k[9:]),
				Server: binary.BigEndian.Uint64(k[17:]), Gen: binary.BigEndian.Uint64(v)})
		}
		return true
	})
	return out
}
