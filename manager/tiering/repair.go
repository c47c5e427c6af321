package tiering

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Re-replication (meta/replica.go has the mechanism). Every tick the
// manager looks for chunks of tiers that keep two copies and have one (a
// copy's server was lost, the chunk was promoted, or no other failure
// domain had room when it was written) and copies each to a new group,
// maxRepairs at a time. A copy on a server that is down is given up
// first. Repairs run in manual tiering mode too: they are about not
// losing data, not about where it should be.

// maxRepairs bounds the chunk copies made at once.
const maxRepairs = 2

// repairBackoff is how long a chunk whose copy failed waits before the
// next try (no room in another domain, a server failing).
const repairBackoff = 10 * time.Second

type chunkRef struct{ ino, idx uint64 }

// repairTick gives up the copies on servers that are down and starts
// copies of chunks that have one.
func (m *Manager) repairTick(ctx context.Context) {
	short, err := m.cfg.NS.ShortChunks(256)
	if err != nil {
		m.cfg.Log.Warn("listing chunks short of copies failed", "err", err)
		return
	}
	now := m.cfg.Now()
	for _, sc := range short {
		k := chunkRef{sc.Ino, sc.Loc.Idx}
		if sc.Lost != 0 {
			if _, err := m.cfg.NS.Degrade(ctx, sc.Ino, sc.Loc.Idx, sc.Loc.Gen, sc.Lost); err != nil {
				m.cfg.Log.Warn("giving up a lost chunk copy failed", "ino", sc.Ino, "chunk", sc.Loc.Idx, "server", sc.Lost, "err", err)
			} else {
				m.logDecision(wire.MigrationJob, "copy-lost", []string{fmt.Sprintf("chunk %d of inode %d: data server %d is down; its copy is given up",
					sc.Loc.Idx, sc.Ino, sc.Lost)})
			}
			continue // copied again at a later tick
		}
		m.mu.Lock()
		if m.repairing[k] || now.Before(m.repairAfter[k]) || len(m.repairing) >= maxRepairs {
			m.mu.Unlock()
			continue
		}
		m.repairing[k] = true
		m.mu.Unlock()
		go m.repair(ctx, k)
	}
}

func (m *Manager) repair(ctx context.Context, k chunkRef) {
	bytes, err := m.cfg.NS.Replicate(ctx, k.ino, k.idx)
	m.mu.Lock()
	delete(m.repairing, k)
	if err != nil {
		m.repairAfter[k] = m.cfg.Now().Add(repairBackoff)
		m.totals.ReplicaFailed++
	} else {
		delete(m.repairAfter, k)
		m.totals.Replicated++
		m.totals.ReplicaBytes += bytes
	}
	m.mu.Unlock()
	switch {
	case err == nil:
		m.cfg.Log.Info("chunk replicated", "ino", k.ino, "chunk", k.idx, "bytes", bytes)
		m.logDecision(wire.MigrationJob, "copied", []string{fmt.Sprintf("chunk %d of inode %d: second copy made again (%s)",
			k.idx, k.ino, size.Format(bytes))})
	case rpc.Errno(err) == syscall.ENOSPC || errors.Is(err, context.Canceled):
		m.cfg.Log.Debug("chunk not replicated", "ino", k.ino, "chunk", k.idx, "err", err)
	default:
		m.cfg.Log.Warn("chunk not replicated; will try again", "ino", k.ino, "chunk", k.idx, "err", err)
	}
}
