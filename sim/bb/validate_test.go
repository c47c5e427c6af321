package bb

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/iosched"
	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/workload"
)

// realBBRun is one run of the burst-buffer experiment on real daemons
// (bench/bbos/run.sh; docs/experiments/bbos.md), as stored.
type realBBRun struct {
	Mix        workload.CkptMix
	Policy     string
	Exp, Label string
	Run        int
	Checkpoint []struct {
		App     string
		Version int
		Bytes   float64
		At, End float64
		Start   float64
	}
	Failures []struct {
		App string
		Hit bool
	}
	Final struct {
		Bypass, NoVersions bool
		Totals             struct{ Demoted, Bypassed float64 }
		// the buffer's I/O scheduler (sets kept since 2026-11-29)
		Pools []struct{ Phases, Preempted uint64 }
	}
	// Sched is the scheduler's decisions, [kind, application, µs from
	// the first] (bench/bbos/run.sh TRACE=1)
	Sched [][3]any
	// Writes is each checkpoint write at the buffer's data server,
	// [application, bytes, arrival, end, inode] (µs from the run's start;
	// TRACE=1 since 2026-12-05; the inode in the sets made after
	// results-dedicated-trace; bench/bbos/trace.py reads them)
	Writes [][]any
	// Timeline is the manager's state as `sluice bb replay` sampled it:
	// when (seconds from the start) and the pool's time into its period
	// (ns)
	Timeline []struct {
		T    float64
		Pool struct{ Elapsed, Ticked float64 }
	}
	// Window is the mount's write-behind window the applications shared
	// (0: the 32 MiB of the sets made before it was recorded)
	Window float64 `json:"window"`
	// setup is a checkpoint's setup beside its bytes on the daemons
	// the run was made with (0: realSetup's, setup-results.jsonl)
	setup time.Duration
}

func loadRealBB(t *testing.T, path string) []realBBRun {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []realBBRun
	sc := bufio.NewScanner(z)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r realBBRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// the real experiment's buffer (bench/bbos/run.sh): 128 MiB at 160 MB/s,
// the PFS at 56, --bb-rates 160,105,1,56 (MaxDWPP 2.14 S)
var realBBRates = bbos.Rates{WriteMax: 160e6, WriteMin: 105e6, DemoteMin: 1e6, DemoteMax: 56e6}

// simOfReal replays run r in the model, with each checkpoint's setup
// beside its bytes as measured on the same daemons (realSetup). The
// model takes its period-scaled defaults for the manager's look, the
// servers' idle switch, the device's burst and its step, which at the
// 8 MiB sets' 6 s period are the daemons' own (250 ms, 20 ms, 5 ms; a
// step of 1.6 ms); at the ×4 sets' 24 s period they are 1 s, 80 ms,
// 20 ms and 6.3 ms where bench/bbos/run.sh passed the daemons the same
// flags as at 6 s. With SIM_BB_DAEMON_SETTINGS set the model is given
// the daemons' settings at every period (and a 1 ms step): the ×4 sets
// do not rank BBOS as the daemons do then (docs/experiments/sim.md,
// "The model's settings against the daemons'"); the switch is how that
// is measured.
func simOfReal(t *testing.T, r realBBRun) *Result { return simOfRealTraced(t, r, nil) }

// phase is when the manager's first period began, from the run's start
// (Config.Phase): the earliest of T less the pool's Elapsed over the
// timeline's samples of the first period (a sample's T is taken after
// the manager answered, so the earliest is the nearest).
func (r realBBRun) phase() time.Duration {
	first := math.Inf(1)
	for _, s := range r.Timeline {
		if at := s.T - s.Pool.Elapsed/1e9; at < r.Mix.Period.Seconds()/2 {
			first = min(first, at)
		}
	}
	if math.IsInf(first, 1) {
		return 0
	}
	return time.Duration(first * float64(time.Second))
}

// ticks is when after the period's start the run's manager ticked first
// (Config.Ticks), for a model that looks every every and a period that
// began at phase (realBBRun.phase): from the
// timeline's samples of the last tick (the pool's Ticked, kept since
// 2026-12-05), as an offset within every; in the sets made before, half
// the daemons' --bb-every (250 ms in every set): their ticker's phase
// against the period is chance, and that is its mean.
func (r realBBRun) ticks(every, phase time.Duration) time.Duration {
	at := math.Inf(1)
	for _, s := range r.Timeline {
		if s.Pool.Ticked > 0 && s.T >= 1 { // past the grants' own ticks
			// a sample's T is taken after the manager answered: the
			// earliest offset is the nearest
			off := math.Mod(s.T-s.Pool.Ticked/1e9-phase.Seconds(), every.Seconds())
			if off < 0 {
				off += every.Seconds()
			}
			at = min(at, off)
		}
	}
	if math.IsInf(at, 1) {
		return 125 * time.Millisecond
	}
	return time.Duration(at * float64(time.Second))
}

// simOfRealTraced is simOfReal with the model's scheduler decisions told
// to trace (nil: none).
func simOfRealTraced(t *testing.T, r realBBRun, trace func(iosched.Event)) *Result {
	cfg := Config{Trace: trace, Mix: r.Mix, Policy: bbos.Policy(r.Policy), S: float64(r.Mix.Buffer), Rates: realBBRates,
		ReadBW: 160e6, PFSRead: 56e6, Bypass: r.Final.Bypass, NoVersions: r.Final.NoVersions, Restarts: 8,
		WriteBehind: cmp.Or(r.Window, 32<<20), SharedWindow: true, Setup: r.setup, Phase: r.phase()}
	if cfg.Setup == 0 {
		cfg.Setup = realSetup(t, "../../bench/bbos/setup-results.jsonl")
	}
	if os.Getenv("SIM_BB_DAEMON_SETTINGS") != "" {
		cfg.Every, cfg.ServerIdle, cfg.DeviceBurst, cfg.Tick = 250*time.Millisecond, 20*time.Millisecond, 5*time.Millisecond, time.Millisecond
		cfg.MaxWait = iosched.DefaultMaxWait
	}
	cfg.Ticks = r.ticks(cmp.Or(cfg.Every, r.Mix.Period/24), cfg.Phase)
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestValidateBurstBuffer: the burst-buffer model against the runs of the
// BBOS experiment on real daemons (bench/bbos/results.jsonl.gz), each
// replayed with its own mix, policy and switches. Per run, the bytes
// demoted agree within 20 % in at least 90 % of the runs, and the share
// of failures that found their checkpoint on the buffer within 0.15 in at
// least 90 % of the runs, under low and under high congestion (high since
// the daemons stopped spilling checkpoints at a burst's start:
// docs/experiments/sim.md, "Open checkpoints are room to come"); the
// policies rank as on the real daemons (BBOS above LRU and FIFO on
// restart hits wherever they were compared; version awareness above MTBF
// alone). Under low congestion the time a run's checkpoints took in all
// agrees within 15 % in at least 90 % of the runs; checkpoint by
// checkpoint and application by application the agreement is reported,
// beside how far the daemons agree with themselves from one period to
// the next. Checkpoint by checkpoint, over the cases repeated under a
// policy blind to the seed, the model agrees with the runs at least as
// often as one run with another (the 8 MiB checkpoints take 56 ms alone,
// and from run to run the daemons' move by 10–20 ms one time in five:
// no model judged checkpoint by checkpoint can reach the 90 %
// on this set, docs/experiments/sim.md).
func TestValidateBurstBuffer(t *testing.T) {
	runs := loadRealBB(t, "../../bench/bbos/results.jsonl.gz")
	if len(runs) < 100 {
		t.Fatalf("%d stored runs", len(runs))
	}
	sims := replayReal(t, runs)
	d := decisionsAgree(t, runs, sims)
	tm := timesAgree(t, runs, sims, "low")
	if n := phasesAgree(t, runs, sims); n > 0 {
		t.Errorf("the scheduler's phases per checkpoint part by more than 0.1 in %d cases under low congestion", n)
	}
	if tm.run.short() {
		t.Errorf("the checkpoints' time in all agrees in %d of %d runs under low congestion: want 90 %%", tm.run.ok, tm.run.n)
	}
	if tm.rerun.n == 0 || tm.rerun.pct() < tm.again.pct() {
		t.Errorf("under low congestion the model's checkpoints agree with the runs' for %.0f %% (%d of %d), one run's with another's for %.0f %%: want at least as many",
			tm.rerun.pct(), tm.rerun.ok, tm.rerun.n, tm.again.pct())
	}
	if d.hits.short() || d.high.short() || d.demoted.short() {
		t.Errorf("failure hits agree in %d of %d runs under low congestion and %d of %d under high, demoted bytes in %d of %d: want 90 %%",
			d.hits.ok, d.hits.n, d.high.ok, d.high.n, d.demoted.ok, d.demoted.n)
	}
	if d.ranked < 5 {
		t.Errorf("only %d policy pairs ranked", d.ranked)
	}
	// the high-congestion runs again with the scheduler's decisions kept
	// (bench/bbos/run.sh TRACE=1, 2026-12-02): reported
	high := loadRealBB(t, "../../bench/bbos/results-high-trace.jsonl.gz")
	if len(high) < 30 {
		t.Fatalf("%d traced runs", len(high))
	}
	t.Logf("high congestion, the scheduler's decisions kept (results-high-trace.jsonl.gz):")
	hs := make([]*Result, len(high))
	traces := make([][]iosched.Event, len(high))
	for i, r := range high {
		hs[i] = simOfRealTraced(t, r, func(e iosched.Event) { traces[i] = append(traces[i], e) })
	}
	decisionsAgree(t, high, hs)
	timesAgree(t, high, hs, "high")
	phasesAgree(t, high, hs)
	turnsAgree(t, high, hs, traces)
}

// TestValidateBurstBufferOwnWindow: the 8 MiB set run again with the
// daemons of 2026-12-05, every application writing through its own
// window as from its own compute node (bench/bbos/run.sh APP_WINDOW=1;
// bench/bbos/results-appwindow.jsonl.gz, all four experiments, 153 runs;
// the 48 of BBOS with bypass run again after the manager began to roll
// the period at a bypass decision, results-appwindow-roll, and the 12 of
// the versions experiment after `sluice bb replay` began to start
// checkpoints due at one instant in order, results-appwindow-versions:
// loadAppWindow), each replayed with the setup of a checkpoint measured
// on the same daemons (setup-results-20261205.jsonl). Asserted at the
// issue's bar (90 %): the runs' time in all within 15 % and each
// application's checkpoints' time in all (its I/O time) within 15 % or
// 10 ms, under both congestions; the failure hits, the bytes demoted and
// the policies' ranking as in TestValidateBurstBuffer; the scheduler's
// phases per checkpoint within 0.1 under low congestion. Not met, and
// kept from falling: checkpoint by checkpoint (88.6 %, at least 87 %
// asserted; docs/experiments/sim.md).
func TestValidateBurstBufferOwnWindow(t *testing.T) {
	runs := loadAppWindow(t)
	if len(runs) < 150 {
		t.Fatalf("%d stored runs", len(runs))
	}
	setup := realSetup(t, "../../bench/bbos/setup-results-20261205.jsonl")
	for i := range runs {
		runs[i].setup = setup
	}
	sims := replayReal(t, runs)
	d := decisionsAgree(t, runs, sims)
	var ck count
	for _, cong := range []string{"low", "high"} {
		tm := timesAgree(t, runs, sims, cong)
		ck = tm.ck // every run's, whichever the congestion
		if tm.run.short() {
			t.Errorf("%s congestion: runs' times in all agree for %d of %d: want 90 %%", cong, tm.run.ok, tm.run.n)
		}
		if tm.app.short() {
			t.Errorf("%s congestion: applications' times in all agree for %d of %d: want 90 %%", cong, tm.app.ok, tm.app.n)
		}
	}
	if ck.ok*100 < ck.n*87 {
		t.Errorf("checkpoints' times agree for %d of %d: want at least 87 %% (the bar is 90)", ck.ok, ck.n)
	}
	if d.hits.short() || d.high.short() || d.demoted.short() {
		t.Errorf("failure hits agree in %d of %d runs under low congestion and %d of %d under high, demoted bytes in %d of %d: want 90 %%",
			d.hits.ok, d.hits.n, d.high.ok, d.high.n, d.demoted.ok, d.demoted.n)
	}
	if d.ranked < 5 {
		t.Errorf("only %d policy pairs ranked", d.ranked)
	}
	rankByTime(t, runs, sims)
	if n := phasesAgree(t, runs, sims); n > 0 {
		t.Errorf("the scheduler's phases per checkpoint part by more than 0.1 in %d cases under low congestion", n)
	}
}

// TestValidateBurstBufferTraced replays the runs made after the 8 MiB
// own-window set with each write's and each demotion read's arrival at
// the buffer's server recorded (bench/bbos TRACE=1; bench/bbos/trace.py):
// the dedicated buffer under high congestion (results-dedicated-trace:
// they showed the model where its writers' requests reach the device, a
// fresh chunk's first write going alone, writeDevice) and FIFO's restart
// cases (results-fifo-trace: demotion reading the buffer beside the
// writes, a checkpoint 49 ms with no read overlapping it and about 4 ms
// more for each one). Judged at the bar application by
// application.
func TestValidateBurstBufferTraced(t *testing.T) {
	setup := realSetup(t, "../../bench/bbos/setup-results-20261205.jsonl")
	for _, f := range []string{"results-dedicated-trace", "results-fifo-trace"} {
		runs := loadRealBB(t, "../../bench/bbos/"+f+".jsonl.gz")
		if len(runs) < 4 {
			t.Fatalf("%s: %d stored runs", f, len(runs))
		}
		var apps, cks count
		for _, r := range runs {
			if len(r.Writes) == 0 {
				t.Fatalf("%s: %s at %.1f S run %d: no writes recorded", f, r.Label, r.Mix.DWPP, r.Run)
			}
			r.setup = setup
			s := simOfReal(t, r)
			ok, n := agreeApps(r, s)
			apps.add(ok, n)
			ok, n = agree(r, s)
			cks.add(ok, n)
			rt, mt := runTimes(r, s)
			t.Logf("%s: %s at %.1f S run %d: checkpoints' time in all %.2f s on the daemons, %.2f s in the model (%.2f×)", f, r.Label, r.Mix.DWPP, r.Run, rt, mt, mt/rt)
		}
		t.Logf("%s: applications' times in all within 15 %% or 10 ms: %d of %d; checkpoints: %d of %d", f, apps.ok, apps.n, cks.ok, cks.n)
		if apps.short() {
			t.Errorf("%s: applications' times in all agree for %d of %d: want 90 %%", f, apps.ok, apps.n)
		}
	}
}

// loadAppWindow loads the own-window 8 MiB set: results-appwindow's
// runs, those of BBOS with bypass in them (every experiment's) replaced
// by their runs of results-appwindow-roll, made after the manager began
// to roll the period at a bypass decision past the period's end
// (manager/bbos Hint; before, the period rolled at the manager's first
// tick past its end, up to 250 ms later; no other run takes that path),
// and the versions experiment's by those of
// results-appwindow-versions, made after `sluice bb replay` began to
// start the checkpoints due at one instant in the mix's order (before,
// which reached the buffer first was a race between their writers).
func loadAppWindow(t *testing.T) []realBBRun {
	runs := loadRealBB(t, "../../bench/bbos/results-appwindow.jsonl.gz")
	for _, again := range []struct {
		file string
		of   func(realBBRun) bool
	}{
		{"results-appwindow-roll", func(r realBBRun) bool { return r.Final.Bypass }},
		{"results-appwindow-versions", func(r realBBRun) bool { return r.Exp == "versions" }},
	} {
		by := map[string]realBBRun{}
		for _, r := range loadRealBB(t, "../../bench/bbos/"+again.file+".jsonl.gz") {
			if again.of(r) {
				by[runKey(r)] = r
			}
		}
		var replaced int
		for i, r := range runs {
			if a, ok := by[runKey(r)]; ok && again.of(r) {
				runs[i] = a
				replaced++
			}
		}
		if replaced != len(by) {
			t.Fatalf("%s: %d runs, %d replaced", again.file, len(by), replaced)
		}
	}
	return runs
}

// runKey names run r: its experiment, policy, mix and run.
func runKey(r realBBRun) string {
	return fmt.Sprintf("%s %s %d %+v", r.Exp, r.Label, r.Run, r.Mix)
}

// replayReal replays each stored run in the model.
func replayReal(t *testing.T, runs []realBBRun) []*Result {
	sims := make([]*Result, len(runs))
	for i, r := range runs {
		sims[i] = simOfReal(t, r)
	}
	return sims
}

// decisions is how far the model agrees with the daemons on what the
// policies decided: the share of failures that found their checkpoint
// on the buffer within 0.15, under low congestion (hits) and high
// (high), and the bytes demoted within 20 % (demoted), run by run; and
// how many pairs of policies the daemons' runs rank on failure hits
// (ranked; a pair the model ranks the other way is an error).
type decisions struct {
	hits, high, demoted count
	ranked              int
}

// decisionsAgree measures and logs the decisions of runs against their
// replays sims.
func decisionsAgree(t *testing.T, runs []realBBRun, sims []*Result) decisions {
	var d decisions
	type group struct {
		exp, cong, classes string
		dwpp               float64
		mtbf               int
	}
	real, model := map[group]map[string][]float64{}, map[group]map[string][]float64{}
	for i, r := range runs {
		s := sims[i]
		var hits, fails int
		for _, f := range r.Failures {
			fails++
			if f.Hit {
				hits++
			}
		}
		rh := float64(hits) / float64(max(fails, 1))
		c := &d.hits
		if r.Mix.Congestion == "high" {
			c = &d.high
		}
		c.n++
		if fails < 10 || math.Abs(rh-s.HitRatio()) <= 0.15 {
			c.ok++
		} else {
			t.Logf("%s %s DWPP %.1f %s run %d: failure hits real %.2f, model %.2f", r.Exp, r.Label, r.Mix.DWPP, r.Mix.Congestion, r.Run, rh, s.HitRatio())
		}
		d.demoted.n++
		if dem := r.Final.Totals.Demoted; math.Abs(s.Demoted-dem) <= 0.2*dem {
			d.demoted.ok++
		} else {
			t.Logf("%s %s DWPP %.1f %s run %d: demoted real %.0f MiB, model %.0f (%.0f MiB spilled)", r.Exp, r.Label, r.Mix.DWPP, r.Mix.Congestion, r.Run, dem/(1<<20), s.Demoted/(1<<20), s.Spilled/(1<<20))
		}
		g := group{r.Exp, r.Mix.Congestion, fmt.Sprint(len(r.Mix.Apps)), r.Mix.DWPP, int(r.Mix.Apps[0].MTBF / time.Minute)}
		if real[g] == nil {
			real[g], model[g] = map[string][]float64{}, map[string][]float64{}
		}
		real[g][r.Label] = append(real[g][r.Label], rh)
		model[g][r.Label] = append(model[g][r.Label], s.HitRatio())
	}
	t.Logf("failure hits within 0.15 in %d of %d runs under low congestion, %d of %d under high, demoted within 20 %% in %d of %d",
		d.hits.ok, d.hits.n, d.high.ok, d.high.n, d.demoted.ok, d.demoted.n)
	for g, byLabel := range real {
		for _, pair := range [][2]string{{"bbos", "lru"}, {"bbos", "fifo"}, {"bbos", "bbos-noversions"}} {
			a, b := byLabel[pair[0]], byLabel[pair[1]]
			if len(a) == 0 || len(b) == 0 || math.Abs(median(a)-median(b)) < 0.05 {
				continue // not compared, or too close to rank
			}
			d.ranked++
			ra := median(a) > median(b)
			ma := median(model[g][pair[0]]) > median(model[g][pair[1]])
			if ra != ma {
				t.Errorf("%+v: real ranks %s %v %s on failure hits (%.2f, %.2f), the model the other way (%.2f, %.2f)", g, pair[0],
					map[bool]string{true: "above", false: "below"}[ra], pair[1], median(a), median(b), median(model[g][pair[0]]), median(model[g][pair[1]]))
			}
		}
	}
	t.Logf("%d policy pairs ranked", d.ranked)
	return d
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// count is how many of n agreed.
type count struct{ ok, n int }

func (c *count) add(ok, n int) { c.ok, c.n = c.ok+ok, c.n+n }

// short says whether fewer than nine in ten agreed (the bar).
func (c count) short() bool { return c.ok*10 < c.n*9 }

// pct is the share that agreed, in per cent.
func (c count) pct() float64 { return 100 * float64(c.ok) / float64(max(c.n, 1)) }

// timing is how far the model's checkpoint times agree with the
// daemons' (within 15 % or 10 ms unless said): checkpoint by checkpoint
// (ck, every run), and over the runs of one congestion the runs' time in all (run,
// within 15 %), each application's time in all (app), the daemons
// against themselves from one period to the next (self), the model's
// median over a case's repeats against the daemons' (med) and the
// daemons' runs against their own median (rself); and, for scale, how
// many checkpoints a model without contention predicts (alone: each at
// the buffer's full write rate).
//
// Over the cases run more than once under a policy blind to the seed
// (every one but BBOS: the repeats differ only in when the failures
// came, which change nothing written), each checkpoint of a run
// against the same checkpoint of every other run of its case is how far
// one run of the daemons predicts another (again), and the model's
// checkpoints of those runs against them (rerun): a model judged
// checkpoint by checkpoint can do no better than the first.
//
// tied is ck with the checkpoints scheduled at the same instant with the
// same bytes paired in order of their times (agreeTied).
type timing struct{ ck, tied, run, app, appTied, self, med, rself, alone, again, rerun count }

// timesAgree measures and logs the timing of runs against their
// replays sims; the measures over runs, applications and repeats take
// the runs of congestion cong.
func timesAgree(t *testing.T, runs []realBBRun, sims []*Result, cong string) timing {
	var tm timing
	repeats := map[string]repeatedApps{} // congestion cong, by case
	byCase := map[string]*count{}        // checkpoints, by DWPP and congestion
	for i, r := range runs {
		s := sims[i]
		ok, n := agree(r, s)
		tm.ck.add(ok, n)
		tm.tied.add(agreeTied(r, s))
		for _, c := range r.Checkpoint {
			if c.End > 0 {
				tm.alone.n++
				if near(c.Bytes/realBBRates.WriteMax, c.End-c.At) {
					tm.alone.ok++
				}
			}
		}
		k := fmt.Sprintf("DWPP %.2f %s", r.Mix.DWPP, r.Mix.Congestion)
		if byCase[k] == nil {
			byCase[k] = &count{}
		}
		byCase[k].add(ok, n)
		if r.Mix.Congestion != cong {
			continue
		}
		t1, t2 := runTimes(r, s)
		if math.Abs(t2-t1) <= 0.15*t1 {
			tm.run.ok++
		} else {
			t.Logf("%s %s DWPP %.1f %s run %d: checkpoints took %.2f s in all, the model %.2f", r.Exp, r.Label, r.Mix.DWPP, r.Mix.Congestion, r.Run, t1, t2)
		}
		tm.run.n++
		tm.app.add(agreeApps(r, s))
		tm.appTied.add(agreeAppsTied(r, s))
		c := repeatCase(r)
		if repeats[c] == nil {
			repeats[c] = repeatedApps{}
		}
		repeats[c].add(r, s)
		tm.self.add(selfAgree(r))
	}
	tm.med.ok, tm.med.n, tm.rself.ok, tm.rself.n = agreeRepeats(repeats)
	tm.again, tm.rerun = agreeAgain(runs, sims, cong)
	t.Logf("checkpoint times within 15 %% or 10 ms: %d of %d (each at the buffer's full rate: %d); with those scheduled together paired in order: %d",
		tm.ck.ok, tm.ck.n, tm.alone.ok, tm.tied.ok)
	for _, k := range slices.Sorted(maps.Keys(byCase)) {
		t.Logf("checkpoint times at %s: %d of %d within 15 %% or 10 ms", k, byCase[k].ok, byCase[k].n)
	}
	if tm.run.n == 0 {
		return tm
	}
	t.Logf("%s congestion: the checkpoints' time in all within 15 %% in %d of %d runs; per application (its checkpoints' time in all) within 15 %% or 10 ms for %d of %d (with those scheduled together paired in order: %d); the daemons themselves, an application's checkpoint against its previous one: %d of %d",
		cong, tm.run.ok, tm.run.n, tm.app.ok, tm.app.n, tm.appTied.ok, tm.self.ok, tm.self.n)
	t.Logf("%s congestion, applications run in repeated cases: the model's median time in all within 15 %% or 10 ms of the daemons' median for %d of %d; the daemons' runs within 15 %% or 10 ms of their own median for %d of %d (the bound run by run)",
		cong, tm.med.ok, tm.med.n, tm.rself.ok, tm.rself.n)
	t.Logf("%s congestion, cases run more than once under a policy blind to the seed: a checkpoint of one run within 15 %% or 10 ms of the same checkpoint of another run of its case %d of %d times (%.0f %%); the model's within 15 %% or 10 ms of those runs' for %d of %d (%.0f %%)",
		cong, tm.again.ok, tm.again.n, tm.again.pct(), tm.rerun.ok, tm.rerun.n, tm.rerun.pct())
	return tm
}

// repeatCase names the case of run r: its experiment, policy and mix
// but for the seed of its failures (and the applications' MTBFs drawn
// from it), by which the repeats of a case differ.
func repeatCase(r realBBRun) string {
	mix := r.Mix
	mix.Seed, mix.Apps = 0, slices.Clone(mix.Apps)
	for i := range mix.Apps {
		mix.Apps[i].MTBF = 0
	}
	return fmt.Sprintf("%s %s %+v", r.Exp, r.Label, mix)
}

// agreeAgain counts, over the runs of congestion cong whose case was run
// more than once under a policy that does not read the seed (not BBOS),
// the checkpoints of each run within 15 % or 10 ms of the same
// checkpoint of each other run of the case (again), and the model's
// replays of those runs within 15 % or 10 ms of their run (rerun).
func agreeAgain(runs []realBBRun, sims []*Result, cong string) (again, rerun count) {
	cases := map[string][]int{}
	for i, r := range runs {
		if r.Mix.Congestion == cong && bbos.Policy(r.Policy) != bbos.BBOS {
			c := repeatCase(r)
			cases[c] = append(cases[c], i)
		}
	}
	for _, is := range cases {
		if len(is) < 2 {
			continue
		}
		for _, i := range is {
			rerun.add(agree(runs[i], sims[i]))
			ti := daemonTimes(runs[i])
			for _, j := range is {
				if j == i {
					continue
				}
				for k, tj := range daemonTimes(runs[j]) {
					if x, found := ti[k]; found {
						again.n++
						if near(x, tj) {
							again.ok++
						}
					}
				}
			}
		}
	}
	return again, rerun
}

// agree counts the checkpoints whose time (schedule to end) the model
// predicts within 15 % or 10 ms.
func agree(r realBBRun, s *Result) (ok, n int) {
	checkpointTimes(r, s, func(_ ckKey, rt, mt float64, found bool) {
		n++
		if found && near(mt, rt) {
			ok++
		}
	})
	return ok, n
}

// agreeTied is agree with the checkpoints scheduled at the same instant
// with the same bytes taken as a group: which of them the daemons serve
// first is a race between their writers (processes started in the same
// microsecond), which no model can predict, so the group's times are
// paired in order, the fastest on the daemons with the fastest in the
// model, and so on. A checkpoint scheduled alone is judged as in agree.
func agreeTied(r realBBRun, s *Result) (ok, n int) {
	tied := tiedModel(r, s)
	for k, rt := range daemonTimes(r) {
		n++
		if mt, found := tied[k]; found && near(mt, rt) {
			ok++
		}
	}
	return ok, n
}

// tiedModel is the model's time for each checkpoint the daemons finished
// (as checkpointTimes), with the checkpoints scheduled at the same
// instant with the same bytes paired in order (agreeTied): the fastest
// on the daemons gets the fastest of the group in the model, and so on.
// A checkpoint the model did not finish is left out.
func tiedModel(r realBBRun, s *Result) map[ckKey]float64 {
	type at struct {
		us    int64
		bytes float64
	}
	byKey := map[ckKey]at{}
	for _, c := range r.Checkpoint {
		byKey[ckKey{c.App, c.Version}] = at{int64(math.Round(c.At * 1e6)), c.Bytes}
	}
	type ck struct {
		k  ckKey
		rt float64
	}
	real, model := map[at][]ck{}, map[at][]float64{}
	checkpointTimes(r, s, func(k ckKey, rt, mt float64, found bool) {
		g := byKey[k]
		real[g] = append(real[g], ck{k, rt})
		if found {
			model[g] = append(model[g], mt)
		}
	})
	out := map[ckKey]float64{}
	for g, cks := range real {
		mts := model[g]
		slices.SortFunc(cks, func(a, b ck) int { return cmp.Compare(a.rt, b.rt) })
		slices.Sort(mts)
		for i, c := range cks {
			if i < len(mts) {
				out[c.k] = mts[i]
			}
		}
	}
	return out
}

// ckKey names a checkpoint: its application and version.
type ckKey struct {
	app string
	v   int
}

// daemonTimes is each checkpoint the daemons finished and its time
// (schedule to end, seconds).
func daemonTimes(r realBBRun) map[ckKey]float64 {
	t := map[ckKey]float64{}
	for _, c := range r.Checkpoint {
		if c.End > 0 {
			t[ckKey{c.App, c.Version}] = c.End - c.At
		}
	}
	return t
}

// near says whether x is within 15 % or 10 ms of the reference ref.
func near(x, ref float64) bool {
	d := math.Abs(x - ref)
	return d <= 0.15*ref || d <= 0.010
}

// checkpointTimes pairs each checkpoint the daemons finished with the
// model's time for it (schedule to end, seconds; found false: the model
// did not finish it).
func checkpointTimes(r realBBRun, s *Result, each func(k ckKey, real, model float64, found bool)) {
	sim := map[ckKey]float64{}
	for _, c := range s.Checkpoints {
		if c.Done > 0 {
			sim[ckKey{c.App, c.Version}] = (c.Done - c.At).Seconds()
		}
	}
	for k, rt := range daemonTimes(r) {
		d, found := sim[k]
		each(k, rt, d, found)
	}
}

// runTimes is the time the run's checkpoints took in all, on the daemons
// and in the model (the checkpoints both finished).
func runTimes(r realBBRun, s *Result) (real, model float64) {
	checkpointTimes(r, s, func(_ ckKey, rt, mt float64, found bool) {
		if found {
			real += rt
			model += mt
		}
	})
	return real, model
}

// appTimes is each application's checkpoints' time in all, on the
// daemons and in the model (+Inf: the model did not finish one of them).
func appTimes(r realBBRun, s *Result) (real, model map[string]float64) {
	m := map[ckKey]float64{}
	checkpointTimes(r, s, func(k ckKey, _, mt float64, found bool) {
		if found {
			m[k] = mt
		}
	})
	return appTimesOf(r, m)
}

// appTimesOf is appTimes with the model's time of each checkpoint given
// (model; one missing: the model did not finish it).
func appTimesOf(r realBBRun, model map[ckKey]float64) (real, apps map[string]float64) {
	real, apps = map[string]float64{}, map[string]float64{}
	for k, rt := range daemonTimes(r) {
		real[k.app] += rt
		if mt, found := model[k]; found {
			apps[k.app] += mt
		} else {
			apps[k.app] = math.Inf(1)
		}
	}
	return real, apps
}

// agreeApps counts the applications whose checkpoints' time in all the
// model predicts within 15 % or 10 ms.
func agreeApps(r realBBRun, s *Result) (ok, n int) { return nearApps(appTimes(r, s)) }

// agreeAppsTied is agreeApps with the model's checkpoint times paired in
// order within the groups scheduled at the same instant (tiedModel):
// which application of a group the daemons serve first is a race
// between its writers' processes, and so is which one pays the wait.
func agreeAppsTied(r realBBRun, s *Result) (ok, n int) {
	return nearApps(appTimesOf(r, tiedModel(r, s)))
}

// nearApps counts the applications whose time in all in model is within
// 15 % or 10 ms of theirs in real.
func nearApps(real, model map[string]float64) (ok, n int) {
	for app, rt := range real {
		n++
		if near(model[app], rt) {
			ok++
		}
	}
	return ok, n
}

// repeatedApps holds each application's checkpoints' time in all over
// the repeats of one case (experiment, policy, mix), on the daemons and in
// the model, run by run.
type repeatedApps map[string]struct{ real, model []float64 }

func (a repeatedApps) add(r realBBRun, s *Result) {
	real, model := appTimes(r, s)
	for app, rt := range real {
		e := a[app]
		e.real, e.model = append(e.real, rt), append(e.model, model[app])
		a[app] = e
	}
}

// agreeRepeats counts, over the applications run more than once, those
// whose median time in all over the repeats the model's median predicts
// within 15 % or 10 ms, and, run by run, the daemons' times within 15 %
// or 10 ms of their own median: what the repeats say of the noise of
// one run, the bound for any model judged run by run.
func agreeRepeats(cases map[string]repeatedApps) (medOK, medN, selfOK, selfN int) {
	for _, apps := range cases {
		for _, e := range apps {
			if len(e.real) < 2 {
				continue
			}
			m := median(e.real)
			medN++
			if near(median(e.model), m) {
				medOK++
			}
			for _, x := range e.real {
				selfN++
				if near(x, m) {
					selfOK++
				}
			}
		}
	}
	return medOK, medN, selfOK, selfN
}

// selfAgree counts the daemons' checkpoints within 15 % or 10 ms of
// their application's previous one (the mix repeats every period): how
// far the daemons agree with themselves, the bound for any model.
func selfAgree(r realBBRun) (ok, n int) {
	t := daemonTimes(r)
	for k, b := range t {
		if a, found := t[ckKey{k.app, k.v - 1}]; found {
			n++
			if near(b, a) {
				ok++
			}
		}
	}
	return ok, n
}

// TestValidateBurstBufferLarge: the same replay against the BBOS
// experiment's low-congestion cases run with every size and time four
// times the above (a 512 MiB buffer, 32 MiB checkpoints, a 24 s period,
// the same rates, so the same DWPP and congestion), two sets:
// bench/bbos/results-32m.jsonl.gz, every application through the mount's
// one shared window, and results-32m-low-appwindow.jsonl.gz, run again
// after the fixes below with every application its own window. There
// the 10–40 ms a checkpoint moves by from run to run (a demotion block,
// a manager's look) is a smaller part of it, and the bar holds on
// both sets checkpoint by checkpoint and application by application: at
// least 90 % within 15 % or 10 ms (and the runs' times, failure hits and
// bytes demoted as above; the policies rank as on the daemons). The same ×4 under high congestion is replayed beside it, two
// sets (docs/experiments/sim.md, "Burst buffer"):
//   - results-32m-high-workers.jsonl.gz, run after the forwarding daemon
//     stopped holding its workers for requests at data servers, every
//     application writing through the mount's one shared window: the
//     bytes demoted agree as under low congestion and the policies rank
//     the same (asserted);
//   - results-32m-high-appwindow.jsonl.gz, run after BBOS's bypass
//     counted the bypassed checkpoints in the period's load, every
//     application with a mount's window of its own (bench/bbos/run.sh
//     APP_WINDOW=1), as on a machine where jobs write from their own
//     nodes: the policies rank the same (asserted); the checkpoints'
//     times agree far better than on the first set (reported), the bytes
//     demoted do not (reported: the daemons spill a period's late
//     checkpoints to the PFS, their placement having forgotten the room
//     promised to chunks queued at the buffer's I/O scheduler, where the
//     model makes them wait; docs/experiments/sim.md, "Why the daemons
//     spill");
//   - results-32m-high-mended.jsonl.gz and -mended-2, three runs per
//     case after the mend (a data server counts the room of new chunks
//     queued at it; stalled writers get room in the order they
//     stalled): the bar holds under high congestion too, at
//     least 90 % of the checkpoints, applications and runs within 15 %
//     or 10 ms, and the bytes demoted agree and the policies rank the
//     same (asserted).
func TestValidateBurstBufferLarge(t *testing.T) {
	runs := loadRealBB(t, "../../bench/bbos/results-32m.jsonl.gz")
	if len(runs) < 50 {
		t.Fatalf("%d stored runs", len(runs))
	}
	for _, set := range []struct {
		paths   []string
		demoted bool // assert the bytes demoted
		times   bool // assert the checkpoints' times and the applications' and runs' times in all
		runs    int  // stored
	}{{[]string{"../../bench/bbos/results-32m-high-workers.jsonl.gz"}, true, false, 30},
		{[]string{"../../bench/bbos/results-32m-high-appwindow.jsonl.gz"}, false, false, 30},
		{[]string{"../../bench/bbos/results-32m-high-mended.jsonl.gz", "../../bench/bbos/results-32m-high-mended-2.jsonl.gz"}, true, true, 36}} {
		var high []realBBRun
		for _, path := range set.paths {
			high = append(high, loadRealBB(t, path)...)
		}
		if len(high) < set.runs {
			t.Fatalf("%v: %d stored runs under high congestion", set.paths, len(high))
		}
		t.Logf("high congestion, %v:", set.paths)
		hs := replayReal(t, high)
		if hd := decisionsAgree(t, high, hs); set.demoted && hd.demoted.short() {
			t.Errorf("high congestion: bytes demoted agree for %d of %d runs: want 90 %%", hd.demoted.ok, hd.demoted.n)
		}
		tm := timesAgree(t, high, hs, "high")
		if set.times && (tm.ck.short() || tm.app.short() || tm.run.short()) {
			t.Errorf("%v: checkpoints' times agree for %d of %d, applications' times in all for %d of %d, runs' for %d of %d: want 90 %%",
				set.paths, tm.ck.ok, tm.ck.n, tm.app.ok, tm.app.n, tm.run.ok, tm.run.n)
		}
		rankByTime(t, high, hs)
		phasesAgree(t, high, hs)
	}
	for i, path := range []string{"../../bench/bbos/results-32m.jsonl.gz", "../../bench/bbos/results-32m-low-appwindow.jsonl.gz"} {
		if i > 0 {
			if runs = loadRealBB(t, path); len(runs) < 50 {
				t.Fatalf("%s: %d stored runs", path, len(runs))
			}
		}
		t.Logf("low congestion, %s:", path)
		sims := replayReal(t, runs)
		d := decisionsAgree(t, runs, sims)
		tm := timesAgree(t, runs, sims, "low")
		rankByTime(t, runs, sims)
		// the first set's daemons bypassed fewer checkpoints at 2.14 S
		// (BBOS at 0.72 phases per checkpoint, the model 0.49): it was
		// made before BBOS's bypass counted the bypassed checkpoints in
		// the period's load (docs/experiments/sim.md)
		if n := phasesAgree(t, runs, sims); n > 0 && i > 0 {
			t.Errorf("%s: the scheduler's phases per checkpoint part by more than 0.1 in %d cases", path, n)
		}
		for _, c := range []struct {
			what string
			c    count
		}{{"checkpoints' times", tm.ck}, {"applications' times in all", tm.app}, {"runs' times in all", tm.run},
			{"failure hits (runs)", d.hits}, {"bytes demoted (runs)", d.demoted}} {
			if c.c.short() {
				t.Errorf("%s: %s agree for %d of %d: want 90 %%", path, c.what, c.c.ok, c.c.n)
			}
		}
		if d.ranked < 3 {
			t.Errorf("%s: only %d policy pairs ranked", path, d.ranked)
		}
	}
}

// phasesAgree logs, per congestion, policy and DWPP, the median over the
// runs of the buffer's I/O scheduler phases per checkpoint on the daemons
// (their data server's count, kept with each run since 2026-11-29) and in
// the model (the same iosched.Phases): one per checkpoint is each
// written in one turn; more, turns handed on mid-checkpoint (a writer
// waiting for room, or with nothing in flight for the gap). It returns
// how many of the cases under low congestion part by more than 0.1.
func phasesAgree(t *testing.T, runs []realBBRun, sims []*Result) (lowApart int) {
	real, model := map[caseKey][]float64{}, map[caseKey][]float64{}
	for i, r := range runs {
		if len(r.Final.Pools) == 0 || r.Policy == string(bbos.Dedicated) || len(r.Checkpoint) == 0 {
			continue
		}
		k := caseOf(r)
		n := float64(len(r.Checkpoint))
		real[k] = append(real[k], float64(r.Final.Pools[0].Phases)/n)
		model[k] = append(model[k], float64(sims[i].Phases)/n)
	}
	for _, k := range sortedCases(real) {
		r, m := median(real[k]), median(model[k])
		t.Logf("%s congestion, %s at %.2f S: the scheduler's phases per checkpoint %.2f on the daemons, %.2f in the model (medians of %d runs)",
			k.cong, k.label, k.dwpp, r, m, len(real[k]))
		if k.cong == "low" && math.Abs(m-r) > 0.1 {
			lowApart++
		}
	}
	return lowApart
}

// caseKey is a stored run's case: congestion, policy label and DWPP.
type caseKey struct {
	cong, label string
	dwpp        float64
}

func caseOf(r realBBRun) caseKey { return caseKey{r.Mix.Congestion, r.Label, r.Mix.DWPP} }

// sortedCases are m's cases in order of congestion, label and DWPP.
func sortedCases[V any](m map[caseKey]V) []caseKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b caseKey) int {
		return cmp.Or(cmp.Compare(a.cong, b.cong), cmp.Compare(a.label, b.label), cmp.Compare(a.dwpp, b.dwpp))
	})
}

// schedEvents are run r's scheduler decisions as iosched Events.
func schedEvents(r realBBRun) []iosched.Event {
	var out []iosched.Event
	for _, e := range r.Sched {
		kind, _ := e[0].(string)
		app, _ := e[1].(string)
		us, _ := e[2].(float64)
		out = append(out, iosched.Event{Kind: kind, App: app, At: bbTime(time.Duration(us) * time.Microsecond)})
	}
	return out
}

// dryTurns are, for each phase the gap ended, how long its application
// had nothing at the scheduler: from its last request's end to its next
// arrival (queued, or its phase begun). On bench/bbos's daemons under
// high congestion that is a writer waiting for room mid-checkpoint.
func dryTurns(events []iosched.Event) []time.Duration {
	var out []time.Duration
	for i, e := range events {
		if e.Kind != "gap" {
			continue
		}
		for _, f := range events[i+1:] {
			if f.App == e.App && (f.Kind == "queue" || f.Kind == "begin") {
				out = append(out, f.At.Sub(e.At))
				break
			}
		}
	}
	return out
}

// turnsAgree logs, for the runs that kept the daemons' scheduler
// decisions (Sched), per case, the turns the gap ended per checkpoint and
// the median of how long those writers stayed away (dryTurns), on the
// daemons and in the model's replays sims, whose scheduler decisions are
// traces.
func turnsAgree(t *testing.T, runs []realBBRun, sims []*Result, traces [][]iosched.Event) {
	type figs struct {
		gaps, ck float64
		dry      []float64
	}
	real, model := map[caseKey]*figs{}, map[caseKey]*figs{}
	add := func(m map[caseKey]*figs, k caseKey, ev []iosched.Event, cks int) {
		if m[k] == nil {
			m[k] = &figs{}
		}
		d := dryTurns(ev)
		m[k].gaps += float64(len(d))
		m[k].ck += float64(cks)
		for _, x := range d {
			m[k].dry = append(m[k].dry, x.Seconds())
		}
	}
	for i, r := range runs {
		if len(r.Sched) == 0 {
			continue
		}
		add(real, caseOf(r), schedEvents(r), len(r.Checkpoint))
		add(model, caseOf(r), traces[i], len(sims[i].Checkpoints))
	}
	for _, k := range sortedCases(real) {
		r, m := real[k], model[k]
		t.Logf("%s at %.2f S: turns ended by the gap per checkpoint %.2f on the daemons, %.2f in the model; their writers away %.0f ms and %.0f ms (medians)",
			k.label, k.dwpp, r.gaps/r.ck, m.gaps/m.ck, median(r.dry)*1000, median(m.dry)*1000)
	}
}

// rankByTime logs, per congestion, policy and DWPP, the median over the
// repeats of the time the checkpoints took in all on the daemons and in
// the model, and fails where the model orders two policies of one
// congestion and DWPP the other way from the daemons (those whose
// daemons' medians part by more than 5 %).
func rankByTime(t *testing.T, runs []realBBRun, sims []*Result) {
	type key struct {
		cong, label string
		dwpp        float64
	}
	real, model := map[key][]float64{}, map[key][]float64{}
	for i, r := range runs {
		if r.Exp != "perf" {
			continue
		}
		k := key{r.Mix.Congestion, r.Label, r.Mix.DWPP}
		a, b := runTimes(r, sims[i])
		real[k], model[k] = append(real[k], a), append(model[k], b)
	}
	keys := slices.SortedFunc(maps.Keys(real), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.cong, b.cong), cmp.Compare(a.dwpp, b.dwpp), cmp.Compare(median(real[a]), median(real[b])))
	})
	for _, k := range keys {
		t.Logf("%s congestion, %s at %.2f S: checkpoints' time in all %.1f s on the daemons (%.1f–%.1f), %.1f s in the model (%.2f×)", k.cong, k.label, k.dwpp,
			median(real[k]), slices.Min(real[k]), slices.Max(real[k]), median(model[k]), median(model[k])/median(real[k]))
	}
	for _, a := range keys {
		for _, b := range keys {
			ra, rb := median(real[a]), median(real[b])
			if a.cong == b.cong && a.dwpp == b.dwpp && ra*1.05 < rb && median(model[a]) >= median(model[b]) {
				t.Errorf("%s congestion, at %.2f S the daemons' checkpoints take %s %.1f s, %s %.1f; the model orders them the other way (%.1f, %.1f)",
					a.cong, a.dwpp, a.label, ra, b.label, rb, median(model[a]), median(model[b]))
			}
		}
	}
}

// realSetup is what a checkpoint of `sluice bb replay` costs on the
// daemons beside its bytes (bench/bbos/setup.sh, kept in path:
// bench/bbos/setup-results.jsonl for the daemons of 2026-12-01): the
// median time of its dd less the median of the same bytes written from
// an open file in one process.
func realSetup(t *testing.T, path string) time.Duration {
	if d, ok := setups.Load(path); ok {
		return d.(time.Duration)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string][]float64{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Way  string
			Secs float64
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		by[r.Way] = append(by[r.Way], r.Secs)
	}
	if len(by["dd"]) < 10 || len(by["inproc"]) < 10 {
		t.Fatalf("setup-results.jsonl: %d dd and %d in-process files", len(by["dd"]), len(by["inproc"]))
	}
	d := time.Duration((median(by["dd"]) - median(by["inproc"])) * float64(time.Second))
	setups.Store(path, d)
	return d
}

// setups holds realSetup's answers by file, read once.
var setups sync.Map

// TestDryTurns: a writer whose turn the gap ended is away until it
// queues again or its phase begins; one that never comes back counts
// nothing.
func TestDryTurns(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	ev := []iosched.Event{{Kind: "begin", App: "a", At: at(0)}, {Kind: "queue", App: "b", At: at(1)}, {Kind: "gap", App: "a", At: at(5)},
		{Kind: "begin", App: "b", At: at(15)}, {Kind: "queue", App: "a", At: at(400)}, {Kind: "gap", App: "b", At: at(420)},
		{Kind: "begin", App: "a", At: at(430)}, {Kind: "end", App: "a", At: at(450)}}
	got := dryTurns(ev)
	if len(got) != 1 || got[0] != 395*time.Millisecond {
		t.Errorf("dry turns %v, want [395ms] (a away from 5 to 400 ms; b never back)", got)
	}
}

// TestReplayTicks: a replay's manager ticks where the run's last ticks
// put it against the period (the samples' T less Ticked, from the
// period's start, within a look), or half the daemons' 250 ms for a run
// that did not record them.
func TestReplayTicks(t *testing.T) {
	var r realBBRun
	r.Mix.Period = 6 * time.Second
	add := func(at, elapsed, ticked float64) {
		r.Timeline = append(r.Timeline, struct {
			T    float64
			Pool struct{ Elapsed, Ticked float64 }
		}{T: at, Pool: struct{ Elapsed, Ticked float64 }{elapsed * 1e9, ticked * 1e9}})
	}
	add(0.2, 0.22, 0)
	if got := r.ticks(250*time.Millisecond, r.phase()); got != 125*time.Millisecond {
		t.Fatalf("no ticks recorded: %v, want 125ms", got)
	}
	if got := r.phase(); got < -21*time.Millisecond || got > -19*time.Millisecond {
		t.Fatalf("phase %v, want -20ms", got)
	}
	add(1.2, 1.22, 0.1)   // ticked at 1.1: 1.12 from the period's start
	add(2.21, 2.23, 0.36) // at 1.85 (2.21 late by its answer): 1.87
	if got := r.ticks(250*time.Millisecond, r.phase()); got < 119*time.Millisecond || got > 121*time.Millisecond {
		t.Fatalf("ticks %v, want 120ms", got)
	}
}
