package meta

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
)

// serveOn serves s on loopback, as the metadata daemon does, and returns
// a client of it: tests call the service's operations the way daemons
// and commands do (rpc.Do).
func serveOn(t *testing.T, s *Service) *rpc.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("test")
	srv := rpc.NewServer(secret, s.Handler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	go srv.Serve(ln)
	c := rpc.NewClient(ln.Addr().String(), secret, rpc.ClientOptions{Timeout: 10 * time.Second})
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c
}
