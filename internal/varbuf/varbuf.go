// Package varbuf owns the varint encoding shared by sluice's binary
// formats (the wire protocol's messages, Beacon's record batches): reading
// unsigned and signed varints, single bytes, length-prefixed strings and
// plausible list lengths from a buffer with a sticky error, and appending
// length-prefixed strings. It must not know any format's fields.
package varbuf

import "encoding/binary"

// Reader consumes B front to back. The first failure sets Err to Bad and
// every later read returns zero values.
type Reader struct {
	B   []byte
	Err error
	Bad error // the error a malformed buffer reports
}

// Fail records a malformed buffer (the first failure sticks).
func (r *Reader) Fail() {
	if r.Err == nil {
		r.Err = r.Bad
	}
	r.B = nil
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || len(r.B) < 1 {
		r.Fail()
		return 0
	}
	c := r.B[0]
	r.B = r.B[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	if r.Err != nil {
		return 0
	}
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Str reads a string written by AppendStr.
func (r *Reader) Str() string {
	n := r.Uvarint()
	if r.Err != nil {
		return ""
	}
	if n > uint64(len(r.B)) {
		r.Fail()
		return ""
	}
	s := string(r.B[:n])
	r.B = r.B[n:]
	return s
}

// Count reads a list length and checks it is plausible given the bytes
// left (each element takes at least min bytes), so a hostile length cannot
// make a decoder allocate without bound.
func (r *Reader) Count(min int) int {
	n := r.Uvarint()
	if r.Err != nil {
		return 0
	}
	if n > uint64(len(r.B)/min) {
		r.Fail()
		return 0
	}
	return int(n)
}

// AppendStr appends s with its length as a varint.
func AppendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
