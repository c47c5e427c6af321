package fwd

import (
	"sort"
	"sync"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// jobTable counts, per job, what the daemon served: the first, always-on
// layer of end-to-end job identity (full per-operation monitoring is
// Beacon's). Requests without a job id count under "-".
type jobTable struct {
	mu   sync.Mutex // guards jobs
	jobs map[string]*jobStat
}

type jobStat struct {
	ops, metaOps  uint64
	readB, writeB uint64
	ranks         map[int32]bool
	nodes         map[string]bool
}

// opsIn is how many file system operations request q stands for: each
// create and removal of a write-back batch counts.
func opsIn(q ns.Request) uint64 {
	if b, ok := q.(*ns.BatchReq); ok {
		return uint64(b.Ops())
	}
	return 1
}

// record counts request q of operation op, of n bytes, for its job.
func (t *jobTable) record(op wire.Op, q ns.Request, n uint64) {
	who := q.Header().Who
	job := who.Job
	if job == "" {
		job = "-"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs == nil {
		t.jobs = map[string]*jobStat{}
	}
	j := t.jobs[job]
	if j == nil {
		j = &jobStat{ranks: map[int32]bool{}, nodes: map[string]bool{}}
		t.jobs[job] = j
	}
	j.ops++
	switch op {
	case ns.OpRead:
		j.readB += n
	case ns.OpWrite:
		j.writeB += n
	case ns.OpFsync, ns.OpFlush:
	default:
		j.metaOps += opsIn(q)
	}
	if who.Rank >= 0 && len(j.ranks) < 100000 {
		j.ranks[who.Rank] = true
	}
	if who.Node != "" && len(j.nodes) < 100000 {
		j.nodes[who.Node] = true
	}
}

func (t *jobTable) snapshot() []api.JobCounters {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []api.JobCounters
	for name, j := range t.jobs {
		c := api.JobCounters{Job: name, Ops: j.ops, MetaOps: j.metaOps, ReadBytes: j.readB, WriteBytes: j.writeB}
		for r := range j.ranks {
			c.Ranks = append(c.Ranks, r)
		}
		for n := range j.nodes {
			c.Nodes = append(c.Nodes, n)
		}
		sort.Slice(c.Ranks, func(a, b int) bool { return c.Ranks[a] < c.Ranks[b] })
		sort.Strings(c.Nodes)
		out = append(out, c)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Job < out[b].Job })
	return out
}
