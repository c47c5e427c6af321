package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/burstbuf"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
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
	subs := []string{"job-process", "pools", "setup", "data-in", "paths", "pre-run", "post-run", "data-out", "teardown", "status"}
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
	if sub == "status" {
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
	migrate := func(ctx context.Context, path, tier string) error {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		_, _, err := mc.Call(ctx, &wire.Msg{Op: wire.OpMigrate, Ino: st.Ino, Tier: tier, Flags: wire.MoveWait}, nil, nil)
		return err
	}
	switch sub {
	case "setup":
		if *uid < 0 || *gid < 0 {
			return fmt.Errorf("setup: want --uid and --gid")
		}
		return j.Setup()
	case "data-in":
		return j.StageIn(ctx, migrate)
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
		b, _ := json.Marshal(spec)
		_, _, err := mc.Call(ctx, &wire.Msg{Op: wire.OpJob, Name: fwdmap.CallStart}, b, nil)
		return err
	case "post-run":
		return nil
	case "data-out":
		return j.StageOut(ctx, migrate)
	case "teardown":
		// the buffer goes at once either way; in a hurry (a cancelled
		// job) an unreachable metadata service does not hold it up
		err := j.Teardown()
		if _, _, e := mc.Call(ctx, &wire.Msg{Op: wire.OpJob, Name: fwdmap.CallEnd, Who: wire.Who{Job: j.ID}}, nil, nil); e != nil && err == nil && !*hurry {
			err = e
		}
		return err
	}
	return fmt.Errorf("unknown stage %q", sub)
}

// bbPoolsOf sums the live data servers' capacity and use per buffer tier.
func bbPoolsOf(mc *rpc.Client) (map[string][2]uint64, error) {
	servers, err := listServers(mc)
	if err != nil {
		return nil, err
	}
	pools := map[string][2]uint64{}
	for _, s := range servers {
		if s.Role != "data" || !s.Alive || s.Tier != "mem" && s.Tier != "ssd" {
			continue
		}
		p := pools[s.Tier]
		pools[s.Tier] = [2]uint64{p[0] + s.Capacity, p[1] + s.Used}
	}
	return pools, nil
}

// bbPools prints the pools for slurm_bb_pools: one per buffer tier, its
// capacity in MiB granules.
func bbPools(mc *rpc.Client) error {
	pools, err := bbPoolsOf(mc)
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
	for _, t := range []string{"mem", "ssd"} {
		if p, ok := pools[t]; ok {
			out.Pools = append(out.Pools, pool{ID: t, Quantity: p[0] / bbGranule, Granularity: bbGranule})
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// bbStatus answers `scontrol show bbstat`: the pools and the jobs'
// buffer directories.
func bbStatus(mc *rpc.Client, mount string) error {
	pools, err := bbPoolsOf(mc)
	if err != nil {
		return err
	}
	fmt.Printf("%-5s %10s %10s %10s\n", "POOL", "CAPACITY", "USED", "FREE")
	for _, t := range []string{"mem", "ssd"} {
		if p, ok := pools[t]; ok {
			fmt.Printf("%-5s %10s %10s %10s\n", t, size.Format(p[0]), size.Format(p[1]), size.Format(p[0]-min(p[0], p[1])))
		}
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
