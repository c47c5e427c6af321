package fwd_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

var secret = testrig.Secret

func quiet() *slog.Logger { return testrig.Quiet() }

// stack starts a metadata service, one data server capped at mbps and a
// forwarding daemon, all in this process on loopback, and returns a client
// of the forwarding daemon.
func stack(t testing.TB, mbps float64) *rpc.Client {
	return stackWith(t, mbps, nil)
}

// memServer starts a mem-tier data server (on tmpfs where there is one)
// until ctx ends.
func memServer(t testing.TB, ctx context.Context, metaAddr string, mbps float64, reg prometheus.Registerer) *data.Server {
	t.Helper()
	return dataServer(t, ctx, metaAddr, "mem", mbps, reg)
}

// dataServer starts a data server of tier kind (on tmpfs where there is
// one) until ctx ends.
func dataServer(t testing.TB, ctx context.Context, metaAddr, kind string, mbps float64, reg prometheus.Registerer) *data.Server {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "sluice-fwd-test")
	if err != nil {
		dir = t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ds, err := data.New(data.Config{Kind: kind, Dir: dir, Capacity: 1 << 30, Meta: metaAddr, Secret: secret,
		MaxMBps: mbps, Log: quiet(), Metrics: reg, StateDir: dir + "/.state", ZeroCopy: true, LocalSocket: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := ds.Listen()
	go ds.Run(ctx, ln, "")
	return ds
}

func stackWith(t testing.TB, mbps float64, reg prometheus.Registerer) *rpc.Client {
	c, _ := stackFwd(t, mbps, fwd.Config{Metrics: reg})
	return c
}

// stackFwd is stackWith for a forwarding daemon configured by cfg; it
// also returns the data server.
func stackFwd(t testing.TB, mbps float64, cfg fwd.Config) (*rpc.Client, *data.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, metaAddr := testrig.Meta(t, meta.Config{Metrics: cfg.Metrics})
	ds := memServer(t, ctx, metaAddr, mbps, cfg.Metrics)

	c := startFwd(t, ctx, metaAddr, cfg)
	// wait for the data server to register
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _, err := rpc.DoPayload(ctx, c, ns.Statfs, &ns.PingReq{}, nil, nil)
		if err == nil && resp.Capacity > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("data server did not register")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, ds
}

// startFwd starts a forwarding daemon with cfg (its metadata service,
// secret and logger set here) until ctx ends, and returns a client of it.
func startFwd(t testing.TB, ctx context.Context, metaAddr string, cfg fwd.Config) *rpc.Client {
	cfg.Meta, cfg.Secret, cfg.Log = metaAddr, secret, quiet()
	// the daemons' defaults: zero-copy reads and writes, local sockets
	cfg.ZeroCopy, cfg.LocalSocket = true, true
	fs := fwd.New(cfg)
	ln, _ := fs.Listen()
	go fs.Run(ctx, ln, "")
	c := rpc.NewClient(fs.Addr(), secret, rpc.ClientOptions{Timeout: 30 * time.Second})
	t.Cleanup(c.Close)
	return c
}

func create(t testing.TB, c *rpc.Client, name string) uint64 {
	t.Helper()
	resp, _, err := rpc.DoPayload(context.Background(), c, ns.Mknod, &ns.MknodReq{Parent: meta.RootIno, Name: name, Mode: 0o644}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ino := resp.Attr.Ino
	if _, _, err := rpc.DoPayload(context.Background(), c, ns.Open, &ns.OpenReq{Ino: ino}, nil, nil); err != nil {
		t.Fatal(err)
	}
	return ino
}

// TestBulkDoesNotBlockMetadataOrSmallIO: with the data server capped at
// 20 MB/s and a stream of 4 MiB writes saturating it, stat and 4 KiB reads
// on the same forwarding node and connection still answer promptly.
func TestBulkDoesNotBlockMetadataOrSmallIO(t *testing.T) {
	c := stack(t, 20)
	ctx := context.Background()
	small := create(t, c, "small")
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: small, Len: 4096}, bytes.Repeat([]byte{7}, 4096), nil); err != nil {
		t.Fatal(err)
	}
	big := create(t, c, "big")
	payload := bytes.Repeat([]byte{1}, 4<<20)
	var wg sync.WaitGroup
	bulkStart := time.Now()
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: big, Off: uint64(i) << 22, Len: 4 << 20}, payload, nil); err != nil {
				t.Error(err)
			}
		}(i)
	}
	time.Sleep(100 * time.Millisecond)
	var worst time.Duration
	buf := make([]byte, 4096)
	for i := 0; i < 20; i++ {
		start := time.Now()
		if _, _, err := rpc.DoPayload(ctx, c, ns.Getattr, &ns.InoReq{Ino: small}, nil, nil); err != nil {
			t.Fatal(err)
		}
		mid := time.Now()
		if _, _, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: small, Len: 4096}, nil, buf); err != nil {
			t.Fatal(err)
		}
		if testing.Verbose() {
			t.Logf("stat %v read %v", mid.Sub(start), time.Since(mid))
		}
		if d := time.Since(start); d > worst {
			worst = d
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	bulk := time.Since(bulkStart)
	t.Logf("bulk 24 MiB took %v; worst stat+4KiB read during it: %v", bulk, worst)
	if bulk < 800*time.Millisecond {
		t.Fatalf("bulk writes finished in %v: the throttle did not hold them back, the test proves nothing", bulk)
	}
	if worst > 300*time.Millisecond {
		t.Fatalf("metadata/small I/O waited %v behind bulk I/O", worst)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{7}, 4096)) {
		t.Fatal("small read returned wrong data")
	}
}

// BenchmarkWrite1MiB measures one client streaming 1 MiB writes through a
// forwarding daemon to an uncapped mem data server, without FUSE:
//
//	go test ./fwd -run '^$' -bench Write1MiB
func BenchmarkWrite1MiB(b *testing.B) {
	c := stack(b, 0)
	ino := create(b, c, "bench")
	payload := bytes.Repeat([]byte{3}, 1<<20)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := uint64(i%256) << 20
		if _, _, err := rpc.DoPayload(context.Background(), c, ns.Write, &ns.IOReq{Ino: ino, Off: off, Len: 1 << 20}, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead1MiB is the read counterpart of BenchmarkWrite1MiB.
func BenchmarkRead1MiB(b *testing.B) {
	c := stack(b, 0)
	ino := create(b, c, "bench")
	payload := bytes.Repeat([]byte{3}, 1<<20)
	for i := 0; i < 64; i++ {
		rpc.DoPayload(context.Background(), c, ns.Write, &ns.IOReq{Ino: ino, Off: uint64(i) << 20, Len: 1 << 20}, payload, nil)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := rpc.DoPayload(context.Background(), c, ns.Read, &ns.IOReq{Ino: ino, Off: uint64(i%64) << 20, Len: 1 << 20}, nil, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreate measures a create through a forwarding daemon to the
// metadata service (Pebble on the test's temporary directory), without FUSE.
func BenchmarkCreate(b *testing.B) {
	c := stack(b, 0)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := rpc.DoPayload(ctx, c, ns.Mknod, &ns.MknodReq{Parent: meta.RootIno, Name: strconv.Itoa(i), Mode: 0o644}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestInjectedSlowdown: a forwarding daemon told to be 20× slow serves
// requests several times slower (the fail-slow fault later issues detect).
func TestInjectedSlowdown(t *testing.T) {
	c := stack(t, 0)
	ctx := context.Background()
	ino := create(t, c, "f")
	measure := func() time.Duration {
		start := time.Now()
		for i := 0; i < 40; i++ {
			if _, _, err := rpc.DoPayload(ctx, c, ns.Getattr, &ns.InoReq{Ino: ino}, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / 40
	}
	measure()
	healthy := measure()
	if _, err := rpc.Do(ctx, c, api.Fault, &api.FaultReq{Kind: api.FaultSlow, Value: 2000}); err != nil {
		t.Fatal(err)
	}
	slow := measure()
	t.Logf("getattr: healthy %v, slowed %v", healthy, slow)
	if slow < 4*healthy {
		t.Fatalf("slowdown ×20 made requests only %.1f× slower", float64(slow)/float64(healthy))
	}
	rpc.Do(ctx, c, api.Fault, &api.FaultReq{Kind: api.FaultSlow, Value: 100})
	if again := measure(); again > 3*healthy+time.Millisecond {
		t.Fatalf("clearing the fault did not restore speed: %v", again)
	}
}

// TestMetrics: requests, bytes and per-job bytes appear in the registry.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := stackWith(t, 0, reg)
	ctx := context.Background()
	ino := create(t, c, "m")
	payload := bytes.Repeat([]byte{5}, 256<<10)
	for i := 0; i < 3; i++ {
		if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Head: ns.Head{Who: wire.Who{Job: "j1", Rank: 2}}, Ino: ino, Off: uint64(i) << 18, Len: 256 << 10}, payload, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP sluice_job_bytes_total File data moved per job through this forwarding daemon.
# TYPE sluice_job_bytes_total counter
sluice_job_bytes_total{dir="write",job="j1"} 786432
`
	// the worker counts a request after answering it: allow it a moment
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_job_bytes_total")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	n, err := testutil.GatherAndCount(reg, "sluice_fwd_requests_total", "sluice_fwd_queue_depth", "sluice_fwd_request_duration_seconds")
	if err != nil || n < 3+int(wire.NumClasses) {
		t.Fatalf("series: %d %v", n, err)
	}
	// the data server and metadata service report into the same registry
	want = `
# HELP sluice_data_bytes_total Chunk data read and written.
# TYPE sluice_data_bytes_total counter
sluice_data_bytes_total{dir="write",tier="mem"} 786432
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_data_bytes_total"); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg, "sluice_meta_requests_total"); n < 3 {
		t.Fatalf("metadata series: %d", n)
	}
}

// TestAccessReported: reads and writes through the forwarding daemon
// reach the metadata service as the file's last access (ns.Access), the
// input of the ONFS policy's order of open files, also a closed file's
// (until 2026-12-06 an access went with the state of a file closed before
// the next report: sluice file stat showed no last access).
func TestAccessReported(t *testing.T) {
	ctx := context.Background()
	svc, c, _ := tierStack(t, 1, 0)
	ino := create(t, c, "f")
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096), nil); err != nil {
		t.Fatal(err)
	}
	wait := func(after int64) int64 {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			a, err := svc.Activity(ino)
			if err != nil {
				t.Fatal(err)
			}
			if a.LastAccess > after {
				return a.LastAccess
			}
			if time.Now().After(deadline) {
				t.Fatalf("last access %d, want one after %d", a.LastAccess, after)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := wait(0)
	time.Sleep(10 * time.Millisecond)
	if _, _, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: ino, Len: 4096}, nil, nil); err != nil {
		t.Fatal(err)
	}
	wait(first)
	// a file written and closed between two reports: its state goes at
	// the close, its access is reported still
	ino = create(t, c, "g")
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rpc.Do(ctx, c, ns.Flush, &ns.SizeReq{Ino: ino, Size: 4096}); err != nil {
		t.Fatal(err)
	}
	if _, err := rpc.Do(ctx, c, ns.Release, &ns.InoReq{Ino: ino}); err != nil {
		t.Fatal(err)
	}
	wait(0)
}

// TestFsyncAfterTruncate: a truncate adopted after writes makes the
// daemon forget chunk locations; an fsync then still syncs the data
// servers that hold what was written before it (and kept by it).
func TestFsyncAfterTruncate(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := stackWith(t, 0, reg)
	ctx := context.Background()
	ino := create(t, c, "f")
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: 256 << 10}, make([]byte, 256<<10), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rpc.DoPayload(ctx, c, ns.Setattr, &ns.SetattrReq{Ino: ino, Mask: ns.SetSize, Size: 128 << 10}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rpc.DoPayload(ctx, c, ns.Fsync, &ns.SizeReq{Ino: ino}, nil, nil); err != nil {
		t.Fatal(err)
	}
	syncs := 0.0
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "sluice_data_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "chunk-sync" {
					syncs += m.GetCounter().GetValue()
				}
			}
		}
	}
	if syncs == 0 {
		t.Fatal("fsync after a truncate synced no data server")
	}
}

// TestFlushReportsAnotherDaemonsWrites: a write inside a file acknowledged
// by one forwarding daemon that never reported it (it died; here it just
// has not yet) is reported by the daemon the handle's flush reaches, from
// the client's account of its writes: the file's mtime moves, and with it
// the change feed that makes other mounts drop what they cached of the
// file (their block caches read the old bytes otherwise).
func TestFlushReportsAnotherDaemonsWrites(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	memServer(t, ctx, metaAddr, 0, nil)
	a := startFwd(t, ctx, metaAddr, fwd.Config{SizeFlush: time.Hour}) // reports only at flushes
	b := startFwd(t, ctx, metaAddr, fwd.Config{})
	testrig.WaitData(t, svc, 1)
	ino := create(t, a, "f")
	resp, _, err := rpc.DoPayload(ctx, a, ns.Write, &ns.IOReq{Ino: ino, Len: 256 << 10}, make([]byte, 256<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	gen := resp.Trunc
	if _, _, err := rpc.DoPayload(ctx, a, ns.Flush, &ns.SizeReq{Ino: ino, Size: 256 << 10, Trunc: gen}, nil, nil); err != nil {
		t.Fatal(err)
	}
	before, err := svc.Getattr(ino)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	// an overwrite through a, not reported; the handle's flush reaches b
	if _, _, err := rpc.DoPayload(ctx, a, ns.Write, &ns.IOReq{Ino: ino, Len: 4096}, bytes.Repeat([]byte{7}, 4096), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rpc.DoPayload(ctx, b, ns.Flush, &ns.SizeReq{Ino: ino, Size: 4096, Trunc: gen}, nil, nil); err != nil {
		t.Fatal(err)
	}
	after, err := svc.Getattr(ino)
	if err != nil {
		t.Fatal(err)
	}
	if after.Mtime <= before.Mtime || after.Size != 256<<10 {
		t.Fatalf("after the flush: mtime %d (was %d), size %d: want a later mtime, the same size", after.Mtime, before.Mtime, after.Size)
	}
}
