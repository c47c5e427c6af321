// Package api is the contract of sluice's administration and monitoring
// services as commands and dashboards call them: the operations, their
// request and reply types (numbers 200-299 for administration, 330-349
// for monitoring; Beacon's are in beacon/beaconrpc, the forwarding map's
// in fwdmap) and the types they carry. Daemons serve them; commands call
// them with rpc.Do. It must not import a daemon, a manager or a store.
package api

import (
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Operation numbers of the monitoring operations here.
const (
	OpJobStats wire.Op = 330 + iota // a forwarding daemon's per-job counters
)

// The operations, typed.
var (
	JobStats = wire.Define[wire.Empty, JobStatsRep](OpJobStats, "job-stats", wire.Monitor)
)

// JobCounters is what a forwarding daemon served one job (requests with
// no job id count under "-"): the first, always-on layer of end-to-end
// job identity (full per-operation monitoring is Beacon's).
type JobCounters struct {
	Job                   string
	Ops, MetaOps          uint64
	ReadBytes, WriteBytes uint64
	Ranks                 []int32
	Nodes                 []string
}

// Fields implements wire.Message.
func (j *JobCounters) Fields(c *wire.Codec) {
	c.String(1, &j.Job)
	c.Uint64(2, &j.Ops)
	c.Uint64(3, &j.MetaOps)
	c.Uint64(4, &j.ReadBytes)
	c.Uint64(5, &j.WriteBytes)
	int32s(c, 6, &j.Ranks)
	c.Strings(7, &j.Nodes)
}

// JobStatsRep is a forwarding daemon's counters, one per job.
type JobStatsRep struct{ Jobs []JobCounters }

// Fields implements wire.Message.
func (r *JobStatsRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Jobs) }

// int32s is a list of small signed integers (ranks; -1 for none), sent
// as a list of zigzag values.
func int32s(c *wire.Codec, n uint32, v *[]int32) {
	var u []uint64
	if c.Encoding() {
		for _, x := range *v {
			u = append(u, uint64(uint32(x)<<1^uint32(x>>31)))
		}
	}
	c.Uint64s(n, &u)
	if !c.Encoding() && u != nil {
		*v = make([]int32, len(u))
		for i, x := range u {
			(*v)[i] = int32(uint32(x>>1)) ^ -int32(x&1)
		}
	}
}
