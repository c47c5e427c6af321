package meta

import (
	"os"
	"reflect"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

// TestRecordsRoundTrip: every stored record carries all its fields.
func TestRecordsRoundTrip(t *testing.T) {
	for _, m := range []wire.Message{&inode{}, &chunkRecord{}, &serverRecord{}, &MoveIntent{}} {
		wiretest.RoundTrip(t, m)
	}
}

// TestLegacyRecords: records written by protocol 1's codec (before
// records had their own types; testdata/records-v1, written by that
// version) still read, whole.
func TestLegacyRecords(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/records-v1/" + name + ".bin")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	n, err := decodeInode(read("inode"))
	want := &inode{Attr: wire.Attr{Ino: 42, Mode: 0o100640, Nlink: 2, Uid: 1000, Gid: 100, Size: 5 << 30, Atime: -5, Mtime: 1700000000123456789,
		Ctime: 1700000000999, ChunkSize: 4 << 20, StripeCnt: 2, StripeUnit: 1 << 20, Rdev: 0x0801, Trunc: 12}, Target: "../target", Parent: 7, Name: "ckpt.0"}
	if err != nil || !reflect.DeepEqual(n, want) {
		t.Fatalf("inode: %+v %v", n, err)
	}
	c, err := decodeChunk(read("chunk"))
	wc := wire.ChunkLoc{Idx: 1280, Tier: "mem", Servers: []uint64{3, 4}, Gen: 9, Replicas: []uint64{5, 6}, Home: []uint64{11}}
	if err != nil || !reflect.DeepEqual(c, wc) {
		t.Fatalf("chunk: %+v %v", c, err)
	}
	if c, err := decodeChunk(read("chunk-plain")); err != nil || !reflect.DeepEqual(c, wire.ChunkLoc{Idx: 3, Tier: "ssd", Servers: []uint64{2}}) {
		t.Fatalf("chunk: %+v %v", c, err)
	}
	s, err := decodeServer(read("server"))
	ws := wire.ServerInfo{ID: 3, Role: "data", Tier: "mem", Addr: "127.0.0.1:7000", Capacity: 8 << 30, Used: 1 << 30, Node: "n1",
		Alive: true, Rank: 0, WriteBW: 5e8, ReadBW: 6e8, Domain: "cab1", MaxPerf: 3e8, Pending: 4 << 20, Written: 77}
	if err != nil || !reflect.DeepEqual(s, ws) {
		t.Fatalf("server: %+v %v", s, err)
	}
	mi, err := decodeMove(read("move"))
	wm := MoveIntent{Ino: 42, Idx: 1280, Session: 99, State: 2, Trunc: 12, ChunkSize: 4 << 20, StripeUnit: 1 << 20,
		From: wc, To: wire.ChunkLoc{Idx: 1280, Tier: "pfs", Servers: []uint64{8}, Gen: 10}, Keep: true}
	if err != nil || !reflect.DeepEqual(mi, wm) {
		t.Fatalf("move: %+v %v", mi, err)
	}
	// and written again, they are in the new form and read the same
	if got, err := decodeMove(wm.encode()); err != nil || !reflect.DeepEqual(got, wm) || wm.encode()[0] != recordMark {
		t.Fatalf("move rewritten: %+v %v", got, err)
	}
	for _, bad := range [][]byte{{recordMark, 0xff}, {200}, {lAttr, 0xff}} {
		if _, err := decodeInode(bad); err == nil {
			t.Fatalf("%x: corrupt record accepted", bad)
		}
	}
}
