package bb

import (
	"math"

	"github.com/sluice-hpc/sluice/policy/bbos"
)

// The buffer's room: where a checkpoint version is placed, the room a
// stalled writer may take, eviction in the policy's cold order.

// sequences are the granted applications' checkpoint sequences.
func (m *bbModel) sequences() []bbos.Sequence {
	var out []bbos.Sequence
	for i, a := range m.apps {
		if m.grant[i] {
			out = append(out, bbos.Sequence{Job: a.Name, MTBF: a.MTBF.Seconds(), Bytes: uint64(a.Size)})
		}
	}
	return out
}

// residentLocked is what the buffer holds, as policy Versions (a file
// being written is resident from its first byte).
func (m *bbModel) residentLocked() []bbos.Version {
	var out []bbos.Version
	for _, v := range m.versions {
		if v.resident || v.written > 0 && !v.bypassed {
			out = append(out, v.Version)
		}
	}
	return out
}

// newest is application app's newest finished checkpoint.
func (m *bbModel) newest(app int) *bbVersion {
	var best *bbVersion
	for _, v := range m.versions {
		if v.app == app && v.complete && (best == nil || v.Seq > best.Seq) {
			best = v
		}
	}
	return best
}

// stallRoom is the free space the deleters keep while writers wait for
// room: a checkpoint for each of the queued ones that have not begun (the
// daemons count placement's stalled writers) and one more, at most half
// the buffer, above the reserve.
func (m *bbModel) stallRoom() float64 {
	waiting := 0
	for _, v := range m.queue {
		if !v.bypassed && v.written == 0 {
			waiting++
		}
	}
	return min((m.room-m.cfg.Reserve)*float64(1+waiting), m.cfg.S/2) + m.cfg.Reserve
}

// place gives checkpoint v room for want more bytes (at least its next
// chunk), in whole chunks: on the buffer as far as there is room
// (evicting demoted copies for it at once, as the deleters do for writers
// waiting at placement), or, with the buffer full and nothing on it the
// manager could free, on the PFS (placement's spill). False: it waits for
// room.
func (m *bbModel) place(v *bbVersion, order []bbos.Version, want float64) bool {
	rem := float64(v.Bytes) - v.alloc - v.spilled
	one := min(m.cfg.Chunk, rem)
	c := min(math.Ceil(max(want, 1)/m.cfg.Chunk)*m.cfg.Chunk, rem)
	if free := m.cfg.S - m.used - m.promised - m.cfg.Reserve; c > free {
		m.evictFrom(order, c-free)
	}
	if free := m.cfg.S - m.used - m.promised - m.cfg.Reserve; free >= one {
		g := min(c, max(math.Floor(free/m.cfg.Chunk)*m.cfg.Chunk, one))
		v.alloc += g
		m.promised += g
		v.resident, v.waits = true, false
		return true
	}
	if m.freeable() {
		v.waits = true
		return false
	}
	v.waits = false
	v.spilled += c
	m.res.Spilled += c
	return true
}

// placeWindow gives checkpoint v room for the requests its writer has on
// their way, a window of part bytes beyond what it wrote; false: it waits
// for room.
func (m *bbModel) placeWindow(v *bbVersion, order []bbos.Version, part float64) bool {
	for {
		need := v.windowNeed(part)
		if need <= 0 {
			return true
		}
		if !m.place(v, order, need) {
			return false
		}
	}
}

// windowNeed is the room checkpoint v's writer needs beyond what its
// chunks were given for the requests its window of part bytes has on
// their way (0 or less: none).
func (v *bbVersion) windowNeed(part float64) float64 {
	return min(v.written+v.spillW+part, float64(v.Bytes)) - v.alloc - v.spilled
}

// freeable says whether the buffer holds a checkpoint the manager can
// free room from: finished and seen by it, or being written by a writer
// that does not wait for room (it finishes, then demotes); on the buffer
// (the daemons' stall reserve is there only then: manager/bbos canFree).
// Asked once a step.
func (m *bbModel) freeable() bool {
	if m.canFree == 0 {
		m.canFree = 1
		for _, v := range m.versions {
			if v.resident && (v.complete && m.known[v.ID] || !v.complete && !v.waits) {
				m.canFree = 2
				break
			}
		}
	}
	return m.canFree == 2
}

// evict drops demoted copies the manager knows, coldest first, until need
// bytes are freed.
func (m *bbModel) evict(need float64) { m.evictFrom(m.order(), need) }

// evictFrom is evict with the cold order at hand.
func (m *bbModel) evictFrom(order []bbos.Version, need float64) {
	for _, o := range order {
		if need <= 0 {
			return
		}
		v := m.byID(o.ID)
		if !v.resident || !v.onPFS || !m.known[v.ID] {
			continue
		}
		v.resident = false
		m.used -= v.written
		need -= v.written
		m.res.Evicted += v.written
	}
}

// order is everything on the buffer in the policy's cold order.
func (m *bbModel) order() []bbos.Version {
	return bbos.Order(m.cfg.Policy, m.residentLocked(), !m.cfg.NoVersions)
}

func (m *bbModel) byID(id uint64) *bbVersion { return m.versions[id-1] }
