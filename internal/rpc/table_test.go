package rpc

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// TestTable: a table answers its operations in-process (Invoke) as over a
// connection, an operation it does not serve with ENOSYS naming the
// server, a second handler for one operation is refused, and Observe sees
// every request served with how long its handler ran.
func TestTable(t *testing.T) {
	seen := map[wire.Op]time.Duration{}
	tb := &Table{Name: "test server", Observe: func(op wire.Op, took time.Duration) { seen[op] += took }}
	On(tb, tPing, func(_ context.Context, q *tmsg) (*tmsg, error) {
		time.Sleep(5 * time.Millisecond)
		return &tmsg{Ino: q.Ino + 1}, nil
	})
	On(tb, tUnlink, func(_ context.Context, q *tmsg) (*tmsg, error) {
		return nil, Errorf(syscall.ENOENT, "no %q", q.Name)
	})
	ctx := context.Background()
	if r, err := Do(ctx, tb, tPing, &tmsg{Ino: 41}); err != nil || r.Ino != 42 {
		t.Fatalf("ping: %+v %v", r, err)
	}
	if _, err := Do(ctx, tb, tUnlink, &tmsg{Name: "x"}); Errno(err) != syscall.ENOENT {
		t.Fatalf("unlink: %v, want ENOENT", err)
	}
	if _, err := Do(ctx, tb, tRead, &tmsg{}); Errno(err) != syscall.ENOSYS || !strings.Contains(err.Error(), "test server") {
		t.Fatalf("an operation not served: %v, want ENOSYS naming the server", err)
	}
	if seen[tPing.Op] < 5*time.Millisecond || len(seen) != 2 {
		t.Fatalf("observed %v: want ping (≥ 5 ms) and unlink", seen)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an operation served twice was accepted")
		}
	}()
	On(tb, tPing, func(context.Context, *tmsg) (*tmsg, error) { return nil, nil })
}

// TestRelay: an operation relayed answers with the far server's reply or
// error, and with the error of finding it when it cannot be found.
func TestRelay(t *testing.T) {
	far := &Table{Name: "far"}
	On(far, tPing, func(_ context.Context, q *tmsg) (*tmsg, error) { return &tmsg{Ino: q.Ino * 2}, nil })
	On(far, tUnlink, func(_ context.Context, q *tmsg) (*tmsg, error) {
		return nil, Errorf(syscall.ENOENT, "far: no %q", q.Name)
	})
	var found error
	near := &Table{Name: "near"}
	to := func(context.Context) (Invoker, error) { return far, found }
	Relay(near, tPing, to)
	Relay(near, tUnlink, to)
	ctx := context.Background()
	if r, err := Do(ctx, near, tPing, &tmsg{Ino: 21}); err != nil || r.Ino != 42 {
		t.Fatalf("ping relayed: %+v %v", r, err)
	}
	if _, err := Do(ctx, near, tUnlink, &tmsg{Name: "x"}); Errno(err) != syscall.ENOENT || !strings.Contains(err.Error(), "far") {
		t.Fatalf("the far server's error: %v", err)
	}
	found = Errorf(syscall.EIO, "no far server is active")
	if _, err := Do(ctx, near, tPing, &tmsg{}); Errno(err) != syscall.EIO || !strings.Contains(err.Error(), "no far server") {
		t.Fatalf("no far server: %v", err)
	}
}
