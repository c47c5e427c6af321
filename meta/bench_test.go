package meta

import (
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// BenchmarkCreate measures the metadata service's create on each engine,
// without any network:
//
//	go test ./meta -run '^$' -bench Create
func BenchmarkCreate(b *testing.B) {
	for _, name := range []string{"mem", "pebble"} {
		b.Run(name, func(b *testing.B) {
			e, err := engine.Open(name, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			s, err := New(Config{Engine: e, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Create(RootIno, strconv.Itoa(i), syscall.S_IFREG|0o644, 0, 0, "", true, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
