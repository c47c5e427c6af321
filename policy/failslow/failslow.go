// Package failslow is the fail-slow detection policy (Gunawi et al.,
// "Fail-Slow at Scale"; Sunway's Beacon): it compares each forwarding node
// and data server with its peers, window by window, and names the ones
// much slower than their peers under comparable load. Pure: records in,
// slow servers out; no clock, no I/O. The manager (manager/monitor) runs
// it periodically; DFRA avoids what it names.
package failslow

import (
	"sort"
	"strings"

	"github.com/sluice-hpc/sluice/beacon"
)

// Options tune the detector. Zero fields take the defaults.
type Options struct {
	Factor     float64 // slower than peers by at least this (3)
	MinWindows int     // in at least this many windows (3)
	MinOps     uint64  // operations a server needs in a window to count (4)
	// A server more loaded than LoadFactor × the peers' median operations
	// in a window is not compared in it (2).
	LoadFactor float64
}

// PeerGroup is the set of servers a server is compared with: same layer,
// same name up to the last '-' ("data-mem-3" is compared with the other
// "data-mem-*", "fwd-4" with the other "fwd-*").
func PeerGroup(layer beacon.Layer, server string) string {
	if i := strings.LastIndexByte(server, '-'); i > 0 {
		return layer.String() + ":" + server[:i]
	}
	return layer.String() + ":" + server
}

// Detect compares each forwarding node and data server with its
// peers window by window. For each window and size class of request, a
// server's mean latency is divided by the median of its peers' means; a
// window in which the ratio reaches Factor (with the server no more
// loaded than its peers) counts as slow.
func Detect(recs []beacon.Record, opt Options) []beacon.SlowServer {
	if opt.Factor == 0 {
		opt.Factor = 3
	}
	if opt.MinWindows == 0 {
		opt.MinWindows = 3
	}
	if opt.MinOps == 0 {
		opt.MinOps = 4
	}
	if opt.LoadFactor == 0 {
		opt.LoadFactor = 2
	}
	type cell struct {
		group  string
		window int64
		op     string
		size   uint64
	}
	// cell → server → stat
	cells := map[cell]map[string]*beacon.OpStat{}
	layers := map[string]beacon.Layer{}
	for i := range recs {
		r := &recs[i]
		if r.Layer == beacon.LayerClient {
			continue
		}
		c := cell{PeerGroup(r.Layer, r.Server), r.Window, r.Op, beacon.SizeClass(r.Size)}
		m := cells[c]
		if m == nil {
			m = map[string]*beacon.OpStat{}
			cells[c] = m
		}
		st := m[r.Server]
		if st == nil {
			st = &beacon.OpStat{}
			m[r.Server] = st
		}
		st.Ops += r.Count
		st.LatSum += r.LatSum
		layers[r.Server] = r.Layer
	}
	type slowAcc struct {
		windows map[int64]bool
		ratios  []float64
		since   int64
	}
	slow := map[string]*slowAcc{}
	for c, m := range cells {
		if len(m) < 2 {
			continue
		}
		for s, st := range m {
			if st.Ops < opt.MinOps {
				continue
			}
			var lats, loads []float64
			for p, ps := range m {
				if p == s || ps.Ops < opt.MinOps {
					continue
				}
				lats = append(lats, float64(ps.LatSum)/float64(ps.Ops))
				loads = append(loads, float64(ps.Ops))
			}
			if len(lats) == 0 {
				continue
			}
			peerLat, peerLoad := beacon.Median(lats), beacon.Median(loads)
			if peerLat <= 0 || float64(st.Ops) > opt.LoadFactor*peerLoad {
				continue
			}
			ratio := float64(st.LatSum) / float64(st.Ops) / peerLat
			if ratio < opt.Factor {
				continue
			}
			a := slow[s]
			if a == nil {
				a = &slowAcc{windows: map[int64]bool{}, since: c.window}
				slow[s] = a
			}
			a.windows[c.window] = true
			a.ratios = append(a.ratios, ratio)
			a.since = min(a.since, c.window)
		}
	}
	var out []beacon.SlowServer
	for s, a := range slow {
		if len(a.windows) >= opt.MinWindows {
			out = append(out, beacon.SlowServer{Server: s, Layer: layers[s], Ratio: beacon.Median(a.ratios), Windows: len(a.windows), Since: a.since})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ratio > out[j].Ratio })
	return out
}
