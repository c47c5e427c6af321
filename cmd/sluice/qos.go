package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// QoS rules (docs/qos.md) and how the forwarding daemons and data servers
// enforce them.

var qosAddCmd = spec{use: "add NAME [job=J] [uid=U] [gid=G] [node=N] [app=A] [op=read|write|meta] [rate=SIZE/s] [iops=N] [share=W]",
	short: "add a QoS rule (first match wins)", example: "sluice qos add ckpt app=wrf op=write rate=200M/s\nsluice qos add vip job=7001 share=4 --before ckpt",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		before := fs.String("before", "", "put the rule in front of this one (first match wins)")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf("want: qos add NAME [job=J] [uid=U] [gid=G] [node=N] [app=A] [op=read|write|meta] [rate=BYTES/s] [iops=N] [share=W] [--before RULE]")
			}
			r, err := qos.ParseRule(args[0], args[1:])
			if err != nil {
				return err
			}
			return printRules(rpc.Do(context.Background(), mc, api.QoSAdd, &api.QoSAddReq{Rule: r, Before: *before}))
		})
	}}

var qosRmCmd = spec{use: "rm NAME", short: "remove a QoS rule", example: "sluice qos rm ckpt",
	aliases: []string{"remove"}, setup: func(fs *pflag.FlagSet) func([]string) error {
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want: qos rm NAME")
			}
			return printRules(rpc.Do(context.Background(), mc, api.QoSRemove, &api.RuleRef{Name: args[0]}))
		})
	}}

// printRules prints the version a change of the rules made.
func printRules(rs *qos.RuleSet, err error) error {
	if err != nil {
		return err
	}
	fmt.Printf("QoS rules version %d\n", rs.Version)
	return nil
}

var qosListCmd = spec{use: "list", short: "show the QoS rules in order", example: "sluice qos list --json",
	aliases: []string{"ls"}, setup: func(fs *pflag.FlagSet) func([]string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			rs, err := rpc.Do(context.Background(), mc, api.QoSList, &wire.Empty{})
			if err != nil {
				return err
			}
			if *asJSON {
				return json.NewEncoder(os.Stdout).Encode(rs)
			}
			fmt.Printf("QoS rules version %d (first match wins; unmatched requests share fairly per job)\n", rs.Version)
			for _, r := range rs.Rules {
				fmt.Println(r)
			}
			return nil
		})
	}}

var qosStatsCmd = spec{use: "stats", short: "show each gate's flows: caps, shares, use and waits", example: "sluice qos stats",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		asJSON := fs.Bool("json", false, "print JSON")
		cn := addConn(fs)
		return withMeta(cn, func(mc *rpc.Client, args []string) error { return qosStats(mc, cn.secret(), *asJSON) })
	}}

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
