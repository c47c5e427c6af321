package bb

import (
	"math"
	"time"

	"github.com/sluice-hpc/sluice/policy/bbos"
)

// The burst buffer's device and PFS: the writes each step issues, their
// requests' sizes, the demotions' share of the PFS.

// writePFS gives the bypassing writers n bytes of the PFS in the order
// their requests came: each writer's requests in flight (its part of the
// mount's window, at most the forwarding daemon's 8 per job, headBytes)
// queue behind those issued before them, and the bytes of those served
// are issued again at the back. With 8 MiB checkpoints and windows of
// their own the writers go one after the other in the order they began;
// with small windows, or larger checkpoints, they take turns a window
// (or 8 MiB) at a time. It returns what they left of n.
func (m *bbModel) writePFS(bypassing []*bbVersion, n float64) float64 {
	// the queue: writers still bypassing (a writer leaves it when it is
	// done), then newcomers in the order they began
	q := m.pfsQ
	for _, v := range bypassing {
		if !v.atPFS {
			v.atPFS = true
			q = append(q, &pfsTurn{v: v, left: min(m.part(), headBytes, float64(v.Bytes)-v.written)})
		}
	}
	for n > 0 && len(q) > 0 {
		t := q[0]
		g := min(n, t.left, float64(t.v.Bytes)-t.v.written)
		t.v.written += g
		t.left -= g
		n -= g
		m.res.Bypassed += g
		switch rest := float64(t.v.Bytes) - t.v.written; {
		case rest < 1: // done (the window and the rest part by rounding)
			t.v.written = float64(t.v.Bytes)
			q = q[1:]
		case t.left <= 0:
			t.left = min(m.part(), headBytes, rest)
			q = append(q[1:], t)
		}
	}
	m.pfsQ = q
	return max(n, 0)
}

// pfsTurn is a bypassing writer in the PFS's queue and the bytes of its
// window's requests there.
type pfsTurn struct {
	v    *bbVersion
	left float64
}

// devReq is a writer's requests at the device, n bytes, in the order
// they reserved: the first requests of heads of its chunks from chunk
// first on (each of reqBytes, the last maybe less), or (heads 0) other
// requests of chunks whose first landed. done is what of it was written.
type devReq struct {
	v            *bbVersion
	n, done      float64
	first, heads int
}

// writeDevice writes the step's checkpoint bytes. The device serves
// requests in the order they reserved (the servers' bucket is a queue of
// reservations): each writer let through (active) has its requests at
// the device up to its window (its part of the mount's, at most the
// forwarding daemon's headBytes), within the room placed for them (the
// next chunks placed as its requests reach them), and the next join the
// queue's end as the first are written. So a checkpoint that comes while
// another's requests are queued waits for them, and those behind it for
// its own: writers are served in turn by their windows, not all at once
// (on the daemons, under the dedicated buffer, 8 MiB checkpoints of a
// burst end one after another). A writer whose turn ended has its
// requests at the device written still.
//
// A chunk's first write goes alone: the forwarding daemon holds a fresh
// chunk's other writes until it lands (fwd chunkForWrite: a fresh chunk
// may still move), so a writer's first requests at the device are the
// first of each chunk its window reaches, and the rest of a chunk join
// the queue's end once its first is written (issue). Under the dedicated
// buffer the next writers' first requests are queued by then, and the
// writers of a burst share the device in part (on the daemons the first
// few of a burst's 8 MiB checkpoints end later than they would one
// after another, and the last ones closer together: bench/bbos TRACE=1's
// Writes).
func (m *bbModel) writeDevice(now time.Duration, active []*bbVersion, order []bbos.Version) {
	tok := max(min(m.wTok, m.devTok), 0)
	// a step tops up and writes in rounds; a window is at least a
	// quarter of the step's bytes, so a step takes a few at any scale
	win := max(min(m.part(), headBytes), tok/4)
	for round := 0; tok > 0 && round < 64; round++ {
		for _, v := range active {
			m.issue(v, order, win)
		}
		if len(m.devQ) == 0 {
			return
		}
		served := 0
		for ; served < len(m.devQ) && tok > 0; served++ {
			r := &m.devQ[served]
			x := min(tok, r.n)
			tok -= x
			r.done += x
			if r.heads > 0 {
				// its chunks' first requests land one by one
				r.v.landed = max(r.v.landed, r.first+min(int(r.done/m.reqSize()+1e-9), r.heads))
			}
			if r.n -= x; r.n >= dustOf(r.v) {
				m.wrote(now, r.v, x)
				break // tok is spent
			}
			m.wrote(now, r.v, x+r.n)
			r.v.landed = max(r.v.landed, r.first+r.heads)
			r.v.reqs--
			if r.v.reqs == 0 {
				// all its placed room written but a rounding's dust
				if left := r.v.alloc - r.v.written; left > 0 && left < dustOf(r.v) {
					m.wrote(now, r.v, left)
				}
				r.v.inDev = 0
			}
		}
		m.devQ = append(m.devQ[:0], m.devQ[served:]...)
	}
}

// issue queues writer v's next requests at the device, within its window
// win there and the bytes its writer has sent (its window of the mount's
// beyond what it wrote, at least win): first the first request of each
// chunk those bytes reach (the chunk placed now if it was not), then the
// other requests of chunks whose first was written.
func (m *bbModel) issue(v *bbVersion, order []bbos.Version, win float64) {
	dust := dustOf(v)
	room := win - v.inDev
	if room < dust {
		return
	}
	c, req := m.cfg.Chunk, m.reqSize()
	sent := min(v.written+max(m.part(), win), float64(v.Bytes)-v.spilled)
	// the chunks its sent bytes reach whose first request is not issued
	if n := min(int(math.Ceil(sent/c-1e-9))-v.heads, int((room+dust)/req)); n > 0 {
		last := float64(v.heads+n-1) * c
		for v.alloc <= last && v.alloc+v.spilled < float64(v.Bytes) {
			was := v.alloc + v.spilled
			if !m.place(v, order, last+1-v.alloc) || v.alloc+v.spilled <= was {
				break
			}
		}
		// those placed on the buffer (a spilled one goes to the PFS)
		if n = min(n, int(math.Ceil(v.alloc/c-1e-9))-v.heads); n > 0 {
			b := float64(n-1)*req + min(req, v.alloc-float64(v.heads+n-1)*c)
			m.devQ = append(m.devQ, devReq{v: v, n: b, first: v.heads, heads: n})
			v.heads += n
			v.inDev += b
			v.reqs++
			room -= b
		}
	}
	// the other requests of its landed chunks, as far as its writer sent
	if l := v.landed; l > 0 && room >= dust {
		lastAt := float64(l-1) * c
		body := float64(l-1)*(c-req) + max(min(c, v.alloc-lastAt, sent-lastAt)-req, 0)
		if b := min(body-v.body, room); b >= dust {
			m.devQ = append(m.devQ, devReq{v: v, n: b})
			v.body += b
			v.inDev += b
			v.reqs++
		}
	}
}

// reqBytes is the mount's write request (client/vfs): a chunk's first
// write is one.
const reqBytes = 1 << 20

// reqSize is a chunk's first write: a request, at most the chunk.
func (m *bbModel) reqSize() float64 { return min(reqBytes, m.cfg.Chunk) }

// dustOf is what is left of checkpoint v's bytes by rounding alone.
func dustOf(v *bbVersion) float64 { return max(float64(v.Bytes)*1e-12, 1e-6) }

// wrote accounts n bytes of checkpoint v written to the buffer at now.
func (m *bbModel) wrote(now time.Duration, v *bbVersion, n float64) {
	if n <= 0 {
		return
	}
	v.inDev -= n
	m.wTok -= n
	m.devTok -= n
	m.used += n
	m.promised -= n
	m.res.MaxUsed = max(m.res.MaxUsed, m.used)
	m.dwsf += n
	m.lastW = now
	v.written += n
}

// writers are the checkpoints that write to the buffer in the step at
// now: every one with room placed to write under Dedicated; otherwise the
// one whose application has the I/O scheduler's turn, each of the others
// asking for it (queued in the order they first ask).
func (m *bbModel) writers(now time.Duration) []*bbVersion {
	var ready []*bbVersion
	for _, v := range m.queue {
		if !v.bypassed && !(v.waits && v.alloc <= v.written) {
			ready = append(ready, v)
		}
	}
	if m.cfg.Policy == bbos.Dedicated {
		return ready
	}
	at := bbTime(now)
	var turn []*bbVersion
	for _, v := range ready {
		if m.sched.Ask(v.Job, at) {
			turn = append(turn, v)
		}
	}
	if len(turn) == 0 { // a later ask handed the turn to an earlier one
		for _, v := range ready {
			if v.Job == m.sched.Active() && m.sched.Ask(v.Job, at) {
				turn = append(turn, v)
			}
		}
	}
	return turn
}

// headBytes is how much of a checkpoint's writes reach the device at once
// when it starts: the forwarding daemon's bound of 8 mebibyte requests
// per job, class and server (fwd/backends.go), within the writer's window.
const headBytes = 8 << 20

// copyBlock is what each demotion stream reads at a time (data/mover.go).
const copyBlock = 1 << 20

// demoteCost is what a demoted byte costs the device in checkpoint bytes:
// equation 1's slope (1 for bench/bbos's emulated device, where writes
// and demotion reads share one bandwidth; 0.37 on the paper's testbed).
func (m *bbModel) demoteCost() float64 {
	r := m.cfg.Rates
	if r.DemoteMax <= r.DemoteMin {
		return 1
	}
	return max((r.WriteMax-r.WriteMin)/(r.DemoteMax-r.DemoteMin), 1e-3)
}

// demotionShare is how much of the device (in checkpoint bytes) demotion
// may take this step. Where writes (within their cap) and demotion
// (within its cap and the PFS) ask together no more than the device
// has, each gets what it asks; beyond, the device serves requests in the
// order they come (the servers' bucket is a queue of reservations). A
// checkpoint's first requests reach the device at once (its head: its
// window, at most the forwarding daemon's 8 per job, headBytes), ahead of
// the reads demotion issues after them: while the head is written,
// demotion has what the writer leaves, and the reads it asked for wait
// (a block per stream at most) to go first once the head is through.
// Otherwise each has the share its requests in flight give it — a block
// per demotion stream, the writers' windows in mebibyte requests — and
// what the other leaves of its share.
func (m *bbModel) demotionShare(pfs float64) float64 {
	k := m.demoteCost()
	var demotable float64
	for _, v := range m.versions {
		if m.known[v.ID] && v.resident && !v.onPFS {
			demotable += v.written - v.demoted
		}
	}
	dem := k * max(min(m.dTok, pfs, demotable), 0)
	var left float64
	for _, v := range m.queue {
		if !v.bypassed {
			left += float64(v.Bytes) - v.written - v.spilled
			if m.cfg.Policy != bbos.Dedicated {
				break
			}
		}
	}
	wr := max(min(m.wTok, left), 0)
	if wr+dem <= m.devTok {
		return dem
	}
	w := m.writeRequests()
	// the writer whose first requests are at the device ahead of
	// demotion's next reads (its head), and what it can write this step
	var head *bbVersion
	for _, q := range m.queue {
		if q.bypassed || q.written >= float64(q.Bytes) || q.waits && q.alloc <= q.written {
			continue
		}
		if q.written < min(m.part(), headBytes) {
			head = q
			wr = max(min(m.wTok, q.alloc-q.written), 0)
		}
		if head != nil || m.cfg.Policy != bbos.Dedicated {
			break
		}
	}
	share := m.devTok * bbos.DemoteStreams / (bbos.DemoteStreams + w)
	switch {
	case m.owed > 0 && m.owedBehind != head:
		// demotion's reads queued behind the last head go first
		if head != nil {
			share = 0
		}
		return min(dem, max(m.owed, share, m.devTok-wr))
	case head != nil:
		// behind the head: what it leaves, the rest of what demotion
		// asks queued (a block per stream at most)
		got := min(dem, max(m.devTok-wr, 0))
		m.owed = min(m.owed+dem-got, bbos.DemoteStreams*copyBlock*k)
		m.owedBehind = head
		return got
	}
	return min(dem, max(share, m.devTok-wr))
}

// inFlight is how many write requests checkpoint v has on their way: what
// it has left, up to its write-behind window, in requests of a mebibyte
// (the mount's).
func (m *bbModel) inFlight(v *bbVersion) float64 {
	return m.requests(float64(v.Bytes) - v.written - v.spillW)
}

// requests is how many requests a writer with bytes left to write has on
// their way: up to its write-behind window, in the mount's mebibytes.
func (m *bbModel) requests(bytes float64) float64 {
	return math.Ceil(min(max(bytes, 0), m.part()) / reqBytes)
}

// part is the write-behind window each writer has: WriteBehind, or with
// SharedWindow its equal part among the checkpoints being written (at
// least a request).
func (m *bbModel) part() float64 {
	if !m.cfg.SharedWindow || len(m.queue) == 0 {
		return m.cfg.WriteBehind
	}
	return max(m.cfg.WriteBehind/float64(len(m.queue)), 1<<20)
}

// writeRequests is how many checkpoint write requests are in flight: the
// bytes each writer has left, up to its write-behind window, in requests
// of a mebibyte (the mount's), over the writers the buffer serves now.
func (m *bbModel) writeRequests() float64 {
	var w float64
	for _, v := range m.queue {
		if v.bypassed || v.written >= float64(v.Bytes) {
			continue
		}
		w += m.inFlight(v)
		if m.cfg.Policy != bbos.Dedicated {
			break
		}
	}
	return w
}
