package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// cmdPool manages resource pools (meta/pool.go, docs/placement.md): a
// named set of data servers with the bandwidth each gives the pool, bound
// to a directory or a job.
func cmdPool(args []string) error {
	fs, cfg := flagSet("pool")
	servers := fs.String("servers", "", "create: the pool's data servers, by id (see status): 1,2,3")
	perf := fs.String("perf", "", "create: the pool's max_perf of some of its servers, MB/s: 1=500,2=300 (default: what each measured)")
	job := fs.String("job", "", "bind/unbind: a job instead of a directory")
	asJSON := fs.Bool("json", false, "list: print JSON")
	mc, sub, err := metaClientSub(fs, cfg, args, "create", "rm", "bind", "unbind", "list", "ls")
	if err != nil {
		return err
	}
	defer mc.Close()
	rest := fs.Args()
	ctx := context.Background()
	var c struct {
		Pool api.Pool
		Ino  uint64
		Job  string
	}
	var l *api.PoolList
	switch sub {
	case "create":
		if len(rest) != 1 {
			return fmt.Errorf("want: pool create NAME --servers ID,ID [--perf ID=MB/s,...]")
		}
		c.Pool.Name = rest[0]
		for _, f := range strings.Split(*servers, ",") {
			id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				return fmt.Errorf("--servers: %q is not a server id", f)
			}
			c.Pool.Servers = append(c.Pool.Servers, id)
		}
		if *perf != "" {
			c.Pool.Perf = map[uint64]float64{}
			for _, f := range strings.Split(*perf, ",") {
				k, v, _ := strings.Cut(f, "=")
				id, err1 := strconv.ParseUint(strings.TrimSpace(k), 10, 64)
				mb, err2 := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("--perf: %q: want ID=MB/s", f)
				}
				c.Pool.Perf[id] = mb
			}
		}
	case "rm":
		if len(rest) != 1 {
			return fmt.Errorf("want: pool rm NAME")
		}
		c.Pool.Name = rest[0]
	case "bind", "unbind":
		want := 1 // the pool (bind) or the directory (unbind)
		if sub == "bind" && *job == "" {
			want = 2
		}
		if sub == "unbind" && *job != "" {
			want = 0
		}
		if len(rest) != want {
			return fmt.Errorf("want: pool bind DIR NAME | pool bind --job J NAME | pool unbind DIR | pool unbind --job J")
		}
		c.Job = *job
		if *job == "" {
			var st syscall.Stat_t
			if err := syscall.Stat(rest[0], &st); err != nil {
				return fmt.Errorf("%s: %v", rest[0], err)
			}
			c.Ino = st.Ino
		}
		if sub == "bind" {
			c.Pool.Name = rest[len(rest)-1]
		}
	case "list", "ls":
		sub = "list"
	default:
		return fmt.Errorf("want: pool create|rm|bind|unbind|list")
	}
	switch sub {
	case "create":
		l, err = rpc.Do(ctx, mc, api.PoolCreate, &c.Pool)
	case "rm":
		l, err = rpc.Do(ctx, mc, api.PoolRemove, &api.PoolRef{Name: c.Pool.Name})
	case "bind":
		l, err = rpc.Do(ctx, mc, api.PoolBind, &api.PoolBinding{Pool: c.Pool.Name, Ino: c.Ino, Job: c.Job})
	case "unbind":
		l, err = rpc.Do(ctx, mc, api.PoolUnbind, &api.PoolBinding{Ino: c.Ino, Job: c.Job})
	default:
		l, err = rpc.Do(ctx, mc, api.PoolLs, &wire.Empty{})
	}
	if err != nil {
		return err
	}
	if sub != "list" {
		return nil
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(l)
	}
	return printPools(mc, l)
}

// printPools shows the pools with each member's max_perf (the pool's or
// measured) and estimated backlog, and the bindings.
func printPools(mc *rpc.Client, l *api.PoolList) error {
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	byID := map[uint64]wire.ServerInfo{}
	for _, s := range servers {
		byID[s.ID] = s
	}
	fmt.Printf("placement: %s\n", l.Placement)
	for _, pool := range l.Pools {
		var sum float64
		var members []string
		for _, id := range pool.Servers {
			mb, src := pool.Perf[id], "pool"
			if mb == 0 {
				mb, src = float64(byID[id].MaxPerf)/1e6, "measured"
			}
			sum += mb
			members = append(members, fmt.Sprintf("%d:%s %.0fMB/s (%s), %s pending", id, byID[id].Tier, mb, src, size.Format(byID[id].Pending)))
		}
		fmt.Printf("pool %s: %d servers, %.0f MB/s in all\n  %s\n", pool.Name, len(pool.Servers), sum, strings.Join(members, "\n  "))
	}
	var binds []string
	for d, name := range l.DirPools {
		binds = append(binds, fmt.Sprintf("directory ino %d → %s", d, name))
	}
	for j, name := range l.Jobs {
		binds = append(binds, fmt.Sprintf("job %s → %s", j, name))
	}
	sort.Strings(binds)
	for _, b := range binds {
		fmt.Println(b)
	}
	return nil
}
