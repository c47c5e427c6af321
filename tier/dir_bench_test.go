package tier

import (
	"os"
	"testing"
)

// The data server asks Holds once per chunk write (data/queued.go: is this
// a new chunk whose room must count while its write is queued?). These two
// benchmarks put that lookup beside the 1 MiB chunk write it precedes
// (docs/benchmarks.md, "A new chunk's first write"):
//
//	go test -run '^$' -bench 'DirStore' -benchmem ./tier
func benchStore(b *testing.B) *DirStore {
	dir, err := os.MkdirTemp("/dev/shm", "sluice-tierbench-")
	if err != nil {
		dir = b.TempDir()
	} else {
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	s, err := OpenDir("mem", Config{Dir: dir, Capacity: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkDirStoreHolds: the lookup, on a store holding 4,096 chunks.
func BenchmarkDirStoreHolds(b *testing.B) {
	s := benchStore(b)
	for i := range 4096 {
		if err := s.Write(ChunkID{Ino: uint64(1 + i/64), Idx: uint64(i % 64), ChunkSize: 4 << 20}, 0, []byte{1}, 4<<20); err != nil {
			b.Fatal(err)
		}
	}
	held := 0
	for i := 0; b.Loop(); i++ {
		if s.Holds(ChunkID{Ino: uint64(1 + i%64), Idx: uint64(i % 64), ChunkSize: 4 << 20}) {
			held++
		}
	}
	if held == 0 {
		b.Fatal("no chunk held")
	}
}

// BenchmarkDirStoreWrite1MiB: a 1 MiB write into a 4 MiB chunk of the same
// store, the request the lookup comes before.
func BenchmarkDirStoreWrite1MiB(b *testing.B) {
	s := benchStore(b)
	p := make([]byte, 1<<20)
	b.SetBytes(int64(len(p)))
	for i := 0; b.Loop(); i++ {
		id := ChunkID{Ino: 1, Idx: uint64(i / 4 % 64), ChunkSize: 4 << 20}
		if err := s.Write(id, int64(i%4)<<20, p, 4<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDirStoreSmallFileLife: a small file's chunk written, synced
// and deleted on a store holding 50,000 other files' chunks: the sync and
// the deletion look at the file's own chunks (byIno), not the tier's.
func BenchmarkDirStoreSmallFileLife(b *testing.B) {
	s := benchStore(b)
	for i := range 50_000 {
		if err := s.Write(ChunkID{Ino: uint64(1 + i), ChunkSize: 4 << 20}, 0, []byte{1}, 4096); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; b.Loop(); i++ {
		ino := uint64(1_000_000 + i)
		if err := s.Write(ChunkID{Ino: ino, ChunkSize: 4 << 20}, 0, make([]byte, 4096), 4096); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(ino); err != nil {
			b.Fatal(err)
		}
		if err := s.DeleteFile(ino); err != nil {
			b.Fatal(err)
		}
	}
}
