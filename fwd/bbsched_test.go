package fwd_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

// TestScheduledServerTurns: six jobs write through a forwarding daemon
// with two bulk workers to a data server whose burst-buffer I/O scheduler
// is on. The jobs' requests waiting there for their turn must not hold
// the workers the job whose turn it is needs: each job's writes are then
// one phase, and the jobs finish one after another. (Held, the waiting
// jobs' requests keep the active job out of the server; its phase ends at
// every gap and the jobs share the server request by request, all
// finishing at the end.)
func TestScheduledServerTurns(t *testing.T) {
	const jobs, writes = 6, 6
	c, ds := stackFwd(t, 40, fwd.Config{Workers: [wire.NumClasses]int{0, 0, 2}})
	ctx := context.Background()
	dc := rpc.NewClient(ds.Addr(), secret, rpc.ClientOptions{Timeout: 10 * time.Second})
	defer dc.Close()
	bb := func(ctl *api.BBControl) api.BBServerState {
		st, err := rpc.Do(ctx, dc, api.BBServer, &api.BBServerReq{Set: ctl})
		if err != nil {
			t.Fatal(err)
		}
		return *st
	}
	bb(&api.BBControl{Sched: true})
	inos := make([]uint64, jobs)
	for j := range inos {
		inos[j] = create(t, c, fmt.Sprintf("ckpt%d", j))
	}
	payload := bytes.Repeat([]byte{5}, 1<<20)
	start := time.Now()
	ends := make([]time.Duration, jobs)
	var wg sync.WaitGroup
	for j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := wire.Who{Job: fmt.Sprintf("job%d", j)}
			for i := range writes {
				m := &ns.IOReq{Head: ns.Head{Who: who}, Ino: inos[j], Off: uint64(i) << 20, Len: 1 << 20}
				if _, _, err := rpc.DoPayload(ctx, c, ns.Write, m, payload, nil); err != nil {
					t.Error(err)
					return
				}
			}
			ends[j] = time.Since(start)
		}()
	}
	wg.Wait()
	st := bb(nil)
	slices.Sort(ends)
	t.Logf("phases %d (preempted %d), jobs' ends %v", st.Phases, st.Preempted, ends)
	if st.Phases > 2*jobs {
		t.Errorf("%d phases for %d jobs: the jobs took turns request by request", st.Phases, jobs)
	}
	// one after another, the median job ends about halfway; sharing the
	// server, with the last
	if mid, last := ends[jobs/2-1], ends[jobs-1]; mid > last*3/4 {
		t.Errorf("the median job ended at %v, the last at %v: the jobs' writes overlapped", mid, last)
	}
	for j := range jobs {
		buf := make([]byte, 1<<20)
		if _, _, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: inos[j], Off: (writes - 1) << 20, Len: 1 << 20}, nil, buf); err != nil || !bytes.Equal(buf, payload) {
			t.Fatalf("job %d's last write reads back wrong (%v)", j, err)
		}
	}
}

// TestSlowServerKeepsNoWorkers: one job's writes wait on a slow data
// server (a PFS its checkpoints bypass the buffer to) while another job
// writes to a fast one through the same forwarding daemon's two bulk
// workers. The slow job's requests, at the server or waiting for the one
// that places their chunk, must not hold the workers: the fast job writes
// at the fast server's pace, not the slow one's. (Held, the fast job's
// requests wait for slow ones to finish: 16 MiB took 0.3-1.6 s, not 20 ms.)
func TestSlowServerKeepsNoWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	svc.SetPlacementHint(func(ino, parent uint64, name string) string {
		if strings.HasPrefix(name, "bypass") {
			return "pfs"
		}
		return ""
	})
	dataServer(t, ctx, metaAddr, "mem", 0, nil)
	dataServer(t, ctx, metaAddr, "pfs", 4, nil)
	testrig.WaitData(t, svc, 2)
	c := startFwd(t, ctx, metaAddr, fwd.Config{Workers: [wire.NumClasses]int{0, 0, 2}})
	slow, fast := create(t, c, "bypass-ckpt"), create(t, c, "ckpt")
	payload := bytes.Repeat([]byte{9}, 1<<20)
	write := func(ino uint64, job string, off uint64) {
		m := &ns.IOReq{Head: ns.Head{Who: wire.Who{Job: job}}, Ino: ino, Off: off << 20, Len: 1 << 20}
		if _, _, err := rpc.DoPayload(ctx, c, ns.Write, m, payload, nil); err != nil {
			t.Error(err)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			write(slow, "slow", uint64(i))
		}()
	}
	time.Sleep(200 * time.Millisecond) // the slow job's requests in flight
	fastStart := time.Now()
	for i := range 16 {
		write(fast, "fast", uint64(i))
	}
	took := time.Since(fastStart)
	wg.Wait()
	slowEnd := time.Since(start)
	t.Logf("16 MiB to the fast server in %v while 8 MiB to the 4 MB/s server took %v", took, slowEnd)
	if slowEnd < time.Second {
		t.Fatalf("the slow server wrote 8 MiB in %v: not slow", slowEnd)
	}
	if took > slowEnd/4 {
		t.Errorf("the fast job took %v beside the slow server's %v: it waited for the slow server's requests", took, slowEnd)
	}
	for _, f := range []uint64{slow, fast} {
		buf := make([]byte, 1<<20)
		if _, _, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: f, Off: 7 << 20, Len: 1 << 20}, nil, buf); err != nil || !bytes.Equal(buf, payload) {
			t.Fatalf("ino %d reads back wrong (%v)", f, err)
		}
	}
}
