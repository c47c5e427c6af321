package varbuf

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errBad = errors.New("bad")

func TestRoundTripAndStickyError(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -7)
	b = AppendStr(b, "hello")
	b = append(b, 9)
	b = binary.AppendUvarint(b, 2)
	b = append(b, 1, 2)
	r := Reader{B: b, Bad: errBad}
	if r.Uvarint() != 300 || r.Varint() != -7 || r.Str() != "hello" || r.Byte() != 9 || r.Count(1) != 2 || r.Err != nil {
		t.Fatalf("round trip failed: %v", r.Err)
	}
	// a string longer than the buffer, then reads after the failure
	r = Reader{B: binary.AppendUvarint(nil, 99), Bad: errBad}
	if r.Str() != "" || r.Err != errBad || r.Uvarint() != 0 || r.Byte() != 0 {
		t.Fatal("malformed string not reported, or error not sticky")
	}
	// an implausible count
	r = Reader{B: binary.AppendUvarint(nil, 1<<40), Bad: errBad}
	if r.Count(1) != 0 || r.Err != errBad {
		t.Fatal("hostile count accepted")
	}
}
