package live

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/sim"
	"github.com/sluice-hpc/sluice/workload"
)

// Package live runs the simulator's workload description on a live
// cluster: each sim.Job as one of the workload package's behaviours, a
// process per rank, from its submit time. It owns the mapping of a
// simulated job to a live one and the schedule; the behaviours are
// package workload's, the cluster is whatever the directory is mounted
// from.
//
// The simulator's workload description run live: `sluice workload --jobs
// FILE DIR` reads the JSON Lines `sluice sim day --jobs` reads (sim.Job, e.g.
// written by `sluice sim day --gen-jobs` from a job log) and runs every job on
// the mount from its submit time, as one of the workload package's
// behaviours with a process per rank, so that the same jobs can be
// measured on real daemons and simulated (docs/sim.md, "Workloads").
// With --compute-nodes the jobs wait for their emulated compute nodes as
// the simulator's do (sim.Nodes: first come first served); --as-run
// prints, as sim.Job lines, what the live run does (its ranks, bytes,
// operations and computation), so that the simulator runs exactly that.

// Options are how Run runs the jobs (`sluice workload --jobs`'s flags).
type Options struct {
	// TimeScale multiplies submit times and the computation between
	// write phases; VolScale every job's bytes and metadata operations.
	TimeScale, VolScale float64
	MaxRanks            int   // processes per job at most
	MaxBytes            int64 // refuse a workload that moves more (0: no bound)
	Block               int64 // request size of bulk I/O
	// Register registers each job with the forwarding-map manager of
	// the local cluster in State (default: the current one).
	Register bool
	State    string
	// ComputeNodes > 0: jobs wait for that many emulated compute nodes
	// (cn0…), first come first served; 0: each starts at its submit
	// time on its own nodes
	ComputeNodes int
	// Exe is the sluice binary each job's `sluice workload` runs as.
	Exe string
	// Out receives a JSON line per job.
	Out io.Writer
}

// Plan is how one sim.Job runs live.
type Plan struct {
	Kind    string
	Ranks   int
	PerRank int64 // workload.Params.Size
	Ops     int
	Bursts  int
	Period  time.Duration
	// Lead is the computation before its first I/O (the job holds its
	// nodes meanwhile).
	Lead  time.Duration
	Nodes []string // emulated compute nodes
}

// PlanOf maps job j to a behaviour: its class and pattern pick the kind,
// its ranks are its nodes up to maxRanks, its bytes are scaled by
// volScale (at least a block per rank). Its computation, scaled by
// timeScale, comes before its I/O (Lead and Compute), or for a
// checkpointing job before each of its write phases (Compute spread
// over them: Period), as the simulator runs it.
func PlanOf(j sim.Job, o Options, block int64) Plan {
	ranks := max(1, min(j.Nodes, o.MaxRanks))
	lj := Plan{Ranks: ranks}
	for i := 0; i < min(max(j.Nodes, 1), ranks); i++ {
		n := i
		if i < len(j.OnNodes) {
			n = j.OnNodes[i]
		}
		lj.Nodes = append(lj.Nodes, "cn"+strconv.Itoa(n))
	}
	per := func(total float64) int64 {
		b := int64(math.Ceil(total * o.VolScale / float64(ranks)))
		return max(block, (b+block-1)/block*block)
	}
	switch {
	case j.Class == "meta" || j.Write+j.Read == 0:
		lj.Kind = workload.Meta
		// a file costs a create, a stat and an unlink
		lj.Ops = max(1, int(math.Round(j.MetaOps*o.VolScale/3/float64(ranks))))
	case j.Class == "iops":
		lj.Kind = workload.IOPS // a file of workload.IOPSFileSize per rank
		n := j.Requests         // 4 KiB reads
		if n <= 0 {
			n = (j.Read + j.Write) / 4096
		}
		lj.Ops = max(1, int(math.Round(n*o.VolScale/float64(ranks))))
	case j.Pattern == "1-1":
		lj.Kind = workload.OneOne
		lj.PerRank = per(max(j.Write, j.Read)) // written, read back
	case j.Pattern == "N-1":
		lj.Kind = workload.N1
		lj.PerRank = per(j.Write)
	case j.Phases > 1:
		lj.Kind = workload.Checkpoint
		lj.Bursts = j.Phases
		lj.PerRank = per(j.Write) / block / int64(j.Phases) * block * int64(j.Phases)
		lj.PerRank = max(lj.PerRank, block*int64(j.Phases))
		lj.Period = secs(j.Compute / float64(j.Phases) * o.TimeScale)
	case j.Write == 0:
		lj.Kind = workload.Read
		lj.PerRank = per(j.Read / workload.ReadPasses)
	default:
		lj.Kind = workload.NN
		lj.PerRank = per(j.Write)
	}
	lj.Lead = secs(j.Lead * o.TimeScale)
	if lj.Kind == workload.Checkpoint {
		lj.Lead += lj.Period // it computes before its first checkpoint too
	} else {
		lj.Lead += secs(j.Compute * o.TimeScale)
	}
	return lj
}

func secs(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// asRun describes what lj, job j run live, does as a job of the
// simulator's: its ranks are its nodes, its bytes and operations are what
// the behaviour moves (a write and its reading back; an iops rank's 8 MiB
// file and its 4 KiB reads; a read job's staged input as setup), its
// computation comes before its I/O (Lead) or before each checkpoint
// (Compute). PlanOf of it, unscaled, is lj again.
func asRun(j sim.Job, lj Plan) sim.Job {
	n := float64(lj.Ranks)
	all := float64(lj.PerRank) * n
	a := sim.Job{ID: j.ID, App: j.App, Submit: j.Submit, Nodes: lj.Ranks, Pattern: "N-N", Class: j.Class, Phases: 1,
		Lead: lj.Lead.Seconds(), Warmup: j.Warmup}
	if len(j.OnNodes) > 0 {
		a.OnNodes = j.OnNodes[:lj.Ranks]
	}
	switch lj.Kind {
	case workload.Meta:
		a.Class, a.MetaOps = "meta", float64(lj.Ops)*3*n
	case workload.IOPS:
		a.Class, a.Write, a.Read, a.Requests, a.ReadBack = "iops", workload.IOPSFileSize*n, float64(lj.Ops)*4096*n, float64(lj.Ops)*n, true
	case workload.OneOne:
		a.Pattern, a.Write, a.Read, a.ReadBack = "1-1", all, all, true
	case workload.N1:
		a.Pattern, a.Write, a.Read, a.ReadBack = "N-1", all, all, true
	case workload.Checkpoint:
		a.Write, a.Phases = all, lj.Bursts
		a.Compute = lj.Period.Seconds() * float64(lj.Bursts)
		a.Lead = (lj.Lead - lj.Period).Seconds()
	case workload.Read:
		a.Read, a.SetupBytes = all*workload.ReadPasses, all
	default:
		a.Write, a.Read, a.ReadBack = all, all, true
	}
	return a
}

// bytes is roughly what lj moves in all (for the --max-bytes guard).
func (lj Plan) bytes() int64 {
	switch lj.Kind {
	case workload.Meta:
		return 0
	case workload.NN, workload.N1, workload.OneOne:
		return 2 * lj.PerRank * int64(lj.Ranks) // written and read back
	case workload.Read:
		return (1 + workload.ReadPasses) * lj.PerRank * int64(lj.Ranks)
	case workload.IOPS:
		return (workload.IOPSFileSize + int64(lj.Ops)*4096) * int64(lj.Ranks)
	default:
		return lj.PerRank * int64(lj.Ranks)
	}
}

// Result is one job's line of output: the fields of the simulator's
// per-job results (sim.JobResult) that a live run measures.
type Result struct {
	ID      string  `json:"id"`
	App     string  `json:"app"`
	Nodes   int     `json:"nodes"`
	Pattern string  `json:"pattern"`
	Class   string  `json:"class"`
	Kind    string  `json:"kind"`  // the workload behaviour it ran as
	Ranks   int     `json:"ranks"` // processes
	Bytes   float64 `json:"bytes"`
	Ops     int     `json:"ops"`
	Submit  float64 `json:"submit"` // seconds from the start of the run, scaled
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	IOTime  float64 `json:"io_time"` // its slowest rank's I/O time
	Policy  string  `json:"policy"`  // "live"
	// OnNodes are the emulated compute nodes it got (--compute-nodes),
	// as sim.Job's on_nodes: a simulation of the run as it went.
	OnNodes []int  `json:"on_nodes,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Run runs the jobs of file path under dir, one subdirectory per
// job, each from its submit time × timeScale (schedule), and prints a
// Result line per job as it ends; asRunOnly: prints instead the
// sim.Job lines of what it would run (asRun).
func Run(path, dir string, o Options, asRunOnly bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	jobs, err := sim.ReadJobs(bufio.NewReader(f))
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(jobs) == 0 {
		return fmt.Errorf("%s: no jobs", path)
	}
	bs := o.Block
	if bs <= 0 || bs > 64<<20 {
		return fmt.Errorf("--block: want a size up to 64M")
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	plans := make([]Plan, len(jobs))
	var total int64
	for i, j := range jobs {
		plans[i] = PlanOf(j, o, bs)
		total += plans[i].bytes()
		if n := o.ComputeNodes; n > 0 {
			for _, k := range asRun(j, plans[i]).OnNodes {
				if k >= n {
					return fmt.Errorf("job %s runs on node %d of --compute-nodes %d", j.ID, k, n)
				}
			}
			if plans[i].Ranks > n {
				return fmt.Errorf("job %s wants %d nodes of --compute-nodes %d", j.ID, plans[i].Ranks, n)
			}
		}
	}
	if o.MaxBytes > 0 && total > o.MaxBytes {
		return fmt.Errorf("the jobs would move %s in all, more than --max-bytes %s: scale them down with --volume-scale (e.g. %.3g)",
			size.Format(uint64(total)), size.Format(uint64(o.MaxBytes)), float64(o.MaxBytes)/float64(total)*o.VolScale)
	}
	enc := json.NewEncoder(o.Out)
	if asRunOnly {
		for i, j := range jobs {
			a := asRun(j, plans[i])
			a.Submit = (j.Submit - jobs[0].Submit) * o.TimeScale // as the live run submits it
			if err := enc.Encode(a); err != nil {
				return err
			}
		}
		return nil
	}
	exe := o.Exe
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var mu sync.Mutex // guards enc, failed
	failed := 0
	schedule(jobs, plans, o.ComputeNodes, o.TimeScale, func(j sim.Job, lj Plan) Result {
		return runJob(exe, dir, j, lj, o, bs)
	}, func(r Result) {
		mu.Lock()
		defer mu.Unlock()
		if r.Error != "" {
			failed++
		}
		enc.Encode(r)
	})
	if failed > 0 {
		return fmt.Errorf("%d of %d jobs failed", failed, len(jobs))
	}
	return nil
}

// schedule runs every job (run) and hands its result to emit (from
// the job's goroutine). A job is submitted at its submit time × timeScale
// from the first job's; with nodes > 0 it then waits for its emulated
// compute nodes (cn0 … cnN−1), first come first served as the
// simulator's scheduler (sim.Nodes: its own nodes, else the first run of
// free ones), and plans[i].Nodes become the nodes it got; else it starts
// at once on its own. The result's submit, start and end are seconds
// from the first submission.
func schedule(jobs []sim.Job, plans []Plan, nodes int, timeScale float64, run func(sim.Job, Plan) Result, emit func(Result)) {
	var pool *sim.Nodes
	if nodes > 0 {
		pool = sim.NewNodes(nodes)
	}
	begin := time.Now()
	first := jobs[0].Submit
	at := func(i int) time.Duration { return secs((jobs[i].Submit - first) * timeScale) }
	done := make(chan []int)
	var queue []int
	next, running := 0, 0
	for next < len(jobs) || len(queue) > 0 || running > 0 {
		for next < len(jobs) && time.Since(begin) >= at(next) {
			queue = append(queue, next)
			next++
		}
		for len(queue) > 0 {
			i := queue[0]
			var taken []int
			if pool != nil {
				a := asRun(jobs[i], plans[i])
				if !pool.Fits(a) {
					break
				}
				taken = pool.Take(a)
				plans[i].Nodes = plans[i].Nodes[:0]
				for _, n := range taken {
					plans[i].Nodes = append(plans[i].Nodes, "cn"+strconv.Itoa(n))
				}
			}
			queue = queue[1:]
			running++
			go func(i int, lj Plan, started time.Duration) {
				r := run(jobs[i], lj)
				r.Submit, r.Start, r.End = at(i).Seconds(), started.Seconds(), time.Since(begin).Seconds()
				r.OnNodes = taken
				emit(r)
				done <- taken
			}(i, plans[i], time.Since(begin))
		}
		var submit <-chan time.Time
		if next < len(jobs) {
			submit = time.After(at(next) - time.Since(begin))
		}
		select {
		case t := <-done:
			running--
			if pool != nil {
				pool.Release(t)
			}
		case <-submit:
		}
	}
}

// runJob runs one job through `sluice workload` (a process per rank).
func runJob(exe, dir string, j sim.Job, lj Plan, o Options, block int64) Result {
	r := Result{ID: j.ID, App: j.App, Nodes: j.Nodes, Pattern: j.Pattern, Class: j.Class, Kind: lj.Kind, Ranks: lj.Ranks, Policy: "live"}
	app := j.App
	if app == "" {
		app = "job-" + j.ID
	}
	args := []string{"workload", "--json", "--kind", lj.Kind, "--ranks", strconv.Itoa(lj.Ranks), "--job", j.ID, "--app", app,
		"--size", strconv.FormatInt(max(lj.PerRank, 1), 10), "--block", strconv.FormatInt(block, 10),
		"--nodes", strings.Join(lj.Nodes, ",")}
	if lj.Ops > 0 {
		args = append(args, "--ops", strconv.Itoa(lj.Ops))
	}
	if lj.Bursts > 0 {
		args = append(args, "--bursts", strconv.Itoa(lj.Bursts), "--period", max(lj.Period, time.Millisecond).String())
	}
	if o.Register {
		args = append(args, "--register")
		if o.State != "" {
			args = append(args, "--state", o.State)
		}
	}
	args = append(args, filepath.Join(dir, "job-"+j.ID))
	time.Sleep(lj.Lead) // its computation before its I/O, on its nodes
	c := exec.Command(exe, args...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		r.Error = strings.TrimSpace(err.Error() + " " + stderr.String())
		return r
	}
	var s struct {
		workload.Summary
	}
	if err := json.Unmarshal(out, &s); err != nil {
		r.Error = fmt.Sprintf("reading its summary: %v", err)
		return r
	}
	r.Bytes, r.Ops, r.IOTime = float64(s.Bytes), s.Ops, s.Slowest.Seconds()
	return r
}
