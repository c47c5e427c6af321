package beacon

import (
	"context"
	"math/bits"
	"sort"
	"sync"
	"time"
)

// DefaultWindow is the aggregation window.
const DefaultWindow = time.Second

// maxKeys bounds the records one window holds per daemon; past it, file
// and request size are coarsened (inode 0, size rounded up to a power of
// two) so memory stays bounded under any workload.
const maxKeys = 50000

type recKey struct {
	window int64
	job    string
	app    string
	uid    uint32
	rank   int32
	node   string
	op     string
	ino    uint64
	size   uint64
}

type seqKey struct {
	job  string
	rank int32
	op   string
	ino  uint64
}

// Collector turns one daemon's operations into window records. Add is
// cheap (a map update under a mutex); Drain hands out closed windows. It is
// safe for concurrent use.
type Collector struct {
	layer  Layer
	window time.Duration

	mu     sync.Mutex // guards server, cur, last
	server string
	cur    map[recKey]*Record
	last   map[seqKey]uint64 // end of the previous operation, for Seq
}

// NewCollector returns a collector for one daemon (server names it in the
// records, e.g. "fwd-3"). window 0 means DefaultWindow.
func NewCollector(layer Layer, server string, window time.Duration) *Collector {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Collector{layer: layer, server: server, window: window,
		cur: map[recKey]*Record{}, last: map[seqKey]uint64{}}
}

// SetServer renames the recording daemon (once it knows its id).
func (c *Collector) SetServer(name string) {
	c.mu.Lock()
	c.server = name
	c.mu.Unlock()
}

// Window returns the aggregation window.
func (c *Collector) Window() time.Duration { return c.window }

// Add records one operation.
func (c *Collector) Add(op Op) {
	start := op.Start.UnixNano()
	w := start - start%int64(c.window)
	isData := op.Name == OpRead || op.Name == OpWrite
	ino := op.Ino
	if !isData {
		// a metadata storm touches a new file with every operation: keyed
		// by file, it would leave one record per operation to encode, ship
		// and store. Metadata operations collapse per job, rank, node and
		// operation; files are kept for reads and writes (the I/O mode).
		ino = 0
	}
	k := recKey{window: w, job: op.Job, app: op.App, uid: op.Uid, rank: op.Rank, node: op.Node, op: op.Name, ino: ino, size: op.Size}
	end := op.Off + op.Size
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.cur[k]
	if r == nil && len(c.cur) >= maxKeys {
		k.ino = 0
		if k.size > 1 {
			k.size = 1 << bits.Len64(k.size-1)
		}
		r = c.cur[k]
	}
	if r == nil {
		r = &Record{Window: w, Layer: c.layer, Server: c.server, Who: op.Who, Uid: op.Uid,
			Op: op.Name, Ino: k.ino, Size: k.size,
			OffMin: op.Off, First: start}
		c.cur[k] = r
	}
	r.Count += max(uint64(op.N), 1)
	if isData {
		r.Bytes += op.Size
		sk := seqKey{job: op.Job, rank: op.Rank, op: op.Name, ino: op.Ino}
		if prev, ok := c.last[sk]; ok && prev == op.Off {
			r.Seq++
		}
		if len(c.last) > maxKeys {
			clear(c.last)
		}
		c.last[sk] = end
	}
	if op.Off < r.OffMin {
		r.OffMin = op.Off
	}
	if end > r.OffMax {
		r.OffMax = end
	}
	if start < r.First {
		r.First = start
	}
	if e := start + int64(op.Lat); e > r.Last {
		r.Last = e
	}
	r.LatSum += int64(op.Lat)
	if int64(op.Lat) > r.LatMax {
		r.LatMax = int64(op.Lat)
	}
	r.Wait += int64(op.Wait)
	r.QoSWait += int64(op.QoSWait)
	if op.Err {
		r.Errors++
	}
}

// Drain returns the records of every window that ended by now (all
// windows if all is set), oldest first, and forgets them.
func (c *Collector) Drain(now time.Time, all bool) []Record {
	cut := now.UnixNano()
	c.mu.Lock()
	var out []Record
	for k, r := range c.cur {
		if all || k.window+int64(c.window) <= cut {
			out = append(out, *r)
			delete(c.cur, k)
		}
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Window != out[j].Window {
			return out[i].Window < out[j].Window
		}
		return out[i].First < out[j].First
	})
	return out
}

// Shipper sends a daemon's closed windows to the store, compressed, once
// per tick. Batches that cannot be sent are kept (at most Backlog of
// them, the oldest dropped first) and sent with the next tick.
type Shipper struct {
	C       *Collector
	Send    func(ctx context.Context, batch []byte) error
	Now     func() time.Time
	Backlog int // default 60
	// OnError is told about failed sends (for the daemon's log).
	OnError func(err error)

	pending [][]byte
	dropped int
}

// Run ships every tick until ctx ends, then ships what is left once.
func (s *Shipper) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.Flush(fctx, true)
			cancel()
			return
		case <-tick:
			s.Flush(ctx, false)
		}
	}
}

// Flush drains the collector (every window if all) and sends what is
// pending. It returns the number of batches still pending.
func (s *Shipper) Flush(ctx context.Context, all bool) int {
	if recs := s.C.Drain(s.Now(), all); len(recs) > 0 {
		s.pending = append(s.pending, Encode(recs))
	}
	backlog := s.Backlog
	if backlog <= 0 {
		backlog = 60
	}
	for len(s.pending) > backlog {
		s.pending = s.pending[1:]
		s.dropped++
	}
	for len(s.pending) > 0 {
		if err := s.Send(ctx, s.pending[0]); err != nil {
			if s.OnError != nil {
				s.OnError(err)
			}
			break
		}
		s.pending = s.pending[1:]
	}
	return len(s.pending)
}

// Dropped returns how many batches were dropped because the store was
// unreachable for longer than the backlog.
func (s *Shipper) Dropped() int { return s.dropped }
