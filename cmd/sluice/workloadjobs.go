package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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

// The simulator's workload description run live: `sluice workload --jobs
// FILE DIR` reads the JSON Lines `sluice sim --jobs` reads (sim.Job, e.g.
// written by `sluice sim --gen-jobs` from a job log) and runs every job on
// the mount at its submit time, as one of the workload package's
// behaviours with a process per rank, so that the same jobs can be
// measured on real daemons and simulated (docs/sim.md, "Workloads").

// liveJobs are `sluice workload --jobs`'s options.
type liveJobs struct {
	timeScale, volScale float64
	maxRanks            int
	maxBytes            int64
	block               string
	register            bool
	state               string
}

// liveJob is how one sim.Job runs live.
type liveJob struct {
	Kind    string
	Ranks   int
	PerRank int64 // workload.Params.Size
	Ops     int
	Bursts  int
	Period  time.Duration
	Nodes   []string // emulated compute nodes
}

// liveOf maps job j to a behaviour: its class and pattern pick the kind,
// its ranks are its nodes up to maxRanks, its bytes are scaled by
// volScale (at least a block per rank), and the time between its write
// phases is its computation spread over them, scaled by timeScale.
func liveOf(j sim.Job, o liveJobs, block int64) liveJob {
	ranks := max(1, min(j.Nodes, o.maxRanks))
	lj := liveJob{Ranks: ranks}
	for i := 0; i < min(max(j.Nodes, 1), ranks); i++ {
		n := i
		if i < len(j.OnNodes) {
			n = j.OnNodes[i]
		}
		lj.Nodes = append(lj.Nodes, "cn"+strconv.Itoa(n))
	}
	per := func(total float64) int64 {
		b := int64(math.Ceil(total * o.volScale / float64(ranks)))
		return max(block, (b+block-1)/block*block)
	}
	switch {
	case j.Class == "meta" || j.Write+j.Read == 0:
		lj.Kind = workload.Meta
		// a file costs a create, a stat and an unlink
		lj.Ops = max(1, int(j.MetaOps*o.volScale/3/float64(ranks)))
	case j.Class == "iops":
		lj.Kind = workload.IOPS
		lj.PerRank = per(j.Read + j.Write)
		lj.Ops = max(1, int(max(j.Requests, (j.Read+j.Write)/4096)*o.volScale/float64(ranks)))
	case j.Pattern == "1-1":
		lj.Kind = workload.OneOne
		lj.PerRank = per(j.Write + j.Read)
	case j.Pattern == "N-1":
		lj.Kind = workload.N1
		lj.PerRank = per(j.Write)
	case j.Phases > 1:
		lj.Kind = workload.Checkpoint
		lj.Bursts = j.Phases
		lj.PerRank = per(j.Write) / block / int64(j.Phases) * block * int64(j.Phases)
		lj.PerRank = max(lj.PerRank, block*int64(j.Phases))
		lj.Period = time.Duration(j.Compute / float64(j.Phases) * o.timeScale * float64(time.Second))
	case j.Write == 0:
		lj.Kind = workload.Read
		lj.PerRank = per(j.Read / workload.ReadPasses)
	default:
		lj.Kind = workload.NN
		lj.PerRank = per(j.Write)
	}
	return lj
}

// bytes is roughly what lj moves in all (for the --max-bytes guard).
func (lj liveJob) bytes() int64 {
	switch lj.Kind {
	case workload.Meta:
		return 0
	case workload.NN, workload.N1, workload.OneOne:
		return 2 * lj.PerRank * int64(lj.Ranks) // written and read back
	case workload.Read:
		return (1 + workload.ReadPasses) * lj.PerRank * int64(lj.Ranks)
	default:
		return lj.PerRank * int64(lj.Ranks)
	}
}

// liveResult is one job's line of output: the fields of the simulator's
// per-job results (sim.JobResult) that a live run measures.
type liveResult struct {
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
	Error   string  `json:"error,omitempty"`
}

// runLiveJobs runs the jobs of file path under dir, one subdirectory per
// job, each at its submit time × timeScale, and prints a liveResult line
// per job as it ends.
func runLiveJobs(path, dir string, o liveJobs) error {
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
	bs, err := size.Parse(o.block)
	if err != nil || bs <= 0 || bs > 64<<20 {
		return fmt.Errorf("--block: want a size up to 64M")
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	plans := make([]liveJob, len(jobs))
	var total int64
	for i, j := range jobs {
		plans[i] = liveOf(j, o, bs)
		total += plans[i].bytes()
	}
	if o.maxBytes > 0 && total > o.maxBytes {
		return fmt.Errorf("the jobs would move %s in all, more than --max-bytes %s: scale them down with --volume-scale (e.g. %.3g)",
			size.Format(uint64(total)), size.Format(uint64(o.maxBytes)), float64(o.maxBytes)/float64(total)*o.volScale)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	first := jobs[0].Submit
	start := time.Now()
	enc := json.NewEncoder(os.Stdout)
	var mu sync.Mutex // guards enc, failed
	failed := 0
	var wg sync.WaitGroup
	for i, j := range jobs {
		at := start.Add(time.Duration((j.Submit - first) * o.timeScale * float64(time.Second)))
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func(j sim.Job, lj liveJob) {
			defer wg.Done()
			r := runLiveJob(exe, dir, j, lj, o, bs)
			r.Submit = at.Sub(start).Seconds()
			r.Start = r.Submit
			r.End = time.Since(start).Seconds()
			mu.Lock()
			defer mu.Unlock()
			if r.Error != "" {
				failed++
			}
			enc.Encode(r)
		}(j, plans[i])
	}
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d of %d jobs failed", failed, len(jobs))
	}
	return nil
}

// runLiveJob runs one job through `sluice workload` (a process per rank).
func runLiveJob(exe, dir string, j sim.Job, lj liveJob, o liveJobs, block int64) liveResult {
	r := liveResult{ID: j.ID, App: j.App, Nodes: j.Nodes, Pattern: j.Pattern, Class: j.Class, Kind: lj.Kind, Ranks: lj.Ranks, Policy: "live"}
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
	if o.register {
		args = append(args, "--register")
		if o.state != "" {
			args = append(args, "--state", o.state)
		}
	}
	args = append(args, filepath.Join(dir, "job-"+j.ID))
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
