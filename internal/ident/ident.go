// Package ident owns how a client finds out which job, rank and node a
// request comes from: the job id from the calling process's environment
// (SLURM_JOB_ID by default, the variable configurable like Lustre's
// jobid_var), the rank from SLURM_PROCID, PMI_RANK or OMPI_COMM_WORLD_RANK,
// and the node from SLURMD_NODENAME when the process has it (Slurm sets it
// for every task; a test bed emulating many compute nodes on one host sets
// it per rank), else the mount's own node name. It reads /proc and nothing
// else.
package ident

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// RankVars are the environment variables that carry an MPI rank, in order.
var RankVars = []string{"SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK"}

// ID identifies the application behind a request: job, rank, compute node
// (NodeVar, else the Resolver's Node) and application (AppVar, else the
// executable's name from /proc/PID/comm). It is the wire's identity, so
// the client sets it on a request in one assignment.
type ID = wire.Who

// NodeVar is the environment variable naming the caller's compute node.
const NodeVar = "SLURMD_NODENAME"

// AppVar is the environment variable that tags an application explicitly.
const AppVar = "SLUICE_APP"

// Resolver maps a process id to its identity, caching results briefly so a
// stream of requests from one process reads /proc once.
type Resolver struct {
	JobVar string // default SLURM_JOB_ID
	// Node is the compute node of a process that names none (the mount's).
	Node string
	TTL  time.Duration
	Now  func() time.Time
	Proc string // default /proc

	// Wait bounds how long a lookup waits for /proc (default 100 ms).
	// Reading another process's environment takes that process's exec
	// lock; a process in execve that closes a file on this mount waits for
	// our FLUSH reply, so an unbounded read would deadlock the two.
	Wait time.Duration

	mu    sync.Mutex // guards cache
	cache map[uint32]entry
}

type entry struct {
	id ID
	at time.Time
}

// Lookup returns the identity of pid. Unknown values are "" and -1 (the
// node is always known: the Resolver's when the process names none).
func (r *Resolver) Lookup(pid uint32) ID { return r.onNode(r.lookup(pid)) }

// onNode puts id on the Resolver's node if it names none.
func (r *Resolver) onNode(id ID) ID {
	if id.Node == "" {
		id.Node = r.Node
	}
	return id
}

func (r *Resolver) lookup(pid uint32) ID {
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
	wait := r.Wait
	if wait == 0 {
		wait = 100 * time.Millisecond
	}
	done := make(chan ID, 1)
	go func() {
		id := r.read(pid)
		r.mu.Lock()
		if r.cache == nil || len(r.cache) > 4096 {
			r.cache = map[uint32]entry{}
		}
		r.cache[pid] = entry{id: id, at: t}
		r.mu.Unlock()
		done <- id
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case id := <-done:
		return id
	case <-timer.C:
		return ID{Rank: -1}
	}
}

// Cached returns the identity of pid if it is cached, without touching
// /proc (for requests sent while the caller may be inside execve, such as
// FLUSH and RELEASE).
func (r *Resolver) Cached(pid uint32) ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.cache[pid]; ok {
		return r.onNode(e.id)
	}
	return r.onNode(ID{Rank: -1})
}

func (r *Resolver) read(pid uint32) ID {
	proc := r.Proc
	if proc == "" {
		proc = "/proc"
	}
	id := ID{Rank: -1}
	dir := proc + "/" + strconv.FormatUint(uint64(pid), 10)
	env, err := os.ReadFile(dir + "/environ")
	if err != nil {
		return id
	}
	id = Parse(env, r.JobVar)
	if id.App == "" {
		if comm, err := os.ReadFile(dir + "/comm"); err == nil {
			id.App = string(bytes.TrimSpace(comm))
		}
	}
	return id
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
	id.Node = vars[NodeVar]
	if tag := vars[AppVar]; tag != "" {
		id.App = "tag:" + tag
	}
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
