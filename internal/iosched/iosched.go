// Package iosched is the I/O scheduler of a burst-buffer server (BBOS
// §IV-A, docs/bbos.md "I/O scheduler"): one queue per application, and
// the I/O phases of different applications do not overlap on the server.
// A phase is an application's run of requests; it ends once the
// application has had nothing in flight for Gap, and the application that
// has waited longest goes next. An application that has waited MaxWait
// takes its turn even from a phase that goes on (no phase starves the
// others).
//
// Phases is the pure state machine: the caller passes the time, and it
// neither sleeps nor reads a clock, so the data server and the simulator
// run the same code. Gate wraps it for a server's request goroutines and
// is the only place that blocks. The package must not know what the
// requests do or where they come from beyond the application's key.
package iosched

import (
	"context"
	"sync"
	"time"
)

// The data servers' defaults: a phase ends after 10 ms without a request
// of its application; none waits more than 10 s (a third of the callers'
// timeout, so a request at the gate never outlives its caller).
const (
	DefaultGap     = 10 * time.Millisecond
	DefaultMaxWait = 10 * time.Second
)

// Phases orders the I/O phases of applications on one server. The zero
// value is not usable: set Gap and MaxWait.
type Phases struct {
	// Gap ends a phase: the active application has had no request in
	// flight for this long.
	Gap time.Duration
	// MaxWait bounds the wait: an application waiting this long takes
	// the turn from a phase that goes on.
	MaxWait time.Duration

	// Trace, if set, is told each turn's change and each application's
	// arrival at the queue, in order (Event); it must not call back.
	Trace func(Event)

	active   string         // the application whose phase runs ("": none)
	closing  bool           // the active application said its phase is over (End)
	idle     time.Time      // when the active application's last request ended (zero: one is in flight)
	inflight map[string]int // requests admitted and not done, by application
	queue    []waiter       // applications waiting, in order of arrival
	// Stats
	Phases      uint64        // phases begun
	Preempted   uint64        // phases cut short by MaxWait
	Waited      uint64        // requests that had to wait
	WaitedTotal time.Duration // their waits, summed (as told by Admitted)
}

// Event is one of the scheduler's decisions, for Phases.Trace.
type Event struct {
	// Kind is "queue" (App asks while another's phase runs and waits),
	// "begin" (App's phase begins), "gap" (App's phase ended, idle since
	// At, for Gap), "end" (App ended its phase: End) or "preempt" (App's
	// phase was cut short by a wait of MaxWait).
	Kind string
	App  string
	At   time.Time
}

// trace tells Trace of an event, if it is set.
func (p *Phases) trace(kind, app string, at time.Time) {
	if p.Trace != nil {
		p.Trace(Event{Kind: kind, App: app, At: at})
	}
}

type waiter struct {
	app   string
	since time.Time
}

// Ask says whether a request of app may start at now. If it may, it is
// counted in flight and Done must follow; if not, app is queued and the
// caller asks again when Next says.
func (p *Phases) Ask(app string, now time.Time) bool {
	p.advance(now)
	if p.active == "" {
		p.begin(app, now)
	}
	if p.active != app {
		if !p.queued(app) {
			p.queue = append(p.queue, waiter{app, now})
			p.trace("queue", app, now)
		}
		p.advance(now) // a wait that is long enough already
		if p.active != app {
			return false
		}
	}
	if p.inflight == nil {
		p.inflight = map[string]int{}
	}
	p.inflight[app]++
	p.idle = time.Time{}
	return true
}

// Done ends a request of app that Ask admitted.
func (p *Phases) Done(app string, now time.Time) {
	if p.inflight[app] <= 1 {
		delete(p.inflight, app)
	} else {
		p.inflight[app]--
	}
	if app == p.active && p.inflight[app] == 0 {
		p.idle = now
		if p.closing {
			p.finish(now)
		}
	}
}

// End says app's phase is over (its job synced what it wrote: a
// checkpoint's end): once app has nothing in flight, the application that
// has waited longest goes at once instead of after the gap.
func (p *Phases) End(app string, now time.Time) {
	if p.active != app {
		return
	}
	p.closing = true
	if p.inflight[app] == 0 {
		p.finish(now)
	}
}

// finish ends the active phase at now.
func (p *Phases) finish(now time.Time) {
	p.trace("end", p.active, now)
	p.active, p.closing = "", false
	p.advance(now)
}

// Admitted records that a request waited d before Ask admitted it.
func (p *Phases) Admitted(d time.Duration) {
	if d > 0 {
		p.Waited++
		p.WaitedTotal += d
	}
}

// Active is the application whose phase runs ("": none).
func (p *Phases) Active() string { return p.active }

// Waiting is how many applications wait for their turn.
func (p *Phases) Waiting() int { return len(p.queue) }

// Next is when the turn may change without a request ending: the active
// phase's gap running out, or the longest wait reaching MaxWait. Zero:
// nothing is waiting.
func (p *Phases) Next() time.Time {
	if len(p.queue) == 0 {
		return time.Time{}
	}
	t := p.queue[0].since.Add(p.MaxWait)
	if p.active != "" && !p.idle.IsZero() {
		if g := p.idle.Add(p.Gap); g.Before(t) {
			t = g
		}
	}
	return t
}

// advance ends the active phase if its gap ran out (the next waiting
// application begins), or hands the turn to an application that has
// waited MaxWait.
//
// The turn changes at the time it fell due (the gap's end, the wait's
// end), not when it was looked at, so the schedule does not depend on how
// often the caller looks. Turns left unclaimed run out one gap each.
func (p *Phases) advance(now time.Time) {
	for {
		ended := time.Time{}
		if p.active != "" && p.inflight[p.active] == 0 && !p.idle.IsZero() && now.Sub(p.idle) >= p.Gap {
			ended = p.idle.Add(p.Gap)
			p.trace("gap", p.active, p.idle)
			p.active = ""
		}
		if len(p.queue) == 0 {
			return
		}
		switch head := p.queue[0]; {
		case p.active == "":
			if ended.IsZero() {
				ended = now
			}
			p.begin(head.app, ended)
		case now.Sub(head.since) >= p.MaxWait:
			p.Preempted++
			p.trace("preempt", p.active, head.since.Add(p.MaxWait))
			p.begin(head.app, head.since.Add(p.MaxWait))
		default:
			return
		}
	}
}

// begin starts app's phase, taking it off the queue.
func (p *Phases) begin(app string, now time.Time) {
	for i, w := range p.queue {
		if w.app == app {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			break
		}
	}
	p.active, p.closing = app, false
	p.trace("begin", app, now)
	p.Phases++
	p.idle = now // until its first request is admitted
	if p.inflight[app] > 0 {
		p.idle = time.Time{}
	}
}

func (p *Phases) queued(app string) bool {
	for _, w := range p.queue {
		if w.app == app {
			return true
		}
	}
	return false
}

// Gate runs Phases for concurrent requests: Enter blocks a request until
// its application's turn. A nil *Gate admits everything at once.
type Gate struct {
	now  func() time.Time
	mu   sync.Mutex    // guards p and turn
	p    Phases        // the schedule
	turn chan struct{} // closed when the turn may have changed
}

// NewGate returns a gate with the given phase gap and longest wait.
func NewGate(gap, maxWait time.Duration, now func() time.Time) *Gate {
	if now == nil {
		now = time.Now
	}
	return &Gate{now: now, p: Phases{Gap: gap, MaxWait: maxWait}, turn: make(chan struct{})}
}

// SetTrace has f told the gate's decisions (Phases.Trace), called with
// the gate's lock held.
func (g *Gate) SetTrace(f func(Event)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.p.Trace = f
}

// Enter waits for app's turn (or ctx's end: the request then goes on
// regardless, since failing it would only make its sender retry) and
// returns the function that ends the request.
func (g *Gate) Enter(ctx context.Context, app string) (done func()) {
	if g == nil {
		return func() {}
	}
	start := g.now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		now := g.now()
		was := g.p.active
		ok := g.p.Ask(app, now)
		if g.p.active != was {
			g.signalLocked()
		}
		if ok {
			g.p.Admitted(now.Sub(start))
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				was := g.p.active
				g.p.Done(app, g.now())
				if g.p.active != was || g.p.active == app && !g.p.idle.IsZero() {
					g.signalLocked() // the turn changed, or the waiters' next look is the gap's end
				}
				g.mu.Unlock()
			}
		}
		turn, next := g.turn, g.p.Next()
		g.mu.Unlock()
		var wake <-chan time.Time
		if !next.IsZero() {
			d := max(next.Sub(now), time.Millisecond)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			wake = timer.C
		}
		select {
		case <-turn:
		case <-wake:
		case <-ctx.Done():
			g.mu.Lock()
			g.p.Admitted(g.now().Sub(start))
			g.mu.Unlock()
			return func() {}
		}
		if timer != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// End ends app's phase once it has nothing in flight (Phases.End).
func (g *Gate) End(app string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.p.active
	g.p.End(app, g.now())
	if g.p.active != was {
		g.signalLocked()
	}
}

// signalLocked wakes every waiter to ask again (the turn changed, or the
// active phase went idle). Caller holds g.mu.
func (g *Gate) signalLocked() {
	close(g.turn)
	g.turn = make(chan struct{})
}

// Stats is what the gate has done.
type Stats struct {
	Active            string
	Waiting           int
	Phases, Preempted uint64
	Waited            uint64
	WaitedTotal       time.Duration
}

// Stats returns the gate's figures (zero for a nil gate).
func (g *Gate) Stats() Stats {
	if g == nil {
		return Stats{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Active: g.p.active, Waiting: len(g.p.queue), Phases: g.p.Phases, Preempted: g.p.Preempted,
		Waited: g.p.Waited, WaitedTotal: g.p.WaitedTotal}
}
