// Package beaconrpc is Beacon's contract over sluice's RPC and its client
// side: the calls of an OpBeacon request, the Client that asks them, the
// Shipper loop every daemon and mount runs to send its records, and the
// names of operations in records. It is a leaf for the data path: it must
// not import the record store or the service (manager/monitor).
package beaconrpc

import (
	"time"

	"github.com/sluice-hpc/sluice/beacon"
)

// Calls, carried in Msg.Name of an OpBeacon request.
const (
	CallPut          = "put"          // payload: a compressed batch
	CallQuery        = "query"        // payload: Query (JSON); reply: compressed records
	CallJobs         = "jobs"         // reply: []beacon.JobInfo
	CallHealth       = "health"       // reply: []beacon.SlowServer
	CallInterference = "interference" // payload: Query (From, To); reply: []beacon.Interference
	CallProfilePut   = "profile-put"  // payload: beacon.Profile, merged into the stored one
	CallProfileGet   = "profile-get"  // Msg.Path: key; reply: beacon.Profile
	CallProfiles     = "profiles"     // reply: []beacon.Profile
	CallProfileJob   = "profile-job"  // Msg.Job: build the job's profile now; reply: beacon.Profile
)

// Query is a Filter on the wire (times in unix ns).
type Query struct {
	Job, Node, Server string
	Layer             beacon.Layer
	Ino               uint64
	From, To          int64
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
