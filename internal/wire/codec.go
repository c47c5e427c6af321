package wire

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// Message is implemented by every request, reply and record type of the
// protocol. Fields visits the message's fields in strictly increasing
// field number, one call of the Codec per field; the same method encodes
// and decodes, so a type has exactly one codec.
//
// Field numbers are part of the wire format: a field keeps its number and
// kind for as long as the major version lasts; a minor version may add
// fields with new numbers, which an older peer skips.
type Message interface {
	Fields(c *Codec)
}

// Ptr is the constraint of generic helpers over a message type T whose
// pointer implements Message.
type Ptr[T any] interface {
	*T
	Message
}

// Wire types of a field, in the low two bits of its tag.
const (
	typVarint  = 0 // unsigned varint: unsigned integers, bools
	typZigzag  = 1 // signed varint: signed integers, durations
	typBytes   = 2 // length-prefixed: strings, bytes, nested messages, lists
	typFixed64 = 3 // 8 bytes, little-endian: float64
)

// Codec encodes a message into bytes or decodes one from them, as its
// Fields method visits the fields. Zero values are not written: an absent
// field decodes as zero. A field number seen in the input that the
// decoding type does not visit is skipped (a field added by a later minor
// version); a known field of the wrong wire type, a truncated field, or
// field numbers out of order make the input malformed.
type Codec struct {
	enc  bool
	b    []byte // encoding: the output; decoding: what is left of the input
	last uint32 // the last field number visited (encoding) or read (decoding)
	err  error
	// decoding: the next field's header, read ahead (has: one is read)
	num uint32
	typ uint8
	has bool
}

// Encode appends m's encoding to b.
func Encode(b []byte, m Message) []byte {
	c := Codec{enc: true, b: b}
	m.Fields(&c)
	return c.b
}

// Decode fills m, which must be zero, from b.
func Decode(b []byte, m Message) error {
	c := Codec{b: b}
	m.Fields(&c)
	c.finish()
	if c.err != nil {
		return fmt.Errorf("%w: %T: %v", ErrMalformed, m, c.err)
	}
	return nil
}

// Encoding says whether c writes (true) or reads the message: a Fields
// method that derives a field from others needs to know.
func (c *Codec) Encoding() bool { return c.enc }

func (c *Codec) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
	c.b, c.has = nil, false
}

// tag writes field n's tag (encoding), after checking the visiting order:
// fields out of order are a programming error of the message type.
func (c *Codec) tag(n uint32, typ uint8) {
	if n <= c.last {
		panic(fmt.Sprintf("wire: field %d visited after field %d", n, c.last))
	}
	c.last = n
	c.b = binary.AppendUvarint(c.b, uint64(n)<<2|uint64(typ))
}

// peek reads the next field's tag into num and typ, once.
func (c *Codec) peek() bool {
	if c.has {
		return true
	}
	if c.err != nil || len(c.b) == 0 {
		return false
	}
	t, k := binary.Uvarint(c.b)
	if k <= 0 || t>>2 == 0 || t>>2 > math.MaxUint32 {
		c.fail("bad field tag")
		return false
	}
	num := uint32(t >> 2)
	if num <= c.last {
		c.fail("field %d after field %d", num, c.last)
		return false
	}
	c.b = c.b[k:]
	c.num, c.typ, c.has, c.last = num, uint8(t&3), true, num
	return true
}

// skip consumes the value of the field just peeked.
func (c *Codec) skip() {
	c.has = false
	switch c.typ {
	case typVarint, typZigzag:
		if _, k := binary.Uvarint(c.b); k > 0 {
			c.b = c.b[k:]
			return
		}
	case typBytes:
		if c.span(); c.err == nil {
			return
		}
	case typFixed64:
		if len(c.b) >= 8 {
			c.b = c.b[8:]
			return
		}
	}
	c.fail("truncated field %d", c.num)
}

// at moves to field n of wire type typ in the input: it skips the fields
// before it (unknown to this version) and reports whether n is there.
func (c *Codec) at(n uint32, typ uint8) bool {
	for c.peek() {
		switch {
		case c.num < n:
			c.skip()
		case c.num == n:
			if c.typ != typ {
				c.fail("field %d has wire type %d, want %d", n, c.typ, typ)
				return false
			}
			c.has = false
			return true
		default:
			return false
		}
	}
	return false
}

// finish skips whatever fields are left after the last one visited.
func (c *Codec) finish() {
	for c.peek() {
		c.skip()
	}
}

func (c *Codec) uvarint() uint64 {
	v, k := binary.Uvarint(c.b)
	if k <= 0 {
		c.fail("truncated varint")
		return 0
	}
	c.b = c.b[k:]
	return v
}

// span reads a length-prefixed value.
func (c *Codec) span() []byte {
	n := c.uvarint()
	if c.err != nil {
		return nil
	}
	if n > uint64(len(c.b)) {
		c.fail("length %d past the end", n)
		return nil
	}
	v := c.b[:n:n]
	c.b = c.b[n:]
	return v
}

// Uint64 is an unsigned integer field.
func (c *Codec) Uint64(n uint32, v *uint64) {
	if c.enc {
		if *v != 0 {
			c.tag(n, typVarint)
			c.b = binary.AppendUvarint(c.b, *v)
		}
		return
	}
	if c.at(n, typVarint) {
		*v = c.uvarint()
	}
}

// Uint32 is an unsigned integer field of at most 32 bits.
func (c *Codec) Uint32(n uint32, v *uint32) { narrow(c, n, v, math.MaxUint32) }

// Uint16 is an unsigned integer field of at most 16 bits.
func (c *Codec) Uint16(n uint32, v *uint16) { narrow(c, n, v, math.MaxUint16) }

// Uint8 is an unsigned integer field of at most 8 bits.
func (c *Codec) Uint8(n uint32, v *uint8) { narrow(c, n, v, math.MaxUint8) }

// narrow is an unsigned field of a type narrower than 64 bits: a value
// past limit does not decode.
func narrow[T ~uint8 | ~uint16 | ~uint32](c *Codec, n uint32, v *T, limit uint64) {
	x := uint64(*v)
	c.Uint64(n, &x)
	if !c.enc {
		if x > limit {
			c.fail("field %d: %d does not fit %T", n, x, *v)
			return
		}
		*v = T(x)
	}
}

// Int64 is a signed integer field.
func (c *Codec) Int64(n uint32, v *int64) {
	if c.enc {
		if *v != 0 {
			c.tag(n, typZigzag)
			c.b = binary.AppendVarint(c.b, *v)
		}
		return
	}
	if c.at(n, typZigzag) {
		x, k := binary.Varint(c.b)
		if k <= 0 {
			c.fail("truncated varint")
			return
		}
		c.b = c.b[k:]
		*v = x
	}
}

// Int32 is a signed integer field of at most 32 bits.
func (c *Codec) Int32(n uint32, v *int32) {
	x := int64(*v)
	c.Int64(n, &x)
	if !c.enc {
		if x < math.MinInt32 || x > math.MaxInt32 {
			c.fail("field %d: %d does not fit 32 bits", n, x)
			return
		}
		*v = int32(x)
	}
}

// Int is a signed integer field.
func (c *Codec) Int(n uint32, v *int) {
	x := int64(*v)
	c.Int64(n, &x)
	if !c.enc {
		*v = int(x)
	}
}

// Duration is a duration field, in nanoseconds.
func (c *Codec) Duration(n uint32, v *time.Duration) { c.Int64(n, (*int64)(v)) }

// Time is a point in time, sent as unix nanoseconds (the zero time is not
// sent); it decodes in the local time zone, without a monotonic reading.
func (c *Codec) Time(n uint32, v *time.Time) {
	var ns int64
	if c.enc && !v.IsZero() {
		ns = v.UnixNano()
	}
	c.Int64(n, &ns)
	if !c.enc && ns != 0 {
		*v = time.Unix(0, ns)
	}
}

// Bool is a boolean field.
func (c *Codec) Bool(n uint32, v *bool) {
	var x uint64
	if *v {
		x = 1
	}
	c.Uint64(n, &x)
	if !c.enc {
		if x > 1 {
			c.fail("field %d: bool %d", n, x)
		}
		*v = x == 1
	}
}

// Float64 is a floating-point field.
func (c *Codec) Float64(n uint32, v *float64) {
	if c.enc {
		if *v != 0 || math.Signbit(*v) {
			c.tag(n, typFixed64)
			c.b = binary.LittleEndian.AppendUint64(c.b, math.Float64bits(*v))
		}
		return
	}
	if c.at(n, typFixed64) {
		if len(c.b) < 8 {
			c.fail("truncated float")
			return
		}
		*v = math.Float64frombits(binary.LittleEndian.Uint64(c.b))
		c.b = c.b[8:]
	}
}

// String is a string field.
func (c *Codec) String(n uint32, v *string) {
	if c.enc {
		if *v != "" {
			c.tag(n, typBytes)
			c.b = binary.AppendUvarint(c.b, uint64(len(*v)))
			c.b = append(c.b, *v...)
		}
		return
	}
	if c.at(n, typBytes) {
		*v = string(c.span())
	}
}

// Bytes is a byte-string field (a copy when decoding; nil when empty).
func (c *Codec) Bytes(n uint32, v *[]byte) {
	if c.enc {
		if len(*v) != 0 {
			c.tag(n, typBytes)
			c.b = binary.AppendUvarint(c.b, uint64(len(*v)))
			c.b = append(c.b, *v...)
		}
		return
	}
	if c.at(n, typBytes) {
		if s := c.span(); len(s) > 0 {
			*v = append([]byte(nil), s...)
		}
	}
}

// Uint64s is a list of unsigned integers (packed; nil when empty).
func (c *Codec) Uint64s(n uint32, v *[]uint64) {
	if c.enc {
		if len(*v) != 0 {
			c.open(n)
			at := len(c.b)
			for _, x := range *v {
				c.b = binary.AppendUvarint(c.b, x)
			}
			c.close(at)
		}
		return
	}
	if !c.at(n, typBytes) {
		return
	}
	s := c.span()
	k := 0
	for _, x := range s {
		if x < 0x80 {
			k++
		}
	}
	if k == 0 {
		if len(s) > 0 {
			c.fail("field %d: truncated list", n)
		}
		return
	}
	out := make([]uint64, 0, k)
	for len(s) > 0 && c.err == nil {
		x, w := binary.Uvarint(s)
		if w <= 0 {
			c.fail("field %d: truncated list", n)
			return
		}
		out = append(out, x)
		s = s[w:]
	}
	*v = out
}

// Strings is a list of strings (nil when empty).
func (c *Codec) Strings(n uint32, v *[]string) {
	if c.enc {
		if len(*v) != 0 {
			c.open(n)
			at := len(c.b)
			c.b = binary.AppendUvarint(c.b, uint64(len(*v)))
			for _, s := range *v {
				c.b = binary.AppendUvarint(c.b, uint64(len(s)))
				c.b = append(c.b, s...)
			}
			c.close(at)
		}
		return
	}
	if !c.at(n, typBytes) {
		return
	}
	c.sub(c.span(), func() {
		k := c.count()
		if k == 0 {
			return
		}
		out := make([]string, 0, k)
		for i := 0; i < k && c.err == nil; i++ {
			out = append(out, string(c.span()))
		}
		*v = out
	})
}

// open starts a length-prefixed field n whose length is written by close:
// one byte is kept for it, enough for most values.
func (c *Codec) open(n uint32) {
	c.tag(n, typBytes)
	c.b = append(c.b, 0)
}

// close writes the length of the value that began at at (after open's
// byte), moving the value up if its length takes more than one byte.
func (c *Codec) close(at int) {
	l := len(c.b) - at
	if l < 0x80 {
		c.b[at-1] = byte(l)
		return
	}
	var hdr [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(hdr[:], uint64(l))
	c.b = append(c.b, hdr[:w-1]...)
	copy(c.b[at+w-1:], c.b[at:at+l])
	copy(c.b[at-1:], hdr[:w])
}

// count reads a list's length, which must be plausible for the bytes left
// (every element takes at least one), so a hostile length cannot make a
// decoder allocate without bound.
func (c *Codec) count() int {
	k := c.uvarint()
	if c.err == nil && k > uint64(len(c.b)) {
		c.fail("list of %d in %d bytes", k, len(c.b))
		return 0
	}
	return int(k)
}

// sub decodes a nested value from b with f on this codec, then carries on
// where it was.
func (c *Codec) sub(b []byte, f func()) {
	if c.err != nil {
		return
	}
	rest, last := c.b, c.last
	c.b, c.last, c.has = b, 0, false
	f()
	c.finish()
	if c.err != nil {
		return
	}
	c.b, c.last, c.has = rest, last, false
}

// nested encodes m as a length-prefixed value of field n; with
// omitEmpty, a message with no field to send leaves nothing.
func (c *Codec) nested(n uint32, m Message, omitEmpty bool) {
	start := len(c.b)
	last := c.last
	c.open(n)
	at := len(c.b)
	c.last = 0
	m.Fields(c)
	c.last = n
	if omitEmpty && len(c.b) == at {
		c.b, c.last = c.b[:start], last
		return
	}
	c.close(at)
}

// Embed is a nested message held by value; it is left out when it has no
// field to send.
func Embed[T any, P Ptr[T]](c *Codec, n uint32, v *T) {
	if c.enc {
		c.nested(n, P(v), true)
		return
	}
	if c.at(n, typBytes) {
		c.sub(c.span(), func() { P(v).Fields(c) })
	}
}

// Opt is an optional nested message: nil is left out, and a message sent
// with every field zero decodes as a pointer to a zero value.
func Opt[T any, P Ptr[T]](c *Codec, n uint32, v **T) {
	if c.enc {
		if *v != nil {
			c.nested(n, P(*v), false)
		}
		return
	}
	if c.at(n, typBytes) {
		x := new(T)
		c.sub(c.span(), func() { P(x).Fields(c) })
		*v = x
	}
}

// List is a list of nested messages (nil when empty).
func List[T any, P Ptr[T]](c *Codec, n uint32, v *[]T) {
	if c.enc {
		c.putElements(n, len(*v), func(i int) { P(&(*v)[i]).Fields(c) })
		return
	}
	var out []T
	c.getElements(n, func(k int) { out = make([]T, k) }, func(i int) { P(&out[i]).Fields(c) })
	if out != nil {
		*v = out
	}
}

// Map is a map, sent as a list of entries (key field 1, value field 2) in
// key order, so an encoding is the same every time; key and val are the
// codec of each (a Codec method expression such as (*Codec).String, or
// Embed for a message).
func Map[K cmp.Ordered, V any](c *Codec, n uint32, v *map[K]V, key func(*Codec, uint32, *K), val func(*Codec, uint32, *V)) {
	if c.enc {
		keys := make([]K, 0, len(*v))
		for k := range *v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		c.putElements(n, len(keys), func(i int) {
			kk, vv := keys[i], (*v)[keys[i]]
			key(c, 1, &kk)
			val(c, 2, &vv)
		})
		return
	}
	var out map[K]V
	c.getElements(n, func(k int) { out = make(map[K]V, k) }, func(int) {
		var kk K
		var vv V
		key(c, 1, &kk)
		val(c, 2, &vv)
		out[kk] = vv
	})
	if out != nil {
		*v = out
	}
}

// putElements writes field n as a list of k nested elements, element i
// written by put(i); an empty list is left out.
func (c *Codec) putElements(n uint32, k int, put func(i int)) {
	if k == 0 {
		return
	}
	c.open(n)
	at := len(c.b)
	c.b = binary.AppendUvarint(c.b, uint64(k))
	last := c.last
	for i := 0; i < k; i++ {
		c.b = append(c.b, 0)
		el := len(c.b)
		c.last = 0
		put(i)
		c.close(el)
	}
	c.last = last
	c.close(at)
}

// getElements reads field n written by putElements: alloc(k) is told the
// count (not for an empty list), then get(i) reads element i.
func (c *Codec) getElements(n uint32, alloc func(k int), get func(i int)) {
	if !c.at(n, typBytes) {
		return
	}
	c.sub(c.span(), func() {
		k := c.count()
		if k == 0 {
			return
		}
		alloc(k)
		for i := 0; i < k && c.err == nil; i++ {
			c.sub(c.span(), func() { get(i) })
		}
	})
}
