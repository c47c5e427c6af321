package main

import (
	"context"
	"errors"
	"fmt"
	_ "net/http/pprof"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/policy/tiering"
)

// beaconName is the name a server's monitoring records carry.
func beaconName(s wire.ServerInfo) string {
	if s.Role == "data" {
		return fmt.Sprintf("data-%s-%d", s.Tier, s.ID)
	}
	return fmt.Sprintf("%s-%d", s.Role, s.ID)
}

var statusCmd = spec{use: "status", short: "show servers, tiers, forwarding nodes, clients and the tiering manager's state",
	example: "sluice cluster status", setup: func(fs *pflag.FlagSet) func([]string) error {
		return withServers(addConn(fs), status)
	}}

func status(mc *rpc.Client, servers []wire.ServerInfo) error {
	if addrs := strings.Split(mc.Addr(), ","); len(addrs) > 1 { // the one that answered is the active one
		active := mc.Serving()
		fmt.Printf("metadata service: %s active; standing by: %s\n\n", active,
			strings.Join(slices.DeleteFunc(addrs, func(a string) bool { return a == active }), ", "))
	}
	sort.SliceStable(servers, func(i, j int) bool { return servers[i].Role < servers[j].Role })
	// Beacon's fail-slow verdicts (empty when monitoring is off)
	slow := map[string]float64{}
	if hs, err := (beaconrpc.Client{C: mc}).Health(context.Background()); err == nil {
		for _, h := range hs {
			slow[h.Server] = h.Ratio
		}
	}
	fmt.Printf("%-4s %-7s %-5s %-22s %-10s %10s %10s %6s %8s %8s %s\n", "ID", "ROLE", "TIER", "ADDRESS", "NODE", "CAPACITY", "USED", "USED%", "MAX_PERF", "PENDING", "STATE")
	tiers := map[string][2]uint64{}
	for _, s := range servers {
		state := "up"
		if !s.Alive {
			state = "DOWN"
		} else if r, ok := slow[beaconName(s)]; ok {
			state = fmt.Sprintf("FAIL-SLOW (%.1f× its peers' latency)", r)
		}
		capS, usedS, pct, perf, open := "-", "-", "-", "-", "-"
		if s.Role == "data" {
			capS, usedS, open = size.Format(s.Capacity), size.Format(s.Used), size.Format(s.Pending)
			if s.MaxPerf > 0 {
				perf = fmt.Sprintf("%.1fMB/s", float64(s.MaxPerf)/1e6)
			}
			if s.Capacity > 0 {
				pct = fmt.Sprintf("%.1f", 100*float64(s.Used)/float64(s.Capacity))
			}
			if s.Alive {
				t := tiers[s.Tier]
				tiers[s.Tier] = [2]uint64{t[0] + s.Capacity, t[1] + s.Used}
			}
		}
		tier := s.Tier
		if tier == "" {
			tier = "-"
		}
		if s.Domain != "" {
			state += " (domain " + s.Domain + ")"
		}
		fmt.Printf("%-4d %-7s %-5s %-22s %-10s %10s %10s %6s %8s %8s %s\n", s.ID, s.Role, tier, s.Addr, s.Node, capS, usedS, pct, perf, open, state)
	}
	fmt.Println("\nTIER  CAPACITY       USED")
	for _, t := range []string{"mem", "ssd", "hdd", "pfs"} {
		if v, ok := tiers[t]; ok {
			fmt.Printf("%-5s %-14s %s\n", t, size.Format(v[0]), size.Format(v[1]))
		}
	}
	if err := printManagers(mc); err != nil {
		return err
	}
	return printTiering(mc)
}

// printManagers shows where each manager runs and which instance answers
// for it (nothing from a metadata service too old to say: ENOSYS).
func printManagers(mc *rpc.Client) error {
	rep, err := rpc.Do(context.Background(), mc, api.Managers, &wire.Empty{})
	if errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("\n%-13s %-26s %s\n", "MANAGER", "RUNS", "ACTIVE")
	for _, m := range rep.Managers {
		runs, active := "in the metadata service", m.Active
		if m.Apart {
			runs = "apart"
			if m.Role != "monitor" {
				runs = "apart (sluice manager)"
			}
		}
		if active == "" {
			active = "NONE (a takeover, or no instance running)"
		}
		if m.Error != "" {
			active = "? " + m.Error
		}
		fmt.Printf("%-13s %-26s %s\n", m.Role, runs, active)
	}
	return nil
}

// printTiering shows each server's free-space mode against its thresholds
// and the migrations in flight (the tiering manager's latest decisions).
func printTiering(mc *rpc.Client) error {
	st, err := rpc.Do(context.Background(), mc, api.TierStatus, &wire.Empty{})
	if err != nil {
		return err
	}
	fmt.Printf("\nTIERING  %d files, %d chunks, %s migrated; %d chunk moves aborted; %d files drained to the PFS\n", st.Totals.Files, st.Totals.Chunks,
		size.Format(st.Totals.Bytes), st.Totals.Failed, st.Totals.Drained)
	if st.Totals.Replicated > 0 || st.Totals.ReplicaFailed > 0 {
		fmt.Printf("REPLICAS %d chunk copies made again (%s), %d tries failed\n", st.Totals.Replicated,
			size.Format(st.Totals.ReplicaBytes), st.Totals.ReplicaFailed)
	}
	if len(st.Servers) > 0 {
		fmt.Printf("%-4s %-12s %10s %10s %10s %4s %9s %s\n", "ID", "MODE", "Cs-w", "Cf-m", "Cn-m", "N", "IN-FLIGHT", "WHY")
	}
	for _, s := range st.Servers {
		fmt.Printf("%-4d %-12s %10s %10s %10s %4d %9d %s\n", s.ID, s.Mode, size.Format(s.StallWrite), size.Format(s.ForcedOut),
			size.Format(s.NormalOut), s.Concurrency, s.InFlight, s.Reason)
	}
	if len(st.Prefetch) > 0 {
		fmt.Printf("\nPREFETCH %-14s %6s %9s %6s %7s %6s %7s %10s %s\n", "JOB", "FILES", "PROMOTED", "READ", "WINDOW", "FAILED", "UNREAD", "BYTES", "STATE")
	}
	for _, p := range st.Prefetch {
		state := "running"
		if p.Done {
			state = "done in " + p.Finished.Sub(p.Started).Round(time.Millisecond).String()
		}
		fmt.Printf("         %-14s %6d %9d %6d %7d %6d %7d %10s %s\n", p.Job, p.Files, p.Promoted, p.Read, p.InWindow, p.Failed,
			p.Dropped, size.Format(p.PromotedBytes), state)
	}
	return nil
}

// cmdPrefetch hands the tiering manager a job's input files, in the order
// the job will read them, to promote to the mem tier ahead of the reads.
var prefetchCmd = spec{use: "prefetch --job J PATH...", short: "promote a job's input files to the mem tier ahead of its reads",
	example: "sluice file prefetch --job 7001 --list inputs.txt", setup: func(fs *pflag.FlagSet) func([]string) error {
		job := fs.String("job", "", "the job that will read the files")
		list := fs.String("list", "", "file holding the paths, one per line, in reading order (besides or instead of PATH arguments)")
		return withPaths(addConn(fs), func(mc *rpc.Client, args []string) error { return prefetch(mc, *job, *list, args) })
	}}

func prefetch(mc *rpc.Client, job, list string, paths []string) error {
	if list != "" {
		b, err := os.ReadFile(list)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				paths = append(paths, l)
			}
		}
	}
	if job == "" || len(paths) == 0 {
		return fmt.Errorf("want --job and at least one file (arguments or --list)")
	}
	q := &api.PrefetchReq{Job: job}
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		q.Files = append(q.Files, st.Ino)
	}
	if _, err := rpc.Do(context.Background(), mc, api.Prefetch, q); err != nil {
		return err
	}
	fmt.Printf("prefetching %d files for job %s (sluice cluster status shows progress)\n", len(paths), job)
	return nil
}

var migrateCmd = spec{use: "migrate --tier T PATH...", short: "move files' data to a tier now",
	example: "sluice file migrate --tier pfs /mnt/sluice/out/*.h5", setup: func(fs *pflag.FlagSet) func([]string) error {
		to := fs.String("tier", "", "destination tier: mem, ssd, hdd or pfs")
		noWait := fs.Bool("no-wait", false, "return at once; the move goes on in the metadata daemon")
		return withPaths(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) == 0 || *to == "" {
				return fmt.Errorf("want --tier and at least one path")
			}
			for _, p := range args {
				moved, err := migrate(context.Background(), mc, p, *to, !*noWait)
				if err != nil {
					return err
				}
				if !*noWait {
					fmt.Printf("%s: %d chunks moved to %s\n", p, moved, *to)
				}
			}
			return nil
		})
	}}

// migrate asks the tiering manager to move file path to tier (and, if
// wait, answers when it is there, with the chunks moved).
func migrate(ctx context.Context, mc *rpc.Client, path, tier string, wait bool) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	r, err := rpc.Do(ctx, mc, api.Migrate, &api.MigrateReq{Ino: st.Ino, Tier: tier, Wait: wait})
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	return r.Chunks, nil
}

// listServers asks the metadata service for every registered daemon.
func listServers(mc *rpc.Client) ([]wire.ServerInfo, error) {
	resp, err := rpc.Do(context.Background(), mc, api.Servers, &wire.Empty{})
	if err != nil {
		return nil, err
	}
	return resp.Servers, nil
}

var jobActivityCmd = spec{use: "activity", short: "what each job did, as the forwarding nodes saw it",
	example: "sluice job activity", setup: func(fs *pflag.FlagSet) func([]string) error {
		cn := addConn(fs)
		return withServers(cn, func(_ *rpc.Client, servers []wire.ServerInfo) error { return jobActivity(servers, cn.secret()) })
	}}

func jobActivity(servers []wire.ServerInfo, secret []byte) error {
	ctx := context.Background()
	type agg struct {
		api.JobCounters
		fwds  []string
		ranks map[int32]bool
		nodes map[string]bool
	}
	jobs := map[string]*agg{}
	for _, si := range servers {
		if si.Role != "fwd" || !si.Alive {
			continue
		}
		fc := rpc.NewClient(si.Addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second, Name: "forwarding node " + si.Addr})
		r, err := rpc.Do(ctx, fc, api.JobStats, &wire.Empty{})
		fc.Close()
		if err != nil {
			return err
		}
		for _, c := range r.Jobs {
			a := jobs[c.Job]
			if a == nil {
				a = &agg{JobCounters: api.JobCounters{Job: c.Job}, ranks: map[int32]bool{}, nodes: map[string]bool{}}
				jobs[c.Job] = a
			}
			a.Ops += c.Ops
			a.MetaOps += c.MetaOps
			a.ReadBytes += c.ReadBytes
			a.WriteBytes += c.WriteBytes
			a.fwds = append(a.fwds, strconv.FormatUint(si.ID, 10))
			for _, x := range c.Ranks {
				a.ranks[x] = true
			}
			for _, x := range c.Nodes {
				a.nodes[x] = true
			}
		}
	}
	var names []string
	for n := range jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%-10s %8s %8s %12s %12s %6s %-14s %s\n", "JOB", "OPS", "META", "READ", "WRITTEN", "RANKS", "NODES", "FWD")
	for _, n := range names {
		a := jobs[n]
		var nodes []string
		for x := range a.nodes {
			nodes = append(nodes, x)
		}
		sort.Strings(nodes)
		fmt.Printf("%-10s %8d %8d %12s %12s %6d %-14s %s\n", n, a.Ops, a.MetaOps, size.Format(a.ReadBytes),
			size.Format(a.WriteBytes), len(a.ranks), strings.Join(nodes, ","), strings.Join(a.fwds, ","))
	}
	return nil
}

var statCmd = spec{use: "stat PATH", short: "show a file's layout, migration, activity and coolness",
	example: "sluice file stat /mnt/sluice/ckpt/rank0", setup: func(fs *pflag.FlagSet) func([]string) error {
		return withPaths(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one path")
			}
			return stat(mc, args[0])
		})
	}}

func stat(mc *rpc.Client, path string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	ctx := context.Background()
	a, err := rpc.Do(ctx, mc, ns.Getattr, &ns.InoReq{Ino: st.Ino})
	if rpc.Errno(err) == syscall.ENOENT {
		// a mount answers creates and closes before the service hears of
		// them (write-back creates, close-behind): an fsync through it
		// sends what the file depends on. (Only then: the open would count
		// in the file's activity, which this command shows.)
		if f, oerr := os.Open(path); oerr == nil {
			f.Sync()
			f.Close()
			a, err = rpc.Do(ctx, mc, ns.Getattr, &ns.InoReq{Ino: st.Ino})
		}
	}
	if err != nil {
		return err
	}
	l, err := rpc.Do(ctx, mc, ns.Layout, &ns.FileReq{Ino: st.Ino})
	if err != nil {
		return err
	}
	at := a.Attr
	fmt.Printf("path:        %s\ninode:       %d\nsize:        %d\ntruncations: %d\nchunk size:  %d\nstripe:      count %d, unit %d\nchunks:      %d allocated\n",
		path, at.Ino, at.Size, at.Trunc, at.ChunkSize, at.StripeCnt, at.StripeUnit, len(l.Chunks))
	for _, c := range l.Chunks {
		reps := ""
		if len(c.Replicas) > 0 {
			reps = fmt.Sprintf(" replicas %v", c.Replicas)
		}
		if len(c.Home) > 0 {
			reps += fmt.Sprintf(" (a cache: clean copy on pfs %v)", c.Home)
		}
		fmt.Printf("  chunk %-6d tier %-4s servers %v%s generation %d\n", c.Idx, c.Tier, c.Servers, reps, c.Gen)
	}
	if fst, err := rpc.Do(ctx, mc, api.FileMigration, &api.FileRef{Ino: st.Ino}); err == nil {
		state := "none"
		if fst.Migrating {
			state = "moving now"
		}
		fmt.Printf("migration:   %s\n", state)
		for _, c := range fst.Chunks {
			fmt.Printf("  chunk %-6d %s → %s %v, %s\n", c.Idx, c.From, c.To, c.Servers, c.State)
		}
	}
	act, err := rpc.Do(ctx, mc, ns.Activity, &ns.FileReq{Ino: st.Ino})
	if err != nil {
		return err
	}
	printActivity(*act, time.Now())
	return nil
}

// printActivity prints a file's open/close history and what the tiering
// policy makes of it.
func printActivity(a wire.Activity, now time.Time) {
	ago := func(ns int64) string {
		if ns == 0 {
			return "never"
		}
		return now.Sub(time.Unix(0, ns)).Round(time.Millisecond).String() + " ago"
	}
	mean := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return d.Round(time.Millisecond).String()
	}
	fmt.Printf("activity:    %d open handles; opened %d times since the metadata service started; last open %s, last close %s\n",
		a.Open, a.Opened, ago(a.LastOpen), ago(a.LastClose))
	fmt.Printf("             mean open→close %s, close→open %s\n", mean(a.MeanToc), mean(a.MeanTco))
	fmt.Printf("             last read or write %s (as the forwarding daemons report it)\n", ago(a.LastAccess))
	switch {
	case a.Open > 0:
		fmt.Printf("coolness:    open: moves down only under forced out, by its place in the LRU of open files (last read or write)\n")
	case a.LastClose == 0:
		fmt.Printf("coolness:    not seen closed since the metadata service started\n")
	default:
		c := tiering.NormalCoolness(tiering.File{LastClose: time.Unix(0, a.LastClose), MeanTco: a.MeanTco, MeanToc: a.MeanToc}, now)
		fmt.Printf("coolness:    %.4g for normal out (Close·T_closed·(T_co/T_oc), policy/tiering)\n", c)
	}
}

var stripeCmd = spec{use: "stripe DIR", short: "set a directory's chunk size and striping, or its node-local mode",
	example: "sluice file stripe --chunk-size 1M --count 2 /mnt/sluice/out\nsluice file stripe --local /mnt/sluice/scratch", setup: setupStripe}

func setupStripe(fs *pflag.FlagSet) func([]string) error {
	chunk := fs.String("chunk-size", "0", "chunk size (power of two, e.g. 4M)")
	count := fs.Uint("count", 0, "stripe count: data servers per chunk")
	unit := fs.String("unit", "0", "stripe unit")
	local := fs.Bool("local", false, "node-local mode: the directory's entries (one private directory per node or rank) and all under them live on the data server each name hashes to, with no metadata-service operation (docs/nodelocal.md)")
	global := fs.Bool("global", false, "take the directory out of node-local mode")
	tier := fs.String("tier", "", "with --local: the tier whose data servers keep the entries (default: the fastest with servers)")
	return withPaths(addConn(fs), func(mc *rpc.Client, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("want one directory")
		}
		return stripe(mc, args[0], *chunk, *count, *unit, *tier, *local, *global)
	})
}

func stripe(mc *rpc.Client, dir, chunk string, count uint, unit, tier string, local, global bool) error {
	cs, err := size.Parse(chunk)
	if err != nil {
		return fmt.Errorf("--chunk-size: %v", err)
	}
	us, err := size.Parse(unit)
	if err != nil {
		return fmt.Errorf("--unit: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	if local || global {
		resp, err := rpc.Do(context.Background(), mc, ns.SetLayout, &ns.SetLayoutReq{Ino: st.Ino, Tier: tier, Local: !global, Global: global})
		if err != nil {
			return err
		}
		if resp.Tier == "" {
			fmt.Printf("%s: global (entries in the metadata service)\n", dir)
		} else {
			fmt.Printf("%s: node-local, entries on the %s tier's data servers\n", dir, resp.Tier)
		}
		return nil
	}
	resp, err := rpc.Do(context.Background(), mc, ns.SetLayout, &ns.SetLayoutReq{Ino: st.Ino,
		ChunkSize: uint32(cs), StripeCnt: uint32(count), StripeUnit: uint32(us)})
	if err != nil {
		return err
	}
	fmt.Printf("%s: chunk size %d, stripe count %d, unit %d\n", dir, resp.Attr.ChunkSize, resp.Attr.StripeCnt, resp.Attr.StripeUnit)
	return nil
}

var faultCmd = spec{use: "fault --server ID (--slow F | --fill SIZE | --stall MS | --pause POINT | --resume POINT)",
	short:   "inject a fault into a data server, a forwarding node or the metadata service (tests)",
	example: "sluice cluster fault --server 3 --slow 10\nsluice cluster fault --server 3 --slow 1", setup: setupFault}

func setupFault(fs *pflag.FlagSet) func([]string) error {
	id := fs.Uint64("server", 0, "id of the data server or forwarding node (see cluster status)")
	slow := fs.Float64("slow", 0, "make every request take this many times as long")
	fill := fs.String("fill", "", "shrink the tier's budget to this size")
	stall := fs.Int("stall", -1, "delay every request by this many milliseconds (0 clears)")
	pause := fs.String("pause", "", "hold the next migration at this step until --resume (crash tests): move-begun, move-copying, move-stopped (data server that copies), move-committed (--meta-service)")
	resume := fs.String("resume", "", "release the pause point armed with --pause")
	toMeta := fs.Bool("meta-service", false, "inject into the metadata service (--pause/--resume)")
	cn := addConn(fs)
	return withServers(cn, func(mc *rpc.Client, servers []wire.ServerInfo) error {
		f := faultArgs{id: *id, slow: *slow, fill: *fill, stall: *stall, pause: *pause, resume: *resume, toMeta: *toMeta}
		return fault(mc, servers, cn.secret(), f)
	})
}

// faultArgs are fault's flags.
type faultArgs struct {
	id                  uint64
	slow                float64
	fill, pause, resume string
	stall               int
	toMeta              bool
}

func fault(mc *rpc.Client, servers []wire.ServerInfo, secret []byte, f faultArgs) error {
	ctx := context.Background()
	point := &api.FaultReq{Kind: api.FaultPause, Point: f.pause}
	if f.resume != "" {
		point.Kind, point.Point = api.FaultResume, f.resume
	}
	if f.toMeta {
		if point.Point == "" {
			return fmt.Errorf("--meta-service takes --pause or --resume")
		}
		_, err := rpc.Do(ctx, mc, api.Fault, point)
		return err
	}
	var target *wire.ServerInfo
	for i := range servers {
		if servers[i].ID == f.id {
			target = &servers[i]
		}
	}
	if target == nil || target.Role == "client" {
		return fmt.Errorf("--server %d: no such data server or forwarding node", f.id)
	}
	var m *api.FaultReq
	switch {
	case f.slow > 0:
		m = &api.FaultReq{Kind: api.FaultSlow, Value: uint64(f.slow * 100)}
	case f.fill != "":
		n, err := size.Parse(f.fill)
		if err != nil {
			return fmt.Errorf("--fill: %v", err)
		}
		m = &api.FaultReq{Kind: api.FaultFill, Value: uint64(n)}
	case f.stall >= 0:
		m = &api.FaultReq{Kind: api.FaultStall, Value: uint64(f.stall)}
	case point.Point != "":
		m = point
	default:
		return fmt.Errorf("give one of --slow, --fill, --stall, --pause, --resume")
	}
	sc := rpc.NewClient(target.Addr, secret, rpc.ClientOptions{Timeout: 10 * time.Second, Name: fmt.Sprintf("server %d", f.id)})
	defer sc.Close()
	_, err := rpc.Do(ctx, sc, api.Fault, m)
	return err
}

var tierSetCmd = spec{use: "set DIR", short: "set a directory's tiering policy (what the flags name changes)",
	example: "sluice tier set --pin mem --drain on-close /mnt/sluice/hot", setup: func(fs *pflag.FlagSet) func([]string) error {
		pin := fs.String("pin", "", "files never move below this tier (mem or ssd; none clears)")
		drain := fs.String("drain", "", "when files move down to the PFS: now, on-close, cool or never (none clears)")
		keepCache := fs.Bool("keep-cache", false, "a drained file's fast copy stays as a clean cache, dropped with nothing to copy when space is needed (=false clears)")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			var keep *bool
			if fs.Changed("keep-cache") {
				keep = keepCache
			}
			return tierPolicy(mc, "set", args, *pin, *drain, keep)
		})
	}}

var tierShowCmd = spec{use: "show PATH", short: "show the tiering policy a file or directory follows",
	example: "sluice tier show /mnt/sluice/hot/a", setup: func(fs *pflag.FlagSet) func([]string) error {
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error { return tierPolicy(mc, "show", args, "", "", nil) })
	}}

// tierBudgetCmd lends a mem-tier server's memory to its node (its files
// move off until its usage fits the smaller budget) or gives it back.
var tierBudgetCmd = spec{use: "budget --server ID (SIZE | --release)", short: "shrink a mem-tier server's budget at run time, or give it back",
	example: "sluice tier budget --server 2 512M\nsluice tier budget --server 2 --release", setup: func(fs *pflag.FlagSet) func([]string) error {
		id := fs.Uint64("server", 0, "id of the data server (see cluster status)")
		release := fs.Bool("release", false, "give the server its configured budget back")
		wait := fs.Duration("wait", 5*time.Minute, "wait this long for the server's data to fit the smaller budget (0: do not wait)")
		cn := addConn(fs)
		return withMeta(cn, func(mc *rpc.Client, args []string) error {
			return tierBudget(mc, cn.secret(), *id, *release, *wait, args)
		})
	}}

func tierBudget(mc *rpc.Client, secret []byte, id uint64, release bool, wait time.Duration, args []string) error {
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	var target *wire.ServerInfo
	for i := range servers {
		if servers[i].ID == id && servers[i].Role == "data" {
			target = &servers[i]
		}
	}
	if target == nil {
		return fmt.Errorf("--server %d: no such data server", id)
	}
	m := &api.BudgetReq{}
	switch {
	case release:
		m.Release = true
	case len(args) == 1:
		n, err := size.Parse(args[0])
		if err != nil {
			return fmt.Errorf("budget: %v", err)
		}
		m.Size = uint64(n)
	default:
		return fmt.Errorf("give the budget (e.g. 1G) or --release")
	}
	sc := rpc.NewClient(target.Addr, secret, rpc.ClientOptions{Timeout: 10 * time.Second, Name: fmt.Sprintf("data server %d", id)})
	defer sc.Close()
	r, err := rpc.Do(context.Background(), sc, api.Budget, m)
	if err != nil {
		return err
	}
	fmt.Printf("data server %d (%s): budget %s, holding %s\n", id, target.Tier, size.Format(r.Capacity), size.Format(r.Used))
	if release || wait == 0 {
		return nil
	}
	// the metadata service hears the new budget with the next heartbeat;
	// then the tiering manager moves files off until they fit
	deadline := time.Now().Add(wait)
	var last time.Time
	for ; ; time.Sleep(200 * time.Millisecond) {
		servers, err := listServers(mc)
		if err != nil {
			return err
		}
		for _, si := range servers {
			if si.ID != id {
				continue
			}
			if si.Capacity == r.Capacity && si.Used <= si.Capacity {
				fmt.Printf("data server %d holds %s: within its budget\n", id, size.Format(si.Used))
				return nil
			}
			if time.Since(last) > 2*time.Second {
				fmt.Printf("  holding %s of %s, moving files off\n", size.Format(si.Used), size.Format(r.Capacity))
				last = time.Now()
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("data server %d still holds more than its budget after %v (tiering manual? files pinned?)", id, wait)
		}
	}
}

// tierPolicy sets (sub "set") or shows a directory's tiering policy.
func tierPolicy(mc *rpc.Client, sub string, paths []string, pin, drain string, keepCache *bool) error {
	if len(paths) != 1 {
		return fmt.Errorf("want one path")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(paths[0], &st); err != nil {
		return fmt.Errorf("%s: %v", paths[0], err)
	}
	ctx := context.Background()
	if sub == "set" {
		cur, err := rpc.Do(ctx, mc, api.TierGet, &api.FileRef{Ino: st.Ino})
		if err != nil {
			return err
		}
		pol := api.TierPolicy{}
		if cur.From == st.Ino {
			pol = cur.TierPolicy // change only what the flags name
		}
		if pin != "" {
			pol.Pin = strings.TrimPrefix(pin, "none")
		}
		if drain != "" {
			pol.Drain = strings.TrimPrefix(drain, "none")
		}
		if keepCache != nil {
			pol.KeepCache = *keepCache
		}
		if _, err := rpc.Do(ctx, mc, api.TierSet, &api.TierSetReq{Ino: st.Ino, Policy: pol}); err != nil {
			return fmt.Errorf("%s: %v", paths[0], err)
		}
	}
	got, err := rpc.Do(ctx, mc, api.TierGet, &api.FileRef{Ino: st.Ino})
	if err != nil {
		return err
	}
	pinS, drainS := got.Pin, got.Drain
	if pinS == "" {
		pinS = "none"
	}
	if drainS == "" {
		drainS = got.DefaultDrain + " (the default)"
	}
	if drainS == "cool (the default)" || got.Drain == "cool" {
		drainS += fmt.Sprintf(", after %v closed", got.DrainAge)
	}
	from := "no directory policy"
	if got.From != 0 {
		from = fmt.Sprintf("from directory inode %d", got.From)
	}
	if got.KeepCache {
		drainS += ", keeping the fast copy as a cache"
	}
	fmt.Printf("%s: pin %s, drain %s (%s)\n", paths[0], pinS, drainS, from)
	return nil
}
