package beacon

import (
	"fmt"
	"strings"
)

// Profile summarises an application's I/O so a policy can judge its next
// run before it starts (the inputs DFRA needs). Profiles are keyed by
// application: an explicit SLUICE_APP tag, or the executable name and user.
type Profile struct {
	Key        string
	Source     string // "beacon" or "darshan"
	Runs       int
	Updated    int64   // unix ns of the last run merged
	Volume     uint64  // bytes read and written per run
	ReadBytes  uint64  // per run
	WriteBytes uint64  // per run
	IONodes    int     // compute nodes doing I/O
	IORanks    int     // ranks doing I/O
	NodeBW     float64 // bytes/s per I/O node while active
	// RunBW is the newest run's aggregate bandwidth over its busy time
	// and RunFwds the forwarding nodes it went through: a run whose
	// bandwidth filled its forwarding nodes was bound by them, so its
	// demand is unknown beyond "more than it had". (Not the best window:
	// the client's write-behind absorbs a burst at memory speed.)
	RunBW       float64
	RunFwds     int
	Mode        string
	Classes     []string
	MetaOps     uint64  // per run
	MetaRate    float64 // metadata operations/s while active
	MeanRequest uint64  // bytes
	Sizes       []SizeBin
}

// AppKey is the profile key of an application: its tag if it has one
// (the client reads SLUICE_APP), else "executable@uid".
func AppKey(app string, uid uint32) string {
	if strings.HasPrefix(app, "tag:") {
		return strings.TrimPrefix(app, "tag:")
	}
	return fmt.Sprintf("%s@%d", app, uid)
}

// ProfileOf summarises one job's report.
func ProfileOf(r JobReport) Profile {
	p := Profile{Key: AppKey(r.App, r.Uid), Source: "beacon", Runs: 1, Updated: r.To.UnixNano(),
		Volume: r.ReadBytes + r.WriteBytes, ReadBytes: r.ReadBytes, WriteBytes: r.WriteBytes,
		IONodes: r.IONodes, IORanks: r.IORanks, Mode: r.Mode, Classes: r.Classes,
		MetaOps: r.MetaOps, MetaRate: r.MetaRate, MeanRequest: r.MeanRequest, Sizes: r.Sizes}
	if r.IONodes > 0 {
		p.NodeBW = r.BW / float64(r.IONodes)
	}
	p.RunBW = r.BW
	for _, s := range r.Servers {
		if s.Layer == LayerFwd {
			p.RunFwds++
		}
	}
	return p
}

// Merge folds a new run into a profile: sizes and rates are averaged with
// the newest run weighted most (half), the mode and behaviours are the
// newest run's.
func (p Profile) Merge(n Profile) Profile {
	if p.Runs == 0 {
		return n
	}
	avgU := func(a, b uint64) uint64 { return a/2 + b/2 }
	avgF := func(a, b float64) float64 { return (a + b) / 2 }
	out := n
	out.Runs = p.Runs + n.Runs
	out.Volume = avgU(p.Volume, n.Volume)
	out.ReadBytes = avgU(p.ReadBytes, n.ReadBytes)
	out.WriteBytes = avgU(p.WriteBytes, n.WriteBytes)
	out.NodeBW = avgF(p.NodeBW, n.NodeBW)
	out.MetaOps = avgU(p.MetaOps, n.MetaOps)
	out.MetaRate = avgF(p.MetaRate, n.MetaRate)
	out.MeanRequest = avgU(p.MeanRequest, n.MeanRequest)
	return out
}

// Has reports whether the profile shows a behaviour.
func (p Profile) Has(class string) bool {
	for _, c := range p.Classes {
		if c == class {
			return true
		}
	}
	return false
}
