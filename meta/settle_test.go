package meta

import (
	"testing"
	"time"
)

// A new chunk's promise survives its server's next report: the file's
// close, after the heartbeat, still settles the chunk on the server (the
// first report after a promise used to sweep it, and the chunk kept its
// whole reservation until the server's own reclaim). Promises stale for
// longer than promiseKeep are swept once there are many.
func TestPromiseOutlivesReport(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := clockedService(t, &now)
	r := &s.reg
	r.mu.Lock()
	m := &member{}
	m.info.ID, m.info.Used = 1, 4<<20
	r.servers[1] = m
	r.promiseLocked(5, 0, []uint64{1}, []uint64{4 << 20}, nil, nil)
	r.promiseLocked(6, 0, []uint64{1}, []uint64{4 << 20}, nil, nil)
	r.reportedLocked(m) // the heartbeat: its usage counts both chunks' room
	r.mu.Unlock()
	if !r.settle(5, 0, 4096) {
		t.Fatal("the close after the server's report found no promise to settle")
	}
	r.mu.Lock()
	q, used := r.settleQ[1], m.info.Used
	r.mu.Unlock()
	if len(q) != 1 || q[0].Ino != 5 || used != 4096 {
		t.Errorf("settlements queued %+v, server's usage %d; want chunk 0 of 5 and 4096", q, used)
	}
	// ino 6 never closed: swept once stale and old, at a report past the
	// sweep's size
	now = now.Add(promiseKeep + time.Second)
	r.mu.Lock()
	r.promiseSweep = 0
	r.reportedLocked(m)
	_, kept := r.promises[chunkKey{6, 0}]
	r.mu.Unlock()
	if kept {
		t.Error("a promise stale for longer than promiseKeep survived the sweep")
	}
}
