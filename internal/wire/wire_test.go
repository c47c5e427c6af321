package wire_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

func TestHeader(t *testing.T) {
	var b [wire.HeaderSize]byte
	h := wire.Header{Kind: wire.KindResponse, Flags: 1, Op: 417, ReqID: 1 << 40, BodyLen: 100, PayloadLen: 1 << 20}
	wire.PutHeader(b[:], h)
	got, err := wire.ParseHeader(b[:])
	if err != nil || got != h {
		t.Fatalf("header %+v %v", got, err)
	}
	b[0] = 'X'
	if _, err := wire.ParseHeader(b[:]); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("bad magic accepted")
	}
	wire.PutHeader(b[:], wire.Header{Kind: wire.KindRequest, PayloadLen: wire.MaxPayload + 1})
	if _, err := wire.ParseHeader(b[:]); err == nil {
		t.Fatalf("oversized payload accepted")
	}
}

// TestStatus: an error reply's Status carries every field, and reads
// what every earlier minor version encoded (testdata/v*/).
func TestStatus(t *testing.T) {
	wiretest.RoundTrip(t, &wire.Status{})
	wiretest.Golden(t, "testdata", "status", &wire.Status{})
}

// v20 and v21 are one message as minor versions 0 and 1 of a major
// version have it: 1 adds fields, among them a list and a nested message.
type v20 struct {
	A uint64
	B string
	D []wire.ChunkLoc
}

func (m *v20) Fields(c *wire.Codec) {
	c.Uint64(1, &m.A)
	c.String(3, &m.B)
	wire.List(c, 7, &m.D)
}

type v21 struct {
	A  uint64
	X  int64
	B  string
	Y  []wire.DirEntry
	Z  *wire.Attr
	D  []wire.ChunkLoc
	F  float64
	XS []string
}

func (m *v21) Fields(c *wire.Codec) {
	c.Uint64(1, &m.A)
	c.Int64(2, &m.X)
	c.String(3, &m.B)
	wire.List(c, 4, &m.Y)
	wire.Opt(c, 5, &m.Z)
	wire.List(c, 7, &m.D)
	c.Float64(8, &m.F)
	c.Strings(9, &m.XS)
}

// TestMinorVersions: a message of a later minor version decodes in an
// earlier one with the fields it knows intact, and the other way round.
func TestMinorVersions(t *testing.T) {
	newer := &v21{A: 7, X: -3, B: "b", Y: []wire.DirEntry{{Name: "y", Ino: 2}}, Z: &wire.Attr{Ino: 9},
		D: []wire.ChunkLoc{{Idx: 1, Tier: "mem", Servers: []uint64{3, 300}}}, F: 2.5, XS: []string{"p", ""}}
	var old v20
	if err := wire.Decode(wire.Encode(nil, newer), &old); err != nil {
		t.Fatalf("older decoder: %v", err)
	}
	if want := (v20{A: 7, B: "b", D: newer.D}); !reflect.DeepEqual(old, want) {
		t.Fatalf("older decoder read %+v, want %+v", old, want)
	}
	var back v21
	if err := wire.Decode(wire.Encode(nil, &old), &back); err != nil {
		t.Fatalf("newer decoder: %v", err)
	}
	if want := (v21{A: 7, B: "b", D: newer.D}); !reflect.DeepEqual(back, want) {
		t.Fatalf("newer decoder read %+v, want %+v", back, want)
	}
}

func TestLongValues(t *testing.T) {
	// lengths that take more than one byte move the value up (Codec.close)
	long := strings.Repeat("x", 70000)
	m := &v21{B: long, Y: make([]wire.DirEntry, 300), XS: []string{long, "z"}, Z: &wire.Attr{}}
	for i := range m.Y {
		m.Y[i] = wire.DirEntry{Name: strings.Repeat("n", i), Ino: uint64(i) << 40, Mode: 0o100644}
	}
	var got v21
	if err := wire.Decode(wire.Encode(nil, m), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, m) {
		t.Fatal("long values changed")
	}
	if got.Z == nil {
		t.Fatal("an optional message with no field set decoded as nil")
	}
}

func TestValues(t *testing.T) {
	type all struct {
		u64 uint64
		i64 int64
		f   float64
		d   time.Duration
	}
	for _, v := range []all{{math.MaxUint64, math.MinInt64, math.Inf(-1), -time.Hour}, {1, math.MaxInt64, math.Copysign(0, -1), 1}} {
		in := &numbers{v.u64, v.i64, v.f, v.d, true}
		var out numbers
		if err := wire.Decode(wire.Encode(nil, in), &out); err != nil {
			t.Fatal(err)
		}
		if out.U != in.U || out.I != in.I || math.Float64bits(out.F) != math.Float64bits(in.F) || out.D != in.D || !out.B {
			t.Fatalf("%+v came back as %+v", in, out)
		}
	}
}

type numbers struct {
	U uint64
	I int64
	F float64
	D time.Duration
	B bool
}

func (m *numbers) Fields(c *wire.Codec) {
	c.Uint64(1, &m.U)
	c.Int64(2, &m.I)
	c.Float64(3, &m.F)
	c.Duration(4, &m.D)
	c.Bool(5, &m.B)
}

type small struct{ A uint32 }

func (m *small) Fields(c *wire.Codec) { c.Uint32(1, &m.A) }

func TestDecodeRejects(t *testing.T) {
	good := wire.Encode(nil, &v21{A: 1, B: "bee", Y: []wire.DirEntry{{Name: "y"}}, F: 1})
	for i := 1; i < len(good); i++ {
		// a prefix that ends inside a field fails; one that ends
		// between fields is a message with fewer of them
		var m v21
		if err := wire.Decode(good[:i], &m); err == nil && !bytes.Equal(wire.Encode(nil, &m), good[:i]) {
			t.Fatalf("prefix %d decoded to a different message", i)
		}
	}
	for name, b := range map[string][]byte{
		"huge string":        {3<<2 | 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge list":          {4<<2 | 2, 5, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"out of order":       {3<<2 | 2, 0, 1 << 2, 1},
		"repeated":           {1 << 2, 1, 1 << 2, 1},
		"wrong type":         {1<<2 | 2, 0},
		"field zero":         {0, 1},
		"too big for uint32": {1 << 2, 0xff, 0xff, 0xff, 0xff, 0x1f},
		"bool of 2":          {5 << 2, 2},
		"truncated float":    {8<<2 | 3, 1, 2},
	} {
		var m v21
		var s small
		var n numbers
		err := wire.Decode(b, &m)
		if name == "too big for uint32" {
			err = wire.Decode(b, &s)
		}
		if name == "bool of 2" {
			err = wire.Decode(b, &n)
		}
		if !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
}

func TestFieldOrderChecked(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("fields visited out of order were encoded")
		}
	}()
	wire.Encode(nil, &backwards{A: 1, B: 2})
}

type backwards struct{ A, B uint64 }

func (m *backwards) Fields(c *wire.Codec) {
	c.Uint64(2, &m.B)
	c.Uint64(1, &m.A)
}

func TestClass(t *testing.T) {
	if wire.Classify(&wire.Empty{}) != wire.ClassMeta || wire.IOClass(1<<20) != wire.ClassBulk || wire.IOClass(4096) != wire.ClassSmall {
		t.Fatal("classification")
	}
}

// FuzzDecode: the decoders of the types every service shares (a
// Status, attributes, a chunk's location, a daemon's description).
func FuzzDecode(f *testing.F) {
	for _, m := range []wire.Message{&wire.Status{}, &wire.Attr{}, &wire.ChunkLoc{}, &wire.ServerInfo{}} {
		wiretest.Fill(m)
		f.Add(wire.Encode(nil, m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range []wire.Message{&wire.Status{}, &wire.Attr{}, &wire.ChunkLoc{}, &wire.ServerInfo{}, &wire.Who{}, &wire.Activity{}} {
			wiretest.Redecode(t, m, b)
		}
	})
}

// FuzzHeader: header parsing never panics and accepted headers round-trip.
func FuzzHeader(f *testing.F) {
	var b [wire.HeaderSize]byte
	wire.PutHeader(b[:], wire.Header{Kind: wire.KindRequest, Op: 415, ReqID: 1, BodyLen: 10})
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := wire.ParseHeader(in)
		if err != nil {
			return
		}
		var out [wire.HeaderSize]byte
		wire.PutHeader(out[:], h)
		h2, err := wire.ParseHeader(out[:])
		if err != nil || h2 != h {
			t.Fatalf("header round trip")
		}
	})
}

type withMaps struct {
	A map[string]uint64
	B map[uint64]wire.Attr
}

func (m *withMaps) Fields(c *wire.Codec) {
	wire.Map(c, 1, &m.A, (*wire.Codec).String, (*wire.Codec).Uint64)
	wire.Map(c, 2, &m.B, (*wire.Codec).Uint64, wire.Embed[wire.Attr])
}

func TestMaps(t *testing.T) {
	wiretest.RoundTrip(t, &withMaps{})
	m := &withMaps{A: map[string]uint64{"z": 1, "a": 2, "m": 0}}
	first := wire.Encode(nil, m)
	for i := 0; i < 20; i++ {
		if !bytes.Equal(wire.Encode(nil, m), first) {
			t.Fatal("a map's encoding changed between runs")
		}
	}
	var back withMaps
	if err := wire.Decode(first, &back); err != nil || len(back.A) != 3 || back.A["m"] != 0 || back.A["a"] != 2 {
		t.Fatalf("%+v %v", back, err)
	}
}
