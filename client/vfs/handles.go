package vfs

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Handles counts this mount's file handles the metadata service knows
// open, per inode: those it acknowledged (an open, a create that opened,
// a batch of write-back creates made open) and whose release has not
// been sent. The service keeps its count in memory; a restarted server,
// or a standby that took over, knows none of them, so when the change
// feed tells the mount it lost changes the mount sends the whole table
// again (Reclaim; ns.Reclaim, meta/opens.go), and a file it holds open
// and another unlinked is not removed under it.
//
// An open or release at the service holds gate shared from its send
// until it is counted here; a reclaim holds it exclusively while it reads
// the table and sends it, so no open or release is half done at the
// service and not yet here (or the reverse) when the table is read.
type Handles struct {
	gate sync.RWMutex
	mu   sync.Mutex     // guards n
	n    map[uint64]int // inode → handles
}

// NewHandles returns an empty table.
func NewHandles() *Handles { return &Handles{n: map[uint64]int{}} }

// begin and end bracket an open or release at the service.
func (h *Handles) begin() { h.gate.RLock() }
func (h *Handles) end()   { h.gate.RUnlock() }

// opened counts a handle of ino the service acknowledged.
func (h *Handles) opened(ino uint64) {
	h.mu.Lock()
	h.n[ino]++
	h.mu.Unlock()
}

// released drops a handle of ino whose release was sent (answered or
// not: a release the service did not see is corrected by the next
// reclaim).
func (h *Handles) released(ino uint64) {
	h.mu.Lock()
	if h.n[ino]--; h.n[ino] <= 0 {
		delete(h.n, ino)
	}
	h.mu.Unlock()
}

// Count is the handles of ino the service knows open.
func (h *Handles) Count(ino uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[ino]
}

// Reclaim sends the table to the metadata service as mount client's
// handles, trying again while the service cannot be reached (for up to
// timeout).
func (h *Handles) Reclaim(ctx context.Context, mc rpc.Invoker, client uint64, timeout time.Duration) (int, error) {
	h.gate.Lock()
	defer h.gate.Unlock()
	h.mu.Lock()
	q := &ns.ReclaimReq{Client: client, Opens: make([]ns.OpenCount, 0, len(h.n))}
	for ino, n := range h.n {
		q.Opens = append(q.Opens, ns.OpenCount{Ino: ino, N: uint32(n)})
	}
	h.mu.Unlock()
	until := time.Now().Add(timeout)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := rpc.Do(cctx, mc, ns.Reclaim, q)
		cancel()
		if err == nil || !rpc.Unreached(err) || time.Now().After(until) {
			return len(q.Opens), err
		}
		select {
		case <-ctx.Done():
			return len(q.Opens), ctx.Err()
		case <-time.After(wait):
		}
	}
}
