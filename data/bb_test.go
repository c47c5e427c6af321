package data_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
)

func (r *fenceRig) bbControl(c *api.BBControl) api.BBServerState {
	r.t.Helper()
	st, err := rpc.Do(context.Background(), r.c, api.BBServer, &api.BBServerReq{Set: c})
	if err != nil {
		r.t.Fatal(err)
	}
	return *st
}

func (r *fenceRig) writeAs(who wire.Who, off int, p []byte) error {
	_, _, err := rpc.DoPayload(context.Background(), r.c, chunk.Write, &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: r.ino, ChunkSize: 1 << 20},
		Off: uint64(off), Len: uint64(len(p))}, Reserve: 1 << 20, Who: who}, p, nil)
	return err
}

func (r *fenceRig) readAs(who wire.Who, n int) error {
	_, _, err := rpc.DoPayload(context.Background(), r.c, chunk.Read, &chunk.ReadReq{At: chunk.At{ID: chunk.ID{Ino: r.ino, ChunkSize: 1 << 20},
		Len: uint64(n)}, Who: who}, nil, nil)
	return err
}

// TestBBCaps: the checkpoint cap throttles jobs' writes and only them, the
// demotion cap migrations' reads, and the server counts its jobs' bytes.
func TestBBCaps(t *testing.T) {
	r := newFenceRig(t)
	job := wire.Who{Job: "7"}
	mig := wire.Who{Job: wire.MigrationJob}
	p := make([]byte, 256<<10)
	timed := func(f func() error, n int) time.Duration {
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start)
	}
	st := r.bbControl(&api.BBControl{WriteCap: 4e6, DemoteCap: 50e6, IdleDemoteCap: 2e6})
	if st.WriteCap != 4e6 || st.DemoteCap != 50e6 || st.IdleDemoteCap != 2e6 || st.Sched {
		t.Fatalf("controls not kept: %+v", st)
	}
	// 16 × 256 KiB = 4 MiB at 4 MB/s: about a second (less the burst)
	if d := timed(func() error { return r.writeAs(job, 0, p) }, 16); d < 700*time.Millisecond || d > 3*time.Second {
		t.Fatalf("4 MiB of job writes under a 4 MB/s cap took %v", d)
	}
	if d := timed(func() error { return r.writeAs(mig, 0, p) }, 16); d > 500*time.Millisecond {
		t.Fatalf("migration writes paid the checkpoint cap: %v", d)
	}
	// 8 × 256 KiB = 2 MiB at 2 MB/s (no job writes: the idle rate)
	time.Sleep(50 * time.Millisecond)
	if d := timed(func() error { return r.readAs(mig, len(p)) }, 8); d < 700*time.Millisecond || d > 3*time.Second {
		t.Fatalf("2 MiB of migration reads under a 2 MB/s cap took %v", d)
	}
	if d := timed(func() error { return r.readAs(job, len(p)) }, 8); d > 500*time.Millisecond {
		t.Fatalf("job reads paid the demotion cap: %v", d)
	}
	st = r.bbControl(&api.BBControl{})
	if st.JobWritten != 16*uint64(len(p)) || st.LastJobWrite == 0 {
		t.Fatalf("counted %d bytes of job writes, want %d (migrations not counted)", st.JobWritten, 16*len(p))
	}
	if d := timed(func() error { return r.writeAs(job, 0, p) }, 16); d > 500*time.Millisecond {
		t.Fatalf("cap removed, still slow: %v", d)
	}
	// no payload: the controls stay
	r.bbControl(&api.BBControl{WriteCap: 1e6})
	if st := r.bbControl(nil); st.WriteCap != 1e6 {
		t.Fatalf("a look changed the controls: %+v", st)
	}
	if _, err := rpc.Do(context.Background(), r.c, api.BBServer, &api.BBServerReq{Set: &api.BBControl{WriteCap: -1}}); err == nil {
		t.Fatal("a negative cap was taken")
	}
}

// TestBBScheduler: with the scheduler on, a job that arrives while another
// job writes back to back waits for that job's phase to end; without it,
// it goes at once.
func TestBBScheduler(t *testing.T) {
	r := newFenceRig(t)
	p := make([]byte, 64<<10)
	run := func(sched bool) (aEnd, bStart, bEnd time.Time) {
		r.bbControl(&api.BBControl{Sched: sched, Gap: 100 * time.Millisecond, MaxWait: 5 * time.Second, WriteCap: 8e6})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ { // 2.5 MiB at 8 MB/s: about 300 ms
				if err := r.writeAs(wire.Who{Job: "a"}, 0, p); err != nil {
					t.Error(err)
				}
			}
			aEnd = time.Now()
		}()
		time.Sleep(50 * time.Millisecond)
		bStart = time.Now()
		if err := r.writeAs(wire.Who{Job: "b"}, 0, p); err != nil {
			t.Error(err)
		}
		bEnd = time.Now()
		wg.Wait()
		return
	}
	aEnd, _, bEnd := run(true)
	if bEnd.Before(aEnd) {
		t.Fatalf("with the scheduler, b's write ended %v before a's phase did", aEnd.Sub(bEnd))
	}
	st := r.bbControl(nil)
	if !st.Sched || st.Phases < 2 || st.Waited < 1 || st.WaitedTotal < 100*time.Millisecond {
		t.Fatalf("scheduler figures %+v", st)
	}
	aEnd, bStart, bEnd := run(false)
	if !bEnd.Before(aEnd) || bEnd.Sub(bStart) > 200*time.Millisecond {
		t.Fatalf("without the scheduler b waited %v (a ended %v after b)", bEnd.Sub(bStart), aEnd.Sub(bEnd))
	}
}

// TestBBSchedulerSyncEndsPhase: a job's fsync (chunk.Sync with its job)
// ends its phase, so a job waiting behind it goes at once rather than a
// gap later; another job's sync does not end it.
func TestBBSchedulerSyncEndsPhase(t *testing.T) {
	r := newFenceRig(t)
	r.bbControl(&api.BBControl{Sched: true, Gap: 2 * time.Second, MaxWait: 10 * time.Second})
	p := make([]byte, 64<<10)
	a, b := wire.Who{Job: "a"}, wire.Who{Job: "b"}
	if err := r.writeAs(a, 0, p); err != nil {
		t.Fatal(err)
	}
	sync := func(who wire.Who) {
		if _, err := rpc.Do(context.Background(), r.c, chunk.Sync, &chunk.SyncReq{Ino: r.ino, Who: who}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan time.Time)
	go func() {
		if err := r.writeAs(b, 0, p); err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	sync(b) // not b's phase: a's goes on
	select {
	case <-done:
		t.Fatal("b's write went during a's phase")
	case <-time.After(200 * time.Millisecond):
	}
	start := time.Now()
	sync(a)
	if d := (<-done).Sub(start); d > 500*time.Millisecond {
		t.Fatalf("b waited %v after a's fsync ended its phase (the gap is 2 s)", d)
	}
}

// TestBBDemoteHold: with DemoteHold, a migration's read waits while a job
// writes and goes once the server is idle.
func TestBBDemoteHold(t *testing.T) {
	r := newFenceRig(t)
	r.bbControl(&api.BBControl{DemoteHold: true, WriteCap: 4e6, Idle: 20 * time.Millisecond})
	p := make([]byte, 64<<10)
	var writerEnd time.Time
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 30; i++ { // about 0.5 s of back-to-back writes
			if err := r.writeAs(wire.Who{Job: "w"}, 0, p); err != nil {
				t.Error(err)
			}
		}
		writerEnd = time.Now()
	}()
	time.Sleep(50 * time.Millisecond)
	if err := r.readAs(wire.Who{Job: wire.MigrationJob}, len(p)); err != nil {
		t.Fatal(err)
	}
	readEnd := time.Now()
	wg.Wait()
	if readEnd.Before(writerEnd) {
		t.Fatalf("the demotion read ended %v before the job's writes did", writerEnd.Sub(readEnd))
	}
	// idle: at once
	start := time.Now()
	if err := r.readAs(wire.Who{Job: wire.MigrationJob}, len(p)); err != nil || time.Since(start) > 200*time.Millisecond {
		t.Fatalf("an idle server held a demotion read %v (%v)", time.Since(start), err)
	}
}

// TestQueuedChunksCountAsUsed: a new chunk's write held at the burst
// buffer's cap counts its room in the server's reports from its arrival,
// not only once it reaches the store: placement must not see that room
// free (it forgets its own promise at the server's next report) and place
// other chunks there that the store would then refuse.
func TestQueuedChunksCountAsUsed(t *testing.T) {
	r := newFenceRig(t)
	used := func() uint64 {
		for _, si := range r.svc.Servers() {
			if si.ID == r.id {
				return si.Used
			}
		}
		t.Fatal("the data server is not registered")
		return 0
	}
	base := used()
	r.bbControl(&api.BBControl{WriteCap: 4e5})
	job := wire.Who{Job: "7"}
	r.writeAs(job, 0, make([]byte, 64<<10)) // takes the cap's burst
	base2 := used()
	p := make([]byte, 1<<20)
	done := make(chan error, 1)
	go func() {
		// a new chunk of another file: ~2.6 s at the 400 kB/s cap
		_, _, err := rpc.DoPayload(context.Background(), r.c, chunk.Write, &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: r.ino + 1, ChunkSize: 1 << 20},
			Len: uint64(len(p))}, Reserve: 4 << 20, Who: job}, p, nil)
		done <- err
	}()
	deadline := time.Now().Add(2 * time.Second) // a heartbeat a second
	for used() < base2+4<<20 {
		select {
		case err := <-done:
			t.Fatalf("the write ended (%v) before a report counted its room: used %d, was %d (%d before the first write)", err, used(), base2, base)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("a queued new chunk's room not in the reports: used %d, was %d", used(), base2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// once written, the store holds the room: counted once (the first
	// chunk's unwritten room may have been taken back meanwhile)
	time.Sleep(1200 * time.Millisecond)
	if u := used(); u < 4<<20 || u > base2+4<<20 {
		t.Fatalf("after the write: used %d, want 4 MiB to %d", u, base2+4<<20)
	}
}

// TestBBTraceLog: at debug level the server logs each job's chunk write
// and each demotion read with its arrival and end, in the form
// bench/bbos/run.sh TRACE=1 reads back ("Writes", "Reads").
func TestBBTraceLog(t *testing.T) {
	var buf safeBuffer
	r := newFenceRig(t, func(c *data.Config) {
		c.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	p := make([]byte, 64<<10)
	if err := r.writeAs(wire.Who{Job: "bb-app07"}, 0, p); err != nil {
		t.Fatal(err)
	}
	if err := r.readAs(wire.Who{Job: wire.MigrationJob}, len(p)); err != nil {
		t.Fatal(err)
	}
	// run.sh's patterns
	write := regexp.MustCompile(`msg="bb write".* app=(\S+) ino=(\d+) .* len=(\d+) at_us=(\d+) end_us=(\d+)`)
	read := regexp.MustCompile(`msg="bb read".* ino=(\d+) .* len=(\d+) at_us=(\d+) end_us=(\d+)`)
	// a request's record is written as it ends, which may be after its
	// reply reached the caller
	var w, rd []string
	for deadline := time.Now().Add(5 * time.Second); (w == nil || rd == nil) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(buf.String(), "\n") {
			if m := write.FindStringSubmatch(l); m != nil {
				w = m
			}
			if m := read.FindStringSubmatch(l); m != nil {
				rd = m
			}
		}
	}
	if w == nil || rd == nil {
		t.Fatalf("no write or no read record in the log:\n%s", buf.String())
	}
	ino := fmt.Sprint(r.ino)
	if w[1] != "bb-app07" || w[2] != ino || w[3] != fmt.Sprint(len(p)) || w[4] > w[5] {
		t.Errorf("write record %q: want app bb-app07, inode %s, %d bytes, arrival before end", w[0], ino, len(p))
	}
	if rd[1] != ino || rd[2] != fmt.Sprint(len(p)) || rd[3] > rd[4] {
		t.Errorf("read record %q: want inode %s, %d bytes, arrival before end", rd[0], ino, len(p))
	}
}

// safeBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type safeBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
