package data

import (
	"cmp"
	"context"
	"github.com/sluice-hpc/sluice/api"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/iosched"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Burst-buffer controls (OpBBServer, docs/bbos.md): the metadata service's
// buffer manager sets, on each data server of its pool, the checkpoint
// write cap and the demotion read cap the BBOS period plan calls for, and
// turns the I/O scheduler on (one queue per job; the I/O phases of
// different jobs do not overlap on the server). The server counts the
// bytes its jobs write, from which the manager learns the period's data
// written so far (DWSF).

// The scheduler's defaults are iosched's (DefaultGap, DefaultMaxWait). The
// server is idle 20 ms after its jobs' last write; a demotion read held
// while jobs write goes on at the writing rate after 5 s.
const (
	defaultIdle = 20 * time.Millisecond
	maxHold     = 5 * time.Second
)

// uncapped is a bucket rate no device reaches.
const uncapped = 1e15

// bbState is the server's burst-buffer controls.
type bbState struct {
	ckpt       *throttle.Bucket // jobs' writes
	demote     *throttle.Bucket // migrations' reads while jobs write
	demoteIdle *throttle.Bucket // migrations' reads while none does
	gate       atomic.Pointer[iosched.Gate]

	mu  sync.Mutex    // guards ctl
	ctl api.BBControl // as last set

	written   atomic.Uint64 // bytes of jobs' writes served
	writing   atomic.Int64  // jobs' writes in flight
	lastWrite atomic.Int64  // unix ns when the last one ended
}

func newBBState(now func() time.Time) *bbState {
	return &bbState{ckpt: throttle.New(uncapped, uncapped, now), demote: throttle.New(uncapped, uncapped, now),
		demoteIdle: throttle.New(uncapped, uncapped, now)}
}

func (b *bbState) control() api.BBControl {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctl
}

// jobIO says whether a request of who is a job's (not a migration's,
// not untagged), and the key of its job's queue.
func jobIO(who wire.Who) (string, bool) {
	if who.Job == "" || who.Job == wire.MigrationJob {
		return "", false
	}
	return who.Job, true
}

// admitBB runs a read or write through the burst-buffer controls before
// the device's own limits: a job's request waits for its job's turn in
// the I/O scheduler, then a chunk write pays the checkpoint cap; a
// migration's chunk read pays the demotion cap. The returned function ends
// the request.
func (s *Server) admitBB(ctx context.Context, io ioReq) (done func()) {
	done = func() {}
	if job, ok := jobIO(io.who); ok {
		if g := s.bb.gate.Load(); g != nil {
			done = g.Enter(ctx, job)
		}
		if io.write && io.at != nil {
			s.bb.writing.Add(1)
			leave := done
			done = func() {
				s.bb.writing.Add(-1)
				leave()
			}
			done = s.traced(ctx, "bb write", io, done)
			s.bb.ckpt.Wait(ctx, float64(io.n))
		}
	} else if io.who.Job == wire.MigrationJob && !io.write && io.at != nil {
		done = s.traced(ctx, "bb read", io, done)
		s.demoteWait(ctx, float64(io.n))
	}
	return done
}

// traced is done, which ends request io, logging at debug level when io
// came (now) and when it ended, as msg: each checkpoint write ("bb
// write") and demotion read ("bb read") of the buffer's server, which
// bench/bbos/run.sh TRACE=1 keeps with each run.
func (s *Server) traced(ctx context.Context, msg string, io ioReq, done func()) func() {
	log := s.cfg.Log
	if !log.Enabled(ctx, slog.LevelDebug) {
		return done
	}
	at := s.cfg.Now()
	return func() {
		done()
		log.Debug(msg, "app", io.who.Job, "ino", io.at.Ino, "chunk", io.at.Idx, "off", io.at.Off, "len", io.n,
			"at_us", at.UnixMicro(), "end_us", s.cfg.Now().UnixMicro())
	}
}

// demoteWait paces a demotion read of n bytes: at the idle rate while no
// job writes, else at the writing rate, or (DemoteHold) not at all until
// the server is idle, for maxHold at most.
func (s *Server) demoteWait(ctx context.Context, n float64) {
	ctl := s.bb.control()
	idle := ctl.Idle
	if idle <= 0 {
		idle = defaultIdle
	}
	deadline := s.cfg.Now().Add(maxHold)
	for {
		now := s.cfg.Now()
		if s.bb.writing.Load() == 0 && now.Sub(time.Unix(0, s.bb.lastWrite.Load())) >= idle {
			s.bb.demoteIdle.Wait(ctx, n)
			return
		}
		if !ctl.DemoteHold || now.After(deadline) {
			s.bb.demote.Wait(ctx, n)
			return
		}
		t := time.NewTimer(idle / 4)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// syncedBB ends the phase of the job whose fsync m is in the I/O
// scheduler (the end of a checkpoint: the next job goes without waiting
// for the gap).
func (s *Server) syncedBB(who wire.Who) {
	if job, ok := jobIO(who); ok {
		s.bb.gate.Load().End(job)
	}
}

// wroteBB counts a job's write of n bytes served.
func (s *Server) wroteBB(who wire.Who, n uint64) {
	if _, ok := jobIO(who); ok {
		s.bb.written.Add(n)
		s.bb.lastWrite.Store(s.cfg.Now().UnixNano())
	}
}

// bbControl applies controls set (nil: none; api.BBServer) and returns
// the server's state.
func (s *Server) bbControl(set *api.BBControl) (*api.BBServerState, error) {
	b := s.bb
	if set != nil {
		c := *set
		if c.WriteCap < 0 || c.DemoteCap < 0 || c.Gap < 0 || c.MaxWait < 0 {
			return nil, rpc.Errorf(syscall.EINVAL, "burst-buffer controls: negative figures %+v", c)
		}
		if c.IdleDemoteCap < 0 || c.Idle < 0 {
			return nil, rpc.Errorf(syscall.EINVAL, "burst-buffer controls: negative figures %+v", c)
		}
		setCap(b.ckpt, c.WriteCap)
		setCap(b.demote, c.DemoteCap)
		setCap(b.demoteIdle, c.IdleDemoteCap)
		b.mu.Lock()
		old := b.ctl
		b.ctl = c
		b.mu.Unlock()
		if c.Sched != old.Sched || c.Sched && (c.Gap != old.Gap || c.MaxWait != old.MaxWait) {
			var g *iosched.Gate
			if c.Sched {
				g = iosched.NewGate(cmp.Or(c.Gap, iosched.DefaultGap), cmp.Or(c.MaxWait, iosched.DefaultMaxWait), s.cfg.Now)
				if log := s.cfg.Log; log.Enabled(context.Background(), slog.LevelDebug) {
					// the turns as they change (bench/bbos/run.sh TRACE=1)
					g.SetTrace(func(e iosched.Event) {
						log.Debug("bb scheduler", "ev", e.Kind, "app", e.App, "at_us", e.At.UnixMicro())
					})
				}
			}
			// requests inside the old gate finish there
			s.bb.gate.Store(g)
		}
	}
	b.mu.Lock()
	st := api.BBServerState{BBControl: b.ctl, JobWritten: b.written.Load(), LastJobWrite: b.lastWrite.Load()}
	b.mu.Unlock()
	c, u := s.store.Usage()
	st.Capacity, st.Used = uint64(c), uint64(u)
	gs := b.gate.Load().Stats()
	st.Phases, st.Preempted, st.Waited, st.WaitedTotal, st.Active = gs.Phases, gs.Preempted, gs.Waited, gs.WaitedTotal, gs.Active
	return &st, nil
}

// setCap sets a bucket's rate in bytes/s (0: no cap), with 50 ms of burst.
func setCap(b *throttle.Bucket, rate float64) {
	if rate <= 0 {
		rate = uncapped
	}
	b.SetRate(rate, rate/20)
}
