// Package layout owns the arithmetic of file layouts: how a file offset maps
// to a chunk, and how a chunk's bytes are striped over its group of data
// servers. Every role uses it so they agree; it does no I/O and holds no
// state.
//
// A file is cut into chunks of ChunkSize bytes. A chunk lives on a group of G
// data servers of one tier. Within a chunk, stripe s (bytes
// [s·Unit, (s+1)·Unit)) belongs to member s mod G, which stores it compactly
// at local offset (s div G)·Unit, so each member's local object for a chunk
// holds about ChunkSize/G bytes.
package layout

// Defaults for new file systems.
const (
	DefaultChunkSize  = 4 << 20
	DefaultStripeUnit = 1 << 20
	MinChunkSize      = 64 << 10
	MaxChunkSize      = 256 << 20
)

// Piece is one contiguous run of a chunk range on one group member.
type Piece struct {
	Member   int   // index into the chunk's server group
	LocalOff int64 // offset in the member's local object for the chunk
	Len      int64
	BufOff   int64 // offset of this run within the caller's buffer
}

// Span is the part of a file range that falls in one chunk.
type Span struct {
	Idx    uint64 // chunk index
	Off    int64  // offset within the chunk
	Len    int64
	BufOff int64 // offset within the caller's buffer
}

// Spans splits [off, off+n) into per-chunk spans.
func Spans(off, n int64, chunkSize int64) []Span {
	var out []Span
	var buf int64
	for n > 0 {
		idx := off / chunkSize
		in := off % chunkSize
		l := chunkSize - in
		if l > n {
			l = n
		}
		out = append(out, Span{Idx: uint64(idx), Off: in, Len: l, BufOff: buf})
		off += l
		n -= l
		buf += l
	}
	return out
}

// Pieces splits a chunk range [off, off+n) over a group of g members with
// stripe unit unit, merging runs that are contiguous on the same member.
func Pieces(off, n int64, g int, unit int64) []Piece {
	if g <= 1 {
		return []Piece{{Member: 0, LocalOff: off, Len: n}}
	}
	var out []Piece
	var buf int64
	for n > 0 {
		s := off / unit
		in := off % unit
		l := unit - in
		if l > n {
			l = n
		}
		m := int(s % int64(g))
		lo := (s/int64(g))*unit + in
		if k := len(out) - 1; k >= 0 && out[k].Member == m && out[k].LocalOff+out[k].Len == lo {
			out[k].Len += l
		} else {
			out = append(out, Piece{Member: m, LocalOff: lo, Len: l, BufOff: buf})
		}
		off += l
		n -= l
		buf += l
	}
	return out
}

// LocalSize returns how many bytes member m's local object holds when the
// chunk holds exactly its first chunkLen bytes.
func LocalSize(m, g int, unit, chunkLen int64) int64 {
	if g <= 1 {
		return chunkLen
	}
	full := chunkLen / unit // complete stripes
	rem := chunkLen % unit
	mine := full / int64(g) // complete rounds
	size := mine * unit
	if extra := full % int64(g); int64(m) < extra {
		size += unit
	} else if int64(m) == extra {
		size += rem
	}
	return size
}

// Run is a contiguous range of a chunk (logical offsets).
type Run struct{ Off, Len int64 }

// Logical maps the local range [lo, lo+n) of member m of a group of g
// with stripe unit unit back to the chunk's logical ranges (the inverse
// of Pieces), in order.
func Logical(m, g int, unit, lo, n int64) []Run {
	if g <= 1 {
		return []Run{{lo, n}}
	}
	var out []Run
	for n > 0 {
		k, in := lo/unit, lo%unit
		l := min(unit-in, n)
		off := (k*int64(g)+int64(m))*unit + in
		if j := len(out) - 1; j >= 0 && out[j].Off+out[j].Len == off {
			out[j].Len += l
		} else {
			out = append(out, Run{off, l})
		}
		lo += l
		n -= l
	}
	return out
}

// ChunkLen returns how long a chunk is (its logical end) when member m
// of a group of g holds local bytes.
func ChunkLen(m, g int, unit, local int64) int64 {
	if local <= 0 {
		return 0
	}
	r := Logical(m, g, unit, local-1, 1)
	return r[0].Off + 1
}
