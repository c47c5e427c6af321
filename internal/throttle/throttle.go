// Package throttle owns the token buckets that emulate a device's or link's
// bandwidth and IOPS limits. The clock is passed in (Now), so tests and the
// simulator can drive it; Wait is the only place that sleeps. It must not
// know what it is throttling.
package throttle

import (
	"context"
	"sync"
	"time"
)

// Bucket is a token bucket: Rate tokens per second, at most Burst stored.
// A nil *Bucket never throttles.
type Bucket struct {
	mu     sync.Mutex // guards tokens, last, slowdown
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
	// slowdown multiplies the cost of every request (fault injection: a
	// device that turns slow). 1 means healthy.
	slowdown float64
}

// New returns a bucket with the given rate per second and burst. A rate of
// zero or less returns nil (no limit).
func New(rate, burst float64, now func() time.Time) *Bucket {
	if rate <= 0 {
		return nil
	}
	if burst < rate/100 {
		burst = rate / 100
	}
	if now == nil {
		now = time.Now
	}
	return &Bucket{rate: rate, burst: burst, tokens: burst, last: now(), now: now, slowdown: 1}
}

// SetSlowdown makes every later request cost f times more (f ≥ 1).
func (b *Bucket) SetSlowdown(f float64) {
	if b == nil {
		return
	}
	if f < 1 {
		f = 1
	}
	b.mu.Lock()
	b.slowdown = f
	b.mu.Unlock()
}

// SetRate changes the bucket's rate and burst (the tokens stored so far
// are kept, up to the new burst).
func (b *Bucket) SetRate(rate, burst float64) {
	if b == nil || rate <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.tokens += now.Sub(b.last).Seconds() * b.rate
	b.last = now
	b.rate = rate
	b.burst = max(burst, rate/100)
	b.tokens = min(b.tokens, b.burst)
}

// Rate is the bucket's rate (0 for a nil bucket).
func (b *Bucket) Rate() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

// Reserve takes n tokens (possibly going into debt) and returns how long
// the caller must wait before proceeding.
func (b *Bucket) Reserve(n float64) time.Duration {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.tokens += now.Sub(b.last).Seconds() * b.rate
	if b.tokens > b.burst {
		b.tokens = b.burst
	}
	b.last = now
	b.tokens -= n * b.slowdown
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// Backlog is how long the bucket's debt takes to pay off: what a request
// reserving now waits beyond its own tokens (0 for a nil bucket or one
// with tokens to spare).
func (b *Bucket) Backlog() time.Duration {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tokens + b.now().Sub(b.last).Seconds()*b.rate
	if t >= 0 {
		return 0
	}
	return time.Duration(-t / b.rate * float64(time.Second))
}

// Wait takes n tokens and sleeps until they are paid for, or ctx ends.
func (b *Bucket) Wait(ctx context.Context, n float64) error {
	return Sleep(ctx, b.Reserve(n))
}

// Sleep waits d (what Reserve said), or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
