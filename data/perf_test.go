package data

import (
	"testing"
	"time"
)

// The sustained rate counts the windows in which the server was busy
// nine tenths of the time or more: idle gaps and lightly loaded windows
// (where a device's burst inflates a lone request's rate) do not count,
// overlapping writes are not counted twice, and it stays 0 until
// sustainMin of counted windows.
func TestSustainedRate(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	var p perf
	step := func(d time.Duration) { now = now.Add(d) }
	p.sustained(now) // the first window starts
	// 4 s saturated by two overlapping streams of 1 s writes of 5 MB:
	// 20 MB, windows of a second
	a := p.begin(clock)
	step(500 * time.Millisecond)
	b := p.begin(clock)
	for i := range 4 {
		step(500 * time.Millisecond)
		if i%2 == 0 {
			a(5e6)
			a = p.begin(clock)
		} else {
			b(5e6)
			b = p.begin(clock)
		}
		step(500 * time.Millisecond)
		if r := p.sustained(now); r != 0 {
			t.Fatalf("sustained after %d s: %d, want 0 (below %v)", i+1, r, sustainMin)
		}
	}
	a(0)
	b(0)
	// a lightly loaded window: a 1 MB write served in 50 ms from the
	// burst, then idle: not counted
	step(time.Second)
	p.sustained(now)
	done := p.begin(clock)
	step(50 * time.Millisecond)
	done(1e6)
	step(950 * time.Millisecond)
	p.sustained(now)
	step(time.Hour) // idle: not counted
	p.sustained(now)
	// 6 s saturated at 2.5 MB/s by one stream of 1 MB writes, with
	// gaps of 10 ms between them (busy 97.5 %)
	for range 15 {
		done := p.begin(clock)
		step(390 * time.Millisecond)
		done(1e6)
		step(10 * time.Millisecond)
		if now.Sub(p.lastAt) >= time.Second {
			p.sustained(now)
		}
	}
	// counted: 4.5 s with 20 MB, then 6 s with 15 MB: 35 MB / 10.5 s
	if r := p.sustained(now); r != 3333333 {
		t.Fatalf("sustained: %d B/s, want 35 MB / 10.5 s", r)
	}
	// the device turns slow while busy: 1 MB writes of a second each,
	// back to back. After sustainMin of them the figure is theirs
	// alone, below what the probe (and the windows before) gave.
	for i := range 12 {
		done := p.begin(clock)
		step(time.Second)
		done(1e6)
		r := p.sustained(now)
		if i < 9 && r <= 1e6 {
			t.Fatalf("after %d s slow: %d B/s, the older windows already gone", i+1, r)
		}
		if i >= 10 && r != 1e6 {
			t.Fatalf("after %d s slow: %d B/s, want 1 MB/s", i+1, r)
		}
	}
	if len(p.counted) != 10 {
		t.Fatalf("%d windows kept, want the last 10 s of them", len(p.counted))
	}
	// a probe starts afresh
	p.reset()
	if r := p.sustained(now); r != 0 {
		t.Fatalf("sustained after reset: %d", r)
	}
}

// The reported figure is the probe's until the server has been saturated
// for sustainMin, then the rate it sustained lately, below the probe's or
// above it; a configured figure wins.
func TestMaxPerfFollowsSustained(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	srv := &Server{cfg: Config{Now: clock}}
	srv.perf.probed.Store(3e6)
	saturate := func(secs int, rate uint64) {
		for range secs {
			done := srv.perf.begin(clock)
			now = now.Add(time.Second)
			done(rate)
			srv.maxPerf() // the heartbeat
		}
	}
	if r := srv.maxPerf(); r != 3e6 {
		t.Fatalf("before any load: %d, want the probe's 3 MB/s", r)
	}
	saturate(5, 1e6)
	if r := srv.maxPerf(); r != 3e6 {
		t.Fatalf("after 5 s saturated: %d, want the probe's 3 MB/s still", r)
	}
	saturate(6, 1e6)
	if r := srv.maxPerf(); r != 1e6 {
		t.Fatalf("slow and saturated for 11 s: %d, want 1 MB/s", r)
	}
	saturate(11, 5e6)
	if r := srv.maxPerf(); r != 5e6 {
		t.Fatalf("fast and saturated for 11 s: %d, want 5 MB/s", r)
	}
	srv.cfg.MaxPerfMBps = 2
	if r := srv.maxPerf(); r != 2e6 {
		t.Fatalf("configured 2 MB/s: reported %d", r)
	}
}
