package data

import (
	"sync"
	"sync/atomic"
	"time"
)

// meter measures a data server's recent bandwidth for its heartbeats: the
// tiering policy sizes its migrations by it (ONFS eq. 1). A rate is
// measured over each heartbeat period; the figure reported is the highest
// of the last meterPeriods, so an idle moment does not hide what the
// device did a few seconds ago.
type meter struct {
	written, read atomic.Uint64 // bytes since the server started

	mu     sync.Mutex // guards the fields below
	last   time.Time
	lastW  uint64
	lastR  uint64
	wr, rr [meterPeriods]uint64 // bytes/s per recent period
	next   int
}

const meterPeriods = 30

// rates closes the current period at now and returns the recent peak
// write and read rates in bytes/s.
func (m *meter) rates(now time.Time) (write, read uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, r := m.written.Load(), m.read.Load()
	if !m.last.IsZero() {
		if d := now.Sub(m.last).Seconds(); d > 0.05 {
			m.wr[m.next] = uint64(float64(w-m.lastW) / d)
			m.rr[m.next] = uint64(float64(r-m.lastR) / d)
			m.next = (m.next + 1) % meterPeriods
		} else {
			return peak(m.wr[:]), peak(m.rr[:])
		}
	}
	m.last, m.lastW, m.lastR = now, w, r
	return peak(m.wr[:]), peak(m.rr[:])
}

func peak(v []uint64) uint64 {
	var p uint64
	for _, x := range v {
		p = max(p, x)
	}
	return p
}
