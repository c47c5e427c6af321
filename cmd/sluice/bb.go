package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/burstbuf"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/workload"
	"github.com/sluice-hpc/sluice/workload/replay"
)

// bbGranule is the pools' granularity: Slurm counts a pool in granules.
const bbGranule = 1 << 20

// bbHook is what Slurm's burst_buffer/lua hands every stage of a job's
// burst buffer (contrib/slurm/burst_buffer.lua passes them to each).
type bbHook struct {
	job, mount, script, directive *string
	uid, gid                      *int
	conn                          *conn
}

// bbGroup is `sluice bb`: the stages of a job's burst buffer for Slurm's
// burst_buffer/lua plugin (contrib/slurm/burst_buffer.lua calls one from
// each hook), the pools and state, and the checkpoint replay.
func bbGroup() *cobra.Command {
	g := group("bb", "a job's burst buffer, for Slurm's burst_buffer/lua (contrib/slurm)")
	pf := g.PersistentFlags()
	h := &bbHook{
		job:       pf.String("job", "", "the job's id"),
		mount:     pf.String("mount", "", "where sluice is mounted on this node"),
		script:    pf.String("script", "", "the job script holding the directives"),
		directive: pf.String("directive", burstbuf.DefaultDirective, "the directive word (burst_buffer.conf Directive=)"),
		uid:       pf.Int("uid", -1, "the job's uid"),
		gid:       pf.Int("gid", -1, "the job's gid"),
		conn:      addConn(pf),
	}
	stage := func(use, short string, flags func(fs *pflag.FlagSet) func(*bbJob) error) *cobra.Command {
		return leaf(spec{use: use + " --job J --mount M --script S", short: short,
			example: "sluice bb " + use + " --job 7001 --mount /sluice --script job.sh --uid 1000 --gid 1000",
			setup: func(fs *pflag.FlagSet) func([]string) error {
				run := flags(fs)
				return withMeta(h.conn, func(mc *rpc.Client, args []string) error {
					j, err := h.open(mc, use)
					if err != nil || j == nil {
						return err
					}
					return run(j)
				})
			}})
	}
	none := func(run func(*bbJob) error) func(*pflag.FlagSet) func(*bbJob) error {
		return func(*pflag.FlagSet) func(*bbJob) error { return run }
	}
	g.AddCommand(
		stage("job-process", "check a job script's directives (Slurm's job submission)", none(func(*bbJob) error { return nil })),
		stage("setup", "make the job's buffer directories and ask for its grant", func(fs *pflag.FlagSet) func(*bbJob) error {
			wait := fs.Duration("wait", 0, "how long to wait for the policy to admit the job's grant")
			return func(j *bbJob) error { return j.setup(*wait) }
		}),
		stage("data-in", "stage the job's input files in", none(func(j *bbJob) error { return j.StageIn(context.Background(), j.toTier) })),
		stage("paths", "write the job's environment for Slurm", func(fs *pflag.FlagSet) func(*bbJob) error {
			pathFile := fs.String("path-file", "", "the file Slurm adds to the job's environment")
			return func(j *bbJob) error {
				if *pathFile == "" {
					return fmt.Errorf("paths: want --path-file")
				}
				return os.WriteFile(*pathFile, []byte(j.Env()), 0o644)
			}
		}),
		stage("pre-run", "register the job with Beacon and DFRA", func(fs *pflag.FlagSet) func(*bbJob) error {
			nodes := fs.String("nodes", "", "the job's nodes, comma-separated")
			return func(j *bbJob) error { return j.preRun(*nodes) }
		}),
		stage("post-run", "nothing (the job ran)", none(func(*bbJob) error { return nil })),
		stage("data-out", "stage the job's output files out", none(func(j *bbJob) error { return j.StageOut(context.Background(), j.toTier) })),
		stage("teardown", "remove the job's buffer and release its grant", func(fs *pflag.FlagSet) func(*bbJob) error {
			hurry := fs.Bool("hurry", false, "the job was cancelled; do not wait")
			return func(j *bbJob) error { return j.teardown(*hurry) }
		}),
		leaf(spec{use: "pools", short: "the pools for slurm_bb_pools, as JSON", example: "sluice bb pools",
			setup: func(fs *pflag.FlagSet) func([]string) error {
				return withMeta(h.conn, func(mc *rpc.Client, args []string) error { return bbPools(mc) })
			}}),
		leaf(spec{use: "status", short: "the pools, grants, the period's plan and the jobs with a buffer (scontrol show bbstat)",
			example: "sluice bb status --mount /sluice", setup: func(fs *pflag.FlagSet) func([]string) error {
				asJSON := fs.Bool("json", false, "print the burst-buffer manager's state as JSON")
				return withMeta(h.conn, func(mc *rpc.Client, args []string) error {
					if !*asJSON {
						return bbStatus(mc, *h.mount)
					}
					st, err := rpc.Do(context.Background(), mc, api.BBStatus, &wire.Empty{})
					if err == nil {
						err = json.NewEncoder(os.Stdout).Encode(st)
					}
					return err
				})
			}}),
		leaf(spec{use: "replay --mix FILE --mount M", short: "run a checkpoint mix on the running cluster's burst buffer, as Slurm would",
			example: "sluice workload --gen ckpt-mix > mix.json && sluice bb replay --mix mix.json --mount /sluice",
			setup: func(fs *pflag.FlagSet) func([]string) error {
				mix := fs.String("mix", "", "the checkpoint mix to run (from sluice workload --gen ckpt-mix)")
				pool := fs.String("pool", "mem", "the pool the applications ask for")
				restarts := fs.Int("restarts", 8, "applications restarted (their newest checkpoint read) after the run")
				return withMeta(h.conn, func(mc *rpc.Client, args []string) error {
					if *mix == "" || *h.mount == "" {
						return fmt.Errorf("replay: want --mix and --mount")
					}
					return bbReplay(mc, *h.mount, *mix, *pool, *restarts)
				})
			}}))
	return g
}

// bbJob is one stage's job: its directives, and the metadata service.
type bbJob struct {
	burstbuf.Job
	mc  *rpc.Client
	uid int
}

// open reads the job script's directives for stage; a nil job with no
// error means the stage has nothing more to do.
func (h *bbHook) open(mc *rpc.Client, stage string) (*bbJob, error) {
	if *h.script == "" {
		return nil, fmt.Errorf("%s: want --script", stage)
	}
	b, err := os.ReadFile(*h.script)
	if err != nil {
		return nil, err
	}
	spec, err := burstbuf.Parse(string(b), *h.directive)
	if err != nil {
		return nil, err
	}
	if stage == "job-process" {
		return nil, nil // the directives parse; Slurm checks the pool and charges it
	}
	if *h.job == "" || *h.mount == "" {
		return nil, fmt.Errorf("%s: want --job and --mount", stage)
	}
	if stage == "setup" && (*h.uid < 0 || *h.gid < 0) {
		return nil, fmt.Errorf("setup: want --uid and --gid")
	}
	return &bbJob{Job: burstbuf.Job{ID: *h.job, Mount: *h.mount, Spec: spec, UID: *h.uid, GID: *h.gid}, mc: mc, uid: *h.uid}, nil
}

// toTier moves a staged file to tier (burstbuf's stage-in and -out).
func (j *bbJob) toTier(ctx context.Context, path, tier string) error {
	_, err := migrate(ctx, j.mc, path, tier, true)
	return err
}

// setup makes the job's directories and asks for its grant, waiting up to
// wait while the policy refuses it.
func (j *bbJob) setup(wait time.Duration) error {
	ctx := context.Background()
	if err := j.Setup(); err != nil {
		return err
	}
	spec := j.Spec
	if spec.Pool == "" {
		return nil // a directory, no buffer asked for
	}
	if spec.Capacity == 0 {
		// the grant from the application's past runs
		if err := bbFromProfile(ctx, j.mc, &spec); err != nil {
			j.Teardown()
			return err
		}
	}
	ckpt, err := j.CheckpointPath()
	if err != nil {
		j.Teardown()
		return err
	}
	g := api.Grant{Job: j.ID, Pool: spec.Pool, Size: uint64(spec.Capacity), Period: spec.Period.Seconds(), UID: uint32(j.uid),
		App: spec.App, Checkpoint: ckpt, MTBF: spec.MTBF.Seconds()}
	if err := bbGrant(ctx, j.mc, g, wait); err != nil {
		j.Teardown()
		return err
	}
	return nil
}

// preRun tells Beacon and DFRA about the job (the prolog does it too
// where it runs; a second start is harmless).
func (j *bbJob) preRun(nodes string) error {
	spec := fwdmap.JobSpec{ID: j.ID, User: uint32(max(j.uid, 0))}
	if nodes != "" {
		spec.Nodes = strings.Split(nodes, ",")
	}
	if spec.App = j.Spec.App; spec.App != "" {
		spec.App = "tag:" + spec.App
	}
	_, err := rpc.Do(context.Background(), j.mc, fwdmap.Start, &spec)
	return err
}

// teardown removes the buffer at once either way; in a hurry (a cancelled
// job) an unreachable metadata service does not hold it up.
func (j *bbJob) teardown(hurry bool) error {
	ctx := context.Background()
	err := j.Teardown()
	_, e1 := rpc.Do(ctx, j.mc, api.BBRelease, &api.JobRef{Job: j.ID})
	_, e2 := rpc.Do(ctx, j.mc, fwdmap.End, &fwdmap.JobRef{Job: j.ID})
	if e := errors.Join(e1, e2); e != nil && err == nil && !hurry {
		err = e
	}
	return err
}

// bbFromProfile fills a job's burst-buffer request that names a pool but
// no capacity from its application's Beacon profile: the checkpoint size
// and period its past runs' write bursts showed (a period= in the
// directives stays).
func bbFromProfile(ctx context.Context, mc *rpc.Client, spec *burstbuf.Spec) error {
	if spec.App == "" {
		return fmt.Errorf("pool=%s without capacity=: name app= so that the grant comes from the application's past runs", spec.Pool)
	}
	p, err := beaconrpc.Client{C: mc}.Profile(ctx, spec.App)
	if err != nil {
		return fmt.Errorf("no capacity= and no Beacon profile of application %q: %w", spec.App, err)
	}
	if p.CkptBytes == 0 || p.CkptPeriod <= 0 {
		return fmt.Errorf("no capacity=, and application %q's past runs (%d) show no periodic checkpoints to size a grant by", spec.App, p.Runs)
	}
	spec.Capacity = int64(p.CkptBytes)
	if spec.Period == 0 {
		spec.Period = time.Duration(p.CkptPeriod * float64(time.Second))
	}
	return nil
}

// bbGrant asks the metadata service for g, again every second for up to
// wait while the policy refuses it.
func bbGrant(ctx context.Context, mc *rpc.Client, g api.Grant, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		a, err := rpc.Do(ctx, mc, api.BBGrantOp, &g)
		if err != nil {
			return err
		}
		if a.OK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no burst-buffer grant for job %s: %s", g.Job, a.Reason)
		}
		time.Sleep(time.Second)
	}
}

// bbPoolsOf asks the metadata service for the pools and grants.
func bbPoolsOf(mc *rpc.Client) (*api.BBPools, error) {
	return rpc.Do(context.Background(), mc, api.BBPoolsOp, &wire.Empty{})
}

// bbPools prints the pools for slurm_bb_pools: one per buffer tier, in
// 1 MiB granules, as much as the grant policy admits (the tier's
// capacity under dedicated, more under the over-subscribing policies),
// so that Slurm's own accounting of the pools agrees with the grants.
func bbPools(mc *rpc.Client) error {
	r, err := bbPoolsOf(mc)
	if err != nil {
		return err
	}
	type pool struct {
		ID          string `json:"id"`
		Quantity    uint64 `json:"quantity"`
		Granularity uint64 `json:"granularity"`
	}
	out := struct {
		Pools []pool `json:"pools"`
	}{Pools: []pool{}}
	for _, p := range r.Pools {
		out.Pools = append(out.Pools, pool{ID: p.Pool, Quantity: p.Limit / bbGranule, Granularity: bbGranule})
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// bbStatus answers `scontrol show bbstat`: the pools, the grants and the
// jobs' buffer directories.
func bbStatus(mc *rpc.Client, mount string) error {
	r, err := bbPoolsOf(mc)
	if err != nil {
		return err
	}
	fmt.Printf("%-5s %-9s %10s %10s %10s\n", "POOL", "POLICY", "CAPACITY", "ADMITS", "GRANTED")
	for _, p := range r.Pools {
		fmt.Printf("%-5s %-9s %10s %10s %10s\n", p.Pool, p.Policy, size.Format(p.Capacity), size.Format(p.Limit), size.Format(p.Granted))
	}
	for _, g := range r.Grants {
		fmt.Printf("grant: job %s pool %s %s", g.Job, g.Pool, size.Format(g.Size))
		if g.Period > 0 {
			fmt.Printf(" every %s", time.Duration(g.Period*float64(time.Second)))
		}
		fmt.Printf(" (uid %d, since %s)\n", g.UID, time.Unix(0, g.Since).Format(time.DateTime))
	}
	if st, err := rpc.Do(context.Background(), mc, api.BBStatus, &wire.Empty{}); err == nil {
		for _, p := range st.Pools {
			fmt.Printf("pool %s period %s (%s in): written %s of %s expected (%s), demotion %s; checkpoints at %s/s, demotion at %s/s; %d phases, %d requests waited %s\n",
				p.Pool, p.Period, p.Elapsed.Round(time.Second), size.Format(p.DWSF), size.Format(p.DWPP), map[bool]string{true: "writing", false: "idle"}[p.Writing],
				p.Pattern, size.Format(uint64(p.Write)), size.Format(uint64(p.Demote)), p.Phases, p.Waited, p.WaitedTotal.Round(time.Millisecond))
		}
		t := st.Totals
		fmt.Printf("demoted %s (%d files), evicted %s (%d), bypassed %s (%d)\n", size.Format(t.Demoted), t.DemotedFiles,
			size.Format(t.Evicted), t.EvictedFiles, size.Format(t.Bypassed), t.BypassedFiles)
	}
	if mount == "" {
		return nil
	}
	ents, err := os.ReadDir(mount + "/.bb")
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	var jobs []string
	for _, e := range ents {
		jobs = append(jobs, e.Name())
	}
	sort.Strings(jobs)
	fmt.Printf("jobs with a buffer: %d %s\n", len(jobs), strings.Join(jobs, " "))
	return nil
}

// parseBB reads --bb-policy and --bb-rates (MB/s).
func parseBB(policy, rates string) (bbos.Policy, bbos.Rates, error) {
	p := bbos.Policy(policy)
	if !slices.Contains(bbos.Policies, p) {
		return "", bbos.Rates{}, fmt.Errorf("--bb-policy %q: want one of %v", policy, bbos.Policies)
	}
	var r bbos.Rates
	if rates != "" {
		f := strings.Split(rates, ",")
		if len(f) != 4 {
			return "", r, fmt.Errorf("--bb-rates %q: want WRITE_MAX,WRITE_MIN,DEMOTE_MIN,DEMOTE_MAX in MB/s", rates)
		}
		var v [4]float64
		for i, x := range f {
			n, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return "", r, fmt.Errorf("--bb-rates %q: %v", rates, err)
			}
			v[i] = n * 1e6
		}
		r = bbos.Rates{WriteMax: v[0], WriteMin: v[1], DemoteMin: v[2], DemoteMax: v[3]}
	}
	if p != bbos.Dedicated {
		if err := r.Validate(); err != nil {
			return "", r, fmt.Errorf("--bb-policy %s needs --bb-rates: %v", p, err)
		}
	}
	return p, r, nil
}

// bbReplay runs the checkpoint mix in file mixFile on the cluster mounted
// at mount (package workload/replay) and prints its record as JSON.
func bbReplay(mc *rpc.Client, mount, mixFile, pool string, restarts int) error {
	b, err := os.ReadFile(mixFile)
	if err != nil {
		return err
	}
	var mix workload.CkptMix
	if err := json.Unmarshal(b, &mix); err != nil {
		return fmt.Errorf("%s: %v", mixFile, err)
	}
	res, err := replay.Run(context.Background(), mc, mount, mix, pool, restarts)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
