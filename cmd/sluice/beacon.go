package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
)

var jobStartCmd = spec{use: "start JOB", short: "register a job: DFRA gives it forwarding nodes, Beacon learns its application",
	example: "sluice job start --app wrf --nodes cn0,cn1 7001", setup: func(fs *pflag.FlagSet) func([]string) error {
		app := fs.String("app", "", "application tag (as SLUICE_APP)")
		user := fs.Int("user", -1, "the job's uid (default: yours)")
		nodes := fs.String("nodes", "", "the job's compute nodes, comma-separated (default: this host)")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one job id")
			}
			spec := fwdmap.JobSpec{ID: args[0], User: uint32(*user), Nodes: strings.Split(*nodes, ",")}
			if *user < 0 {
				spec.User = uint32(os.Getuid())
			}
			if *nodes == "" {
				spec.Nodes = []string{hostname()}
			}
			if *app != "" {
				spec.App = "tag:" + *app
			}
			pl, err := rpc.Do(context.Background(), mc, fwdmap.Start, &spec)
			if err != nil {
				return err
			}
			printPlacement(os.Stdout, *pl)
			return nil
		})
	}}

var jobEndCmd = spec{use: "end JOB", short: "unregister a job: its forwarding nodes go back", example: "sluice job end 7001",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one job id")
			}
			_, err := rpc.Do(context.Background(), mc, fwdmap.End, &fwdmap.JobRef{Job: args[0]})
			return err
		})
	}}

var jobListCmd = spec{use: "list", short: "the registered jobs and their forwarding nodes", example: "sluice job list",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			l, err := rpc.Do(context.Background(), mc, fwdmap.List, &wire.Empty{})
			if err != nil {
				return err
			}
			for _, pl := range l.Placements {
				printPlacement(os.Stdout, pl)
			}
			return nil
		})
	}}

var jobShowCmd = spec{use: "show JOB", short: "Beacon's analysis of a job, with the decisions taken about it",
	example: "sluice job show 7001\nsluice job show --json 7001", setup: func(fs *pflag.FlagSet) func([]string) error {
		asJSON := fs.Bool("json", false, "print the report as JSON")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one job id, got %d arguments", len(args))
			}
			return jobShow(mc, args[0], *asJSON)
		})
	}}

func jobShow(mc *rpc.Client, job string, asJSON bool) error {
	ctx := context.Background()
	bc := beaconrpc.Client{C: mc}
	recs, err := bc.Query(ctx, beaconrpc.Query{Job: job})
	if err != nil {
		return err
	}
	var decisions []fwdmap.Decision
	if h, err := rpc.Do(ctx, mc, fwdmap.History, &fwdmap.JobRef{Job: job}); err == nil {
		decisions = h.Decisions
	}
	if len(recs) == 0 {
		if len(decisions) > 0 && !asJSON {
			printDecisions(os.Stdout, decisions)
		}
		return fmt.Errorf("no records of job %q (monitoring off, or nothing shipped yet: records leave each daemon once a second)", job)
	}
	rep := beacon.Analyze(job, recs, 0, beacon.Thresholds{})
	inter, err := bc.Interference(ctx, job, rep.From, rep.To)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(struct {
			beacon.JobReport
			Interference []beacon.Interference
			Decisions    []fwdmap.Decision
		}{rep, inter, decisions})
	}
	printReport(os.Stdout, rep, inter)
	printJobPrefetch(mc, job)
	printDecisions(os.Stdout, decisions)
	return nil
}

// printJobPrefetch prints what pre-migration did for job, if anything.
func printJobPrefetch(mc *rpc.Client, job string) {
	st, err := rpc.Do(context.Background(), mc, api.TierStatus, &wire.Empty{})
	if err != nil {
		return
	}
	for _, pf := range st.Prefetch {
		if pf.Job == job {
			fmt.Printf("  prefetched %d of %d input files to mem (%s); %d read, %d not read, %d failed\n",
				pf.Promoted, pf.Files, size.Format(pf.PromotedBytes), pf.Read, pf.Dropped, pf.Failed)
		}
	}
}

// printDecisions prints the decisions about a job: forwarding-node
// placements (DFRA) and the tiering manager's.
func printDecisions(w io.Writer, ds []fwdmap.Decision) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "  decisions:\n")
	for _, d := range ds {
		at := time.Unix(0, d.At).Format("15:04:05.000")
		if d.Kind == "tiering" {
			fmt.Fprintf(w, "    %s tiering %s\n", at, d.Event)
			for _, r := range d.Reasons {
				fmt.Fprintf(w, "      - %s\n", r)
			}
			continue
		}
		if d.Event == "end" {
			fmt.Fprintf(w, "    %s end: %s\n", at, strings.Join(d.Reasons, "; "))
			continue
		}
		ded := ""
		if d.Dedicated {
			ded = ", dedicated"
		}
		fmt.Fprintf(w, "    %s %s: %s (%s%s)\n", at, d.Event, strings.Join(d.Fwds, " "), d.Policy, ded)
		for _, r := range d.Reasons {
			fmt.Fprintf(w, "      - %s\n", r)
		}
	}
}

func printPlacement(w io.Writer, pl fwdmap.Placement) {
	var ids []string
	for _, t := range pl.Fwds {
		ids = append(ids, t.ID)
	}
	ded := ""
	if pl.Dedicated {
		ded = ", dedicated"
	}
	fmt.Fprintf(w, "job %s: forwarding nodes %s (%s%s)\n", pl.Job, strings.Join(ids, " "), pl.Policy, ded)
	for _, r := range pl.Reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}

func printReport(w io.Writer, r beacon.JobReport, inter []beacon.Interference) {
	fmt.Fprintf(w, "job %s", r.Job)
	if r.App != "" {
		fmt.Fprintf(w, "  app %s (uid %d)", strings.TrimPrefix(r.App, "tag:"), r.Uid)
	}
	fmt.Fprintf(w, "\n  from %s to %s (%s active), figures from the %s layer\n",
		r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.Active, r.Source)
	classes := strings.Join(r.Classes, ", ")
	if classes == "" {
		classes = "light"
	}
	fmt.Fprintf(w, "  mode %s; behaviour %s\n", r.Mode, classes)
	fmt.Fprintf(w, "  ranks %d (%d doing I/O) on %d nodes (%d doing I/O); files %d\n", r.Ranks, r.IORanks, r.Nodes, r.IONodes, r.Files)
	fmt.Fprintf(w, "  read %s in %d ops, wrote %s in %d ops; mean request %s, %.0f%% sequential\n",
		size.Format(uint64(r.ReadBytes)), r.ReadOps, size.Format(uint64(r.WriteBytes)), r.WriteOps,
		size.Format(uint64(r.MeanRequest)), 100*r.SeqShare)
	fmt.Fprintf(w, "  bandwidth %s/s mean, %s/s peak; %.0f IOPS; metadata %d ops (%.0f/s)\n",
		size.Format(uint64(r.BW)), size.Format(uint64(r.PeakBW)), r.IOPS, r.MetaOps, r.MetaRate)
	if len(r.PerRank) > 1 {
		fmt.Fprintf(w, "  rank balance: slowest/median I/O time %.2f\n", r.Imbalance)
	}
	if len(r.Sizes) > 0 {
		fmt.Fprintf(w, "  request sizes:")
		for _, b := range r.Sizes {
			fmt.Fprintf(w, " ≤%s:%d", size.Format(uint64(b.Size)), b.Ops)
		}
		fmt.Fprintln(w)
	}
	if len(r.Servers) > 0 {
		fmt.Fprintf(w, "  servers:")
		for _, s := range r.Servers {
			fmt.Fprintf(w, " %s (%s, %d ops)", s.Server, size.Format(uint64(s.Bytes)), s.Ops)
		}
		fmt.Fprintln(w)
	}
	if len(r.ReadTiers) > 0 {
		var total uint64
		for _, b := range r.ReadTiers {
			total += b
		}
		fmt.Fprintf(w, "  reads served by tier:")
		for _, t := range []string{"mem", "ssd", "hdd", "pfs"} {
			if b := r.ReadTiers[t]; b > 0 {
				fmt.Fprintf(w, " %s %.0f%% (%s)", t, 100*float64(b)/float64(total), size.Format(b))
			}
		}
		fmt.Fprintln(w)
	}
	if r.Queued > 0 {
		fmt.Fprintf(w, "  queued %s in the servers (summed over requests; includes writes waiting for a full tier)\n",
			r.Queued.Round(time.Millisecond))
	}
	if r.QoSWaited > 0 {
		fmt.Fprintf(w, "  waited %s for its QoS rules' shares and caps (of the time queued; `sluice qos stats`)\n",
			r.QoSWaited.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  timeline (per %s): read / write / data ops / metadata ops\n", time.Duration(int64(r.Active)/int64(max(1, len(r.Timeline)))))
	for _, p := range r.Timeline {
		fmt.Fprintf(w, "    %s %10s %10s %8d %8d\n", time.Unix(0, p.Window).Format("15:04:05"),
			size.Format(uint64(p.ReadBytes)), size.Format(uint64(p.WriteBytes)), p.DataOps, p.MetaOps)
	}
	for _, x := range inter {
		if x.Victim == r.Job {
			fmt.Fprintf(w, "  slowed by job %s on %s: latency ×%.1f (%v → %v) over %d windows\n",
				x.Aggressor, x.Server, x.Inflation, x.LatAlone, x.LatShared, x.Shared)
		} else {
			fmt.Fprintf(w, "  slowed job %s on %s: its latency ×%.1f over %d windows\n", x.Victim, x.Server, x.Inflation, x.Shared)
		}
	}
}

// cmdTop shows the busiest jobs and servers of the last seconds.
var topCmd = spec{use: "top", short: "live view of the busiest jobs and servers", example: "sluice monitor top --once",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		once := fs.Bool("once", false, "print one view and exit")
		span := fs.Duration("span", 5*time.Second, "how much recent history each view covers")
		every := fs.Duration("interval", 2*time.Second, "refresh interval")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error { return top(mc, *once, *span, *every) })
	}}

func top(mc *rpc.Client, once bool, span, every time.Duration) error {
	bc := beaconrpc.Client{C: mc}
	for {
		now := time.Now()
		recs, err := bc.Query(context.Background(), beaconrpc.Query{From: now.Add(-span - 2*time.Second).UnixNano()})
		if err != nil {
			return err
		}
		slow, err := bc.Health(context.Background())
		if err != nil {
			return err
		}
		if !once {
			fmt.Print("\033[H\033[2J")
		}
		printTop(os.Stdout, recs, slow, now)
		if once {
			return nil
		}
		time.Sleep(every)
	}
}

func printTop(w io.Writer, recs []beacon.Record, slow []beacon.SlowServer, now time.Time) {
	type agg struct {
		ops, meta, bytes uint64
		lat              int64
		windows          map[int64]bool
	}
	jobs, servers := map[string]*agg{}, map[string]*agg{}
	add := func(m map[string]*agg, k string, r *beacon.Record) {
		a := m[k]
		if a == nil {
			a = &agg{windows: map[int64]bool{}}
			m[k] = a
		}
		a.ops += r.Count
		a.bytes += r.Bytes
		a.lat += r.LatSum
		if r.IsMeta() {
			a.meta += r.Count
		}
		a.windows[r.Window] = true
	}
	for i := range recs {
		r := &recs[i]
		switch r.Layer {
		case beacon.LayerFwd:
			add(jobs, r.Job, r)
			add(servers, r.Server, r)
		case beacon.LayerData:
			add(servers, r.Server, r)
		}
	}
	slowBy := map[string]float64{}
	for _, s := range slow {
		slowBy[s.Server] = s.Ratio
	}
	show := func(title string, m map[string]*agg, flag func(string) string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]].bytes+m[keys[i]].ops > m[keys[j]].bytes+m[keys[j]].ops })
		fmt.Fprintf(w, "%-16s %12s %10s %10s %12s %s\n", title, "BANDWIDTH", "OPS/S", "META/S", "MEAN LAT", "")
		for _, k := range keys {
			a := m[k]
			secs := float64(len(a.windows))
			var lat time.Duration
			if a.ops > 0 {
				lat = time.Duration(a.lat / int64(a.ops))
			}
			name := k
			if name == "" {
				name = "(no job)"
			}
			fmt.Fprintf(w, "%-16s %10s/s %10.0f %10.0f %12v %s\n", name, size.Format(uint64(float64(a.bytes)/secs)),
				float64(a.ops)/secs, float64(a.meta)/secs, lat.Round(time.Microsecond), flag(k))
		}
	}
	fmt.Fprintf(w, "sluice monitor top — %s\n\n", now.Format("15:04:05"))
	show("JOB", jobs, func(string) string { return "" })
	fmt.Fprintln(w)
	show("SERVER", servers, func(s string) string {
		if r, ok := slowBy[s]; ok {
			return fmt.Sprintf("FAIL-SLOW ×%.1f", r)
		}
		return ""
	})
}

var profileShowCmd = spec{use: "show [KEY]", short: "show one application profile, or all", example: "sluice profile show tag:wrf",
	setup: func(fs *pflag.FlagSet) func([]string) error {
		asJSON := fs.Bool("json", false, "print each profile as one JSON line")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			bc := beaconrpc.Client{C: mc}
			if len(args) == 1 {
				p, err := bc.Profile(context.Background(), args[0])
				return printProfiles([]beacon.Profile{p}, err, *asJSON)
			}
			ps, err := bc.Profiles(context.Background())
			return printProfiles(ps, err, *asJSON)
		})
	}}

var profileBuildCmd = spec{use: "build JOB", short: "build (or update) a job's application profile from its records",
	example: "sluice profile build 7001", setup: func(fs *pflag.FlagSet) func([]string) error {
		asJSON := fs.Bool("json", false, "print the profile as one JSON line")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one job id")
			}
			p, err := beaconrpc.Client{C: mc}.ProfileJob(context.Background(), args[0])
			return printProfiles([]beacon.Profile{p}, err, *asJSON)
		})
	}}

var profileImportCmd = spec{use: "import LOG.darshan", short: "import a Darshan log as an application profile (needs pydarshan)",
	example: "sluice profile import --app tag:wrf wrf.darshan", setup: func(fs *pflag.FlagSet) func([]string) error {
		app := fs.String("app", "", "profile key (default: the executable and uid in the log)")
		asJSON := fs.Bool("json", false, "print the profile as one JSON line")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one Darshan log")
			}
			p, err := importDarshan(args[0])
			if err != nil {
				return err
			}
			if *app != "" {
				p.Key = *app
			}
			err = beaconrpc.Client{C: mc}.PutProfile(context.Background(), p)
			return printProfiles([]beacon.Profile{p}, err, *asJSON)
		})
	}}

// printProfiles prints ps unless err.
func printProfiles(ps []beacon.Profile, err error, asJSON bool) error {
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range ps {
		if asJSON {
			if err := enc.Encode(p); err != nil {
				return err
			}
			continue
		}
		printProfile(os.Stdout, p)
	}
	return nil
}
func printProfile(w io.Writer, p beacon.Profile) {
	classes := strings.Join(p.Classes, ", ")
	if classes == "" {
		classes = "light"
	}
	fmt.Fprintf(w, "%s: %s, %s; %d run(s), source %s\n", p.Key, p.Mode, classes, p.Runs, p.Source)
	fmt.Fprintf(w, "  volume %s (read %s, written %s); %d I/O ranks on %d nodes at %s/s per node\n",
		size.Format(uint64(p.Volume)), size.Format(uint64(p.ReadBytes)), size.Format(uint64(p.WriteBytes)),
		p.IORanks, p.IONodes, size.Format(uint64(p.NodeBW)))
	fmt.Fprintf(w, "  metadata %d ops (%.0f/s); mean request %s\n", p.MetaOps, p.MetaRate, size.Format(uint64(p.MeanRequest)))
	if len(p.Inputs) > 0 {
		fmt.Fprintf(w, "  inputs: %d files read and not written, the same in %d run(s) in a row (promoted to mem when a job of it starts)\n",
			len(p.Inputs), p.InputRuns)
	}
}

//go:embed darshan/summary.py
var darshanSummary string

// importDarshan summarises a Darshan log with pydarshan (the embedded
// helper) and builds the profile Beacon would have built.
func importDarshan(path string) (beacon.Profile, error) {
	if _, err := os.Stat(path); err != nil {
		return beacon.Profile{}, err
	}
	py := os.Getenv("SLUICE_PYTHON")
	if py == "" {
		py = "python3"
	}
	cmd := exec.Command(py, "-c", darshanSummary, path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "No module named 'darshan'") {
			return beacon.Profile{}, fmt.Errorf("reading Darshan logs needs pydarshan: pip install darshan")
		}
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return beacon.Profile{}, fmt.Errorf("%s: not a readable Darshan log: %v: %s", path, err, msg)
	}
	var s beacon.Summary
	if err := json.Unmarshal(out, &s); err != nil {
		return beacon.Profile{}, fmt.Errorf("%s: %v", path, err)
	}
	p := beacon.ProfileOf(beacon.ReportOfSummary(s, beacon.Thresholds{}))
	p.Source = "darshan"
	p.Updated = time.Now().UnixNano()
	return p, nil
}

var recordsCmd = spec{use: "records", short: "Beacon's records by job, node, server, layer, file and time",
	example: "sluice monitor records --job 7001 --layer fwd --since 10m", setup: func(fs *pflag.FlagSet) func([]string) error {
		var f recordsFlags
		f.job = fs.String("job", "", "only this job")
		f.node = fs.String("node", "", "only requests from this compute node")
		f.server = fs.String("daemon", "", "only records of this daemon (fwd-3, data-mem-1, client@node)")
		f.layer = fs.String("layer", "", "only this layer: client, fwd or data")
		f.ino = fs.Uint64("ino", 0, "only this file (inode number, as sluice file stat shows)")
		f.since = fs.Duration("since", 0, "only windows in the last DURATION")
		f.from = fs.String("start", "", "only windows from this time (RFC 3339)")
		f.to = fs.String("end", "", "only windows before this time (RFC 3339)")
		f.asJSON = fs.Bool("json", false, "the records as JSON Lines, every field (times in unix ns)")
		return withMeta(addConn(fs), func(mc *rpc.Client, args []string) error { return records(mc, f) })
	}}

// recordsFlags are records' flags.
type recordsFlags struct {
	job, node, server, layer, from, to *string
	ino                                *uint64
	since                              *time.Duration
	asJSON                             *bool
}

func records(mc *rpc.Client, f recordsFlags) error {
	var err error
	q := beaconrpc.Query{Job: *f.job, Node: *f.node, Server: *f.server, Ino: *f.ino}
	if *f.layer != "" {
		if q.Layer, err = beacon.ParseLayer(*f.layer); err != nil {
			return err
		}
	}
	if *f.since > 0 {
		q.From = time.Now().Add(-*f.since).UnixNano()
	}
	for _, t := range []struct {
		s   string
		dst *int64
	}{{*f.from, &q.From}, {*f.to, &q.To}} {
		if t.s != "" {
			v, err := time.Parse(time.RFC3339, t.s)
			if err != nil {
				return fmt.Errorf("bad time %q: want RFC 3339 (2006-01-02T15:04:05Z)", t.s)
			}
			*t.dst = v.UnixNano()
		}
	}
	recs, err := beaconrpc.Client{C: mc}.Query(context.Background(), q)
	if err != nil {
		return err
	}
	if *f.asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Printf("%-8s %-6s %-14s %-10s %5s %-10s %-16s %10s %8s %10s %10s %10s\n",
		"WINDOW", "LAYER", "SERVER", "JOB", "RANK", "NODE", "OP", "INO", "COUNT", "BYTES", "MEAN LAT", "MEAN WAIT")
	for _, r := range recs {
		var wait time.Duration
		if r.Count > 0 {
			wait = time.Duration(r.Wait / int64(r.Count))
		}
		fmt.Printf("%-8s %-6s %-14s %-10s %5d %-10s %-16s %10d %8d %10s %10v %10v\n",
			time.Unix(0, r.Window).Format("15:04:05"), r.Layer, dash(r.Server), dash(r.Job), r.Rank, dash(r.Node), r.Op, r.Ino, r.Count,
			size.Format(r.Bytes), r.MeanLat().Round(time.Microsecond), wait.Round(time.Microsecond))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
