// Package monitord is the monitor daemon (`sluice monitor`): Beacon's
// record store (beacon/store, Pebble) and its service (manager/monitor)
// in a process of their own, so that the metadata daemon keeps none of
// the records and a metadata failover loses none. Several monitors divide
// the jobs between them (beaconrpc.Monitors, which the daemons that ship
// records and the metadata daemon use to reach them). It owns nothing of
// the namespace, the data path or the managers.
package monitord

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-hpc/sluice/beacon/store"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/manager/monitor"
)

// Config configures a monitor daemon.
type Config struct {
	Listen      string
	LocalSocket bool
	Secret      []byte
	// Ready, if set, is told the bound address before serving.
	Ready func(addr string) error
	// Dir holds the record store ("": in memory, for tests).
	Dir       string
	Retention time.Duration // records kept this long
	MaxBytes  int64         // and at most this many bytes, compressed
	Window    time.Duration // the daemons' aggregation window
	// Every is how often the periodic work runs (fail-slow detection,
	// profiles of ended jobs, retention; default 5 s).
	Every time.Duration
	Log   *slog.Logger
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Second
	}
	st, err := store.Open(cfg.Dir, store.Options{Retention: cfg.Retention, MaxBytes: cfg.MaxBytes})
	if err != nil {
		return err
	}
	defer st.Close()
	svc := monitor.New(monitor.Config{Store: st, Log: cfg.Log, Window: cfg.Window})
	ln, err := rpc.Listen(cfg.Listen, rpc.ListenOptions{Local: cfg.LocalSocket, Ready: cfg.Ready})
	if err != nil {
		return err
	}
	defer ln.Close()
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	go svc.Run(ctx, t.C)
	table := &rpc.Table{Name: "monitor " + ln.Addr().String()}
	svc.Serve(table)
	srv := rpc.NewServer(cfg.Secret, &rpc.Mux{Name: "monitor", Tables: []*rpc.Table{table}}, cfg.Log)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	cfg.Log.Info("monitor listening", "addr", ln.Addr().String(), "dir", cfg.Dir, "jobs", len(st.Jobs()))
	return srv.Serve(ln)
}
