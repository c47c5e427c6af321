package beaconrpc

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// OpName names a request for Beacon: "read", "write", "meta:<op>", or ""
// for requests that are not application I/O (pings, registration,
// monitoring itself, fault injection). Names are built once: this runs for
// every request of every daemon.
func OpName(op wire.Op) string {
	if int(op) < len(opNames) {
		return opNames[op]
	}
	return ""
}

var opNames = func() []string {
	var names []string
	for op := wire.Op(0); op.Valid() || op == 0; op++ {
		switch op {
		case wire.OpRead, wire.OpChunkRead:
			names = append(names, beacon.OpRead)
		case wire.OpWrite, wire.OpChunkWrite:
			names = append(names, beacon.OpWrite)
		case 0, wire.OpPing, wire.OpRegister, wire.OpServers, wire.OpFault, wire.OpJobStats, wire.OpBeacon, wire.OpJob, wire.OpStat, wire.OpBBServer:
			names = append(names, "")
		default:
			names = append(names, "meta:"+op.String())
		}
	}
	return names
}()

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
