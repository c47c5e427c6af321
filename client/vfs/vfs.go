// Package vfs is the client core of a sluice mount, the part that does not
// speak FUSE (the JuiceFS vfs/fuse split). FS (fs.go, fsnames.go,
// fsio.go) offers one method per file system operation, given the
// caller's credentials (Cred) and the operation's arguments; it follows
// the change feed (feed.go) and drops the kernel's caches through the
// Notifier the adapter gives it. It holds the components:
//
//   - Streams (stream.go): write-behind, readahead and the extents that
//     close and fsync report;
//   - Router (route.go): which forwarding node a request goes to;
//   - DirCache (dircache.go): directories' attributes and listings, kept
//     coherent by the change feed, and the mount's place in that feed;
//   - Creates (creates.go): directory delegations and the creates and
//     removals answered here and sent in batches;
//   - Owned (owned.go): the small files created under a delegation whose
//     bytes the mount keeps, answering read-only opens and reads;
//   - BlockCache (blockcache.go): blocks of files kept for small reads,
//     dropped by writes, truncations and the change feed, in memory
//     mapped outside the Go heap (blockmem.go);
//   - Appends (appends.go): where the writes of O_APPEND handles go when
//     the kernel's cached size is older than the open.
//
// Each component is a type with its own lock over a Caller and an injected
// clock, so it is tested with a fake forwarding node, metadata service and
// clock, without a mount. The go-fuse adapter (package client) translates
// kernel requests into FS's calls and its answers into replies.
//
// It talks to forwarding nodes and to the metadata service (forwarding
// map, delegations) only; never to data servers, never to the kernel.
//
// Lock order, in one place. Locks are taken only in this order:
//
//	wbDir.flushMu (one directory's batch on the wire)
//	  → Creates.mu → Owned.mu → nothing
//	  → DirCache.mu → nothing
//	Streams.mu, Streams.emu, Router.mu, BlockCache.mu, Appends.mu → nothing
//
// DirCache.mu, Owned.mu, Streams.mu, Streams.emu, Router.mu and
// BlockCache.mu are leaves, and Creates.mu takes only Owned.mu (a create
// born owned); none is held while a request is on the wire. wbDir.flushMu
// is the only lock held across a request (so a directory's batches leave
// in order). FS's own locks (pmu, dmu) are leaves too. Waits (a write for an overlapping one, a read
// for the writes before it, a drain) are condition waits on Streams.mu.
package vfs

import (
	"context"
	"time"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Caller sends one request and waits for its answer (an *rpc.Client).
type Caller = rpc.Invoker

// SinkCaller is a Caller that can hand an answer's payload to a sink
// straight off the connection (rpc.Client.InvokeSink).
type SinkCaller interface {
	InvokeSink(ctx context.Context, op wire.Op, req, rep wire.Message, payload []byte, sink rpc.Sink) error
}

// PageCaller is a Caller that can send a payload by reference
// (rpc.Client.InvokePages): payload is a bufpool buffer the call may
// detach the pages of, so the caller does not read it afterwards.
type PageCaller interface {
	InvokePages(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error)
}

// Route says where a request of caller id on inode ino goes.
type Route func(id ident.ID, ino uint64) Caller

// Clock returns the time (time.Now outside tests).
type Clock func() time.Time
