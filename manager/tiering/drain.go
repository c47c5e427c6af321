package tiering

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/tier"
)

// Drain to the PFS: the pfs tier is every file's final home. Each tick the
// manager moves down to it the files whose directory policy (`sluice tier
// set DIR --drain`, api.TierPolicy) says it is time, or, without one, the
// manager's default (Config.DefaultDrain): "now", "on-close" (closed),
// "cool" (closed and not reopened for DrainAge) or "never". A file pinned
// (`--pin`) never drains. Draining is a chunk migration to the pfs tier,
// whose commit links the file's plain file at its namespace path with its
// owner, mode and times; later reads go to it through the mount.
//
// Drained files are moved, not copied: the fast copy is dropped at once
// (a --keep-cache that keeps it as a clean cache is not built).

// drainStreams bounds the files draining at once.
const drainStreams = 4

// drainScan is how often files are looked at for the default "cool"
// drain when no directory has a policy.
const drainScan = 10 * time.Second

// drainTick starts the drains that are due. files is the scan of chunk
// locations if Tick made one (nil: made here when needed).
func (m *Manager) drainTick(ctx context.Context, now time.Time, servers []wire.ServerInfo, files map[uint64][]api.FileUse) {
	pfsUp := false
	for _, si := range servers {
		pfsUp = pfsUp || si.Role == "data" && si.Tier == "pfs" && si.Alive
	}
	if !pfsUp {
		return
	}
	if !m.cfg.Dirs.Any() {
		// only the default applies: "cool" is not urgent, so the scan of
		// every chunk location runs at most every drainScan
		if m.cfg.DefaultDrain == "never" || m.cfg.DefaultDrain == "cool" && now.Sub(m.lastDrainScan) < drainScan {
			return
		}
	}
	m.mu.Lock()
	room := drainStreams - m.draining
	m.mu.Unlock()
	if room <= 0 {
		return
	}
	m.lastDrainScan = now
	if files == nil {
		var err error
		if files, err = m.cfg.NS.ServerFiles(); err != nil {
			m.cfg.Log.Warn("tiering: listing files per server failed", "err", err)
			return
		}
	}
	seen := map[uint64]bool{}
	for _, si := range servers {
		if si.Role != "data" || si.Tier == "pfs" || room <= 0 {
			continue
		}
		for _, f := range files[si.ID] {
			if seen[f.Ino] || room <= 0 {
				continue
			}
			seen[f.Ino] = true
			if m.managed(f.Ino) {
				continue
			}
			due, keep := m.drainDue(now, f.Ino)
			if !due || keep && m.drained(f.Ino) {
				continue
			}
			m.mu.Lock()
			busy := m.migrating[f.Ino] || m.pinned[f.Ino] > 0
			if !busy {
				m.migrating[f.Ino] = true
				m.draining++
			}
			m.mu.Unlock()
			if busy {
				continue
			}
			room--
			m.cfg.Log.Info("tiering: draining a file to the PFS", "ino", f.Ino)
			m.logDecision(wire.MigrationJob, "drain", []string{fmt.Sprintf("drain inode %d to the PFS (its directory's drain policy, or --drain-default %s)",
				f.Ino, m.cfg.DefaultDrain)})
			go func(ino uint64, keep bool) {
				n, _, err := m.moveFileAs(ctx, ino, 0, "pfs", 0, keep)
				m.mu.Lock()
				delete(m.migrating, ino)
				m.draining--
				if err == nil && n > 0 {
					m.totals.Drained++
				}
				m.mu.Unlock()
				if err != nil {
					m.cfg.Log.Info("tiering: drain not finished; tried again later", "ino", ino, "err", err)
				}
			}(f.Ino, keep)
		}
	}
}

// drainDue says whether file ino's policy wants it on the PFS now.
func (m *Manager) drainDue(now time.Time, ino uint64) (due, keep bool) {
	p, _, err := m.cfg.Dirs.Of(ino)
	if err != nil || p.Pin != "" {
		return false, false
	}
	mode := p.Drain
	if mode == "" {
		mode = m.cfg.DefaultDrain
	}
	switch mode {
	case "now":
		return true, p.KeepCache
	case "on-close", "cool":
		a, err := m.cfg.NS.Activity(ino)
		if err != nil || a.Open > 0 {
			return false, false
		}
		if mode == "on-close" {
			// closed at least once since the metadata service started
			// (files it has no history of count as closed long ago)
			return true, p.KeepCache
		}
		if a.LastClose == 0 {
			return true, p.KeepCache
		}
		return now.Sub(time.Unix(0, a.LastClose)) >= m.cfg.DrainAge, p.KeepCache
	}
	return false, false
}

// drained says whether every chunk of ino is on the pfs tier or has a
// clean copy there (--keep-cache).
func (m *Manager) drained(ino uint64) bool {
	locs, err := m.cfg.NS.Layout(ino)
	if err != nil {
		return false
	}
	for _, l := range locs {
		if l.Tier != "pfs" && len(l.Home) == 0 {
			return false
		}
	}
	return true
}

// pinnedOn says whether file ino's directory pins it to server tier
// serverTier or a faster one (it must not move down from there).
func (m *Manager) pinnedOn(ino uint64, serverTier string) bool {
	p, _, err := m.cfg.Dirs.Of(ino)
	if err != nil || p.Pin == "" {
		return false
	}
	pin, _ := tier.Rank(p.Pin)
	here, _ := tier.Rank(serverTier)
	return pin <= here
}
