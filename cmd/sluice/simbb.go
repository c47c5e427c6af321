package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/sim"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/sim/plots"
	"github.com/sluice-hpc/sluice/workload"
)

// simBBRun is one line of `sluice sim bb`'s results.
type simBBRun struct {
	Machine    string  `json:"machine"`
	Policy     string  `json:"policy"`
	DWPP       float64 `json:"dwpp"`
	Congestion string  `json:"congestion"`
	Classes    string  `json:"classes,omitempty"`
	MTBFMax    float64 `json:"mtbf_max_minutes"`
	Seed       int64   `json:"seed"`
	Bypass     bool    `json:"bypass"`
	Versions   bool    `json:"versions"`
	AdmitAll   bool    `json:"admit_all,omitempty"`
	S          float64 `json:"s"`
	Period     float64 `json:"period_s"`
	Apps       int     `json:"apps"`
	Admitted   int     `json:"admitted"`
	// per period, × S
	AdmittedS float64 `json:"admitted_s"`
	ServedS   float64 `json:"served_s"`
	Late      float64 `json:"late"`
	CkptMean  float64 `json:"ckpt_mean_s"`
	CkptMax   float64 `json:"ckpt_max_s"`
	Failures  int     `json:"failures"`
	Hits      float64 `json:"failure_hits"`
	// restarts at the end
	Restarts    int     `json:"restarts"`
	RestartHits int     `json:"restart_hits"`
	RestartBW   float64 `json:"restart_bw"`
	Demoted     float64 `json:"demoted"`
	Evicted     float64 `json:"evicted"`
	Bypassed    float64 `json:"bypassed"`
	Events      uint64  `json:"events"`
	WallSeconds float64 `json:"wall_s"`
}

// cmdSimBB runs checkpointing workloads on a machine's burst buffer under
// the burst-buffer policies (sim.RunBB; docs/sim.md "Burst buffer").
func cmdSimBB(args []string) error {
	fs, cfg := flagSet("sim bb")
	mach := fs.String("machine", "cori-bb", "machine with a burst buffer: a preset ("+strings.Join(machine.Presets(), ", ")+") or a description file")
	policies := fs.String("policy", "all", "burst-buffer policies, comma-separated ("+joinPolicies()+"), or all")
	dwpps := fs.String("dwpp", "1.9", "data written per period as multiples of the buffer S, comma-separated")
	congs := fs.String("congestion", "low", "how close the I/O jobs come: low, med, high, comma-separated")
	size := fs.Float64("size", 0, "checkpoint size, bytes (0: S/40, the paper's 80 GB of 3.2 TB)")
	period := fs.Duration("period", 0, "the planning period (0: 1.9 × S / Br_max, the paper's 3800 s on its testbed)")
	periods := fs.Int("periods", 3, "periods run")
	classes := fs.String("classes", "", "checkpoint periods as divisors of --period with shares, e.g. 1:1,2:1,3:1")
	mtbfMax := fs.Float64("mtbf-max", 100, "applications' MTBF drawn up to this many minutes (scaled by period/3800 s when --mtbf-scale)")
	mtbfScale := fs.Bool("mtbf-scale", false, "scale --mtbf-max by the period over the paper's 3800 s (as bench/bbos on its 6 s period)")
	runs := fs.Int("runs", 3, "runs of every case (mix seeds 1…runs)")
	bypass := fs.Bool("bypass", true, "bbos sends checkpoints it calls cold on arrival to the PFS")
	versions := fs.Bool("versions", true, "cold data by version, then MTBF (false: MTBF alone)")
	restarts := fs.Int("restarts", 8, "applications restarting at the end")
	admitAll := fs.Bool("admit-all", false, "run every application whatever admission says (the paper's utilisation runs)")
	out := fs.String("out", "", "append one JSON line per run to this file")
	plotDir := fs.String("plots", "", "draw the runs into this directory: per congestion, each policy's period served, failure hits and mean checkpoint time against DWPP (SVG, medians over the runs)")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	m, err := machine.Load(*mach)
	if err != nil {
		return err
	}
	s, r4, err := m.BBRates()
	if err != nil {
		return err
	}
	rates := bbos.Rates{WriteMax: r4[0], WriteMin: r4[1], DemoteMin: r4[2], DemoteMax: r4[3]}
	T := *period
	if T <= 0 {
		T = time.Duration(1.9 * s / rates.DemoteMax * float64(time.Second)).Round(time.Second)
	}
	ck := *size
	if ck <= 0 {
		ck = s / 40
	}
	cls, err := parseClasses(*classes)
	if err != nil {
		return err
	}
	var pols []bbos.Policy
	if *policies == "all" {
		pols = bbos.Policies
	} else {
		for _, p := range strings.Split(*policies, ",") {
			pols = append(pols, bbos.Policy(p))
		}
	}
	var ds []float64
	for _, d := range strings.Split(*dwpps, ",") {
		x, err := strconv.ParseFloat(d, 64)
		if err != nil || x <= 0 {
			return fmt.Errorf("--dwpp %q: want multiples of S above 0", *dwpps)
		}
		ds = append(ds, x)
	}
	mtbf := time.Duration(*mtbfMax * float64(time.Minute))
	if *mtbfScale {
		mtbf = time.Duration(float64(mtbf) * T.Seconds() / 3800)
	}
	var w *bufio.Writer
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = bufio.NewWriter(f)
		defer w.Flush()
	}
	fmt.Printf("%s: S %.3g B, write %.3g–%.3g B/s, demote %.3g–%.3g B/s, period %v, checkpoints %.3g B\n",
		m.Name, s, rates.WriteMin, rates.WriteMax, rates.DemoteMin, rates.DemoteMax, T, ck)
	var rows []simBBRun
	fmt.Printf("%-9s %5s %-5s %4s %9s %9s %6s %9s %7s %8s %9s %9s\n", "POLICY", "DWPP", "CONG", "SEED", "ADMIT(S)", "SERVED(S)", "LATE%", "CKPT(s)", "HITS%", "RESTART", "DEMOTED", "BYPASSED")
	for _, cong := range strings.Split(*congs, ",") {
		for _, d := range ds {
			for _, p := range pols {
				for seed := int64(1); seed <= int64(*runs); seed++ {
					mix, err := workload.GenCkptMix(workload.MixOptions{Buffer: int64(s), Size: int64(ck), Period: T, Periods: *periods,
						DWPP: d, Classes: cls, Congestion: cong, MTBFMax: mtbf, Seed: seed})
					if err != nil {
						return err
					}
					t0 := time.Now()
					res, err := sim.RunBB(sim.BBConfig{Mix: mix, Policy: p, S: s, Rates: rates, Bypass: *bypass, NoVersions: !*versions, Restarts: *restarts, AdmitAll: *admitAll})
					if err != nil {
						return err
					}
					row := simBBSummary(res, mix, T)
					row.Machine, row.DWPP, row.Congestion, row.Classes, row.Seed = m.Name, d, cong, *classes, seed
					row.MTBFMax, row.Bypass, row.Versions, row.WallSeconds = mtbf.Minutes(), *bypass && p == bbos.BBOS, *versions, time.Since(t0).Seconds()
					if *admitAll {
						row.AdmitAll, row.Admitted, row.AdmittedS = true, len(mix.Apps), d
					}
					fmt.Printf("%-9s %5.2f %-5s %4d %9.2f %9.2f %6.1f %9.1f %7.1f %5d/%-2d %9.3g %9.3g\n", p, d, cong, seed, row.AdmittedS, row.ServedS,
						100*row.Late, row.CkptMean, 100*row.Hits, row.RestartHits, row.Restarts, row.Demoted, row.Bypassed)
					if w != nil {
						b, _ := json.Marshal(row)
						w.Write(append(b, '\n'))
					}
					rows = append(rows, row)
				}
			}
		}
	}
	if *plotDir != "" {
		return plotBB(*plotDir, m.Name, rows)
	}
	return nil
}

// plotBB draws, for each congestion of rows, each policy's served bytes
// per period, failure hit ratio and mean checkpoint time against DWPP
// (the median over the runs of a case).
func plotBB(dir, machine string, rows []simBBRun) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type key struct {
		cong, pol string
		dwpp      float64
	}
	var congs, pols []string
	by := map[key][]simBBRun{}
	for _, r := range rows {
		k := key{r.Congestion, r.Policy, r.DWPP}
		if !slices.Contains(congs, r.Congestion) {
			congs = append(congs, r.Congestion)
		}
		if !slices.Contains(pols, r.Policy) {
			pols = append(pols, r.Policy)
		}
		by[k] = append(by[k], r)
	}
	figs := []struct {
		name, label string
		y           func(simBBRun) float64
	}{
		{"served", "served per period (× S)", func(r simBBRun) float64 { return r.ServedS }},
		{"hits", "failures hitting the buffer (%)", func(r simBBRun) float64 { return 100 * r.Hits }},
		{"ckpt", "mean checkpoint time (s)", func(r simBBRun) float64 { return r.CkptMean }},
	}
	for _, c := range congs {
		for _, f := range figs {
			var ss []plots.Series
			for _, p := range pols {
				s := plots.Series{Name: p}
				for k, rs := range by {
					if k.cong != c || k.pol != p {
						continue
					}
					ys := make([]float64, len(rs))
					for i, r := range rs {
						ys[i] = f.y(r)
					}
					slices.Sort(ys)
					s.XY = append(s.XY, plotter.XY{X: k.dwpp, Y: ys[len(ys)/2]})
				}
				ss = append(ss, s)
			}
			var b bytes.Buffer
			if err := plots.Curves(&b, fmt.Sprintf("%s, %s congestion", machine, c), "data written per period (DWPP, × S)", f.label, ss); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("bb-%s-%s-%s.svg", machine, c, f.name)), b.Bytes(), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// simBBSummary is a run's figures.
func simBBSummary(res *sim.BBResult, mix workload.CkptMix, T time.Duration) simBBRun {
	end := T * time.Duration(mix.Periods)
	row := simBBRun{Policy: res.Policy, S: res.S, Period: T.Seconds(), Apps: len(mix.Apps), Admitted: len(res.Admitted),
		AdmittedS: res.AdmittedDWP / res.S, ServedS: res.ServedPerPeriod(), Late: res.LateShare(), CkptMean: res.MeanCheckpoint(end),
		Failures: len(res.Failures), Hits: res.HitRatio(), Restarts: res.Restarts, RestartHits: res.RestartHits,
		Demoted: res.Demoted, Evicted: res.Evicted, Bypassed: res.Bypassed, Events: res.Events}
	for _, c := range res.Checkpoints {
		d := c.Done
		if d == 0 {
			d = end
		}
		row.CkptMax = max(row.CkptMax, (d - c.At).Seconds())
	}
	if res.RestartSeconds > 0 {
		row.RestartBW = res.RestartBytes / res.RestartSeconds
	}
	return row
}

func joinPolicies() string {
	var s []string
	for _, p := range bbos.Policies {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}
