package bbos

import (
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/bbos"
)

// Placement: the hint that bypasses the buffer for cold checkpoints, the
// files the manager manages, the room it can free for stalled writers.

// Hint is placement's hint for a new chunk of file ino (parent, name: its
// entry): "pfs" for a checkpoint the policy classifies cold on arrival
// (bypass), decided once per file at its first chunk, in the period the
// chunk comes in (it rolls the period if the last tick did not). A checkpoint of a
// granted sequence is the manager's from that chunk on (Managed). It is
// called with the metadata service's registry lock held and calls nothing
// back.
func (m *Manager) Hint(ino, parent uint64, name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.hints[ino]; ok {
		return h.tier
	}
	for _, seq := range m.dirs[parent] {
		if ok, _ := path.Match(seq.match, name); !ok {
			continue
		}
		// a checkpoint from its first chunk on, under every policy: the
		// tiering manager leaves it to this one (Managed) before a scan
		// has seen it
		m.hints[ino] = hint{scan: m.scans}
		p := m.pools[seq.grant.Pool]
		if p == nil || !m.cfg.Bypass || m.cfg.Policy != pol.BBOS {
			return ""
		}
		// a checkpoint that begins past the period's end begins the next
		// one, whether or not a tick has rolled it yet (a tick comes up
		// to --bb-every late, or one more late when it runs a hair
		// earlier into its interval than the one that began the period)
		now := m.cfg.Now()
		m.rollLocked(p, now)
		// the pool's sequences: which newest versions the buffer keeps
		var seqs []pol.Sequence
		for _, ds := range m.dirs {
			for _, q := range ds {
				if q.grant.Pool == p.Name {
					seqs = append(seqs, pol.Sequence{Job: q.glob, MTBF: q.mtbf, Bytes: q.grant.Size})
				}
			}
		}
		// what the period has written, or will have once the
		// checkpoints placed on the buffer and waiting for their turn are
		// written
		in := pol.Sequence{Job: seq.glob, MTBF: seq.mtbf, Bytes: seq.grant.Size}
		var queued float64
		for _, b := range p.bypassing {
			queued += b
		}
		load := pol.PeriodLoad(p.loads, p.declared, p.dwsf, p.bypassed)
		at := pol.Period{DWPP: load, DWSF: max(p.dwsf, p.placed), Load: p.declared, S: p.S, T: p.period.Seconds(),
			Left: p.start.Add(p.period).Sub(now).Seconds(), PFS: m.cfg.Rates.DemoteMax, Queued: queued, Bypassing: len(p.bypassing)}
		d := ""
		if pol.Bypass(seqs, in, at) {
			d = "pfs"
			m.totals.BypassedFiles++
			m.bypassed[ino] = 0
			if p.bypassing == nil {
				p.bypassing = map[uint64]float64{}
			}
			p.bypassing[ino] = float64(seq.grant.Size)
			go m.logDecision(seq.grant.Job, "bypass", fmt.Sprintf("%s (inode %d) straight to the PFS: the period writes %s (%s so far) through a %s buffer and the buffer keeps the newest versions of %d applications likelier to restart (MTBF %s)",
				name, ino, size.Format(uint64(load)), size.Format(uint64(p.dwsf+p.bypassed)), size.Format(uint64(p.S)), hotter(seqs, in, p.S), time.Duration(seq.mtbf*float64(time.Second))))
			p.bypassed += float64(seq.grant.Size)
		}
		if d == "" {
			p.placed += float64(seq.grant.Size)
		}
		m.hints[ino] = hint{tier: d, scan: m.scans}
		return d
	}
	return ""
}

// hotter counts the hot sequences (pol.Hot) likelier to restart than in.
func hotter(seqs []pol.Sequence, in pol.Sequence, s float64) int {
	hot := pol.Hot(seqs, s)
	n := 0
	for _, q := range seqs {
		if hot[q.Job] && q.MTBF <= in.MTBF && q.Job != in.Job {
			n++
		}
	}
	return n
}

// hint is placement's hint for a checkpoint: its tier ("pfs": bypassed,
// "": none) and the scans begun when it was given (Manager.scans).
type hint struct {
	tier string
	scan uint64
}

// Managed says whether file ino is a checkpoint the manager moves (the
// tiering manager leaves it alone).
func (m *Manager) Managed(ino uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.versions[ino]
	_, hinted := m.hints[ino]
	return ok || hinted
}

// StallReserve is the free space placement keeps on data server si for
// writers to wait at: Reserve on a server of a pool where room will come
// (checkpoints the manager can demote or evict, or ones being written by
// writers that do not wait for room), so that a full buffer makes
// checkpoints wait for room (the paper's stop) instead of spilling; 0
// elsewhere.
func (m *Manager) StallReserve(si wire.ServerInfo) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[si.Tier]; p != nil && p.canFree && slices.Contains(p.servers, si.ID) {
		return m.cfg.Reserve
	}
	return 0
}
