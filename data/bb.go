package data

import (
	"context"
	"encoding/json"
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

// Scheduler defaults: a phase ends after 50 ms without a request of its
// job; no job waits more than 10 s (a third of the callers' timeout).
const (
	defaultGap     = 50 * time.Millisecond
	defaultMaxWait = 10 * time.Second
)

// uncapped is a bucket rate no device reaches.
const uncapped = 1e15

// bbState is the server's burst-buffer controls.
type bbState struct {
	ckpt   *throttle.Bucket // jobs' writes
	demote *throttle.Bucket // migrations' reads
	gate   atomic.Pointer[iosched.Gate]

	mu  sync.Mutex     // guards ctl
	ctl wire.BBControl // as last set

	written   atomic.Uint64 // bytes of jobs' writes served
	lastWrite atomic.Int64  // unix ns of the last one
}

func newBBState(now func() time.Time) *bbState {
	return &bbState{ckpt: throttle.New(uncapped, uncapped, now), demote: throttle.New(uncapped, uncapped, now)}
}

// jobIO says whether m is a job's chunk read or write (not a migration's,
// not untagged), and the key of its job's queue.
func jobIO(m *wire.Msg) (string, bool) {
	if m.Job == "" || m.Job == wire.MigrationJob {
		return "", false
	}
	return m.Job, true
}

// admitBB runs a chunk request through the burst-buffer controls before
// the device's own limits: a job's request waits for its job's turn in
// the I/O scheduler, then a write pays the checkpoint cap; a migration's
// read pays the demotion cap. The returned function ends the request.
func (s *Server) admitBB(ctx context.Context, m *wire.Msg) (done func()) {
	done = func() {}
	if job, ok := jobIO(m); ok {
		if g := s.bb.gate.Load(); g != nil {
			done = g.Enter(ctx, job)
		}
		if m.Op == wire.OpChunkWrite {
			s.bb.ckpt.Wait(ctx, float64(m.Size))
		}
	} else if m.Job == wire.MigrationJob && m.Op == wire.OpChunkRead {
		s.bb.demote.Wait(ctx, float64(m.Size))
	}
	return done
}

// wroteBB counts a job's write served.
func (s *Server) wroteBB(m *wire.Msg) {
	if _, ok := jobIO(m); ok {
		s.bb.written.Add(m.Size)
		s.bb.lastWrite.Store(s.cfg.Now().UnixNano())
	}
}

// bbControl applies an OpBBServer's controls (payload empty: none) and
// returns the server's state.
func (s *Server) bbControl(payload []byte) ([]byte, error) {
	b := s.bb
	if len(payload) > 0 {
		var c wire.BBControl
		if err := json.Unmarshal(payload, &c); err != nil {
			return nil, rpc.Errorf(syscall.EINVAL, "burst-buffer controls: %v", err)
		}
		if c.WriteCap < 0 || c.DemoteCap < 0 || c.Gap < 0 || c.MaxWait < 0 {
			return nil, rpc.Errorf(syscall.EINVAL, "burst-buffer controls: negative figures %+v", c)
		}
		setCap(b.ckpt, c.WriteCap)
		setCap(b.demote, c.DemoteCap)
		b.mu.Lock()
		old := b.ctl
		b.ctl = c
		b.mu.Unlock()
		if c.Sched != old.Sched || c.Sched && (c.Gap != old.Gap || c.MaxWait != old.MaxWait) {
			var g *iosched.Gate
			if c.Sched {
				gap, wait := c.Gap, c.MaxWait
				if gap == 0 {
					gap = defaultGap
				}
				if wait == 0 {
					wait = defaultMaxWait
				}
				g = iosched.NewGate(gap, wait, s.cfg.Now)
			}
			// requests inside the old gate finish there
			s.bb.gate.Store(g)
		}
	}
	b.mu.Lock()
	st := wire.BBServerState{BBControl: b.ctl, JobWritten: b.written.Load(), LastJobWrite: b.lastWrite.Load()}
	b.mu.Unlock()
	c, u := s.store.Usage()
	st.Capacity, st.Used = uint64(c), uint64(u)
	gs := b.gate.Load().Stats()
	st.Phases, st.Preempted, st.Waited, st.WaitedTotal, st.Active = gs.Phases, gs.Preempted, gs.Waited, gs.WaitedTotal, gs.Active
	return json.Marshal(st)
}

// setCap sets a bucket's rate in bytes/s (0: no cap), with 50 ms of burst.
func setCap(b *throttle.Bucket, rate float64) {
	if rate <= 0 {
		rate = uncapped
	}
	b.SetRate(rate, rate/20)
}
