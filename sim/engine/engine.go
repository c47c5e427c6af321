// Package engine is the simulator's deterministic discrete-event core: a
// simulated clock and a queue of events ordered by time, ties broken by
// the order they were scheduled in, so that one input always gives one
// run. The clock is integer nanoseconds (no floating-point drift over a
// simulated day).
//
// It owns only the clock and the queue. It knows nothing of resources,
// jobs or policies (sim/flow, sim), does no I/O and never reads the wall
// clock.
package engine

// Time is simulated time in nanoseconds since the start of the run.
type Time int64

// Common durations in simulated time.
const (
	Nanosecond  Time = 1
	Microsecond      = 1000 * Nanosecond
	Millisecond      = 1000 * Microsecond
	Second           = 1000 * Millisecond
	Minute           = 60 * Second
	Hour             = 60 * Minute
)

// Seconds is t in seconds.
func (t Time) Seconds() float64 { return float64(t) / float64(Second) }

// FromSeconds is s seconds as a Time, rounded to the nanosecond.
func FromSeconds(s float64) Time {
	if s >= 0 {
		return Time(s*float64(Second) + 0.5)
	}
	return Time(s*float64(Second) - 0.5)
}

// Handler is what an event does when it fires.
type Handler interface {
	Fire(now Time)
}

// Func adapts a function to a Handler.
type Func func(now Time)

// Fire implements Handler.
func (f Func) Fire(now Time) { f(now) }

type event struct {
	at  Time
	seq uint64
	h   Handler
}

// Engine is a clock and its event queue. Not safe for concurrent use: a
// simulation is one goroutine.
type Engine struct {
	now     Time
	seq     uint64
	q       []event // binary heap on (at, seq)
	fired   uint64
	stopped bool
}

// New returns an engine at time 0 with nothing scheduled.
func New() *Engine { return &Engine{} }

// Now is the simulated time.
func (e *Engine) Now() Time { return e.now }

// Fired is how many events have fired so far.
func (e *Engine) Fired() uint64 { return e.fired }

// Pending is how many events are scheduled.
func (e *Engine) Pending() int { return len(e.q) }

// At schedules h at time t (at the current time if t is in the past).
// Events at the same time fire in the order they were scheduled.
func (e *Engine) At(t Time, h Handler) {
	if t < e.now {
		t = e.now
	}
	e.seq++
	e.q = append(e.q, event{at: t, seq: e.seq, h: h})
	e.up(len(e.q) - 1)
}

// After schedules h d after now.
func (e *Engine) After(d Time, h Handler) { e.At(e.now+d, h) }

// Stop makes Run return after the event firing now.
func (e *Engine) Stop() { e.stopped = true }

// Run fires events in order until the queue is empty, Stop is called, or
// the next event is after until (until < 0: no limit); the clock is then
// at the last event fired (or at until, if the queue still holds later
// events). It returns the number of events fired.
func (e *Engine) Run(until Time) uint64 {
	e.stopped = false
	start := e.fired
	for len(e.q) > 0 && !e.stopped {
		if until >= 0 && e.q[0].at > until {
			e.now = until
			break
		}
		ev := e.pop()
		e.now = ev.at
		e.fired++
		ev.h.Fire(e.now)
	}
	return e.fired - start
}

func less(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (e *Engine) up(i int) {
	q := e.q
	for i > 0 {
		p := (i - 1) / 2
		if !less(&q[i], &q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (e *Engine) pop() event {
	q := e.q
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&q[r], &q[l]) {
			m = r
		}
		if !less(&q[m], &q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	e.q = q
	return top
}
