package beaconrpc

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// OpName names a request for Beacon: "read", "write", "meta:<op>", or ""
// for requests that are not application I/O (pings, monitoring itself,
// administration: registration, fault injection, pools, rules). Names are built once, when first
// asked (every operation is registered by then): this runs for every
// request of every daemon.
func OpName(op wire.Op) string {
	names := opNames()
	if int(op) < len(names) {
		return names[op]
	}
	return ""
}

var opNames = sync.OnceValue(func() []string {
	specs := wire.Specs()
	names := make([]string, int(specs[len(specs)-1].Op)+1)
	for _, s := range specs {
		if s.Service == wire.Monitor || s.Service == wire.Admin {
			continue // monitoring itself, administration
		}
		switch s.Op {
		case ns.OpRead, chunk.OpRead:
			names[s.Op] = beacon.OpRead
		case ns.OpWrite, chunk.OpWrite:
			names[s.Op] = beacon.OpWrite
		case ns.OpPing:
		default:
			names[s.Op] = "meta:" + s.Name
		}
	}
	return names
})

// Ship sends col's closed windows to the Beacon service through caller
// once per window, in the background, until ctx ends (then once more).
// Failures are logged once per minute at most; batches wait in a bounded
// backlog meanwhile.
func Ship(ctx context.Context, col *beacon.Collector, caller Caller, log *slog.Logger) {
	var lastLog time.Time
	sh := &beacon.Shipper{C: col, Send: Client{C: caller}.Put, Now: time.Now}
	sh.OnError = func(err error) {
		if time.Since(lastLog) > time.Minute {
			lastLog = time.Now()
			log.Warn("cannot ship monitoring records (kept for later)", "err", err, "batches_dropped", sh.Dropped())
		}
	}
	t := time.NewTicker(col.Window())
	go func() {
		defer t.Stop()
		sh.Run(ctx, t.C)
	}()
}
