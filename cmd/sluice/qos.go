package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// cmdQoS manages the QoS rules (docs/qos.md) and shows how the forwarding
// daemons and data servers enforce them.
func cmdQoS(args []string) error {
	fs, cfg := flagSet("qos")
	before := fs.String("before", "", "add: put the rule in front of this one (first match wins)")
	asJSON := fs.Bool("json", false, "list, stats: print JSON")
	mc, sub, err := metaClientSub(fs, cfg, args, "add", "rm", "list", "ls", "stats")
	if err != nil {
		return err
	}
	defer mc.Close()
	rest := fs.Args()
	ctx := context.Background()
	var rs *qos.RuleSet
	switch sub {
	case "add":
		if len(rest) < 2 {
			return fmt.Errorf("want: qos add NAME [job=J] [uid=U] [gid=G] [node=N] [app=A] [op=read|write|meta] [rate=BYTES/s] [iops=N] [share=W] [--before RULE]")
		}
		r, perr := qos.ParseRule(rest[0], rest[1:])
		if perr != nil {
			return perr
		}
		rs, err = rpc.Do(ctx, mc, api.QoSAdd, &api.QoSAddReq{Rule: r, Before: *before})
	case "rm":
		if len(rest) != 1 {
			return fmt.Errorf("want: qos rm NAME")
		}
		rs, err = rpc.Do(ctx, mc, api.QoSRemove, &api.RuleRef{Name: rest[0]})
	case "list", "ls":
		sub = "list"
		rs, err = rpc.Do(ctx, mc, api.QoSList, &wire.Empty{})
	case "stats":
		return qosStats(mc, mustSecret(fs), *asJSON)
	default:
		return fmt.Errorf("want: qos add|rm|list|stats")
	}
	if err != nil {
		return err
	}
	if sub == "list" && *asJSON {
		return json.NewEncoder(os.Stdout).Encode(rs)
	}
	if sub != "list" {
		fmt.Printf("QoS rules version %d\n", rs.Version)
		return nil
	}
	fmt.Printf("QoS rules version %d (first match wins; unmatched requests share fairly per job)\n", rs.Version)
	for _, r := range rs.Rules {
		fmt.Println(r)
	}
	return nil
}

// qosServerStats is one server's answer to api.QoSStats.
type qosServerStats struct {
	ID    uint64
	Addr  string
	Gates []qos.GateStats
}

// qosStats asks every live forwarding daemon and data server for its
// gates' flows.
func qosStats(mc *rpc.Client, secret []byte, asJSON bool) error {
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	var all []qosServerStats
	for _, si := range servers {
		if (si.Role != "fwd" && si.Role != "data") || !si.Alive {
			continue
		}
		c := rpc.NewClient(si.Addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second, Name: si.Role + " server " + si.Addr})
		r, err := rpc.Do(context.Background(), c, api.QoSStats, &wire.Empty{})
		c.Close()
		if err != nil {
			return err
		}
		all = append(all, qosServerStats{ID: si.ID, Addr: si.Addr, Gates: r.Gates})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	if asJSON {
		b, _ := json.Marshal(all)
		os.Stdout.Write(append(b, '\n'))
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tGATE\tRULES\tFLOW\tCAP\tSHARE\tGRANTED\tUSED/s\tOPS/s\tBYTES\tREQS\tQUEUED\tWAITED\tCAPPED")
	for _, s := range all {
		for _, g := range s.Gates {
			for _, f := range g.Flows {
				limit := "-"
				var caps []string
				if f.Rate > 0 {
					caps = append(caps, size.Format(uint64(f.Rate))+"/s")
				}
				if f.Ops > 0 {
					caps = append(caps, fmt.Sprintf("%.0f ops/s", f.Ops))
				}
				if len(caps) > 0 {
					limit = strings.Join(caps, ",")
				}
				fmt.Fprintf(w, "%d\t%s/%s\tv%d\t%s\t%s\t%g\t%.0f%%\t%s\t%.0f\t%s\t%d\t%d\t%s\t%d\n",
					s.ID, g.Role, g.Class, g.Version, f.Key, limit, f.Share, 100*f.Granted,
					size.Format(uint64(f.Used)), f.UsedOps, size.Format(f.Bytes), f.N, f.Depth,
					f.Wait.Round(time.Millisecond), f.Capped)
			}
		}
	}
	return w.Flush()
}
