// Package beaconrpc is Beacon's contract over sluice's RPC and its client
// side: the monitoring service's operations on Beacon's records and
// profiles, their request and reply types (numbers 300-319), the Client
// that asks them, the Shipper loop every daemon and mount runs to send its
// records, and the names of operations in records. It is a leaf for the
// data path: it must not import the record store or the service
// (manager/monitor).
package beaconrpc

import (
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Operation numbers of Beacon's service.
const (
	OpPut          wire.Op = 300 + iota // payload: a compressed batch of records
	OpQuery                             // reply payload: the records, compressed
	OpJobs                              // the jobs known, most recent first
	OpHealth                            // the servers flagged fail-slow
	OpInterference                      // job pairs that slowed each other
	OpProfilePut                        // merge a profile into the stored one
	OpProfileGet                        // one application's profile
	OpProfiles                          // every profile
	OpProfileJob                        // build a job's profile now
	OpDecisionPut                       // keep a manager's decision about a job (since 2.3)
	OpDecisions                         // a job's decisions, oldest first (since 2.3)
)

// The operations, typed.
var (
	Put          = wire.Define[wire.Empty, wire.Empty](OpPut, "beacon-put", wire.Monitor)
	QueryOp      = wire.Define[Query, wire.Empty](OpQuery, "beacon-query", wire.Monitor)
	JobsOp       = wire.Define[wire.Empty, JobsRep](OpJobs, "beacon-jobs", wire.Monitor)
	HealthOp     = wire.Define[wire.Empty, HealthRep](OpHealth, "beacon-health", wire.Monitor)
	Interference = wire.Define[Query, InterferenceRep](OpInterference, "beacon-interference", wire.Monitor)
	ProfilePut   = wire.Define[beacon.Profile, wire.Empty](OpProfilePut, "profile-put", wire.Monitor)
	ProfileGet   = wire.Define[ProfileKey, beacon.Profile](OpProfileGet, "profile-get", wire.Monitor)
	ProfilesOp   = wire.Define[wire.Empty, ProfilesRep](OpProfiles, "profiles", wire.Monitor)
	ProfileJob   = wire.Define[JobReq, beacon.Profile](OpProfileJob, "profile-job", wire.Monitor)
	DecisionPut  = wire.Define[DecisionReq, wire.Empty](OpDecisionPut, "decision-put", wire.Monitor)
	DecisionsOp  = wire.Define[JobReq, DecisionsRep](OpDecisions, "decisions", wire.Monitor)
)

// Query is a Filter on the wire (times in unix ns): the records asked for
// (OpQuery), or the window and job of an interference question.
type Query struct {
	Job, Node, Server string
	Layer             beacon.Layer
	Ino               uint64
	From, To          int64
}

// Fields implements wire.Message.
func (q *Query) Fields(c *wire.Codec) {
	c.String(1, &q.Job)
	c.String(2, &q.Node)
	c.String(3, &q.Server)
	c.Uint8(4, (*uint8)(&q.Layer))
	c.Uint64(5, &q.Ino)
	c.Int64(6, &q.From)
	c.Int64(7, &q.To)
}

// Filter converts q.
func (q Query) Filter() beacon.Filter {
	f := beacon.Filter{Job: q.Job, Node: q.Node, Server: q.Server, Layer: q.Layer, Ino: q.Ino}
	if q.From != 0 {
		f.From = time.Unix(0, q.From)
	}
	if q.To != 0 {
		f.To = time.Unix(0, q.To)
	}
	return f
}

// JobsRep lists the jobs Beacon knows.
type JobsRep struct{ Jobs []beacon.JobInfo }

// Fields implements wire.Message.
func (r *JobsRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Jobs) }

// HealthRep lists the servers flagged fail-slow.
type HealthRep struct{ Slow []beacon.SlowServer }

// Fields implements wire.Message.
func (r *HealthRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Slow) }

// InterferenceRep lists job pairs that slowed each other.
type InterferenceRep struct{ Pairs []beacon.Interference }

// Fields implements wire.Message.
func (r *InterferenceRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Pairs) }

// ProfileKey names an application's profile.
type ProfileKey struct{ Key string }

// Fields implements wire.Message.
func (r *ProfileKey) Fields(c *wire.Codec) { c.String(1, &r.Key) }

// ProfilesRep lists every profile.
type ProfilesRep struct{ Profiles []beacon.Profile }

// Fields implements wire.Message.
func (r *ProfilesRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Profiles) }

// JobReq names a job.
type JobReq struct{ Job string }

// Fields implements wire.Message.
func (r *JobReq) Fields(c *wire.Codec) { c.String(1, &r.Job) }

// DecisionReq is one decision a manager made about job Job at At (unix
// ns): V, the manager's own encoding.
type DecisionReq struct {
	Job string
	At  int64
	V   []byte
}

// Fields implements wire.Message.
func (r *DecisionReq) Fields(c *wire.Codec) {
	c.String(1, &r.Job)
	c.Int64(2, &r.At)
	c.Bytes(3, &r.V)
}

// DecisionsRep is a job's decisions, oldest first.
type DecisionsRep struct{ Decisions []DecisionReq }

// Fields implements wire.Message.
func (r *DecisionsRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Decisions) }
