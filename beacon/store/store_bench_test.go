package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// BenchmarkPut: the store's side of a window (decode a shipped batch and
// keep it in Pebble), per record (ns/op is per record); the rest of
// monitoring's cost per operation is beacon's BenchmarkAdd and
// BenchmarkShip (docs/benchmarks.md, "Beacon's cost per operation").
func BenchmarkPut(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{Retention: time.Hour, MaxBytes: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				b.StopTimer()
				recs := make([]beacon.Record, n)
				for j := range recs {
					recs[j] = beacon.Record{Window: t0.Add(time.Duration(i/n) * time.Second).UnixNano(), Layer: beacon.LayerFwd,
						Server: "fwd-1", Op: beacon.OpRead, Ino: uint64(j), Size: 4096, Count: 25, Bytes: 25 * 4096,
						Who: wire.Who{Job: "4242", App: "fio", Rank: 3, Node: "cn17"}}
				}
				batch := beacon.Encode(recs)
				b.StartTimer()
				if err := s.Put(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
