package meta

import (
	"time"

	"github.com/sluice-hpc/sluice/policy/place"
)

// The order of writers waiting for room. A chunk whose tier is at its
// write-stall reserve waits (AllocWait) until room is freed; every
// stalled allocation is woken at once when it may be (one channel), and
// one still stalled after stallWait goes back to its forwarding daemon,
// which asks again. Without an order, the room freed went to whichever
// asked first: every waiting checkpoint got a chunk now and then and all
// finished together at the end, where the paper's stop serves them in
// turn. A chunk that stalls gets a ticket, kept across its writer's
// retries; while older tickets wait on its tier, a chunk may only take
// room beyond theirs (their chunks are added to the tier's servers'
// reserves for it), so room goes to the oldest first and a newcomer
// waits behind them.

// stallTicket is a stalled chunk's place in the order.
type stallTicket struct {
	seq  uint64
	tier string
	size uint64    // the chunk's room
	seen time.Time // its writer's last ask
}

// stallTicketTTL is how long a ticket whose writer stopped asking (it
// gave up, or died) keeps its place: its writer asks again within
// stallWait of each stall.
const stallTicketTTL = 3 * stallWait

// aheadLocked is, per tier, the room the chunks stalled before chunk k
// wait for (every stalled chunk for a chunk without a ticket). Tickets
// whose writers stopped asking are dropped. Caller holds r.mu.
func (r *registry) aheadLocked(k chunkKey, now time.Time) map[string]uint64 {
	if len(r.stallQ) == 0 {
		return nil
	}
	mine := ^uint64(0)
	if t := r.stallQ[k]; t != nil {
		mine = t.seq
	}
	var ahead map[string]uint64
	for key, t := range r.stallQ {
		if now.Sub(t.seen) > stallTicketTTL {
			delete(r.stallQ, key)
			continue
		}
		if t.seq < mine {
			if ahead == nil {
				ahead = map[string]uint64{}
			}
			ahead[t.tier] += t.size
		}
	}
	return ahead
}

// behind adds the room of the chunks ahead to the reserves of their
// tiers' servers (only where a reserve is kept: a tier nothing can be
// freed on has no waiters).
func behind(servers []place.Server, ahead map[string]uint64) {
	for i := range servers {
		if a := ahead[servers[i].Tier]; a > 0 && servers[i].Reserve > 0 {
			servers[i].Reserve += a
		}
	}
}

// stalledLocked gives chunk k a ticket on tier (or renews its own).
// Caller holds r.mu.
func (r *registry) stalledLocked(k chunkKey, tier string, size uint64, now time.Time) {
	if r.stallQ == nil {
		r.stallQ = map[chunkKey]*stallTicket{}
	}
	if t := r.stallQ[k]; t != nil {
		t.seen, t.tier = now, tier
		return
	}
	r.stallSeq++
	r.stallQ[k] = &stallTicket{seq: r.stallSeq, tier: tier, size: size, seen: now}
}
