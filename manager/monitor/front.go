package monitor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Front is the metadata daemon's face of Beacon's service when the
// records live in monitor daemons (`sluice monitor`): it answers Beacon's
// operations by sending them on to the monitors (beaconrpc.Monitors:
// records to the job's monitor, questions to all, answers merged), so
// the CLI and the mounts ask the metadata daemon as before, and it keeps
// the fail-slow servers the monitors flag for the forwarding manager.
type Front struct {
	M   *beaconrpc.Monitors
	Log *slog.Logger

	mu   sync.Mutex // guards slow
	slow []beacon.SlowServer
}

// Serve adds Beacon's operations to t, each sent on to the monitors.
func (f *Front) Serve(t *rpc.Table) {
	for op := beaconrpc.OpPut; op <= beaconrpc.OpDecisions; op++ {
		spec := wire.SpecOf(op)
		if spec == nil {
			continue
		}
		t.Add(op, func(ctx context.Context, r *rpc.Request) {
			rep := spec.NewReply()
			p, err := f.M.Invoke(ctx, op, r.Req, rep, r.Payload, nil)
			r.Answer(rep, err, p)
		})
	}
}

// Health returns the servers the monitors flagged fail-slow at the last
// look.
func (f *Front) Health() []beacon.SlowServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]beacon.SlowServer(nil), f.slow...)
}

// Run asks the monitors for the fail-slow servers every tick until ctx
// ends.
func (f *Front) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		slow, err := beaconrpc.Client{C: f.M}.Health(cctx)
		cancel()
		if err != nil {
			f.Log.Warn("asking the monitors for fail-slow servers", "err", err)
			continue
		}
		f.mu.Lock()
		f.slow = slow
		f.mu.Unlock()
	}
}
