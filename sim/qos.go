package sim

import (
	"fmt"
	"slices"

	"github.com/sluice-hpc/sluice/policy/qos"
	"github.com/sluice-hpc/sluice/sim/flow"
)

// QoS caps as flows see them (Config.QoS). A daemon's gate (policy/qos
// behind internal/qosgate) holds the requests a rule matches behind that
// rule's token buckets, one set per server, whichever jobs they come from.
// The flow-level equivalent is a resource per rule and server with the
// rule's rate as its capacity, crossed by every flow of matched requests
// through that server beside the server's own resources: max-min sharing
// then gives the matched flows at most the rate together, and what they
// leave of the server to the others.
//
// Shares: a daemon's scheduler fair-queues between flows of requests —
// one per rule matched, one per unmatched job — by the rules' shares (an
// unmatched job's is 1). The servers' resources are Grouped (sim/flow):
// a job's flows through a server (one per storage target, say) are one
// group there, or the matched rule's flows are, with the rule's share as
// the group's weight (group). Forwarding daemons schedule so with or
// without rules; data servers' gates let requests through unscheduled
// while there are no rules, so the storage targets are grouped only when
// Config.QoS has rules.

// capKind is what a cap counts.
type capKind uint8

const (
	qosBytes capKind = iota // a rule's Rate, on flows of bytes
	qosOps                  // its Ops, on flows of operations
)

// qosCapKey names one cap resource: rule rule's kind cap at server index
// of kind server ("fwd": a forwarding node, "ost": a storage target).
type qosCapKey struct {
	rule   int
	kind   capKind
	server string
	index  int
}

// dataClass is the operation class of a phase's data requests.
func dataClass(ph phase) qos.Class {
	if ph.read {
		return qos.Read
	}
	return qos.Write
}

// rule is the index of the QoS rule j's requests of class c match first
// (qos.Classify), or -1; a match is recorded in j's result.
func (s *Sim) rule(j *job, c qos.Class) int {
	if len(s.cfg.QoS) == 0 {
		return -1
	}
	i := qos.Classify(s.cfg.QoS, qos.Req{Job: j.spec.ID, App: j.spec.App, Class: c})
	if i >= 0 {
		if name := s.cfg.QoS[i].Name; !slices.Contains(j.res.QoS, name) {
			j.res.QoS = append(j.res.QoS, name)
		}
	}
	return i
}

// capped returns path with the cap of rule (an index of Config.QoS, or
// -1: none) of the given kind at the server appended, if the rule has
// one; res maps the model's resources to the ones in use (alone's
// copies).
func (s *Sim) capped(path []flow.Use, res func(*flow.Resource) *flow.Resource, rule int, kind capKind, server string, index int) []flow.Use {
	if rule < 0 {
		return path
	}
	r := s.cfg.QoS[rule]
	limit := r.Rate
	if kind == qosOps {
		limit = r.Ops
	}
	if limit <= 0 {
		return path
	}
	k := qosCapKey{rule: rule, kind: kind, server: server, index: index}
	c := s.qosCaps[k]
	if c == nil {
		unit := "B/s"
		if kind == qosOps {
			unit = "ops/s"
		}
		c = s.fm.NewResource(fmt.Sprintf("qos:%s@%s%d:%s", r.Name, server, index, unit), limit)
		s.qosCaps[k] = c
	}
	return append(path, flow.Use{R: res(c)})
}

// group is the scheduler's flow (policy/qos) the requests of j matching
// rule (-1: none) belong to at a server, as a group of flows there, and
// its weight.
func (s *Sim) group(j *job, rule int) (string, float64) {
	if rule < 0 {
		return "job:" + j.spec.ID, 1
	}
	return "rule:" + s.cfg.QoS[rule].Name, s.cfg.QoS[rule].Weight()
}
