package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/spf13/pflag"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/workload"
	"github.com/sluice-hpc/sluice/workload/live"
)

// cmdWorkload runs one behaviour as a job: one process per rank, each with
// the job id, its rank and the application tag in its environment.
var workloadCmd = spec{use: "workload --kind K --ranks N DIR", short: "run an application I/O behaviour as a job, one process per rank",
	example: "sluice workload --kind ckpt --ranks 8 --size 256M /sluice/run1\nsluice workload --gen ckpt-mix --buffer 1G > mix.json", setup: setupWorkload}

func setupWorkload(fs *pflag.FlagSet) func([]string) error {
	kind := fs.String("kind", workload.NN, "behaviour: nn, n1, 11, meta, iops, ckpt")
	ranks := fs.Int("ranks", 4, "processes")
	job := fs.String("job", "", "job id (default: a new one from the clock)")
	jobVar := fs.String("jobid-var", "SLURM_JOB_ID", "environment variable the job id goes in")
	app := fs.String("app", "", "application tag (SLUICE_APP; default: workload-KIND)")
	perRank := fs.String("size", "64M", "bytes per rank (nn, n1, ckpt; rank 0 writes ranks×size in 11)")
	blockSize := fs.String("block", "1M", "request size of bulk I/O")
	ops := fs.Int("ops", 1000, "files per rank (meta) or 4 KiB reads per rank (iops)")
	shared := fs.Bool("shared-dir", false, "meta: every rank's files in one directory (default: one directory per rank)")
	bursts := fs.Int("bursts", 3, "checkpoints (ckpt)")
	period := fs.Duration("period", 2500*time.Millisecond, "idle time between checkpoints (ckpt)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	rank := fs.Int("rank", -1, "internal: run one rank in this process")
	startAt := fs.Int64("start-at", 0, "internal: unix ns at which every rank starts its I/O")
	results := fs.Bool("results", false, "with --json: include every rank's result")
	register := fs.Bool("register", false, "register the job with the forwarding-map manager for its run (DFRA)")
	state := fs.String("state", "", "with --register: state directory of the local cluster (default: the current one)")
	nodeList := fs.String("nodes", "", "emulated compute nodes (cn0,cn1,...): ranks are spread over them in blocks, each with SLURMD_NODENAME set (default: this host)")
	gen := fs.String("gen", "", "print a workload description instead of running one: ckpt-mix (checkpointing applications for sluice bb replay and the simulator; --size per checkpoint, --period the planning period)")
	buffer := fs.String("buffer", "128M", "ckpt-mix: the buffer capacity S the mix is sized for")
	dwpp := fs.Float64Slice("dwpp", []float64{1.0}, "ckpt-mix: data written per period, × S (one value)")
	periods := fs.Int("periods", 3, "ckpt-mix: periods run")
	classes := fs.String("classes", "", "ckpt-mix: checkpoint periods as divisors of --period with shares, e.g. 1:1,2:1,3:1 (default: every application once per period)")
	congestion := fs.String("congestion", "low", "ckpt-mix: low, med or high (how close the I/O jobs come)")
	mtbfMax := fs.Duration("mtbf-max", 16*time.Second, "ckpt-mix: applications' MTBF drawn up to this")
	seed := fs.Int64("seed", 1, "ckpt-mix: random seed")
	jobsFile := fs.String("jobs", "", "run the jobs of a workload description (JSON Lines of sim.Job, what sluice sim day --jobs reads; e.g. from sluice sim day --gen-jobs), each at its submit time, one subdirectory of DIR per job; prints one JSON line per job")
	timeScale := fs.Float64("time-scale", 1, "--jobs: multiply submit times and the computation between write phases")
	volScale := fs.Float64("volume-scale", 1, "--jobs: multiply every job's bytes and metadata operations")
	maxRanks := fs.Int("max-ranks", 4, "--jobs: processes per job at most (a job's nodes beyond are not run)")
	maxBytes := fs.String("max-bytes", "8G", "--jobs: refuse a workload that moves more than this in all (0: no bound)")
	computeNodes := fs.Int("compute-nodes", 0, "--jobs: jobs wait for their emulated compute nodes among this many (cn0…), first come first served, as in the simulator (sluice sim day --machine local: the forwarding daemons × meta's --fwd-ratio); 0: each job starts at its submit time")
	asRunOnly := fs.Bool("as-run", false, "--jobs: print what would run, as the simulator's jobs (JSON Lines of sim.Job: ranks, bytes, operations and computation as run live, scaled), and stop; sluice sim day --jobs of it simulates the live run")
	return func(args []string) error {
		if *gen != "" {
			if *gen != "ckpt-mix" {
				return fmt.Errorf("--gen %q: want ckpt-mix", *gen)
			}
			if len(*dwpp) != 1 {
				return fmt.Errorf("--dwpp: want one value, got %v", *dwpp)
			}
			return genCkptMix(*buffer, *perRank, *period, *periods, (*dwpp)[0], *classes, *congestion, *mtbfMax, *seed)
		}
		if len(args) != 1 && (*jobsFile == "" || !*asRunOnly) {
			return fmt.Errorf("want one directory, got %d arguments", len(args))
		}
		if *jobsFile != "" {
			o := live.Options{TimeScale: *timeScale, VolScale: *volScale, MaxRanks: *maxRanks, Register: *register, State: *state,
				ComputeNodes: *computeNodes, Out: os.Stdout}
			return runLive(*jobsFile, args, o, *maxBytes, *blockSize, *asRunOnly)
		}
		sz, err := size.Parse(*perRank)
		if err != nil {
			return fmt.Errorf("--size: %v", err)
		}
		bs, err := size.Parse(*blockSize)
		if err != nil || bs <= 0 || bs > 64<<20 {
			return fmt.Errorf("--block: want a size up to 64M")
		}
		p := workload.Params{Dir: args[0], Rank: *rank, Ranks: *ranks, Size: sz, Block: int(bs), Ops: *ops,
			Bursts: *bursts, Period: *period, Seed: time.Now().UnixNano(), SharedDir: *shared}
		if *startAt > 0 {
			p.StartAt = time.Unix(0, *startAt)
		}
		if *rank >= 0 {
			res, err := workload.Run(*kind, p)
			if err != nil {
				return err
			}
			return json.NewEncoder(os.Stdout).Encode(res)
		}
		if err := os.MkdirAll(p.Dir, 0o755); err != nil {
			return err
		}
		if *job == "" {
			*job = strconv.FormatInt(time.Now().UnixNano()/1e6%1e9, 10)
		}
		if *app == "" {
			*app = "workload-" + *kind
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		j := workload.Job{ID: *job, App: *app, JobVar: *jobVar, Ranks: *ranks, Exe: exe,
			Args: slices.Concat([]string{"workload"}, setFlags(fs), args)}
		if *nodeList != "" {
			j.Nodes = strings.Split(*nodeList, ",")
		}
		return runJob(j, *kind, *register, *state, *asJSON, *results)
	}
}

// runLive runs the jobs of a workload description (workload/live).
func runLive(jobsFile string, args []string, o live.Options, maxBytes, block string, asRun bool) error {
	mb, err := size.Parse(maxBytes)
	if err != nil {
		return fmt.Errorf("--max-bytes: %v", err)
	}
	if o.TimeScale < 0 || o.VolScale <= 0 || o.MaxRanks < 1 {
		return fmt.Errorf("--time-scale, --volume-scale and --max-ranks must be positive")
	}
	if o.ComputeNodes < 0 {
		return fmt.Errorf("--compute-nodes: want 0 or more")
	}
	if o.Block, err = size.Parse(block); err != nil {
		return fmt.Errorf("--block: %v", err)
	}
	if o.Exe, err = os.Executable(); err != nil {
		return err
	}
	o.MaxBytes = mb
	dir := ""
	if len(args) > 0 {
		dir = args[0]
	}
	return live.Run(jobsFile, dir, o, asRun)
}

// runJob runs j (registered with the forwarding-map manager of the local
// cluster in state if register) and prints its summary.
func runJob(j workload.Job, kind string, register bool, state string, asJSON, results bool) error {
	if register {
		end, err := registerJob(state, j.ID, j.App, j.Nodes)
		if err != nil {
			return err
		}
		defer end()
	}
	start := time.Now()
	rs, err := j.Run()
	if err != nil {
		return err
	}
	s := workload.Summarise(rs)
	if asJSON {
		if !results {
			rs = nil
		}
		return json.NewEncoder(os.Stdout).Encode(struct {
			Job, Kind string
			workload.Summary
			Elapsed time.Duration
			Results []workload.Result `json:",omitempty"`
		}{j.ID, kind, s, time.Since(start), rs})
	}
	fmt.Printf("job %s (%s, %d ranks): %s in %d ops; I/O time %v (slowest rank), %v (median)\n", j.ID, kind, s.Ranks,
		size.Format(uint64(s.Bytes)), s.Ops, s.Slowest.Round(time.Millisecond), s.Median.Round(time.Millisecond))
	return nil
}

// setFlags gives the flags the command line set in fs, as arguments that
// set them again (for a child process of the same command).
func setFlags(fs *pflag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) { out = append(out, "--"+f.Name+"="+f.Value.String()) })
	return out
}

// registerJob starts a job (its compute nodes, default this host, and the
// application tag) with the local cluster's forwarding-map manager and
// returns the call that ends it.
func registerJob(state, job, app string, nodes []string) (func(), error) {
	if len(nodes) == 0 {
		nodes = []string{hostname()}
	}
	mc, err := dialMeta(state, "", "")
	if err != nil {
		return nil, err
	}
	if _, err := rpc.Do(context.Background(), mc, fwdmap.Start, &fwdmap.JobSpec{ID: job, App: "tag:" + app, User: uint32(os.Getuid()), Nodes: nodes}); err != nil {
		mc.Close()
		return nil, err
	}
	return func() {
		rpc.Do(context.Background(), mc, fwdmap.End, &fwdmap.JobRef{Job: job})
		mc.Close()
	}, nil
}

// genCkptMix prints a checkpoint mix (workload.GenCkptMix) as JSON.
func genCkptMix(buffer, ckpt string, period time.Duration, periods int, dwpp float64, classes, congestion string, mtbfMax time.Duration, seed int64) error {
	b, err := size.Parse(buffer)
	if err != nil {
		return fmt.Errorf("--buffer: %v", err)
	}
	c, err := size.Parse(ckpt)
	if err != nil || c < 1<<20 || c%(1<<20) != 0 {
		return fmt.Errorf("--size %q: want whole MiB", ckpt)
	}
	o := workload.MixOptions{Buffer: b, Size: c, Period: period, Periods: periods, DWPP: dwpp, Congestion: congestion, MTBFMax: mtbfMax, Seed: seed}
	if o.Classes, err = parseClasses(classes); err != nil {
		return err
	}
	m, err := workload.GenCkptMix(o)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// parseClasses reads --classes: checkpoint periods as divisors of the
// planning period with their shares, "1:1,2:1,3:1" ("": nil, every
// application once per period).
func parseClasses(classes string) (map[int]int, error) {
	if classes == "" {
		return nil, nil
	}
	out := map[int]int{}
	for _, f := range strings.Split(classes, ",") {
		var k, n int
		if _, err := fmt.Sscanf(f, "%d:%d", &k, &n); err != nil {
			return nil, fmt.Errorf("--classes %q: want DIVISOR:SHARE pairs separated by commas", classes)
		}
		out[k] = n
	}
	return out, nil
}
