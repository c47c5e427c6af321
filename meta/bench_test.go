package meta

import (
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// benchService is a metadata service on a new store of the named engine,
// closed when the benchmark ends.
func benchService(b *testing.B, name string) *Service {
	e, err := engine.Open(name, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	s, err := New(Config{Engine: e, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCreate measures the metadata service's create on each engine,
// without any network:
//
//	go test ./meta -run '^$' -bench Create
func BenchmarkCreate(b *testing.B) {
	for _, name := range []string{"mem", "pebble"} {
		b.Run(name, func(b *testing.B) {
			s := benchService(b, name)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Create(RootIno, strconv.Itoa(i), syscall.S_IFREG|0o644, 0, 0, "", true, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSmallFileLife measures a small file's metadata life (create,
// getattr, size report, removal) in a directory that many files passed
// through before, so the engine reads through flushed tables and
// tombstones as a long-running service does:
//
//	go test ./meta -run '^$' -bench SmallFileLife
func BenchmarkSmallFileLife(b *testing.B) {
	s := benchService(b, "pebble")
	dir, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
	if err != nil {
		b.Fatal(err)
	}
	life := func(name string) {
		a, err := s.Create(dir.Ino, name, syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Getattr(a.Ino); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Extend(a.Ino, 4096, 1, 0); err != nil {
			b.Fatal(err)
		}
		if err := s.Remove(dir.Ino, name, false); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100_000; i++ {
		life("warm" + strconv.Itoa(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		life(strconv.Itoa(i))
	}
}
