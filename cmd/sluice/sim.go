package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/policy/qos"
	"github.com/sluice-hpc/sluice/sim"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/sim/plots"
	"github.com/sluice-hpc/sluice/sim/swf"
)

// simDayCmd runs the day simulator (package sim, docs/sim.md).
var simDayCmd = spec{use: "day (--swf LOG | --jobs FILE)", short: "a machine and a day of jobs under the forwarding policies (ffm, dfra)",
	example: "sluice sim day --machine taihulight --swf ../shared/data/swf/log.swf.gz --policy both --out /tmp/simday", setup: setupSimDay}

// dayFlags are sim day's flags.
type dayFlags struct {
	mach, stateDir, swfPath, jobsPath, profPath, darshanLogs, policy, interf, interfModel string
	memTier, tieringMode, tierFree, placement, out, genJobs, memProf, cpuProf             string
	metaProbe, fwds, slowFwds, slowTargets                                                int
	printMachine, detect, quiet                                                           bool
	from, span, warmup, metaLat, slowAt, detWindow, detSpan, detEvery, detLag             time.Duration
	scale, volScale, memTierBW, spread, slowFactor                                        float64
	seed                                                                                  int64
	rules                                                                                 []qos.Rule
	changes                                                                               []machine.Change
}

func setupSimDay(fs *pflag.FlagSet) func([]string) error {
	f := &dayFlags{}
	fs.StringVar(&f.mach, "machine", "taihulight", "machine: a preset ("+strings.Join(machine.Presets(), ", ")+"), a description file, or local (the running cluster of --dir)")
	fs.StringVar(&f.stateDir, "dir", "", "with --machine local: state directory of the running local cluster (sluice cluster up --dir)")
	fs.IntVar(&f.metaProbe, "meta-probe", 200, "with --machine local: files of the metadata probe through the cluster's mount that measures meta_latency (one process creates, stats, lists and removes them; 0: no probe, latency not modelled)")
	fs.BoolVar(&f.printMachine, "print-machine", false, "print the machine's description (JSON, the format of a description file) and stop")
	fs.StringVar(&f.swfPath, "swf", "", "job log in the Standard Workload Format (.swf or .swf.gz)")
	fs.StringVar(&f.jobsPath, "jobs", "", "workload as JSON Lines (one sim.Job per line; see --gen-jobs)")
	fs.DurationVar(&f.from, "from", 0, "with --swf: the jobs starting this far into the log")
	fs.DurationVar(&f.span, "for", 24*time.Hour, "with --swf: the jobs starting within this span (0: all)")
	fs.DurationVar(&f.warmup, "warmup", 0, "with --swf: also run the jobs of this span before --from, left out of the results (they give the applications a history)")
	fs.Float64Var(&f.scale, "scale", 0, "with --swf: compute nodes per logged processor (0: the log's largest job fills the machine)")
	fs.Float64Var(&f.volScale, "volume-scale", 1, "with --swf: multiply every job's I/O volume")
	fs.StringVar(&f.profPath, "profiles", "", "with --swf: application profiles as JSON Lines (sluice profile show --json): each application of the log does what one of them shows, instead of the Sunway Table 1 mix")
	fs.StringVar(&f.darshanLogs, "darshan", "", "with --swf: Darshan logs (comma-separated; needs pydarshan) imported as profiles, as --profiles")
	fs.Int64Var(&f.seed, "seed", 1, "seed of the jobs' I/O behaviour")
	fs.StringVar(&f.policy, "policy", "both", "forwarding allocation: ffm, dfra, or both (each run, and per-job speed-ups)")
	fs.IntVar(&f.fwds, "fwds", 0, "forwarding nodes (0: the machine's)")
	fs.StringVar(&f.interf, "interference", "", "forwarding-node interference pairs: the machine's (default: the DFRA slides'), or a DFRA pairwise experiment's raw results (bench/dfra/pairwise.jsonl: our own measurements)")
	fs.StringVar(&f.interfModel, "interference-model", "capacity", "with --interference FILE: capacity (a shared node delivers less to both jobs, symmetric) or factors (each job slowed by its own factor beyond its share, calibrated from the experiment's runs: sim.FactorsFromDFRA)")
	fs.DurationVar(&f.metaLat, "meta-latency", -1, "what one metadata operation takes a process when nothing queues: each I/O node issues them one at a time (the machine's meta_latency; 0: not modelled; default: the machine's)")
	fs.StringVar(&f.memTier, "mem-tier", "", "a mem tier in front of the PFS: one mem data server of this capacity per storage group (machine's mem_tier; 0: none; default: the machine's)")
	fs.Float64Var(&f.memTierBW, "mem-tier-mbps", 0, "with --mem-tier: a mem server's bandwidth, MB/s (default: the machine's, else 10,000)")
	fs.StringVar(&f.tieringMode, "tiering", "", "the mem tier's tiering: auto (policy/tiering moves files down by free space; writes wait at Cs-w) or manual (nothing moves; a full server spills); default: the machine's")
	fs.StringVar(&f.tierFree, "tier-free", "", "the mem servers' thresholds Cs-w,Cf-m,Cn-m (as sluice meta --tier-free; default: the machine's, else policy/tiering's)")
	fs.Float64Var(&f.spread, "spread", 0, "age the machine's storage: targets' speeds spread evenly over this factor (Sunway: 5; 0: as described)")
	fs.StringVar(&f.placement, "placement", "perf", "how files are placed on a storage group's targets (policy/place): perf, rr or wrandom")
	fs.IntVar(&f.slowFwds, "slow-fwds", 0, "forwarding nodes made fail-slow (spread over the fixed mapping's)")
	fs.IntVar(&f.slowTargets, "slow-targets", 0, "storage targets made fail-slow (spread over all of them)")
	fs.Float64Var(&f.slowFactor, "slow-factor", 10, "a fail-slow node's bandwidth and operation rate (a target's bandwidth) are divided by this")
	fs.DurationVar(&f.slowAt, "slow-at", 0, "when they turn slow (from the start of the run, warm-up included)")
	fs.DurationVar(&f.detWindow, "detect-window", 0, "with --detect: the records' window (0: 10s; the daemons': 1s)")
	fs.DurationVar(&f.detSpan, "detect-span", 0, "with --detect: the history each detection looks at (0: 60s; the manager's: 30s)")
	fs.DurationVar(&f.detEvery, "detect-every", 0, "with --detect: how often detection runs (0: 30s; the manager's: 5s)")
	fs.DurationVar(&f.detLag, "detect-lag", 0, "with --detect: how long after a window closes its records reach the detector (the daemons': up to a window, 1s)")
	fs.BoolVar(&f.detect, "detect", false, "run fail-slow detection (policy/failslow) on Beacon-like records; DFRA remaps jobs off the forwarding nodes it names (targets it names are reported)")
	fs.StringVar(&f.out, "out", "", "directory for jobs-POLICY.jsonl, timeline-POLICY.csv and summary.json")
	fs.StringVar(&f.genJobs, "gen-jobs", "", "write the workload made from --swf to this file (JSON Lines) and stop")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
	fs.StringVar(&f.memProf, "memprofile", "", "write a heap profile (go tool pprof) to this file, taken when the live heap was largest (checked every simulated hour)")
	fs.StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of the runs (go tool pprof) to this file")
	fs.Func("qos", "a QoS rule in force at every forwarding node and storage target, as sluice qos add takes it: 'NAME [job=J] [app=A] [op=read|write|meta] [rate=BYTES/s] [iops=N] [share=W]' (repeat for more, in order)", func(v string) error {
		w := strings.Fields(v)
		if len(w) < 2 {
			return fmt.Errorf("want NAME and key=value words")
		}
		r, err := qos.ParseRule(w[0], w[1:])
		if err != nil {
			return err
		}
		f.rules = append(f.rules, r)
		return nil
	})
	fs.Func("change", "a scheduled change of capacity beside the machine's own: maintenance (factor=0) or a degraded device, 'at=2h for=30m fwds=fwd0000..fwd0023 targets=ost00012 groups=3 factor=0' (at from the start of the run, warm-up included; for 0 or left out: for good; repeat for more)", func(v string) error {
		c, err := machine.ParseChange(v)
		if err != nil {
			return err
		}
		f.changes = append(f.changes, c)
		return nil
	})
	return func(args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		return f.run()
	}
}

// machine is the machine the flags describe.
func (f *dayFlags) machine() (*machine.Machine, error) {
	var m *machine.Machine
	var err error
	if f.mach == "local" {
		m, err = localMachine(f.stateDir, f.metaProbe)
	} else {
		m, err = machine.Load(f.mach)
	}
	if err != nil {
		return nil, err
	}
	if f.spread > 0 {
		m.Storage.Spread = f.spread
	}
	if err := simMemTier(m, f.memTier, f.memTierBW, f.tieringMode, f.tierFree); err != nil {
		return nil, err
	}
	if f.metaLat != -1 {
		m.MetaLatency = f.metaLat.Seconds()
	}
	if f.interf == "" {
		return m, nil
	}
	if err := f.interference(m); err != nil {
		return nil, err
	}
	return m, m.Check()
}

// interference gives m the forwarding-node interference of a DFRA
// pairwise experiment's raw results.
func (f *dayFlags) interference(m *machine.Machine) error {
	r, err := os.Open(f.interf)
	if err != nil {
		return err
	}
	defer r.Close()
	switch f.interfModel {
	case "capacity":
		pairs, err := machine.PairsFromDFRA(r)
		if err != nil {
			return fmt.Errorf("%s: %w", f.interf, err)
		}
		m.Interference.Pairs = pairs
	case "factors":
		// the pairwise script's caps unless its lines name theirs
		factors, err := sim.FactorsFromDFRA(r, machine.DFRAKinds, 40e6, 800)
		if err != nil {
			return fmt.Errorf("%s: %w", f.interf, err)
		}
		m.Interference.Factors = factors
	default:
		return fmt.Errorf("--interference-model %q: want capacity or factors", f.interfModel)
	}
	return nil
}

// jobs is the workload the flags name, on m.
func (f *dayFlags) jobs(m *machine.Machine) ([]sim.Job, error) {
	var jobs []sim.Job
	switch {
	case f.swfPath != "" && f.jobsPath != "":
		return nil, fmt.Errorf("--swf or --jobs, not both")
	case f.swfPath != "":
		log, err := swf.ParseFile(f.swfPath)
		if err != nil {
			return nil, err
		}
		profiles, err := simProfiles(f.profPath, f.darshanLogs)
		if err != nil {
			return nil, err
		}
		jobs = sim.FromSWF(log, m, sim.GenOptions{Seed: f.seed, From: f.from.Seconds(), For: f.span.Seconds(), Warmup: f.warmup.Seconds(),
			Scale: f.scale, VolumeScale: f.volScale, Profiles: profiles})
	case f.jobsPath != "":
		r, err := os.Open(f.jobsPath)
		if err != nil {
			return nil, err
		}
		jobs, err = sim.ReadJobs(bufio.NewReader(r))
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.jobsPath, err)
		}
	default:
		return nil, fmt.Errorf("a workload: --swf LOG or --jobs FILE")
	}
	if f.warmup > f.from {
		return nil, fmt.Errorf("--warmup %v reaches before the log's start (--from %v)", f.warmup, f.from)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("the workload has no jobs (check --from and --for)")
	}
	return jobs, nil
}

// run simulates the day under each policy asked for.
func (f *dayFlags) run() error {
	m, err := f.machine()
	if err != nil {
		return err
	}
	if f.printMachine {
		b, err := json.MarshalIndent(m, "", " ")
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}
	jobs, err := f.jobs(m)
	if err != nil {
		return err
	}
	if f.genJobs != "" {
		return writeJobs(f.genJobs, jobs)
	}
	policies := map[string][]string{"both": {"ffm", "dfra"}, "ffm": {"ffm"}, "dfra": {"dfra"}}[f.policy]
	if policies == nil {
		return fmt.Errorf("--policy %q: want ffm, dfra or both", f.policy)
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
	}
	stopProf, err := startCPUProfile(f.cpuProf)
	if err != nil {
		return err
	}
	defer stopProf()
	return f.runPolicies(m, jobs, policies)
}

// runPolicies runs jobs on m under each of policies, prints each run's
// figures and the comparison, and writes the outputs.
func (f *dayFlags) runPolicies(m *machine.Machine, jobs []sim.Job, policies []string) error {
	heap := newHeapPeak(f.memProf)
	results := map[string]*sim.Result{}
	measured := 0
	for _, j := range jobs {
		if !j.Warmup {
			measured++
		}
	}
	summary := map[string]any{"machine": m.Name, "jobs": measured, "warmup_jobs": len(jobs) - measured, "seed": f.seed, "args": os.Args[1:]}
	for _, p := range policies {
		r, err := f.runPolicy(m, jobs, p, heap, summary)
		if err != nil {
			return err
		}
		results[p] = r
	}
	if err := heap.done(); err != nil {
		return err
	}
	var cmp *sim.Comparison
	if a, b := results["ffm"], results["dfra"]; a != nil && b != nil {
		c := sim.Compare(a, b)
		cmp = &c
		fmt.Printf("dfra vs ffm: per-job I/O speed-up median %.2f×, p90 %.2f×, max %.2f×; %d I/O-intensive jobs (volume > 1 GiB, > 1 I/O node) save %.1f min of I/O on average (%.1f min on %d jobs DFRA scaled up); %d jobs slower by > 10%%\n",
			cmp.MedianSpeedup, cmp.P90Speedup, cmp.MaxSpeedup, cmp.Intensive, cmp.IntensiveSaved/60, cmp.ScaledSaved/60, cmp.Scaled, cmp.Slower)
		summary["compare"] = cmp
	}
	if f.out == "" {
		return nil
	}
	if err := writeSimPlots(f.out, m.Name, policies, results, cmp); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(summary, "", " ")
	return os.WriteFile(filepath.Join(f.out, "summary.json"), append(b, '\n'), 0o644)
}

// runPolicy runs jobs on m under policy p, with progress on stderr
// unless quiet, and prints and records its figures in summary.
func (f *dayFlags) runPolicy(m *machine.Machine, jobs []sim.Job, p string, heap *heapPeak, summary map[string]any) (*sim.Result, error) {
	lastSubmit := 0.0
	for _, j := range jobs {
		lastSubmit = max(lastSubmit, j.Submit)
	}
	c := sim.Config{Machine: m, Jobs: jobs, Policy: p, FwdNodes: f.fwds, Placement: place.Policy(f.placement),
		FailSlow: sim.FailSlow{Nodes: f.slowFwds, Targets: f.slowTargets, Factor: f.slowFactor, At: engine.Time(f.slowAt), Detect: f.detect,
			Window: engine.Time(f.detWindow), Span: engine.Time(f.detSpan), Every: engine.Time(f.detEvery), Lag: engine.Time(f.detLag)},
		QoS: f.rules, Changes: f.changes}
	wall := time.Now()
	if heap != nil || !f.quiet {
		c.Progress = func(now engine.Time, fired uint64, done, total int) {
			heap.check()
			if !f.quiet {
				printProgress(p, time.Since(wall), now, fired, done, total, lastSubmit)
			}
		}
	}
	s, err := sim.New(c)
	if err != nil {
		return nil, err
	}
	r, err := s.Run()
	if err != nil {
		return nil, err
	}
	el := time.Since(wall)
	heap.check()
	if !f.quiet {
		fmt.Fprintln(os.Stderr)
	}
	printDayRun(p, r, el, summary)
	if f.out != "" {
		if err := writeSimOutputs(f.out, p, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// printProgress shows a run's progress on stderr, on one line.
func printProgress(p string, el time.Duration, now engine.Time, fired uint64, done, total int, lastSubmit float64) {
	eta := "?"
	switch d := sim.ETA(el, now, lastSubmit, done, total); {
	case d >= time.Second:
		eta = d.Round(time.Second).String()
	case d > 0:
		eta = "under a second"
	}
	fmt.Fprintf(os.Stderr, "\r%s: simulated %6.1f h, %d events (%.0f/s), %d/%d jobs done, about %s left   ", p, now.Seconds()/3600, fired,
		float64(fired)/math.Max(el.Seconds(), 1e-9), done, total, eta)
}

// printDayRun prints policy p's run r (el of wall time) and records its
// figures in summary.
func printDayRun(p string, r *sim.Result, el time.Duration, summary map[string]any) {
	st := sim.Summarise(r)
	if len(r.Slow) > 0 {
		fmt.Printf("%-5s fail-slow forwarding nodes and targets %v; detected %d (%v), %d job remaps\n", p, r.Slow, len(r.Detected), r.Detected, r.Remaps)
		summary[p+"_slow"], summary[p+"_detected"], summary[p+"_remaps"] = r.Slow, len(r.Detected), r.Remaps
		summary[p+"_detections"] = r.Detected
	}
	if len(r.Changes) > 0 {
		down, remaps := 0, 0
		for _, c := range r.Changes {
			if !c.End && c.Factor == 0 {
				down++
			}
			remaps += c.Remaps
		}
		fmt.Printf("%-5s scheduled changes: %d took effect (%d took forwarding nodes or targets down), %d job remaps off forwarding nodes going down\n",
			p, len(r.Changes), down, remaps)
		summary[p+"_changes"] = r.Changes
	}
	if mt := r.Mem; mt != nil {
		fmt.Printf("%-5s mem tier: %.1f TB written to it, %.1f TB spilled to the PFS, %.1f TB moved down (%d moves, %d of open files), %d writes waited %.0f s in all (%d spilled after the wait), %.1f TB read back from it, fullest server %.1f GB\n",
			p, mt.Written/1e12, mt.Spilled/1e12, mt.Moved/1e12, mt.Moves, mt.Forced, mt.Stalls, mt.StallTime, mt.StallSpills, mt.ReadMem/1e12, mt.Peak/1e9)
		summary[p+"_mem"] = mt
	}
	fmt.Printf("%-5s jobs %d  I/O time: mean %.1f s, median %.1f s, total %.1f h, I/O-intensive mean %.1f s  aggregate %.1f GB/s  slowdown (vs alone) median %.2f p95 %.2f  forwarding nodes per job mean %.1f  simulated %.1f h in %.1f s (%d events, %.0f/s)\n",
		p, st.Jobs, st.MeanIO, st.MedianIO, st.TotalIO/3600, st.IntensiveMeanIO, st.MeanBW/1e9, st.MedianSlowdown, st.P95Slowdown, st.MeanFwds, r.End.Seconds()/3600, el.Seconds(), r.Events, float64(r.Events)/el.Seconds())
	summary[p] = st
}

// writeJobs writes jobs to path as JSON Lines (sim day --gen-jobs).
func writeJobs(path string, jobs []sim.Job) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := sim.WriteJobs(w, jobs); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startCPUProfile writes a CPU profile to path ("" : none) until the
// returned stop.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeSimPlots draws utilisation.svg (every policy run) and, when both
// policies ran, speedups.svg (the distribution of per-job speed-ups).
func writeSimPlots(dir, machine string, policies []string, results map[string]*sim.Result, cmp *sim.Comparison) error {
	tl := map[string][]sim.Sample{}
	for p, r := range results {
		tl[p] = r.Timeline
	}
	var b bytes.Buffer
	if err := plots.Utilisation(&b, "Utilisation on "+machine, policies, tl); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "utilisation.svg"), b.Bytes(), 0o644); err != nil {
		return err
	}
	if cmp == nil || len(cmp.Speedups) == 0 {
		return nil
	}
	b.Reset()
	if err := plots.Speedups(&b, fmt.Sprintf("DFRA against FFM on %s: per-job I/O speed-up (%d jobs)", machine, len(cmp.Speedups)), cmp.Speedups); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "speedups.svg"), b.Bytes(), 0o644)
}

func writeSimOutputs(dir, policy string, r *sim.Result) error {
	f, err := os.Create(filepath.Join(dir, "jobs-"+policy+".jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, j := range r.Jobs {
		enc.Encode(j)
	}
	if err := closeAll(w, f); err != nil {
		return err
	}
	f, err = os.Create(filepath.Join(dir, "timeline-"+policy+".csv"))
	if err != nil {
		return err
	}
	w = bufio.NewWriter(f)
	sim.WriteTimeline(w, r.Timeline)
	return closeAll(w, f)
}

func closeAll(w *bufio.Writer, c io.Closer) error {
	err := w.Flush()
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}

// simProfiles reads the profiles a workload's applications draw from: a
// JSON Lines file of them and Darshan logs (comma-separated).
func simProfiles(path, darshanLogs string) ([]beacon.Profile, error) {
	var out []beacon.Profile
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		out, err = sim.ReadProfiles(bufio.NewReader(f))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if darshanLogs != "" {
		for _, l := range strings.Split(darshanLogs, ",") {
			p, err := importDarshan(strings.TrimSpace(l))
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// simMemTier gives machine m the mem tier the flags describe (none set:
// the machine's own).
func simMemTier(m *machine.Machine, capacity string, mbps float64, mode, free string) error {
	if capacity != "" {
		c, err := size.Parse(capacity)
		if err != nil || c < 0 {
			return fmt.Errorf("--mem-tier %q: not a size", capacity)
		}
		if c == 0 {
			m.MemTier = nil
		} else {
			if m.MemTier == nil {
				m.MemTier = &machine.MemTier{BW: 10e9}
			}
			m.MemTier.Capacity = float64(c)
		}
	}
	if m.MemTier == nil {
		if mbps > 0 || mode != "" || free != "" {
			return fmt.Errorf("--mem-tier-mbps, --tiering and --tier-free need a mem tier (--mem-tier SIZE)")
		}
		return nil
	}
	if mbps > 0 {
		m.MemTier.BW = mbps * 1e6
	}
	switch mode {
	case "":
	case "auto", "manual":
		m.MemTier.Manual = mode == "manual"
	default:
		return fmt.Errorf("--tiering %q: want auto or manual", mode)
	}
	if free != "" {
		t, err := parseThresholds(free)
		if err != nil {
			return fmt.Errorf("--tier-free: %v", err)
		}
		m.MemTier.Thresholds = [3]float64{float64(t.StallWrite), float64(t.ForcedOut), float64(t.NormalOut)}
	}
	return m.Check()
}
