// Package fwdmap is the forwarding-map contract: the operations mounts and
// commands ask the forwarding-map manager (manager/forwarding, in the
// metadata daemon), numbered 320-329, and what it answers: which
// forwarding nodes serve a job on a compute node, and why. A leaf: it must
// not import the manager, the policy or any store, so the mount links none
// of them.
package fwdmap

import "github.com/sluice-hpc/sluice/internal/wire"

// Operation numbers of the forwarding map.
const (
	OpStart   wire.Op = 320 + iota // register a job: its placement
	OpEnd                          // a job ended
	OpMap                          // a job's placement, from a compute node
	OpList                         // every placement
	OpHistory                      // a job's decisions, oldest first
)

// The operations, typed.
var (
	Start   = wire.Define[JobSpec, Placement](OpStart, "job-start", wire.Monitor)
	End     = wire.Define[JobRef, wire.Empty](OpEnd, "job-end", wire.Monitor)
	Map     = wire.Define[MapReq, Placement](OpMap, "job-map", wire.Monitor)
	List    = wire.Define[wire.Empty, ListRep](OpList, "job-list", wire.Monitor)
	History = wire.Define[JobRef, HistoryRep](OpHistory, "job-history", wire.Monitor)
)

// JobRef names a job.
type JobRef struct{ Job string }

// Fields implements wire.Message.
func (r *JobRef) Fields(c *wire.Codec) { c.String(1, &r.Job) }

// MapReq asks for the placement of job Job as compute node Node sees it
// (a job not registered: the node's default).
type MapReq struct{ Job, Node string }

// Fields implements wire.Message.
func (r *MapReq) Fields(c *wire.Codec) {
	c.String(1, &r.Job)
	c.String(2, &r.Node)
}

// ListRep is every placement.
type ListRep struct{ Placements []Placement }

// Fields implements wire.Message.
func (r *ListRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Placements) }

// HistoryRep is a job's decisions, oldest first.
type HistoryRep struct{ Decisions []Decision }

// Fields implements wire.Message.
func (r *HistoryRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Decisions) }

// Decision is one placement decision about a job, kept after the job ends
// so that `sluice job show ID` can say where its I/O went and why.
type Decision struct {
	At int64 // unix ns
	// Kind is who decided: "" the forwarding-node manager (DFRA), "tiering"
	// the tier-migration manager (manager/tiering)
	Kind      string `json:",omitempty"`
	Event     string // "start", "remap" or "end"; tiering: the server's mode, "prefetch", "drain", "copy-lost", "copied"
	Fwds      []string
	Policy    string
	Dedicated bool
	Reasons   []string
}

// JobSpec registers a job.
type JobSpec struct {
	ID    string
	App   string // application tag; with User, the profile key
	User  uint32
	Nodes []string
}

// Target is one forwarding node of a placement.
type Target struct {
	ID   string // "fwd-<registry id>"
	Addr string
}

// Placement is where a job's I/O goes, and why.
type Placement struct {
	Job       string
	Fwds      []Target
	Policy    string // "ffm" or "dfra"
	Dedicated bool
	Reasons   []string
	Version   uint64 // bumped at every change of this job's placement
	Since     int64  // unix ns
	// Fallbacks (protocol 2.2; a registered job's since 2.3) are the
	// other live forwarding nodes in the order to try them when Fwds'
	// first node cannot be reached: its stand-ins (dfra.StandIns).
	Fallbacks []Target
}

// Fields implements wire.Message.
func (d *Decision) Fields(c *wire.Codec) {
	c.Int64(1, &d.At)
	c.String(2, &d.Kind)
	c.String(3, &d.Event)
	c.Strings(4, &d.Fwds)
	c.String(5, &d.Policy)
	c.Bool(6, &d.Dedicated)
	c.Strings(7, &d.Reasons)
}

// Fields implements wire.Message.
func (j *JobSpec) Fields(c *wire.Codec) {
	c.String(1, &j.ID)
	c.String(2, &j.App)
	c.Uint32(3, &j.User)
	c.Strings(4, &j.Nodes)
}

// Fields implements wire.Message.
func (t *Target) Fields(c *wire.Codec) {
	c.String(1, &t.ID)
	c.String(2, &t.Addr)
}

// Fields implements wire.Message.
func (p *Placement) Fields(c *wire.Codec) {
	c.String(1, &p.Job)
	wire.List(c, 2, &p.Fwds)
	c.String(3, &p.Policy)
	c.Bool(4, &p.Dedicated)
	c.Strings(5, &p.Reasons)
	c.Uint64(6, &p.Version)
	c.Int64(7, &p.Since)
	wire.List(c, 8, &p.Fallbacks)
}
