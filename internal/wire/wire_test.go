package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sample() *Msg {
	return &Msg{
		Op: OpWrite, Errno: 5, ErrMsg: "data server 3 (127.0.0.1:9) unreachable",
		Ino: 42, Parent: 1, NewParent: 7, Handle: 99, Name: "a", NewName: "b", Path: "/x/y",
		Mode: 0o100644, Uid: 1000, Gid: 100, Flags: 0x241, Mask: 3,
		Offset: 5 << 32, Size: 1 << 20, Idx: 1280, ChunkSize: 4 << 20, StripeCnt: 2, StripeUnit: 1 << 20,
		Atime: -5, Mtime: 1700000000123456789,
		Attr:       &Attr{Ino: 42, Mode: 0o100600, Nlink: 1, Uid: 1, Gid: 2, Size: 3, Atime: 4, Mtime: 5, Ctime: 6, ChunkSize: 7, StripeCnt: 8, StripeUnit: 9, Rdev: 0x0801, Trunc: 12},
		ParentAttr: &Attr{Ino: 1, Mode: 0o40755, Nlink: 3, Mtime: -5, Ctime: 11},
		Entries:    []DirEntry{{Name: "f", Ino: 3, Mode: 0o40755}, {Name: "g", Ino: 4, Mode: 0o100644}},
		Chunks:     []ChunkLoc{{Idx: 0, Tier: "mem", Servers: []uint64{1, 2}, Replicas: []uint64{5, 6}, Home: []uint64{9}}, {Idx: 9, Tier: "pfs", Servers: []uint64{3}, Gen: 7}},
		Servers:    []ServerInfo{{ID: 1, Role: "data", Tier: "mem", Addr: "127.0.0.1:1", Capacity: 10, Used: 3, Node: "n", Alive: true, Rank: 0, WriteBW: 5e8, Domain: "cab1", MaxPerf: 3e8, Pending: 4 << 20, Written: 7}},
		Sync:       true, Tier: "ssd", Addr: "127.0.0.1:2", ID: 8, Used: 9, Cap: 10, Gen: 11,
		Trunc: 13, Rdev: 0x0103, Trims: []Trim{{Ino: 42, Idx: 3, Keep: 100, Gen: 13, ChunkSize: 4 << 20}, {Ino: 42, Idx: 4}}, Who: Who{Job: "4711", Rank: -1, Node: "cn001", App: "tag:ior", User: 1000, Group: 100}}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []*Msg{{}, {Op: OpPing}, sample()} {
		b := m.Append(nil)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(normal(got), normal(m)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

// normal makes empty slices nil so DeepEqual compares content.
func normal(m *Msg) *Msg {
	c := *m
	if len(c.Entries) == 0 {
		c.Entries = nil
	}
	if len(c.Chunks) == 0 {
		c.Chunks = nil
	}
	if len(c.Servers) == 0 {
		c.Servers = nil
	}
	if len(c.Trims) == 0 {
		c.Trims = nil
	}
	return &c
}

func TestHeader(t *testing.T) {
	var b [HeaderSize]byte
	h := Header{Kind: KindResponse, Flags: 1, ReqID: 1 << 40, BodyLen: 100, PayloadLen: 1 << 20}
	PutHeader(b[:], h)
	got, err := ParseHeader(b[:])
	if err != nil || got != h {
		t.Fatalf("header %+v %v", got, err)
	}
	b[0] = 'X'
	if _, err := ParseHeader(b[:]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad magic accepted")
	}
	PutHeader(b[:], Header{Kind: KindRequest, PayloadLen: MaxPayload + 1})
	if _, err := ParseHeader(b[:]); err == nil {
		t.Fatalf("oversized payload accepted")
	}
}

func TestDecodeRejects(t *testing.T) {
	good := sample().Append(nil)
	for i := 1; i < len(good); i++ {
		// every strict prefix that ends inside a field must fail or decode
		// to something that re-encodes to exactly that prefix
		m, err := Decode(good[:i])
		if err == nil && !bytes.Equal(m.Append(nil), good[:i]) {
			t.Fatalf("prefix %d decoded to a different message", i)
		}
	}
	if _, err := Decode([]byte{tName, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("huge string length accepted")
	}
	if _, err := Decode([]byte{tEntries, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("huge list length accepted")
	}
	if _, err := Decode([]byte{tIno, 1, tOp, 1}); err == nil {
		t.Fatal("out of order tags accepted")
	}
	if _, err := Decode([]byte{200}); err == nil {
		t.Fatal("unknown tag accepted")
	}
}

func TestClass(t *testing.T) {
	if ClassOf(&Msg{Op: OpWrite, Size: 1 << 20}) != ClassBulk || ClassOf(&Msg{Op: OpRead, Size: 4096}) != ClassSmall || ClassOf(&Msg{Op: OpGetattr}) != ClassMeta {
		t.Fatal("classification")
	}
}

// FuzzDecode: the decoder never panics, and whatever it accepts re-encodes to
// a message that decodes to the same value.
func FuzzDecode(f *testing.F) {
	f.Add(sample().Append(nil))
	f.Add((&Msg{Op: OpLookup, Parent: 1, Name: "x"}).Append(nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(m.Append(nil))
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(again), normal(m)) {
			t.Fatalf("re-encode changed the message")
		}
	})
}

// FuzzHeader: header parsing never panics and accepted headers round-trip.
func FuzzHeader(f *testing.F) {
	var b [HeaderSize]byte
	PutHeader(b[:], Header{Kind: KindRequest, ReqID: 1, BodyLen: 10})
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ParseHeader(in)
		if err != nil {
			return
		}
		var out [HeaderSize]byte
		PutHeader(out[:], h)
		h2, err := ParseHeader(out[:])
		if err != nil || h2 != h {
			t.Fatalf("header round trip")
		}
	})
}

// TestOpNames: every operation has a name (metrics and logs use them).
func TestOpNames(t *testing.T) {
	for o := OpInvalid + 1; o < opMax; o++ {
		if o.String() == "op?" || o.String() == "" {
			t.Errorf("operation %d has no name", o)
		}
	}
}
