package iosched

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPhasesDoNotOverlap(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := &Phases{Gap: 10 * time.Millisecond, MaxWait: time.Second}
	if !p.Ask("a", at(0)) {
		t.Fatal("the first application waits on an idle server")
	}
	if p.Ask("b", at(1)) {
		t.Fatal("b starts while a's phase runs")
	}
	if !p.Ask("a", at(2)) {
		t.Fatal("a's own second request waits")
	}
	if p.Ask("c", at(3)) || p.Waiting() != 2 {
		t.Fatalf("c starts, or the queue is not b, c (%d waiting)", p.Waiting())
	}
	p.Done("a", at(5))
	p.Done("a", at(6))
	if p.Ask("b", at(10)) {
		t.Fatal("b starts before a's gap ran out")
	}
	if n := p.Next(); !n.Equal(at(16)) {
		t.Fatalf("next look at %v, want the gap's end %v", n.Sub(t0), at(16).Sub(t0))
	}
	if p.Ask("c", at(16)) || p.Active() != "b" {
		t.Fatalf("after a's gap the turn is %q, want b (the first to wait)", p.Active())
	}
	if !p.Ask("b", at(16)) {
		t.Fatal("b waits in its own turn")
	}
	// a comes back: it queues behind c
	if p.Ask("a", at(17)) {
		t.Fatal("a starts during b's phase")
	}
	p.Done("b", at(20))
	if !p.Ask("c", at(30)) || p.Active() != "c" {
		t.Fatalf("turn %q, want c", p.Active())
	}
	if p.Phases != 3 {
		t.Fatalf("%d phases, want 3", p.Phases)
	}
}

func TestPhasesMaxWait(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := &Phases{Gap: 10 * time.Millisecond, MaxWait: 100 * time.Millisecond}
	p.Ask("hog", t0)
	if p.Ask("b", t0.Add(time.Millisecond)) {
		t.Fatal("b starts at once")
	}
	// the hog never stops: b's wait ends at MaxWait
	if n := p.Next(); !n.Equal(t0.Add(101 * time.Millisecond)) {
		t.Fatalf("next %v", n.Sub(t0))
	}
	if !p.Ask("b", t0.Add(101*time.Millisecond)) || p.Preempted != 1 {
		t.Fatalf("b not admitted at its MaxWait (preempted %d)", p.Preempted)
	}
	if p.Ask("hog", t0.Add(102*time.Millisecond)) {
		t.Fatal("the hog's next request overlaps b's phase")
	}
	p.Done("hog", t0.Add(103*time.Millisecond)) // its old request ends
	if p.Active() != "b" {
		t.Fatalf("active %q", p.Active())
	}
}

func TestPhasesTurnUnclaimed(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := &Phases{Gap: 10 * time.Millisecond, MaxWait: time.Second}
	p.Ask("a", t0)
	p.Ask("b", t0) // b queues, then gives up (its caller went away)
	p.Ask("c", t0)
	p.Done("a", t0)
	// b's turn comes at 10 ms but b never asks: c gets it at 20 ms
	if p.Ask("c", t0.Add(15*time.Millisecond)) {
		t.Fatal("c overtakes b")
	}
	if !p.Ask("c", t0.Add(20*time.Millisecond)) {
		t.Fatal("an unclaimed turn blocks the server")
	}
}

// TestGate: requests of three applications through a real gate never
// overlap across applications, and every request gets through.
func TestGate(t *testing.T) {
	g := NewGate(5*time.Millisecond, 2*time.Second, nil)
	var overlap, served atomic.Int64
	var mu sync.Mutex
	inflight := map[string]int{}
	var wg sync.WaitGroup
	for _, app := range []string{"a", "b", "c"} {
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(app string) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					done := g.Enter(context.Background(), app)
					mu.Lock()
					inflight[app]++
					for other, n := range inflight {
						if other != app && n > 0 {
							overlap.Add(1)
						}
					}
					mu.Unlock()
					time.Sleep(200 * time.Microsecond)
					mu.Lock()
					inflight[app]--
					mu.Unlock()
					served.Add(1)
					done()
				}
			}(app)
		}
	}
	wg.Wait()
	if served.Load() != 3*4*20 {
		t.Fatalf("served %d", served.Load())
	}
	if overlap.Load() != 0 {
		t.Fatalf("%d requests overlapped another application's", overlap.Load())
	}
	st := g.Stats()
	if st.Phases < 3 || st.Waited == 0 {
		t.Fatalf("stats %+v", st)
	}
	var nilGate *Gate
	nilGate.Enter(context.Background(), "x")()
}

// TestGateCancel: a waiter whose context ends goes on rather than hang.
func TestGateCancel(t *testing.T) {
	g := NewGate(time.Hour, time.Hour, nil)
	done := g.Enter(context.Background(), "a")
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	g.Enter(ctx, "b")()
	if d := time.Since(start); d < 15*time.Millisecond || d > time.Second {
		t.Fatalf("waited %v", d)
	}
}

// TestPhasesEnd: a phase its application says is over (End, at a
// checkpoint's fsync) hands the turn on when its last request ends, not
// a gap later; End from another application, or for a phase that is not
// running, changes nothing.
func TestPhasesEnd(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := &Phases{Gap: 10 * time.Millisecond, MaxWait: time.Second}
	p.Ask("a", at(0))
	p.Ask("b", at(1))
	p.Ask("c", at(1))
	p.End("b", at(2)) // not b's turn
	if p.Active() != "a" {
		t.Fatalf("turn %q after another application's End, want a", p.Active())
	}
	p.End("a", at(3)) // a's request still in flight: the phase goes on
	if p.Active() != "a" || p.Ask("b", at(3)) {
		t.Fatal("a's phase ended with a request in flight")
	}
	p.Done("a", at(4))
	if p.Active() != "b" || !p.Ask("b", at(4)) {
		t.Fatalf("turn %q when a's last request ended after its End, want b at once", p.Active())
	}
	p.Done("b", at(5))
	p.End("b", at(6)) // nothing in flight: at once
	if p.Active() != "c" {
		t.Fatalf("turn %q after b's End, want c", p.Active())
	}
	if !p.Ask("c", at(6)) {
		t.Fatal("c waits in its own turn")
	}
	p.Done("c", at(7))
	p.End("c", at(8))
	if p.Active() != "" || !p.Ask("a", at(8)) || p.Active() != "a" {
		t.Fatalf("after the last phase ended the turn is %q; a must begin at once", p.Active())
	}
	if p.Phases != 4 {
		t.Fatalf("%d phases, want 4", p.Phases)
	}
}

// TestPhasesTrace: Trace is told each arrival at the queue and each
// change of turn, in order, with the times they fell due (a gap's event
// at the idle time it ran from).
func TestPhasesTrace(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var got []Event
	p := &Phases{Gap: 10 * time.Millisecond, MaxWait: 50 * time.Millisecond, Trace: func(e Event) { got = append(got, e) }}
	p.Ask("a", at(0))
	p.Ask("b", at(1))
	p.Done("a", at(4))
	p.Ask("b", at(20)) // a's gap ran out at 14: b's turn
	p.Done("b", at(21))
	p.End("b", at(22))
	p.Ask("c", at(23))
	p.Ask("a", at(24)) // queued behind c's phase
	// at 100: a took the turn at 74 (MaxWait), did not claim it, and its
	// gap ran out at 84; c, asking again, begins
	p.Ask("c", at(100))
	want := []Event{{"begin", "a", at(0)}, {"queue", "b", at(1)}, {"gap", "a", at(4)}, {"begin", "b", at(14)},
		{"end", "b", at(22)}, {"begin", "c", at(23)}, {"queue", "a", at(24)}, {"preempt", "c", at(74)}, {"begin", "a", at(74)},
		{"gap", "a", at(74)}, {"begin", "c", at(100)}}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].App != want[i].App || !got[i].At.Equal(want[i].At) {
			t.Errorf("event %d: %s %s at %v, want %s %s at %v", i, got[i].Kind, got[i].App, got[i].At.Sub(t0), want[i].Kind, want[i].App, want[i].At.Sub(t0))
		}
	}
}
