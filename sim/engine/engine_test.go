package engine

import (
	"math/rand"
	"sort"
	"testing"
)

type rec struct {
	at   Time
	id   int
	seen *[]rec
}

func (r rec) Fire(now Time) { *r.seen = append(*r.seen, rec{at: now, id: r.id}) }

// TestOrder: events fire by time, ties in the order scheduled, whatever
// the order they were put in; the clock is each event's time.
func TestOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	e := New()
	var seen []rec
	var want []rec
	for i := 0; i < 5000; i++ {
		at := Time(r.Intn(300))
		e.At(at, rec{at: at, id: i, seen: &seen})
		want = append(want, rec{at: at, id: i})
	}
	sort.SliceStable(want, func(i, j int) bool { return want[i].at < want[j].at })
	if n := e.Run(-1); n != 5000 {
		t.Fatalf("fired %d", n)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("event %d: %+v, want %+v", i, seen[i], want[i])
		}
	}
}

// TestUntilAndNested: Run stops before events after until; events
// scheduled from a handler (also in the past) fire in order.
func TestUntilAndNested(t *testing.T) {
	e := New()
	var got []Time
	e.At(10, Func(func(now Time) {
		got = append(got, now)
		e.At(5, Func(func(now Time) { got = append(got, now) })) // past: now
		e.After(20, Func(func(now Time) { got = append(got, now) }))
	}))
	e.Run(15)
	if len(got) != 2 || got[0] != 10 || got[1] != 10 || e.Now() != 15 {
		t.Fatalf("got %v now %d", got, e.Now())
	}
	e.Run(-1)
	if len(got) != 3 || got[2] != 30 {
		t.Fatalf("got %v", got)
	}
}

type nop struct{ e *Engine }

func (n nop) Fire(now Time) {}

// BenchmarkEngine: schedule and fire with a queue of 10,000 pending
// events (the goal: ≥ 1 million events/s on one core).
func BenchmarkEngine(b *testing.B) {
	e := New()
	r := rand.New(rand.NewSource(1))
	h := nop{e}
	for i := 0; i < 10000; i++ {
		e.At(Time(r.Int63n(1e9)), h)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.After(Time(r.Int63n(1e9)), h)
		ev := e.pop()
		e.now = ev.at
		ev.h.Fire(e.now)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestTimers runs random operations on timers (set, move earlier or
// later, clear, release and reuse; events that set their own timer again
// when they fire, as a flow's completion does when rounding left bytes)
// and checks every firing against a model that never takes an event back
// but skips superseded ones (a version per timer, as flows did before
// timers): the same events at the same times in the same order, and no
// event left in the queue that the model would skip.
func TestTimers(t *testing.T) {
	type fired struct {
		at Time
		id int
	}
	for seed := int64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewSource(seed))
		e, ref := New(), New()
		var got, want []fired
		const n = 40
		timers := make([]Timer, n)
		vers := make([]int, n) // the model's current version per timer
		live := 0              // the model's timers with an event pending
		pending := make([]bool, n)
		id := 0
		// again: how many more times the event sets its timer again
		// when it fires
		var setE func(k int, at Time, id, again int)
		var setRef func(k int, at Time, id, again int)
		setE = func(k int, at Time, id, again int) {
			if timers[k] == 0 {
				timers[k] = e.NewTimer()
			}
			e.Set(timers[k], at, Func(func(now Time) {
				got = append(got, fired{now, id})
				if again > 0 {
					setE(k, now+Time(id%7), id+1000000, again-1)
				}
			}))
		}
		setRef = func(k int, at Time, id, again int) {
			vers[k]++
			v := vers[k]
			if !pending[k] {
				pending[k] = true
				live++
			}
			ref.At(at, Func(func(now Time) {
				if vers[k] != v {
					return // superseded
				}
				pending[k] = false
				live--
				want = append(want, fired{now, id})
				if again > 0 {
					setRef(k, now+Time(id%7), id+1000000, again-1)
				}
			}))
		}
		var now Time
		for round := 0; round < 200; round++ {
			for i := 0; i < 1+r.Intn(8); i++ {
				k := r.Intn(n)
				switch x := r.Intn(10); {
				case x < 6:
					id++
					at := now + Time(r.Intn(60))
					again := r.Intn(3)
					setE(k, at, id, again)
					setRef(k, at, id, again)
				case x < 8:
					if timers[k] != 0 {
						e.Clear(timers[k])
					}
					vers[k]++
					if pending[k] {
						pending[k] = false
						live--
					}
				default:
					if timers[k] != 0 {
						e.Release(timers[k])
						timers[k] = 0
					}
					vers[k]++
					if pending[k] {
						pending[k] = false
						live--
					}
				}
			}
			now += Time(r.Intn(20))
			e.Run(now)
			ref.Run(now)
			if e.Pending() != live {
				t.Fatalf("seed %d round %d: %d events queued, %d timers live", seed, round, e.Pending(), live)
			}
		}
		e.Run(-1)
		ref.Run(-1)
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d firings, model %d", seed, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d: firing %d is %v, model %v", seed, i, got[i], want[i])
			}
		}
		if len(got) < 100 {
			t.Fatalf("seed %d: only %d firings", seed, len(got))
		}
	}
}
