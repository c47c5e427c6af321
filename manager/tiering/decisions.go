package tiering

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	pol "github.com/sluice-hpc/sluice/policy/tiering"
)

// The manager's decisions go to Beacon's decision log (the store in the
// metadata daemon), as DFRA's do, so `sluice job` shows what was decided
// and why after the fact: moves and drains under the migration job
// (wire.MigrationJob, whose traffic Beacon records under the same name),
// a prefetch under the job it is for.

// DecisionLog keeps decisions by job (Beacon's store).
type DecisionLog interface {
	PutDecision(job string, at time.Time, v []byte) error
}

// maxListed bounds the moves one decision lists.
const maxListed = 16

func (m *Manager) logDecision(job, event string, reasons []string) {
	if m.cfg.Decisions == nil {
		return
	}
	now := m.cfg.Now()
	v, _ := json.Marshal(fwdmap.Decision{At: now.UnixNano(), Kind: "tiering", Event: event, Reasons: reasons})
	if err := m.cfg.Decisions.PutDecision(job, now, v); err != nil {
		m.cfg.Log.Warn("tiering decision not kept", "job", job, "err", err)
	}
}

// logPlan records a policy decision that moves files off server si.
func (m *Manager) logPlan(si wire.ServerInfo, d pol.Decision) {
	free := si.Capacity - min(si.Used, si.Capacity)
	reasons := []string{fmt.Sprintf("server %d (%s): %s free of %s; thresholds Cs-w %s, Cf-m %s, Cn-m %s; %s; %d at once",
		si.ID, si.Tier, size.Format(free), size.Format(si.Capacity), size.Format(d.Thresholds.StallWrite), size.Format(d.Thresholds.ForcedOut),
		size.Format(d.Thresholds.NormalOut), d.Reason, d.Concurrency)}
	for i, mv := range d.Moves {
		if i == maxListed {
			reasons = append(reasons, fmt.Sprintf("and %d more files", len(d.Moves)-i))
			break
		}
		kind := "closed"
		if mv.Forced {
			kind = "open"
		}
		reasons = append(reasons, fmt.Sprintf("move inode %d (%s, %s, coolness %.3g) to %s server %d",
			mv.Ino, size.Format(mv.Bytes), kind, mv.Coolness, mv.Tier, mv.To))
	}
	m.logDecision(wire.MigrationJob, d.Mode.String(), reasons)
}
