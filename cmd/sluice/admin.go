package main

import (
	"context"
	"flag"
	"fmt"
	_ "net/http/pprof"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/cluster"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/policy/tiering"
)

// metaClient connects to the cluster named by --dir or --meta.
func metaClient(fs *flag.FlagSet, cfg *string, args []string) (*rpc.Client, error) {
	mc, _, err := metaClientSub(fs, cfg, args)
	return mc, err
}

// metaServers is metaClient for a command that needs the registered
// daemons too.
func metaServers(fs *flag.FlagSet, cfg *string, args []string) (*rpc.Client, []wire.ServerInfo, error) {
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return nil, nil, err
	}
	servers, err := listServers(mc)
	if err != nil {
		mc.Close()
		return nil, nil, err
	}
	return mc, servers, nil
}

// metaClientSub is metaClient for a command with subcommands: the first
// argument after the flags that names one of subs is taken out, and flags
// after it are parsed too ("job --dir D start --app A ID" and "job start
// --dir D --app A ID" mean the same).
func metaClientSub(fs *flag.FlagSet, cfg *string, args []string, subs ...string) (*rpc.Client, string, error) {
	dir := fs.String("dir", "", "state directory of a local cluster")
	metaAddr := fs.String("meta", "", "metadata service address")
	secretFile := fs.String("secret-file", "", "file holding the cluster secret")
	if err := parse(fs, cfg, args); err != nil {
		return nil, "", err
	}
	sub := ""
	for _, s := range subs {
		if fs.NArg() > 0 && fs.Arg(0) == s {
			sub = s
			if err := parse(fs, cfg, fs.Args()[1:]); err != nil {
				return nil, "", err
			}
		}
	}
	mc, err := dialMeta(*dir, *metaAddr, *secretFile)
	return mc, sub, err
}

// dialMeta returns a client of the metadata daemon: at metaAddr, or the
// local cluster's in dir (default: the current one).
func dialMeta(dir, metaAddr, secretFile string) (*rpc.Client, error) {
	if metaAddr == "" {
		d, err := stateDir(dir)
		if err != nil {
			return nil, err
		}
		c, err := cluster.Load(d)
		if err != nil {
			return nil, err
		}
		metaAddr = c.MetaAddr
		if secretFile == "" {
			secretFile = c.SecretFile()
		}
	}
	secret, err := readSecret(secretFile)
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(metaAddr, secret, rpc.ClientOptions{Timeout: 10 * time.Second, Name: "metadata service " + metaAddr}), nil
}

// beaconName is the name a server's monitoring records carry.
func beaconName(s wire.ServerInfo) string {
	if s.Role == "data" {
		return fmt.Sprintf("data-%s-%d", s.Tier, s.ID)
	}
	return fmt.Sprintf("%s-%d", s.Role, s.ID)
}

func cmdStatus(args []string) error {
	fs, cfg := flagSet("status")
	mc, servers, err := metaServers(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
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
	return printTiering(mc)
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
func cmdPrefetch(args []string) error {
	fs, cfg := flagSet("prefetch")
	job := fs.String("job", "", "the job that will read the files")
	list := fs.String("list", "", "file holding the paths, one per line, in reading order (besides or instead of PATH arguments)")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	paths := fs.Args()
	if *list != "" {
		b, err := os.ReadFile(*list)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				paths = append(paths, l)
			}
		}
	}
	if *job == "" || len(paths) == 0 {
		return fmt.Errorf("want --job and at least one file (arguments or --list)")
	}
	q := &api.PrefetchReq{Job: *job}
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
	fmt.Printf("prefetching %d files for job %s (sluice status shows progress)\n", len(paths), *job)
	return nil
}

func cmdMigrate(args []string) error {
	fs, cfg := flagSet("migrate")
	to := fs.String("tier", "", "destination tier: mem, ssd, hdd or pfs")
	noWait := fs.Bool("no-wait", false, "return at once; the move goes on in the metadata daemon")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	if fs.NArg() == 0 || *to == "" {
		return fmt.Errorf("want --tier and at least one path")
	}
	for _, p := range fs.Args() {
		moved, err := migrate(context.Background(), mc, p, *to, !*noWait)
		if err != nil {
			return err
		}
		if !*noWait {
			fmt.Printf("%s: %d chunks moved to %s\n", p, moved, *to)
		}
	}
	return nil
}

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

func cmdJobs(args []string) error {
	fs, cfg := flagSet("jobs")
	mc, servers, err := metaServers(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	ctx := context.Background()
	type agg struct {
		api.JobCounters
		fwds  []string
		ranks map[int32]bool
		nodes map[string]bool
	}
	jobs := map[string]*agg{}
	secret := mustSecret(fs)
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

func cmdStat(args []string) error {
	fs, cfg := flagSet("stat")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	if fs.NArg() != 1 {
		return fmt.Errorf("want one path")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fs.Arg(0), &st); err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	ctx := context.Background()
	a, err := rpc.Do(ctx, mc, ns.Getattr, &ns.InoReq{Ino: st.Ino})
	if err != nil {
		return err
	}
	l, err := rpc.Do(ctx, mc, ns.Layout, &ns.FileReq{Ino: st.Ino})
	if err != nil {
		return err
	}
	at := a.Attr
	fmt.Printf("path:        %s\ninode:       %d\nsize:        %d\ntruncations: %d\nchunk size:  %d\nstripe:      count %d, unit %d\nchunks:      %d allocated\n",
		fs.Arg(0), at.Ino, at.Size, at.Trunc, at.ChunkSize, at.StripeCnt, at.StripeUnit, len(l.Chunks))
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

func cmdSetstripe(args []string) error {
	fs, cfg := flagSet("setstripe")
	chunk := fs.String("chunk-size", "0", "chunk size (power of two, e.g. 4M)")
	count := fs.Uint("count", 0, "stripe count: data servers per chunk")
	unit := fs.String("unit", "0", "stripe unit")
	local := fs.Bool("local", false, "node-local mode: the directory's entries (one private directory per node or rank) and all under them live on the data server each name hashes to, with no metadata-service operation (docs/nodelocal.md)")
	global := fs.Bool("global", false, "take the directory out of node-local mode")
	tier := fs.String("tier", "", "with --local: the tier whose data servers keep the entries (default: the fastest with servers)")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	if fs.NArg() != 1 {
		return fmt.Errorf("want one directory")
	}
	cs, err := size.Parse(*chunk)
	if err != nil {
		return fmt.Errorf("--chunk-size: %v", err)
	}
	us, err := size.Parse(*unit)
	if err != nil {
		return fmt.Errorf("--unit: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fs.Arg(0), &st); err != nil {
		return err
	}
	if *local || *global {
		resp, err := rpc.Do(context.Background(), mc, ns.SetLayout, &ns.SetLayoutReq{Ino: st.Ino, Tier: *tier, Local: !*global, Global: *global})
		if err != nil {
			return err
		}
		if resp.Tier == "" {
			fmt.Printf("%s: global (entries in the metadata service)\n", fs.Arg(0))
		} else {
			fmt.Printf("%s: node-local, entries on the %s tier's data servers\n", fs.Arg(0), resp.Tier)
		}
		return nil
	}
	resp, err := rpc.Do(context.Background(), mc, ns.SetLayout, &ns.SetLayoutReq{Ino: st.Ino,
		ChunkSize: uint32(cs), StripeCnt: uint32(*count), StripeUnit: uint32(us)})
	if err != nil {
		return err
	}
	fmt.Printf("%s: chunk size %d, stripe count %d, unit %d\n", fs.Arg(0), resp.Attr.ChunkSize, resp.Attr.StripeCnt, resp.Attr.StripeUnit)
	return nil
}

func cmdFault(args []string) error {
	fs, cfg := flagSet("fault")
	id := fs.Uint64("server", 0, "id of the data server or forwarding node (see status)")
	slow := fs.Float64("slow", 0, "make every request take this many times as long")
	fill := fs.String("fill", "", "shrink the tier's budget to this size")
	stall := fs.Int("stall", -1, "delay every request by this many milliseconds (0 clears)")
	pause := fs.String("pause", "", "hold the next migration at this step until --resume (crash tests): move-begun, move-copying, move-stopped (data server that copies), move-committed (--meta-service)")
	resume := fs.String("resume", "", "release the pause point armed with --pause")
	toMeta := fs.Bool("meta-service", false, "inject into the metadata service (--pause/--resume)")
	mc, servers, err := metaServers(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	ctx := context.Background()
	point := &api.FaultReq{Kind: api.FaultPause, Point: *pause}
	if *resume != "" {
		point.Kind, point.Point = api.FaultResume, *resume
	}
	if *toMeta {
		if point.Point == "" {
			return fmt.Errorf("--meta-service takes --pause or --resume")
		}
		_, err := rpc.Do(ctx, mc, api.Fault, point)
		return err
	}
	var target *wire.ServerInfo
	for i := range servers {
		if servers[i].ID == *id {
			target = &servers[i]
		}
	}
	if target == nil || target.Role == "client" {
		return fmt.Errorf("--server %d: no such data server or forwarding node", *id)
	}
	var m *api.FaultReq
	switch {
	case *slow > 0:
		m = &api.FaultReq{Kind: api.FaultSlow, Value: uint64(*slow * 100)}
	case *fill != "":
		n, err := size.Parse(*fill)
		if err != nil {
			return fmt.Errorf("--fill: %v", err)
		}
		m = &api.FaultReq{Kind: api.FaultFill, Value: uint64(n)}
	case *stall >= 0:
		m = &api.FaultReq{Kind: api.FaultStall, Value: uint64(*stall)}
	case point.Point != "":
		m = point
	default:
		return fmt.Errorf("give one of --slow, --fill, --stall, --pause, --resume")
	}
	sc := rpc.NewClient(target.Addr, mustSecret(fs), rpc.ClientOptions{Timeout: 10 * time.Second, Name: fmt.Sprintf("server %d", *id)})
	defer sc.Close()
	_, err = rpc.Do(ctx, sc, api.Fault, m)
	return err
}

func mustSecret(fs *flag.FlagSet) []byte {
	file := fs.Lookup("secret-file").Value.String()
	if file == "" {
		if d, err := stateDir(fs.Lookup("dir").Value.String()); err == nil {
			if c, err := cluster.Load(d); err == nil {
				file = c.SecretFile()
			}
		}
	}
	s, _ := readSecret(file)
	return s
}

// cmdTier changes tiers at run time: `tier set DIR --pin T --drain WHEN`
// sets a directory's tiering policy, `tier show PATH` the one a file
// follows; `tier budget --server ID SIZE` lends a mem-tier server's memory
// to its node (its files move off until its usage fits the smaller
// budget), `tier budget --server ID --release` gives it back.
func cmdTier(args []string) error {
	fs, cfg := flagSet("tier")
	id := fs.Uint64("server", 0, "budget: id of the data server (see status)")
	release := fs.Bool("release", false, "budget: give the server its configured budget back")
	wait := fs.Duration("wait", 5*time.Minute, "budget: wait this long for the server's data to fit the smaller budget (0: do not wait)")
	pin := fs.String("pin", "", "set: files never move below this tier (mem or ssd; none clears)")
	drain := fs.String("drain", "", "set: when files move down to the PFS: now, on-close, cool or never (none clears)")
	keepCache := fs.Bool("keep-cache", false, "set: a drained file's fast copy stays as a clean cache, dropped with nothing to copy when space is needed (=false clears)")
	mc, sub, err := metaClientSub(fs, cfg, args, "budget", "set", "show")
	if err != nil {
		return err
	}
	defer mc.Close()
	switch sub {
	case "set", "show":
		var keep *bool
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "keep-cache" {
				keep = keepCache
			}
		})
		return tierPolicy(mc, sub, fs.Args(), *pin, *drain, keep)
	}
	if sub != "budget" {
		return fmt.Errorf("want: tier set DIR [--pin T] [--drain WHEN] [--keep-cache] | tier show PATH | tier budget --server ID (SIZE | --release)")
	}
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	var target *wire.ServerInfo
	for i := range servers {
		if servers[i].ID == *id && servers[i].Role == "data" {
			target = &servers[i]
		}
	}
	if target == nil {
		return fmt.Errorf("--server %d: no such data server", *id)
	}
	m := &api.BudgetReq{}
	switch {
	case *release:
		m.Release = true
	case fs.NArg() == 1:
		n, err := size.Parse(fs.Arg(0))
		if err != nil {
			return fmt.Errorf("budget: %v", err)
		}
		m.Size = uint64(n)
	default:
		return fmt.Errorf("give the budget (e.g. 1G) or --release")
	}
	sc := rpc.NewClient(target.Addr, mustSecret(fs), rpc.ClientOptions{Timeout: 10 * time.Second, Name: fmt.Sprintf("data server %d", *id)})
	defer sc.Close()
	r, err := rpc.Do(context.Background(), sc, api.Budget, m)
	if err != nil {
		return err
	}
	fmt.Printf("data server %d (%s): budget %s, holding %s\n", *id, target.Tier, size.Format(r.Capacity), size.Format(r.Used))
	if *release || *wait == 0 {
		return nil
	}
	// the metadata service hears the new budget with the next heartbeat;
	// then the tiering manager moves files off until they fit
	deadline := time.Now().Add(*wait)
	var last time.Time
	for ; ; time.Sleep(200 * time.Millisecond) {
		servers, err := listServers(mc)
		if err != nil {
			return err
		}
		for _, si := range servers {
			if si.ID != *id {
				continue
			}
			if si.Capacity == r.Capacity && si.Used <= si.Capacity {
				fmt.Printf("data server %d holds %s: within its budget\n", *id, size.Format(si.Used))
				return nil
			}
			if time.Since(last) > 2*time.Second {
				fmt.Printf("  holding %s of %s, moving files off\n", size.Format(si.Used), size.Format(r.Capacity))
				last = time.Now()
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("data server %d still holds more than its budget after %v (tiering manual? files pinned?)", *id, *wait)
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
