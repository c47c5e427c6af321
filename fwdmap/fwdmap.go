// Package fwdmap is the forwarding-map contract: what mounts and commands
// ask the forwarding-map manager (manager/forwarding, in the metadata
// daemon) in OpJob requests, and what it answers: which forwarding nodes
// serve a job on a compute node, and why. A leaf: it must not import the
// manager, the policy or any store, so the mount links none of them.
package fwdmap

// Calls, in Msg.Name of an OpJob request.
const (
	CallStart = "start" // payload: JobSpec; reply: Placement
	CallEnd   = "end"   // Msg.Job
	CallMap   = "map"   // Msg.Job, Msg.Node; reply: Placement
	CallList  = "list"  // reply: []Placement
	// CallHistory: Msg.Job; reply: []Decision, oldest first.
	CallHistory = "history"
)

// Decision is one placement decision about a job, kept after the job ends
// so that `sluice job ID` can say where its I/O went and why.
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
}
