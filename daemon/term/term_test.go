package term

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestCampaign: the first instance serves; the second stands by until
// the first's term ends (closed here), then serves; the first's context
// ends with ErrEnded as its cause; a standby whose own context ends
// returns without serving.
func TestCampaign(t *testing.T) {
	spec, _ := enginetest.Spec(t, "etcd")
	open := func() engine.Engine {
		e, err := engine.OpenRole(spec, "test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := open(), open()
	actx, err := Campaign(ctx, a.(engine.Elector), "a", "test role", log)
	if err != nil || actx.Err() != nil {
		t.Fatalf("a's campaign: %v %v", err, actx.Err())
	}
	won := make(chan context.Context, 1)
	go func() {
		bctx, _ := Campaign(ctx, b.(engine.Elector), "b", "test role", log)
		won <- bctx
	}()
	select {
	case <-won:
		t.Fatal("b serves while a's term is on")
	case <-time.After(500 * time.Millisecond):
	}
	a.Close()
	select {
	case bctx := <-won:
		if bctx.Err() != nil {
			t.Fatalf("b's term: %v", bctx.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b did not take over when a's term ended")
	}
	select {
	case <-actx.Done():
		if !errors.Is(context.Cause(actx), ErrEnded) {
			t.Fatalf("a's term ended with %v", context.Cause(actx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a's context did not end with its term")
	}
	c := open()
	cctx, ccancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, ccancel)
	got, err := Campaign(cctx, c.(engine.Elector), "c", "test role", log)
	if err != nil || got != cctx {
		t.Fatalf("a standby whose context ended: %v, its own context: %v", err, got == cctx)
	}
}
