package meta

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// clockedService is a service on an in-memory engine whose clock reads
// *now (the test moves it).
func clockedService(t *testing.T, now *time.Time) *Service {
	t.Helper()
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
