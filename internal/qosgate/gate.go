// Package qosgate runs policy/qos's scheduler in a daemon: requests Enter
// the gate, wait there in their flow's queue while the scheduler hands the
// server's slots to others, and Leave when served. It is the only place
// QoS blocks; what goes next is the scheduler's call. A gate is shared by
// one daemon's request goroutines; it must not know what the requests do.
package qosgate

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// Gate admits at most Slots requests at a time, in the scheduler's order.
type Gate struct {
	now func() time.Time
	// Idle, when set, lets every request through at once while there are
	// no rules (a data server without QoS pays nothing for it).
	idle bool

	// link, if set, is what the gate's requests share beyond its slots
	// (Config.Link); linkQueue bounds its queue.
	link      *throttle.Bucket
	linkQueue time.Duration

	mu       sync.Mutex // guards everything below
	s        *qos.Sched
	slots    int
	inflight int
	waiting  map[uint64]*waiter
	timer    *time.Timer
	wake     time.Time // when timer fires (zero: not armed)
	version  uint64    // of the rules in force
	met      *metrics
}

// waiter is a request waiting for its turn (guarded by Gate.mu until
// ready is closed).
type waiter struct {
	ready chan struct{}
	link  float64       // bytes it moves over the link
	delay time.Duration // the link's queue ahead of it when it went
}

// Config configures a gate.
type Config struct {
	// Slots is how many requests are served at once.
	Slots int
	// Link, if set, is the link (or device) the requests' bytes go over,
	// a token bucket: a request is handed its slot only while the link's
	// queue (Bucket.Backlog) is under LinkQueue, and pays the link then,
	// so the scheduler's order holds on the link too. Without it a job
	// with many requests in flight fills the link's queue ahead of one
	// with few, and takes the link in proportion to its requests, not its
	// share. EnterLink says how many bytes a request moves on it and
	// returns how long the link takes to carry them.
	Link      *throttle.Bucket
	LinkQueue time.Duration
	// PassIdle lets requests through unscheduled while there are no rules.
	PassIdle bool
	Now      func() time.Time      // nil: time.Now
	Metrics  prometheus.Registerer // nil: not exported
	// Role and Class label the metrics ("fwd" and its pipeline class,
	// "data" and "chunk").
	Role, Class string
}

// New returns a gate with no rules.
func New(cfg Config) *Gate {
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gate{now: cfg.Now, idle: cfg.PassIdle, s: qos.NewSched(), slots: cfg.Slots, waiting: map[uint64]*waiter{},
		link: cfg.Link, linkQueue: cfg.LinkQueue}
	if cfg.Metrics != nil {
		g.met = newMetrics(cfg.Metrics, cfg.Role, cfg.Class, g)
	}
	return g
}

// SetRules puts rules of the given version in force (a version already
// in force is ignored).
func (g *Gate) SetRules(version uint64, rules []qos.Rule) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if version != 0 && version == g.version {
		return
	}
	g.version = version
	g.s.SetRules(rules, g.now())
	g.dispatchLocked()
}

// Version is the version of the rules in force.
func (g *Gate) Version() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.version
}

// Enter waits for q's turn. It returns the function that ends the
// request's service and how long it waited; or ctx's error.
func (g *Gate) Enter(ctx context.Context, q qos.Req) (leave func(), waited time.Duration, err error) {
	leave, waited, _, err = g.EnterLink(ctx, q, 0)
	return leave, waited, err
}

// EnterLink is Enter for a request that then moves link bytes over the
// gate's link (Config.Link): they are paid when its turn comes, and link
// is how long the caller must then wait for the link to carry them (the
// link's queue ahead of it and its own bytes), as throttle.Bucket.Wait
// would have. The gate does not sleep it: it is the request's service.
func (g *Gate) EnterLink(ctx context.Context, q qos.Req, bytes float64) (leave func(), waited, link time.Duration, err error) {
	g.mu.Lock()
	if g.idle && len(g.s.Rules()) == 0 {
		g.mu.Unlock()
		return func() {}, 0, g.link.Reserve(bytes), nil
	}
	at := g.now()
	id := g.s.Enqueue(at, q)
	w := &waiter{ready: make(chan struct{}), link: bytes}
	g.waiting[id] = w
	g.dispatchLocked()
	g.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		g.mu.Lock()
		if _, still := g.waiting[id]; still {
			delete(g.waiting, id)
			g.s.Cancel(id)
			g.mu.Unlock()
			return nil, g.now().Sub(at), 0, ctx.Err()
		}
		g.mu.Unlock() // handed out meanwhile: served after all
	}
	var once sync.Once
	return func() { once.Do(g.leave) }, g.now().Sub(at), w.delay, nil
}

func (g *Gate) leave() {
	g.mu.Lock()
	g.inflight--
	g.dispatchLocked()
	g.mu.Unlock()
}

// dispatchLocked hands free slots to the scheduler's next requests while
// the link's queue is short, and arms the timer for the first one a cap
// or the link holds back. Caller holds mu.
func (g *Gate) dispatchLocked() {
	for g.inflight < g.slots && g.s.Pending() > 0 {
		now := g.now()
		if b := g.link.Backlog(); b > g.linkQueue {
			g.armLocked(now.Add(b - g.linkQueue))
			return
		}
		id, ok, wake := g.s.Next(now)
		if !ok {
			g.armLocked(wake)
			return
		}
		w := g.waiting[id]
		delete(g.waiting, id)
		g.inflight++
		if w.link > 0 {
			w.delay = g.link.Reserve(w.link)
		}
		close(w.ready)
	}
}

// armLocked makes dispatchLocked run again at wake (zero: not needed),
// unless the timer fires before. Caller holds mu.
func (g *Gate) armLocked(wake time.Time) {
	if wake.IsZero() || !g.wake.IsZero() && !wake.Before(g.wake) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.wake = wake
	g.timer = time.AfterFunc(wake.Sub(g.now()), func() {
		g.mu.Lock()
		g.wake = time.Time{}
		g.dispatchLocked()
		g.mu.Unlock()
	})
}

// Stats returns the scheduler's figures per flow.
func (g *Gate) Stats() []qos.FlowStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.s.Stats(g.now())
}

// Rules returns the rules in force and their version.
func (g *Gate) Rules() (uint64, []qos.Rule) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.version, g.s.Rules()
}

// Stats is the gate's state for `sluice qos stats`.
func (g *Gate) GateStats(role, class string) qos.GateStats {
	v, _ := g.Rules()
	return qos.GateStats{Role: role, Class: class, Version: v, Flows: g.Stats()}
}
