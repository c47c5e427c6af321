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
