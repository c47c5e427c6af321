package tiers_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/policy/tiering"
	"github.com/sluice-hpc/sluice/sim"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/sim/tiers"
)

// tierRun is one run of bench/tiers/threshold.sh as stored.
type tierRun struct {
	Mode     string  `json:"mode"`
	Pattern  string  `json:"pattern"`
	Run      int     `json:"run"`
	MemMiB   uint64  `json:"mem_mib"`
	TierFree string  `json:"tier_free"`
	MemMBps  float64 `json:"mem_mbps"`
	SsdMBps  float64 `json:"ssd_mbps"`
	Writer   struct {
		Bursts []struct {
			T, MBps float64
		} `json:"bursts"`
		MBps float64 `json:"mbps"`
	} `json:"writer"`
	FilesOnMem    int `json:"files_on_mem"`
	FilesMigrated int `json:"files_migrated"`
}

func readTierRuns(t *testing.T, path string) []tierRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []tierRun
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r tierRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// tierConfigOf is the scenario of a stored run (bench/tiers/threshold.sh:
// 4 × the mem tier written in 4 MiB files; bursts of 3/4 of it with 3 s
// pauses), the writer at writerMBps.
func tierConfigOf(t *testing.T, r tierRun, writerMBps float64) tiers.Config {
	t.Helper()
	mem := r.MemMiB << 20
	cfg := tiers.Config{MemBytes: mem, MemRate: r.MemMBps * 1e6, SsdRate: r.SsdMBps * 1e6, Auto: r.Mode != "spill",
		WriterRate: writerMBps * 1e6, FileBytes: 4 << 20, Total: 4 * mem}
	if r.Pattern == "bursts" {
		cfg.Burst, cfg.Pause = 3*mem/4, 3*time.Second
	}
	var th [3]uint64
	for i, w := range strings.Split(r.TierFree, ",") {
		v, err := size.Parse(w)
		if err != nil || i > 2 {
			t.Fatalf("tier_free %q: %v", r.TierFree, err)
		}
		th[i] = uint64(v)
	}
	cfg.Policy.Thresholds = tiering.Thresholds{StallWrite: th[0], ForcedOut: th[1], NormalOut: th[2]}
	return cfg
}

// writerSpeed is the client path's own write speed in the stored runs:
// the median of the first bursts (each onto an empty mem tier).
func writerSpeed(runs []tierRun) float64 {
	var v []float64
	for _, r := range runs {
		if r.Pattern == "bursts" && len(r.Writer.Bursts) > 0 {
			v = append(v, r.Writer.Bursts[0].MBps)
		}
	}
	sort.Float64s(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// TestValidateTiers replays the tiering experiment's runs
// (bench/tiers/threshold.jsonl: a writer of 4× the mem tier, stream and
// bursts, under the ONFS thresholds, thresholds sized for a burst, and
// spill on full) with policy/tiering in the loop, and compares the writer
// bandwidth of each configuration (within 15 % of the median of its runs;
// each run's is reported), how many files each run left on the mem tier
// (within 2 in 90 % of runs) and the ranking of the three configurations
// per pattern. The writer's own speed is one figure for all runs: the
// median of the bursts runs' first bursts (onto an empty mem tier).
func TestValidateTiers(t *testing.T) {
	runs := readTierRuns(t, "../../bench/tiers/threshold.jsonl")
	speed := writerSpeed(runs)
	t.Logf("%d runs; the writer's own speed (median first burst): %.0f MB/s", len(runs), speed)
	within, files := 0, 0
	simBy, realBy, phaseBy := map[string][]float64{}, map[string][]float64{}, map[string][][]float64{}
	for _, r := range runs {
		res, err := tiers.Simulate(tierConfigOf(t, r, speed))
		if err != nil {
			t.Fatal(err)
		}
		key := r.Pattern + " " + r.Mode
		for i, ph := range tickPhases {
			cfg := tierConfigOf(t, r, speed)
			cfg.Phase = time.Duration(ph * float64(time.Second))
			pr, err := tiers.Simulate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			phaseBy[key] = phaseAppend(phaseBy[key], i, pr.MBps)
		}
		ok := math.Abs(res.MBps-r.Writer.MBps) <= 0.15*r.Writer.MBps
		if ok {
			within++
		}
		if abs(res.FilesOnMem-r.FilesOnMem) <= 2 {
			files++
		}
		var sb, rb []string
		for _, b := range res.Bursts {
			sb = append(sb, fmt.Sprintf("%.0f", b.MBps))
		}
		for _, b := range r.Writer.Bursts {
			rb = append(rb, fmt.Sprintf("%.0f", b.MBps))
		}
		t.Logf("%-10s %-7s run %d: writer real %6.1f MB/s, sim %6.1f (%+.0f %%) %v; bursts real %v sim %v; on mem real %d sim %d, migrated real %d sim %d; sim stalls %d, moves %d, slowest file %.2f s",
			r.Mode, r.Pattern, r.Run, r.Writer.MBps, res.MBps, 100*(res.MBps/r.Writer.MBps-1), ok, rb, sb,
			r.FilesOnMem, res.FilesOnMem, r.FilesMigrated, res.FilesMigrated, res.Stalls, res.Moves, res.SlowestFile)
		simBy[key] = append(simBy[key], res.MBps)
		realBy[key] = append(realBy[key], r.Writer.MBps)
	}
	t.Logf("writer bandwidth within 15 %% of the run: %d of %d runs; files left on mem within 2: %d of %d", within, len(runs), files, len(runs))
	if files*10 < 9*len(runs) {
		t.Errorf("files left on mem within 2 of the run's in %d of %d runs: want 90 %%", files, len(runs))
	}
	checkTierConfigs(t, "Simulate", realBy, simBy, phaseBy)
}

// tickPhases are the phases of the tiering manager's ticks (seconds into
// its 1 s period from the writer's start) a model is also run at: the
// daemon's ticker runs from the metadata daemon's start, which no run
// records, and a writer whose bursts meet a mem tier just drained or
// just not is decided by it (the onfs-burst bursts runs).
var tickPhases = []float64{0.0625, 0.1875, 0.3125, 0.4375, 0.5625, 0.6875, 0.8125, 0.9375}

// phaseAppend adds v to phase i's results.
func phaseAppend(by [][]float64, i int, v float64) [][]float64 {
	for len(by) <= i {
		by = append(by, nil)
	}
	by[i] = append(by[i], v)
	return by
}

// checkTierConfigs holds a model's writer bandwidth per configuration
// ("PATTERN MODE") to within 15 % of the median of the real runs (the
// model is deterministic and a configuration's runs repeat the same
// conditions; the onfs-burst bursts runs spread 224–386 MB/s, 1.7×,
// among themselves) at its default phase of the manager's ticks or at one
// of tickPhases (phaseBy: the model's per phase, per run), and the
// configurations at the default phase to the real runs' ranking per
// pattern.
func checkTierConfigs(t *testing.T, model string, realBy, simBy map[string][]float64, phaseBy map[string][][]float64) {
	t.Helper()
	for _, key := range slices.Sorted(maps.Keys(realBy)) {
		rm, sm := median(realBy[key]), median(simBy[key])
		best, lo, hi := sm, sm, sm
		for _, v := range phaseBy[key] {
			pm := median(v)
			lo, hi = min(lo, pm), max(hi, pm)
			if math.Abs(pm-rm) < math.Abs(best-rm) {
				best = pm
			}
		}
		t.Logf("%-18s real median %6.1f MB/s (%.1f–%.1f), %s %6.1f (%+.0f %%), over the ticks' phases %.1f–%.1f",
			key, rm, slices.Min(realBy[key]), slices.Max(realBy[key]), model, sm, 100*(sm/rm-1), lo, hi)
		if math.Abs(best-rm) > 0.15*rm {
			t.Errorf("%s: %s's writer bandwidth %.1f MB/s (%.1f–%.1f over the ticks' phases) is not within 15 %% of the runs' median %.1f", key, model, sm, lo, hi, rm)
		}
	}
	for _, pattern := range []string{"stream", "bursts"} {
		rank := func(by map[string][]float64) []string {
			modes := []string{"onfs", "onfs-burst", "spill"}
			med := func(m string) float64 { return median(by[pattern+" "+m]) }
			sort.SliceStable(modes, func(i, j int) bool { return med(modes[i]) > med(modes[j]) })
			return modes
		}
		rr, sr := rank(realBy), rank(simBy)
		t.Logf("%s: ranking real %v, %s %v", pattern, rr, model, sr)
		if !slices.Equal(rr, sr) {
			t.Errorf("%s: the configurations rank %v in %s, %v for real", pattern, sr, model, rr)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestValidateMemTier replays the tiering experiment's runs (one writer
// of 4 MiB files, each written, fsynced and closed, one after the other,
// as one stream or in bursts with 3 s pauses between:
// bench/tiers/threshold.jsonl) on a machine of one compute node,
// one forwarding node and one storage group whose one target is the ssd
// tier, with the mem tier of the machine model (sim/memtier.go, not
// Simulate' model of its own): each file a write phase (a burst's
// files a burst of phases, the pause before it), the writer's link its
// own speed (the same figure as TestValidateTiers). The writer bandwidth
// of each configuration must be within 15 % of the median of its runs,
// the configurations must rank per pattern as they do for real,
// and each run must move down as many files as the real one did, within
// 2.
func TestValidateMemTier(t *testing.T) {
	runs := readTierRuns(t, "../../bench/tiers/threshold.jsonl")
	speed := writerSpeed(runs)
	simBy, realBy, phaseBy := map[string][]float64{}, map[string][]float64{}, map[string][][]float64{}
	for _, r := range runs {
		key := r.Pattern + " " + r.Mode
		mbps, mt := memTierRun(t, r, speed, 0)
		for i, ph := range tickPhases {
			v, _ := memTierRun(t, r, speed, ph)
			phaseBy[key] = phaseAppend(phaseBy[key], i, v)
		}
		t.Logf("%-7s %-10s run %d: writer real %6.1f MB/s, machine model %6.1f (%+.0f %%); on mem %.0f MiB, spilled %.0f MiB, %d waits (%d spilled), %d moves (%d forced)",
			r.Pattern, r.Mode, r.Run, r.Writer.MBps, mbps, 100*(mbps/r.Writer.MBps-1), mt.Written/(1<<20), mt.Spilled/(1<<20), mt.Stalls, mt.StallSpills, mt.Moves, mt.Forced)
		simBy[key] = append(simBy[key], mbps)
		realBy[key] = append(realBy[key], r.Writer.MBps)
		if abs(mt.Moves-r.FilesMigrated) > 2 {
			t.Errorf("%s run %d: %d files moved down by the machine model, %d for real: want within 2", r.Mode, r.Run, mt.Moves, r.FilesMigrated)
		}
	}
	if len(realBy) != 6 {
		t.Fatalf("configurations %v: want onfs, onfs-burst and spill, stream and bursts", slices.Sorted(maps.Keys(realBy)))
	}
	checkTierConfigs(t, "the machine model", realBy, simBy, phaseBy)
}

// memTierRun is stored run r on the machine model's mem tier
// (TestValidateMemTier), the manager's ticks at phase seconds (0: the
// default): the writer's bandwidth and the tier's figures.
func memTierRun(t *testing.T, r tierRun, speed, phase float64) (float64, *sim.MemStats) {
	t.Helper()
	cfg := tierConfigOf(t, r, speed)
	m, err := machine.Load("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m.ComputeNodes, m.NodeBW, m.FwdNodes, m.FwdBW, m.FwdOps, m.FFMRatio, m.StaticFwds = 1, cfg.WriterRate, 1, 1e12, 1e9, 1, 0
	m.Storage = machine.Storage{Groups: 1, Targets: 1, TargetBW: cfg.SsdRate, ChunkSize: float64(cfg.FileBytes)}
	th := cfg.Policy.Thresholds
	m.MemTier = &machine.MemTier{Capacity: float64(cfg.MemBytes), BW: cfg.MemRate, Manual: !cfg.Auto, Phase: phase,
		Thresholds: [3]float64{float64(th.StallWrite), float64(th.ForcedOut), float64(th.NormalOut)}}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	files := int(cfg.Total / cfg.FileBytes)
	job := sim.Job{ID: "writer", App: "w", Nodes: 1, Pattern: "1-1", Class: "single", Write: float64(cfg.Total), Phases: files}
	if r.Pattern == "bursts" {
		// its files in bursts, a pause before each
		job.BurstPhases = int(cfg.Burst / cfg.FileBytes)
		job.Compute = cfg.Pause.Seconds() * math.Ceil(float64(files)/float64(job.BurstPhases))
	}
	s, err := sim.New(sim.Config{Machine: m, Jobs: []sim.Job{job}, Policy: "ffm"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	return float64(cfg.Total) / res.Jobs[0].IOTime / 1e6, res.Mem
}

// median is the middle of xs (the mean of the two middle ones).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
