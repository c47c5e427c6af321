package sim

import (
	"slices"
	"strings"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/policy/failslow"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/flow"
)

// Beacon's side of a run: records per window, fail-slow detection and the
// remapping of jobs off slow forwarding nodes.

// makeSlow makes the scenario's forwarding nodes fail-slow: spread evenly
// over the fixed mapping's nodes, so that they serve jobs under FFM.
func (s *Sim) makeSlow(now engine.Time) {
	fs := s.cfg.FailSlow
	static := min(len(s.fwds), max(1, (s.m.ComputeNodes+s.dcfg.Ratio-1)/s.dcfg.Ratio))
	for k := 0; k < fs.Nodes && k < len(s.fwds); k++ {
		i := k * static / min(fs.Nodes, static)
		if k >= static {
			i = k
		}
		s.scale(s.fwdBW[i], failSlowKey, 1/fs.Factor, true)
		s.scale(s.fwdOps[i], failSlowKey, 1/fs.Factor, true)
		s.res.Slow = append(s.res.Slow, s.fwds[i].ID)
	}
	n := len(s.targets)
	for k := 0; k < fs.Targets && k < n; k++ {
		t := s.targets[k*n/min(fs.Targets, n)]
		s.scale(t, failSlowKey, 1/fs.Factor, true)
		s.res.Slow = append(s.res.Slow, t.Name)
	}
}

// targetRecordName is a storage target's server name in Beacon's records
// ("data-ost-00012": failslow compares it with the other "data-ost-*").
func targetRecordName(t *flow.Resource) string {
	return "data-" + strings.Replace(t.Name, "ost", "ost-", 1)
}

// recordName is a forwarding node's server name in Beacon's records
// ("fwd-3": failslow compares it with the other "fwd-*").
func recordName(id string) string { return "fwd-" + id[3:] }

// window records what each forwarding node and storage target did in the
// last window, as its daemon's Beacon records would show it (operations
// of 1 MiB, each taking 1 MiB at its bandwidth to serve), and, every
// Every, runs the fail-slow detector over the last Span.
func (s *Sim) window(now engine.Time) {
	fs := s.cfg.FailSlow
	w := max(fs.Window, engine.Second)
	if fs.Window == 0 {
		w = 10 * engine.Second
	}
	span, every := fs.Span, fs.Every
	if span == 0 {
		span = 60 * engine.Second
	}
	if every == 0 {
		every = 30 * engine.Second
	}
	const req = 1 << 20
	start := now - w
	record := func(k int, r *flow.Resource, layer beacon.Layer, server string) {
		// whole operations, as a daemon counts them: what a window
		// moved beyond its last whole operation is the next window's
		b := r.Busy(now)
		moved := b - s.lastBusy[k]
		if moved < req {
			return
		}
		n := uint64(moved / req)
		s.lastBusy[k] += float64(n) * req
		if now == s.cfg.FailSlow.At {
			return
		}
		lat := int64(float64(req) / r.Capacity() * 1e9)
		s.recs = append(s.recs, beacon.Record{Window: int64(start), Layer: layer, Server: server,
			Op: beacon.OpWrite, Size: req, Count: n, Bytes: n * req, LatSum: lat * int64(n), LatMax: lat})
	}
	for i, r := range s.fwdBW {
		record(i, r, beacon.LayerFwd, recordName(s.fwds[i].ID))
	}
	if s.cfg.FailSlow.Targets > 0 {
		for t, r := range s.targets {
			record(len(s.fwdBW)+t, r, beacon.LayerData, targetRecordName(r))
		}
	}
	// forget what is older than the span
	k := 0
	for k < len(s.recs) && s.recs[k].Window < int64(now-span) {
		k++
	}
	s.recs = s.recs[k:]
	if (now-fs.At)%every < w {
		// the windows whose records have reached the detector by now
		seen := len(s.recs)
		for seen > 0 && s.recs[seen-1].Window > int64(now-w-fs.Lag) {
			seen--
		}
		s.detect(now, s.recs[:seen])
	}
	if s.done < len(s.cfg.Jobs) {
		s.e.After(w, engine.Func(s.window))
	}
}

// detect runs policy/failslow and has policy/dfra remap the jobs on the
// nodes it names.
func (s *Sim) detect(now engine.Time, recs []beacon.Record) {
	found := false
	for _, x := range failslow.Detect(recs, failslow.Options{}) {
		if x.Layer == beacon.LayerData {
			id := strings.Replace(strings.TrimPrefix(x.Server, "data-"), "ost-", "ost", 1)
			if !s.flagged[id] {
				s.flagged[id] = true
				s.res.Detected = append(s.res.Detected, Detection{Target: id, At: now.Seconds(), Ratio: x.Ratio})
			}
			continue
		}
		if !strings.HasPrefix(x.Server, "fwd-") {
			continue
		}
		id := "fwd" + x.Server[len("fwd-"):]
		i, ok := s.fwdIdx[id]
		if !ok || s.flagged[id] {
			continue
		}
		s.flagged[id] = true
		s.fwds[i].Slow = true
		s.res.Detected = append(s.res.Detected, Detection{Fwd: id, At: now.Seconds(), Ratio: x.Ratio})
		found = true
	}
	if found {
		s.remap(now)
	}
}

// remap has policy/dfra move the running jobs off forwarding nodes no
// longer usable (flagged fail-slow, or down) and returns how many moved.
func (s *Sim) remap(now engine.Time) int {
	placed := make([]dfra.Assignment, len(s.running))
	jobs := map[string]dfra.Job{}
	for i, r := range s.running {
		placed[i] = r.a
		dj := dfra.Job{ID: r.spec.ID, App: r.spec.App, Nodes: r.names}
		if s.cfg.Policy == "dfra" {
			dj.Profile = s.profile[r.spec.App]
		}
		jobs[r.spec.ID] = dj
	}
	out, moved := dfra.Remap(s.dcfg, s.fwds, placed, jobs)
	for _, i := range moved {
		j := s.running[i]
		j.a = out[i]
		j.res.Remapped++
		j.res.Fwds = max(j.res.Fwds, len(j.a.Fwds))
		s.res.Remaps++
		j.perFwd = s.spread(j.a, j.names[:j.nIO])
		if !j.inIO {
			continue
		}
		// the rest of the phase goes over the new forwarding nodes
		cur := j.phases[j.next-1]
		var bytes, ops float64
		for _, w := range slices.Clone(j.waiters) {
			// a write waiting for room is placed anew below
			bytes += w.rest
			s.memUnwait(w, now, false)
		}
		for _, f := range j.flows {
			left := f.Remaining(now)
			if s.isOps[f.Path[0].R] {
				ops += left
			} else {
				bytes += left
				if mf := j.memFlows[f]; mf != nil && !cur.read && left > 0 {
					s.memUnplace(mf, left)
				}
				if j.wrote != nil && !cur.read && !cur.setup {
					// not written where it was to go: placed anew below
					for _, u := range f.Path {
						if t, ok := s.targetOf[u.R]; ok {
							w := u.W
							if w == 0 {
								w = 1
							}
							j.wrote[t] = max(0, j.wrote[t]-left*w)
						}
					}
				}
			}
			s.fm.Cancel(f)
		}
		j.flows, j.links, j.memFlows = nil, nil, nil
		s.startFlows(j, phase{bytes: bytes, ops: ops, read: cur.read, setup: cur.setup})
	}
	return len(moved)
}
