package beacon

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// What monitoring costs an operation, by its parts (docs/benchmarks.md,
// "Beacon's cost per operation"): each of the three layers an operation
// crosses (mount, forwarding daemon, data server) calls Add once; once a
// window each layer drains its records and encodes them (BenchmarkShip),
// and the store decodes and keeps them (beacon/store BenchmarkPut). The
// A/B runs on the daemons cannot resolve 5 % at 4 KiB on this VM; these
// counts, against the CPU a whole operation costs on the path
// (bench/beaconcost.sh), bound what monitoring adds.

// benchOps are operations as the layers see them: a 4 KiB random read, a
// 1 MiB sequential write, a metadata operation.
var benchOps = []struct {
	name string
	op   Op
	step uint64 // offset step: random (a large prime) or sequential
}{
	{"read4k-random", Op{Who: wire.Who{Job: "4242", App: "fio", Rank: 3, Node: "cn17"}, Uid: 1000, Name: OpRead, Ino: 77, Size: 4096,
		Lat: 40 * time.Microsecond, Wait: 2 * time.Microsecond}, 7919 * 4096},
	{"write1m-seq", Op{Who: wire.Who{Job: "4242", App: "ior", Rank: 3, Node: "cn17"}, Uid: 1000, Name: OpWrite, Ino: 78, Size: 1 << 20,
		Lat: 400 * time.Microsecond, Wait: 5 * time.Microsecond}, 1 << 20},
	{"meta-create", Op{Who: wire.Who{Job: "4242", App: "mdtest", Rank: 3, Node: "cn17"}, Uid: 1000, Name: "meta:create", Ino: 79,
		Lat: 90 * time.Microsecond}, 0},
}

// BenchmarkAdd: one layer's Add, operations 40 µs apart (25,000 a second:
// the 4 KiB rows' rate), the windows drained as the shipper does.
func BenchmarkAdd(b *testing.B) {
	for _, bo := range benchOps {
		b.Run(bo.name, func(b *testing.B) {
			c := NewCollector(LayerClient, "client@cn17", time.Second)
			op := bo.op
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				op.Start = t0.Add(time.Duration(i) * 40 * time.Microsecond)
				op.Off = uint64(i) * bo.step % (64 << 30)
				c.Add(op)
				if i%25000 == 24999 {
					c.Drain(op.Start, false)
				}
			}
		})
	}
}

// BenchmarkAddParallel: Add from every core at once, each goroutine a
// rank of its own (the collector's one mutex is what they share).
func BenchmarkAddParallel(b *testing.B) {
	bo := benchOps[0]
	c := NewCollector(LayerFwd, "fwd-1", time.Second)
	var rank atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		op := bo.op
		op.Rank = rank.Add(1)
		i := 0
		for pb.Next() {
			op.Start = t0.Add(time.Duration(i) * 40 * time.Microsecond)
			op.Off = uint64(i) * bo.step % (64 << 30)
			c.Add(op)
			i++
		}
	})
}

// BenchmarkShip: a window's drain and encoding, per record (ns/op is per
// record; a record stands for every operation of its job, rank, node,
// operation, file and size in the window).
func BenchmarkShip(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			c := NewCollector(LayerData, "data-mem-1", time.Second)
			op := benchOps[0].op
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				b.StopTimer()
				for j := 0; j < n; j++ {
					op.Start = t0.Add(time.Duration(i/n) * time.Second)
					op.Ino = uint64(j) // a record per file
					c.Add(op)
				}
				b.StartTimer()
				recs := c.Drain(op.Start.Add(time.Second), false)
				if len(recs) != n {
					b.Fatalf("%d records drained, want %d", len(recs), n)
				}
				_ = Encode(recs)
			}
		})
	}
}
