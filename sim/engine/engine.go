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
	t   Timer // the timer it belongs to, or 0
}

// Timer is a slot for at most one scheduled event that can be moved or
// taken back (Set, Clear): a flow's completion, whose time changes each
// time its rate does, keeps one event in the queue instead of leaving a
// stale one behind at every change. The zero Timer is none.
type Timer uint32

// Engine is a clock and its event queue. Not safe for concurrent use: a
// simulation is one goroutine.
type Engine struct {
	now     Time
	seq     uint64
	q       []event // binary heap on (at, seq)
	fired   uint64
	stopped bool
	// pos is each timer's event's index in q (-1: none scheduled), by
	// Timer; pos[0] is unused. free holds released timers.
	pos  []int32
	free []Timer
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

// NewTimer returns a timer with nothing scheduled.
func (e *Engine) NewTimer() Timer {
	if n := len(e.free); n > 0 {
		t := e.free[n-1]
		e.free = e.free[:n-1]
		return t
	}
	if len(e.pos) == 0 {
		e.pos = append(e.pos, -1) // Timer 0 is none
	}
	e.pos = append(e.pos, -1)
	return Timer(len(e.pos) - 1)
}

// Set schedules h at time t on timer tm, in place of what tm had
// scheduled: as At, with the event that was there taken back. Among
// events at the same time it fires as if scheduled now.
func (e *Engine) Set(tm Timer, t Time, h Handler) {
	if t < e.now {
		t = e.now
	}
	e.seq++
	if i := e.pos[tm]; i >= 0 {
		e.q[i] = event{at: t, seq: e.seq, h: h, t: tm}
		e.fix(int(i))
		return
	}
	e.q = append(e.q, event{at: t, seq: e.seq, h: h, t: tm})
	e.pos[tm] = int32(len(e.q) - 1)
	e.up(len(e.q) - 1)
}

// Clear takes back what timer tm had scheduled, if anything.
func (e *Engine) Clear(tm Timer) {
	i := e.pos[tm]
	if i < 0 {
		return
	}
	e.pos[tm] = -1
	n := len(e.q) - 1
	if int(i) != n {
		e.q[i] = e.q[n]
		e.setPos(int(i))
	}
	e.q[n] = event{}
	e.q = e.q[:n]
	if int(i) < n {
		e.fix(int(i))
	}
}

// Release clears timer tm and gives it back for NewTimer to reuse.
func (e *Engine) Release(tm Timer) {
	e.Clear(tm)
	e.free = append(e.free, tm)
}

// setPos records where q[i] is, if it belongs to a timer.
func (e *Engine) setPos(i int) {
	if t := e.q[i].t; t != 0 {
		e.pos[t] = int32(i)
	}
}

// fix restores the heap after q[i] changed.
func (e *Engine) fix(i int) {
	if i > 0 && less(&e.q[i], &e.q[(i-1)/2]) {
		e.up(i)
	} else {
		e.down(i)
	}
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
		if ev.t != 0 {
			e.pos[ev.t] = -1
		}
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

// up and down move q[i] to its place, shifting the events it passes
// into the hole it leaves (one copy per level, not a swap).
func (e *Engine) up(i int) {
	q := e.q
	x := q[i]
	for i > 0 {
		p := (i - 1) / 2
		if !less(&x, &q[p]) {
			break
		}
		q[i] = q[p]
		e.setPos(i)
		i = p
	}
	q[i] = x
	e.setPos(i)
}

func (e *Engine) down(i int) {
	q := e.q
	n := len(q)
	x := q[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&q[r], &q[l]) {
			m = r
		}
		if !less(&q[m], &x) {
			break
		}
		q[i] = q[m]
		e.setPos(i)
		i = m
	}
	q[i] = x
	e.setPos(i)
}

func (e *Engine) pop() event {
	q := e.q
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = event{}
	e.q = q[:n]
	if n > 0 {
		e.down(0)
	}
	return top
}
