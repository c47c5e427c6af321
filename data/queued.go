package data

import (
	"sync"

	"github.com/sluice-hpc/sluice/tier"
)

// queuedChunks is the room of new chunks whose first write is queued at
// this server (the burst buffer's I/O scheduler and caps, the QoS gate,
// the device limits) and not in the store yet. The store counts a chunk's
// room only when its first write reaches it, and the metadata service
// keeps the room it promised a new chunk only until this server's next
// report; without this count, chunks queued for seconds at a scheduled
// buffer were in neither, placement saw their room free, placed more
// there, and the store refused those when their turn came (docs/bbos.md,
// "Writers wait for room"). The heartbeat reports the store's use plus
// this room.
type queuedChunks struct {
	mu     sync.Mutex                // guards chunks
	chunks map[tier.ChunkID]queuedAt // the chunks with writes queued
}

// queuedAt is one chunk's queued writes: how many, and the room they ask
// for (the most any asks).
type queuedAt struct {
	n    int
	room int64
}

// enter counts a queued write of chunk id asking for reserve bytes of
// room; leave ends it.
func (q *queuedChunks) enter(id tier.ChunkID, reserve int64) (leave func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.chunks == nil {
		q.chunks = map[tier.ChunkID]queuedAt{}
	}
	c := q.chunks[id]
	q.chunks[id] = queuedAt{c.n + 1, max(c.room, reserve)}
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if c := q.chunks[id]; c.n > 1 {
			q.chunks[id] = queuedAt{c.n - 1, c.room}
		} else {
			delete(q.chunks, id)
		}
	}
}

// bytes is the room of the chunks queued now (asked once a report).
func (q *queuedChunks) bytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var b int64
	for _, c := range q.chunks {
		b += c.room
	}
	return b
}
