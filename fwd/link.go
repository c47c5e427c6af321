package fwd

import (
	"context"
	"time"

	"github.com/sluice-hpc/sluice/internal/throttle"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// The emulated link (Server.bw) carries every read's and write's bytes.
// A bulk request pays it when the bulk gate hands it its turn (the gate
// keeps the link's queue short, so the scheduler's fair order between
// jobs holds on the link too: qosgate.Config.Link) and waits here for
// what it paid; other requests pay it here.

// linkQueue bounds the bulk gate's queue on the link: a request is handed
// its worker only while what the link still has to carry is under it.
// Short, so that a job with one request in flight waits behind little
// more than one request of the others (a reader of 3 × 32 MiB beside a
// writer on a 40 MB/s link: 6.94 s before the gate kept the link's queue,
// 6.08 s with 50 ms, 5.87 with 10; 5.0 would be half the link, 2.93 s
// alone). A timer late by up to the throttle's burst (50 ms) costs the
// link nothing: the bucket saves that much while idle.
const linkQueue = 10 * time.Millisecond

type linkKey struct{}

// linkBytes is what request q (of operation op) moves over the link if it pays at the gate
// (a bulk read or write to a data server; a node-local target's does not
// cross the link).
func linkBytes(c wire.Class, op wire.Op, q ns.Request, n uint64) float64 {
	if c != wire.ClassBulk || op != ns.OpRead && op != ns.OpWrite {
		return 0
	}
	if _, local, err := localTarget(op, q); err != nil || local {
		return 0
	}
	return float64(n)
}

// withLinkPaid marks ctx's request as having paid the link at the gate,
// with d left to wait for it.
func withLinkPaid(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, linkKey{}, d)
}

// payLink waits until the link has carried n bytes of the request: what
// it paid at the gate, else paid now.
func (s *Server) payLink(ctx context.Context, n float64) error {
	d, paid := ctx.Value(linkKey{}).(time.Duration)
	if !paid {
		return s.bw.Wait(ctx, n)
	}
	return throttle.Sleep(ctx, d)
}
