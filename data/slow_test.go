package data_test

import (
	"context"
	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
)

// TestSlowZeroCopyReads: a server slowed by an injected fault is slow for
// reads it answers with sendfile, and still answers them with sendfile;
// the read latency it records covers the send.
func TestSlowZeroCopyReads(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newFenceRig(t, func(c *data.Config) { c.ZeroCopy = true; c.Metrics = reg })
	const size = 1 << 20
	if err := r.write(0, 0, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	// the read latency histogram: its sum and its cumulative counts
	hist := func() (sum float64, cum []uint64, bounds []float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "sluice_data_request_duration_seconds" && hasLabel(m, "op", chunk.OpRead.String()) {
					h := m.GetHistogram()
					for _, b := range h.GetBucket() {
						cum = append(cum, b.GetCumulativeCount())
						bounds = append(bounds, b.GetUpperBound())
					}
					return h.GetSampleSum(), append(cum, h.GetSampleCount()), append(bounds, math.Inf(1))
				}
			}
		}
		return 0, nil, nil
	}
	sendfiles := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "sluice_data_sendfile_reads_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	// reads answers n reads of size bytes: the client's median time, the
	// server's mean recorded latency and the upper bound of the histogram
	// bucket holding its median (a read is counted once its data went)
	reads := func(n, size int) (client, server time.Duration, median float64) {
		sum0, cum0, _ := hist()
		var ds []time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			if got := r.read(0, size); len(got) != size {
				t.Fatalf("read %d bytes, want %d", len(got), size)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		var sum1 float64
		var cum1 []uint64
		var bounds []float64
		count := func(c []uint64) uint64 {
			if len(c) == 0 {
				return 0
			}
			return c[len(c)-1]
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if sum1, cum1, bounds = hist(); count(cum1)-count(cum0) == uint64(n) || time.Now().After(deadline) {
				break
			}
		}
		if got := count(cum1) - count(cum0); got != uint64(n) {
			t.Fatalf("%d reads recorded, want %d", got, n)
		}
		for i := range cum1 {
			var before uint64
			if len(cum0) > 0 {
				before = cum0[i]
			}
			if 2*(cum1[i]-before) >= uint64(n) {
				median = bounds[i]
				break
			}
		}
		return ds[n/2], time.Duration((sum1 - sum0) / float64(n) * 1e9), median
	}
	const n = 30
	_, _, small := reads(n, 4096)
	c0, s0, large := reads(n, size)
	if sf := sendfiles(); sf != 2*n {
		t.Fatalf("%v reads answered with sendfile, want %d", sf, 2*n)
	}
	// a 1 MiB send takes longer than a 4 KiB one: a later bucket (they
	// double)
	if large < 2*small {
		t.Fatalf("healthy reads: the server's median latency is at most %gs for 4 KiB and %gs for 1 MiB: the send is left out", small, large)
	}
	ctx := context.Background()
	if _, err := rpc.Do(ctx, r.c, api.Fault, &api.FaultReq{Kind: api.FaultSlow, Value: 2000}); err != nil {
		t.Fatal(err)
	}
	c1, s1, _ := reads(n, size)
	rpc.Do(ctx, r.c, api.Fault, &api.FaultReq{Kind: api.FaultSlow, Value: 100})
	t.Logf("1 MiB reads: healthy %v at the client, %v recorded (median ≤ %gs, 4 KiB ≤ %gs); slowed ×20 %v, %v", c0, s0, large, small, c1, s1)
	if sf := sendfiles(); sf != 3*n {
		t.Fatalf("%v reads answered with sendfile, want %d: the slowed server stopped using it", sf, 3*n)
	}
	// ×20 adds 19 times the server's service time (the client's own time
	// stays, and dominates under -race)
	if c1-c0 < 5*s0 {
		t.Fatalf("slowed ×20, reads took %v at the client, healthy %v (%v of it at the server): want 5× the server's time more at least", c1, c0, s0)
	}
	if s1 < c1/2 {
		t.Fatalf("slowed reads took %v at the client, the server recorded %v", c1, s1)
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
