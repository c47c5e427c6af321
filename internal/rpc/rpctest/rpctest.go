// Package rpctest serves a handler on loopback for a test and hands back
// a client of it, so that tests call a service the way daemons and
// commands do. It must not be linked by anything but tests.
package rpctest

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
)

// Serve serves h on a loopback port until the test ends and returns a
// client of it.
func Serve(t testing.TB, h rpc.Handler) *rpc.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("test")
	srv := rpc.NewServer(secret, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go srv.Serve(ln)
	c := rpc.NewClient(ln.Addr().String(), secret, rpc.ClientOptions{Timeout: 10 * time.Second})
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c
}
