// Package testrig starts sluice services in the test's process on loopback
// for unit tests of the packages that talk to them (fwd, data): a
// metadata service on the in-memory engine, and helpers to wait for
// daemons to register. It is test support only: no daemon imports it.
package testrig

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/meta"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Secret is the cluster secret of every rig.
var Secret = []byte("0123456789abcdef-test")

// Quiet is a logger that discards everything.
func Quiet() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Meta starts a metadata service (cfg with the in-memory engine, the rig's
// secret and a quiet logger where unset) serving on loopback until the
// test ends, and returns it with its address.
func Meta(t testing.TB, cfg meta.Config) (*meta.Service, string) {
	t.Helper()
	if cfg.Engine == nil {
		cfg.Engine = engine.NewMem()
	}
	if cfg.Log == nil {
		cfg.Log = Quiet()
	}
	if cfg.Secret == nil {
		cfg.Secret = Secret
	}
	svc, err := meta.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(cfg.Secret, svc.Handler(), cfg.Log)
	go srv.Serve(ln)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	go svc.RunSettle(ctx)
	t.Cleanup(cancel)
	return svc, ln.Addr().String()
}

// WaitData waits until n data servers are registered and alive.
func WaitData(t testing.TB, svc *meta.Service, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := 0
		for _, si := range svc.Servers() {
			if si.Role == "data" && si.Alive {
				live++
			}
		}
		if live >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d data servers registered", live, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
