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
	// Inputs are the files the newest run read and did not write, in
	// reading order (JobReport.Inputs); InputRuns counts the runs in a row
	// that read mostly (at least half) the same files: a periodic job.
	// Starting a job of the application (`sluice job start --app`)
	// promotes them to the mem tier before it reads them.
	Inputs    []uint64 `json:",omitempty"`
	InputRuns int      `json:",omitempty"`
	// CkptBytes and CkptPeriod are a checkpointing application's
	// checkpoint size and period (seconds) as its runs' write bursts
	// showed them (JobReport.BurstBytes, BurstEvery; 0: not seen): a
	// burst-buffer grant per I/O phase for a job that names neither
	// (`sluice bb setup`).
	CkptBytes  uint64  `json:",omitempty"`
	CkptPeriod float64 `json:",omitempty"`
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
		MetaOps: r.MetaOps, MetaRate: r.MetaRate, MeanRequest: r.MeanRequest, Sizes: r.Sizes, Inputs: r.Inputs}
	if len(r.Inputs) > 0 {
		p.InputRuns = 1
	}
	if r.IONodes > 0 {
		p.NodeBW = r.BW / float64(r.IONodes)
	}
	p.RunBW = r.BW
	if r.BurstEvery > 0 {
		p.CkptBytes, p.CkptPeriod = r.BurstBytes, r.BurstEvery.Seconds()
	}
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
	if p.CkptPeriod > 0 && n.CkptPeriod > 0 {
		out.CkptBytes, out.CkptPeriod = avgU(p.CkptBytes, n.CkptBytes), avgF(p.CkptPeriod, n.CkptPeriod)
	} else if n.CkptPeriod == 0 {
		out.CkptBytes, out.CkptPeriod = p.CkptBytes, p.CkptPeriod
	}
	if len(n.Inputs) > 0 && 2*overlap(p.Inputs, n.Inputs) >= len(n.Inputs) {
		out.InputRuns = p.InputRuns + 1
	}
	return out
}

// overlap counts the files of b that are in a.
func overlap(a, b []uint64) int {
	in := make(map[uint64]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	n := 0
	for _, x := range b {
		if in[x] {
			n++
		}
	}
	return n
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
