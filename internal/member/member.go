// Package member owns a daemon's membership in the cluster: registering
// with the metadata service, keeping the assigned id across restarts, and
// the heartbeat that reports liveness and usage. It does not serve requests.
package member

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Member keeps one daemon registered.
type Member struct {
	Meta   *rpc.Client
	IDFile string // where the id is kept ("" keeps it in memory only)
	Info   func() wire.ServerInfo
	Log    *slog.Logger
	Every  time.Duration
	// Replied, if set, sees every registration reply (a data server learns
	// there that truncations are waiting for it).
	Replied func(*api.RegisterRep)

	// id is read by request handlers while heartbeats may set it.
	id atomic.Uint64
}

// ID returns the id assigned by the metadata service (0 before Register).
func (m *Member) ID() uint64 { return m.id.Load() }

// Register registers once, reusing a stored id.
func (m *Member) Register(ctx context.Context) error {
	if m.id.Load() == 0 && m.IDFile != "" {
		if b, err := os.ReadFile(m.IDFile); err == nil {
			id, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			m.id.Store(id)
		}
	}
	id := m.id.Load()
	si := m.Info()
	si.ID = id
	resp, err := rpc.Do(ctx, m.Meta, api.Register, &si)
	if err != nil {
		return err
	}
	if resp.ID != id && m.IDFile != "" {
		if err := atomicfile.Write(m.IDFile, []byte(strconv.FormatUint(resp.ID, 10)+"\n"), 0o600); err != nil {
			return err
		}
	}
	m.id.Store(resp.ID)
	if m.Replied != nil {
		m.Replied(resp)
	}
	return nil
}

// Run heartbeats until ctx ends; failures are logged and retried.
func (m *Member) Run(ctx context.Context) {
	every := m.Every
	if every == 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, every*3)
		if err := m.Register(cctx); err != nil && ctx.Err() == nil {
			m.Log.Warn("heartbeat to metadata service failed", "err", err)
		}
		cancel()
	}
}
