package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// cmdJob registers and unregisters jobs with the forwarding-map manager
// (start, end, list), or prints Beacon's analysis of one job.
func cmdJob(args []string) error {
	fs, cfg := flagSet("job")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	app := fs.String("app", "", "start: application tag (as SLUICE_APP)")
	user := fs.Uint("user", uint(os.Getuid()), "start: the job's uid")
	nodes := fs.String("nodes", hostname(), "start: the job's compute nodes, comma-separated")
	mc, sub, err := metaClientSub(fs, cfg, args, "start", "end", "list")
	if err != nil {
		return err
	}
	defer mc.Close()
	ctx := context.Background()
	switch sub {
	case "start":
		if fs.NArg() != 1 {
			return fmt.Errorf("want one job id")
		}
		spec := fwdmap.JobSpec{ID: fs.Arg(0), User: uint32(*user), Nodes: strings.Split(*nodes, ",")}
		if *app != "" {
			spec.App = "tag:" + *app
		}
		pl, err := rpc.Do(ctx, mc, fwdmap.Start, &spec)
		if err != nil {
			return err
		}
		printPlacement(os.Stdout, *pl)
		return nil
	case "end":
		if fs.NArg() != 1 {
			return fmt.Errorf("want one job id")
		}
		_, err := rpc.Do(ctx, mc, fwdmap.End, &fwdmap.JobRef{Job: fs.Arg(0)})
		return err
	case "list":
		l, err := rpc.Do(ctx, mc, fwdmap.List, &wire.Empty{})
		if err != nil {
			return err
		}
		for _, pl := range l.Placements {
			printPlacement(os.Stdout, pl)
		}
		return nil
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one job id, got %d arguments", fs.NArg())
	}
	job := fs.Arg(0)
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
		if len(decisions) > 0 && !*asJSON {
			printDecisions(os.Stdout, decisions)
		}
		return fmt.Errorf("no records of job %q (monitoring off, or nothing shipped yet: records leave each daemon once a second)", job)
	}
	rep := beacon.Analyze(job, recs, 0, beacon.Thresholds{})
	inter, err := bc.Interference(ctx, job, rep.From, rep.To)
	if err != nil {
		return err
	}
	if *asJSON {
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
func cmdTop(args []string) error {
	fs, cfg := flagSet("top")
	once := fs.Bool("once", false, "print one view and exit")
	span := fs.Duration("span", 5*time.Second, "how much recent history each view covers")
	every := fs.Duration("interval", 2*time.Second, "refresh interval")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	bc := beaconrpc.Client{C: mc}
	for {
		now := time.Now()
		recs, err := bc.Query(context.Background(), beaconrpc.Query{From: now.Add(-*span - 2*time.Second).UnixNano()})
		if err != nil {
			return err
		}
		slow, err := bc.Health(context.Background())
		if err != nil {
			return err
		}
		if !*once {
			fmt.Print("\033[H\033[2J")
		}
		printTop(os.Stdout, recs, slow, now)
		if *once {
			return nil
		}
		time.Sleep(*every)
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
	fmt.Fprintf(w, "sluice top — %s\n\n", now.Format("15:04:05"))
	show("JOB", jobs, func(string) string { return "" })
	fmt.Fprintln(w)
	show("SERVER", servers, func(s string) string {
		if r, ok := slowBy[s]; ok {
			return fmt.Sprintf("FAIL-SLOW ×%.1f", r)
		}
		return ""
	})
}

// cmdProfile shows, builds and imports application profiles.
func cmdProfile(args []string) error {
	fs, cfg := flagSet("profile")
	app := fs.String("app", "", "import: profile key (default: the executable and uid in the log)")
	asJSON := fs.Bool("json", false, "print each profile as one JSON line")
	mc, sub, err := metaClientSub(fs, cfg, args, "show", "build", "import")
	if err != nil {
		return err
	}
	defer mc.Close()
	pos := fs.Args()
	bc := beaconrpc.Client{C: mc}
	ctx := context.Background()
	var ps []beacon.Profile
	switch sub {
	case "show":
		if len(pos) == 1 {
			p, err := bc.Profile(ctx, pos[0])
			if err != nil {
				return err
			}
			ps = []beacon.Profile{p}
		} else if ps, err = bc.Profiles(ctx); err != nil {
			return err
		}
	case "build":
		if len(pos) != 1 {
			return fmt.Errorf("want one job id")
		}
		p, err := bc.ProfileJob(ctx, pos[0])
		if err != nil {
			return err
		}
		ps = []beacon.Profile{p}
	case "import":
		if len(pos) != 1 {
			return fmt.Errorf("want one Darshan log")
		}
		p, err := importDarshan(pos[0])
		if err != nil {
			return err
		}
		if *app != "" {
			p.Key = *app
		}
		if err := bc.PutProfile(ctx, p); err != nil {
			return err
		}
		ps = []beacon.Profile{p}
	default:
		return fmt.Errorf("want a subcommand: show [KEY] | build JOB | import LOG.darshan")
	}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range ps {
		if *asJSON {
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

// cmdRecords prints Beacon's stored records matching a query.
func cmdRecords(args []string) error {
	fs, cfg := flagSet("records")
	job := fs.String("job", "", "only this job")
	node := fs.String("node", "", "only requests from this compute node")
	server := fs.String("server", "", "only records of this daemon (fwd-3, data-mem-1, client@node)")
	layer := fs.String("layer", "", "only this layer: client, fwd or data")
	ino := fs.Uint64("ino", 0, "only this file (inode number, as sluice stat shows)")
	since := fs.Duration("since", 0, "only windows in the last DURATION")
	from := fs.String("from", "", "only windows from this time (RFC 3339)")
	to := fs.String("to", "", "only windows before this time (RFC 3339)")
	asJSON := fs.Bool("json", false, "the records as JSON Lines, every field (times in unix ns)")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	q := beaconrpc.Query{Job: *job, Node: *node, Server: *server, Ino: *ino}
	if *layer != "" {
		if q.Layer, err = beacon.ParseLayer(*layer); err != nil {
			return err
		}
	}
	if *since > 0 {
		q.From = time.Now().Add(-*since).UnixNano()
	}
	for _, t := range []struct {
		s   string
		dst *int64
	}{{*from, &q.From}, {*to, &q.To}} {
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
	if *asJSON {
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
