package fwd

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-hpc/sluice/internal/wire"
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

// opsIn is how many file system operations request m stands for: each
// create and removal of a write-back batch counts.
func opsIn(m *wire.Msg) uint64 {
	if m.Op == wire.OpCreateBatch {
		return uint64(len(m.Entries))
	}
	return 1
}

func (t *jobTable) record(m *wire.Msg, n uint64) {
	job := m.Job
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
	switch m.Op {
	case wire.OpRead:
		j.readB += n
	case wire.OpWrite:
		j.writeB += n
	case wire.OpFsync, wire.OpFlush:
	default:
		j.metaOps += opsIn(m)
	}
	if m.Rank >= 0 && len(j.ranks) < 100000 {
		j.ranks[m.Rank] = true
	}
	if m.Node != "" && len(j.nodes) < 100000 {
		j.nodes[m.Node] = true
	}
}

// JobCounters is one job's line of a job-stats answer. It travels as a
// wire.DirEntry: Name carries "job ops metaops read written", Path-free,
// and the rank and node sets follow as text.
type JobCounters struct {
	Job                   string
	Ops, MetaOps          uint64
	ReadBytes, WriteBytes uint64
	Ranks                 []int32
	Nodes                 []string
}

func (t *jobTable) snapshot() []JobCounters {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []JobCounters
	for name, j := range t.jobs {
		c := JobCounters{Job: name, Ops: j.ops, MetaOps: j.metaOps, ReadBytes: j.readB, WriteBytes: j.writeB}
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

// EncodeJobs packs counters into directory entries (one per job) so they
// travel in the existing message type.
func EncodeJobs(cs []JobCounters) []wire.DirEntry {
	var out []wire.DirEntry
	for _, c := range cs {
		ranks := make([]string, len(c.Ranks))
		for i, r := range c.Ranks {
			ranks[i] = strconv.Itoa(int(r))
		}
		fields := []string{c.Job, strconv.FormatUint(c.Ops, 10), strconv.FormatUint(c.MetaOps, 10),
			strconv.FormatUint(c.ReadBytes, 10), strconv.FormatUint(c.WriteBytes, 10),
			strings.Join(ranks, ","), strings.Join(c.Nodes, ",")}
		out = append(out, wire.DirEntry{Name: strings.Join(fields, "\t")})
	}
	return out
}

// DecodeJobs is the inverse of EncodeJobs; malformed entries are skipped.
func DecodeJobs(es []wire.DirEntry) []JobCounters {
	var out []JobCounters
	for _, e := range es {
		f := strings.Split(e.Name, "\t")
		if len(f) != 7 {
			continue
		}
		c := JobCounters{Job: f[0]}
		c.Ops, _ = strconv.ParseUint(f[1], 10, 64)
		c.MetaOps, _ = strconv.ParseUint(f[2], 10, 64)
		c.ReadBytes, _ = strconv.ParseUint(f[3], 10, 64)
		c.WriteBytes, _ = strconv.ParseUint(f[4], 10, 64)
		for _, r := range strings.Split(f[5], ",") {
			if v, err := strconv.Atoi(r); err == nil {
				c.Ranks = append(c.Ranks, int32(v))
			}
		}
		if f[6] != "" {
			c.Nodes = strings.Split(f[6], ",")
		}
		out = append(out, c)
	}
	return out
}
