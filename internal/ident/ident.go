// Package ident owns how a client finds out which job, rank and node a
// request comes from: the job id from the calling process's environment
// (SLURM_JOB_ID by default, the variable configurable like Lustre's
// jobid_var), the rank from SLURM_PROCID, PMI_RANK or OMPI_COMM_WORLD_RANK,
// and the node from the host name. It reads /proc and nothing else.
package ident

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"
)

// RankVars are the environment variables that carry an MPI rank, in order.
var RankVars = []string{"SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK"}

// ID identifies the application behind a request.
type ID struct {
	Job  string
	Rank int32 // -1 when unknown
}

// Resolver maps a process id to its identity, caching results briefly so a
// stream of requests from one process reads /proc once.
type Resolver struct {
	JobVar string // default SLURM_JOB_ID
	TTL    time.Duration
	Now    func() time.Time
	Proc   string // default /proc

	mu    sync.Mutex // guards cache
	cache map[uint32]entry
}

type entry struct {
	id ID
	at time.Time
}

// Lookup returns the identity of pid. Unknown values are "" and -1.
func (r *Resolver) Lookup(pid uint32) ID {
	if pid == 0 {
		return ID{Rank: -1}
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	t := now()
	r.mu.Lock()
	if e, ok := r.cache[pid]; ok && t.Sub(e.at) < ttl {
		r.mu.Unlock()
		return e.id
	}
	r.mu.Unlock()
	id := r.read(pid)
	r.mu.Lock()
	if r.cache == nil || len(r.cache) > 4096 {
		r.cache = map[uint32]entry{}
	}
	r.cache[pid] = entry{id: id, at: t}
	r.mu.Unlock()
	return id
}

func (r *Resolver) read(pid uint32) ID {
	proc := r.Proc
	if proc == "" {
		proc = "/proc"
	}
	id := ID{Rank: -1}
	env, err := os.ReadFile(proc + "/" + strconv.FormatUint(uint64(pid), 10) + "/environ")
	if err != nil {
		return id
	}
	return Parse(env, r.JobVar)
}

// Parse extracts the identity from a NUL-separated environment block.
func Parse(env []byte, jobVar string) ID {
	if jobVar == "" {
		jobVar = "SLURM_JOB_ID"
	}
	id := ID{Rank: -1}
	vars := map[string]string{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if i := bytes.IndexByte(kv, '='); i > 0 {
			vars[string(kv[:i])] = string(kv[i+1:])
		}
	}
	id.Job = vars[jobVar]
	for _, v := range RankVars {
		if s, ok := vars[v]; ok {
			if n, err := strconv.ParseInt(s, 10, 32); err == nil {
				id.Rank = int32(n)
				break
			}
		}
	}
	return id
}
