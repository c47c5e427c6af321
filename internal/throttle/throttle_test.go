package throttle

import (
	"testing"
	"time"
)

func TestRate(t *testing.T) {
	now := time.Unix(0, 0)
	b := New(100, 10, func() time.Time { return now })
	if d := b.Reserve(10); d != 0 {
		t.Fatalf("burst should be free, got %v", d)
	}
	if d := b.Reserve(50); d != 500*time.Millisecond {
		t.Fatalf("want 500ms debt, got %v", d)
	}
	now = now.Add(time.Second)
	if d := b.Reserve(10); d != 0 {
		t.Fatalf("after refill want 0, got %v", d)
	}
	b.SetSlowdown(4)
	now = now.Add(10 * time.Second)
	if d := b.Reserve(10); d != 300*time.Millisecond {
		t.Fatalf("slowdown: got %v", d)
	}
	b.SetSlowdown(1)
	now = now.Add(10 * time.Second)
	b.SetRate(1000, 10)
	if d := b.Reserve(110); d != 100*time.Millisecond || b.Rate() != 1000 {
		t.Fatalf("after SetRate(1000): got %v, rate %v", d, b.Rate())
	}
	var nilb *Bucket
	if nilb.Reserve(1e9) != 0 {
		t.Fatal("nil bucket throttles")
	}
}
