package api

import (
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// QoSAddReq adds Rule to the cluster's QoS rules (docs/qos.md), in front
// of rule Before if set; a rule of the same name is replaced in place.
type QoSAddReq struct {
	Rule   qos.Rule
	Before string
}

// Fields implements wire.Message.
func (r *QoSAddReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Rule)
	c.String(2, &r.Before)
}

// RuleRef names a QoS rule.
type RuleRef struct{ Name string }

// Fields implements wire.Message.
func (r *RuleRef) Fields(c *wire.Codec) { c.String(1, &r.Name) }

// QoSWatchReq waits, at most for the service's hold, until the rules in
// force are another version than Have, and answers them.
type QoSWatchReq struct{ Have uint64 }

// Fields implements wire.Message.
func (r *QoSWatchReq) Fields(c *wire.Codec) { c.Uint64(1, &r.Have) }

// QoSStatsRep is a daemon's QoS gates and their flows.
type QoSStatsRep struct{ Gates []qos.GateStats }

// Fields implements wire.Message.
func (r *QoSStatsRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Gates) }
