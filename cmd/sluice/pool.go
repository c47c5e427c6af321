package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Resource pools (docs/placement.md): a named set of data servers with
// the bandwidth each gives the pool, bound to a directory or a job.

var poolCreateCmd = spec{use: "create NAME --servers ID,...", short: "create a pool of data servers",
	example: "sluice pool create fast --servers 1,2 --perf 1=500,2=300", setup: func(fs *pflag.FlagSet) func([]string) error {
		servers := fs.String("servers", "", "the pool's data servers, by id (see cluster status): 1,2,3")
		perf := fs.String("perf", "", "the pool's max_perf of some of its servers, MB/s: 1=500,2=300 (default: what each measured)")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want: pool create NAME --servers ID,ID [--perf ID=MB/s,...]")
			}
			p, err := parsePool(args[0], *servers, *perf)
			if err != nil {
				return err
			}
			_, err = rpc.Do(context.Background(), mc, api.PoolCreate, &p)
			return err
		})
	}}

// parsePool reads pool create's flags.
func parsePool(name, servers, perf string) (api.Pool, error) {
	p := api.Pool{Name: name}
	for _, f := range strings.Split(servers, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return p, fmt.Errorf("--servers: %q is not a server id", f)
		}
		p.Servers = append(p.Servers, id)
	}
	if perf == "" {
		return p, nil
	}
	p.Perf = map[uint64]float64{}
	for _, f := range strings.Split(perf, ",") {
		k, v, _ := strings.Cut(f, "=")
		id, err1 := strconv.ParseUint(strings.TrimSpace(k), 10, 64)
		mb, err2 := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err1 != nil || err2 != nil {
			return p, fmt.Errorf("--perf: %q: want ID=MB/s", f)
		}
		p.Perf[id] = mb
	}
	return p, nil
}

var poolRmCmd = spec{use: "rm NAME", short: "remove a pool", example: "sluice pool rm fast",
	aliases: []string{"remove"}, setup: func(fs *pflag.FlagSet) func([]string) error {
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want: pool rm NAME")
			}
			_, err := rpc.Do(context.Background(), mc, api.PoolRemove, &api.PoolRef{Name: args[0]})
			return err
		})
	}}

var poolBindCmd = spec{use: "bind (DIR | --job J) NAME", short: "place a directory's or a job's new chunks in a pool",
	example: "sluice pool bind /mnt/sluice/out fast\nsluice pool bind --job 7001 fast", setup: func(fs *pflag.FlagSet) func([]string) error {
		job := fs.String("job", "", "a job instead of a directory")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			want := 2
			if *job != "" {
				want = 1
			}
			if len(args) != want {
				return fmt.Errorf("want: pool bind DIR NAME | pool bind --job J NAME")
			}
			b, err := poolBinding(*job, args[:want-1])
			if err != nil {
				return err
			}
			b.Pool = args[want-1]
			_, err = rpc.Do(context.Background(), mc, api.PoolBind, &b)
			return err
		})
	}}

var poolUnbindCmd = spec{use: "unbind (DIR | --job J)", short: "undo pool bind", example: "sluice pool unbind /mnt/sluice/out",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		job := fs.String("job", "", "a job instead of a directory")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			want := 1
			if *job != "" {
				want = 0
			}
			if len(args) != want {
				return fmt.Errorf("want: pool unbind DIR | pool unbind --job J")
			}
			b, err := poolBinding(*job, args)
			if err != nil {
				return err
			}
			_, err = rpc.Do(context.Background(), mc, api.PoolUnbind, &b)
			return err
		})
	}}

// poolBinding names job, or the directory dir[0] by its inode.
func poolBinding(job string, dir []string) (api.PoolBinding, error) {
	if job != "" {
		return api.PoolBinding{Job: job}, nil
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir[0], &st); err != nil {
		return api.PoolBinding{}, fmt.Errorf("%s: %v", dir[0], err)
	}
	return api.PoolBinding{Ino: st.Ino}, nil
}

var poolListCmd = spec{use: "list", short: "show the pools, their servers' max_perf and backlog, and the bindings",
	example: "sluice pool list", aliases: []string{"ls"}, setup: func(fs *pflag.FlagSet) func([]string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			l, err := rpc.Do(context.Background(), mc, api.PoolLs, &wire.Empty{})
			if err != nil {
				return err
			}
			if *asJSON {
				return json.NewEncoder(os.Stdout).Encode(l)
			}
			return printPools(mc, l)
		})
	}}

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
