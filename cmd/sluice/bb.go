package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/burstbuf"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/bbos"
)

// bbGranule is the pools' granularity: Slurm counts a pool in granules.
const bbGranule = 1 << 20

// cmdBB runs one stage of a job's burst buffer for Slurm's burst_buffer/lua
// plugin (contrib/slurm/burst_buffer.lua calls it from each hook).
func cmdBB(args []string) error {
	fs, cfg := flagSet("bb")
	job := fs.String("job", "", "the job's id")
	mount := fs.String("mount", "", "where sluice is mounted on this node")
	script := fs.String("script", "", "the job script holding the directives")
	directive := fs.String("directive", burstbuf.DefaultDirective, "the directive word (burst_buffer.conf Directive=)")
	uid := fs.Int("uid", -1, "the job's uid")
	gid := fs.Int("gid", -1, "the job's gid")
	pathFile := fs.String("path-file", "", "paths: the file Slurm adds to the job's environment")
	hurry := fs.Bool("hurry", false, "teardown: the job was cancelled; do not wait")
	nodes := fs.String("nodes", "", "pre-run: the job's nodes, comma-separated")
	wait := fs.Duration("wait", 0, "setup: how long to wait for the policy to admit the job's grant")
	asJSON := fs.Bool("json", false, "status: print the burst-buffer manager's state as JSON")
	mix := fs.String("mix", "", "replay: the checkpoint mix to run (`sluice workload --gen ckpt-mix`)")
	pool := fs.String("pool", "mem", "replay: the pool the applications ask for")
	restarts := fs.Int("restarts", 8, "replay: applications restarted (their newest checkpoint read) after the run")
	subs := []string{"job-process", "pools", "setup", "data-in", "paths", "pre-run", "post-run", "data-out", "teardown", "status", "replay"}
	mc, sub, err := metaClientSub(fs, cfg, args, subs...)
	if err != nil {
		return err
	}
	defer mc.Close()
	if sub == "" {
		return fmt.Errorf("want one of: %s", strings.Join(subs, ", "))
	}
	ctx := context.Background()
	if sub == "pools" {
		return bbPools(mc)
	}
	if sub == "replay" {
		if *mix == "" || *mount == "" {
			return fmt.Errorf("replay: want --mix and --mount")
		}
		return cmdBBReplay(mc, *mount, *mix, *pool, *restarts)
	}
	if sub == "status" {
		if *asJSON {
			st, err := rpc.Do(ctx, mc, api.BBStatus, &wire.Empty{})
			if err == nil {
				err = json.NewEncoder(os.Stdout).Encode(st)
			}
			return err
		}
		return bbStatus(mc, *mount)
	}
	if *script == "" {
		return fmt.Errorf("%s: want --script", sub)
	}
	b, err := os.ReadFile(*script)
	if err != nil {
		return err
	}
	spec, err := burstbuf.Parse(string(b), *directive)
	if err != nil {
		return err
	}
	if sub == "job-process" {
		return nil // the directives parse; Slurm checks the pool and charges it
	}
	if *job == "" || *mount == "" {
		return fmt.Errorf("%s: want --job and --mount", sub)
	}
	j := burstbuf.Job{ID: *job, Mount: *mount, Spec: spec, UID: *uid, GID: *gid}
	toTier := func(ctx context.Context, path, tier string) error {
		_, err := migrate(ctx, mc, path, tier, true)
		return err
	}
	switch sub {
	case "setup":
		if *uid < 0 || *gid < 0 {
			return fmt.Errorf("setup: want --uid and --gid")
		}
		if err := j.Setup(); err != nil {
			return err
		}
		if spec.Pool == "" {
			return nil // a directory, no buffer asked for
		}
		if spec.Capacity == 0 {
			// the grant from the application's past runs
			if err := bbFromProfile(ctx, mc, &spec); err != nil {
				j.Teardown()
				return err
			}
		}
		ckpt, err := j.CheckpointPath()
		if err != nil {
			j.Teardown()
			return err
		}
		g := api.Grant{Job: j.ID, Pool: spec.Pool, Size: uint64(spec.Capacity), Period: spec.Period.Seconds(), UID: uint32(*uid),
			App: spec.App, Checkpoint: ckpt, MTBF: spec.MTBF.Seconds()}
		if err := bbGrant(ctx, mc, g, *wait); err != nil {
			j.Teardown()
			return err
		}
		return nil
	case "data-in":
		return j.StageIn(ctx, toTier)
	case "paths":
		if *pathFile == "" {
			return fmt.Errorf("paths: want --path-file")
		}
		return os.WriteFile(*pathFile, []byte(j.Env()), 0o644)
	case "pre-run":
		// Beacon and DFRA learn the job (the prolog does it too where
		// it runs; a second start is harmless)
		spec := fwdmap.JobSpec{ID: j.ID, User: uint32(max(*uid, 0))}
		if *nodes != "" {
			spec.Nodes = strings.Split(*nodes, ",")
		}
		if spec.App = j.Spec.App; spec.App != "" {
			spec.App = "tag:" + spec.App
		}
		_, err := rpc.Do(ctx, mc, fwdmap.Start, &spec)
		return err
	case "post-run":
		return nil
	case "data-out":
		return j.StageOut(ctx, toTier)
	case "teardown":
		// the buffer goes at once either way; in a hurry (a cancelled
		// job) an unreachable metadata service does not hold it up
		err := j.Teardown()
		_, e1 := rpc.Do(ctx, mc, api.BBRelease, &api.JobRef{Job: j.ID})
		_, e2 := rpc.Do(ctx, mc, fwdmap.End, &fwdmap.JobRef{Job: j.ID})
		if e := errors.Join(e1, e2); e != nil && err == nil && !*hurry {
			err = e
		}
		return err
	}
	return fmt.Errorf("unknown stage %q", sub)
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
