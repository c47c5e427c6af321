package faultpoint

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestPoints(t *testing.T) {
	var p Points
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	p.Pass(ctx, log, "x") // not armed: goes through
	p.Arm("x")
	done := make(chan struct{})
	go func() {
		p.Pass(ctx, log, "x")
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("an armed point let the goroutine through")
	case <-time.After(50 * time.Millisecond):
	}
	p.Release("x")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("released point still holds the goroutine")
	}
	// one-shot: after a pass it is disarmed even without a release
	p.Arm("y")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p.Pass(cctx, log, "y") // held until ctx ends: at once
	p.Pass(ctx, log, "y")  // disarmed
}
