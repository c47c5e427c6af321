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
	mu   sync.Mutex             // guards n, room
	n    map[tier.ChunkID]int   // requests queued per chunk
	room map[tier.ChunkID]int64 // the room the chunk's requests ask for (the most)
}

// enter counts a queued write of chunk id asking for reserve bytes of
// room; leave ends it.
func (q *queuedChunks) enter(id tier.ChunkID, reserve int64) (leave func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == nil {
		q.n, q.room = map[tier.ChunkID]int{}, map[tier.ChunkID]int64{}
	}
	q.n[id]++
	q.room[id] = max(q.room[id], reserve)
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.n[id]--; q.n[id] == 0 {
			delete(q.n, id)
			delete(q.room, id)
		}
	}
}

// bytes is the room of the chunks queued now (asked once a report).
func (q *queuedChunks) bytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var b int64
	for _, r := range q.room {
		b += r
	}
	return b
}
