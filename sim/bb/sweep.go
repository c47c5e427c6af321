package bb

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/sim/plots"
	"github.com/sluice-hpc/sluice/workload"
)

// Sweep is the burst-buffer experiment `sluice sim bb` runs: every policy
// at every congestion and DWPP, Runs checkpoint mixes each (seeds
// 1…Runs), on one machine's buffer.
type Sweep struct {
	Machine     string
	S           float64    // the buffer's capacity, bytes
	Rates       bbos.Rates // its write and demotion rates
	Period      time.Duration
	Ckpt        float64 // checkpoint size, bytes
	Policies    []bbos.Policy
	DWPPs       []float64 // data written per period, × S
	Congestions []string  // low, med, high
	Classes     map[int]int
	ClassesText string // as given, for the results
	Periods     int
	MTBFMax     time.Duration
	Runs        int
	Bypass      bool // bbos sends checkpoints it calls cold to the PFS
	Versions    bool // cold data by version, then MTBF
	Restarts    int
	AdmitAll    bool
}

// NewSweep is a sweep on m's burst buffer: its capacity and rates, the
// planning period (0: 1.9 × S / the demotion rate, the paper's 3800 s on
// its testbed) and the checkpoint size (0: S/40, the paper's 80 GB of
// 3.2 TB).
func NewSweep(m *machine.Machine, period time.Duration, ckpt float64) (Sweep, error) {
	s, r4, err := m.BBRates()
	if err != nil {
		return Sweep{}, err
	}
	sw := Sweep{Machine: m.Name, S: s, Rates: bbos.Rates{WriteMax: r4[0], WriteMin: r4[1], DemoteMin: r4[2], DemoteMax: r4[3]},
		Period: period, Ckpt: ckpt, Periods: 3, Runs: 3, Bypass: true, Versions: true, Restarts: 8}
	if sw.Period <= 0 {
		sw.Period = time.Duration(1.9 * s / sw.Rates.DemoteMax * float64(time.Second)).Round(time.Second)
	}
	if sw.Ckpt <= 0 {
		sw.Ckpt = s / 40
	}
	return sw, nil
}

// Run runs every case, handing each run's summary to emit in order.
func (sw Sweep) Run(emit func(Summary) error) error {
	for _, cong := range sw.Congestions {
		for _, d := range sw.DWPPs {
			for _, p := range sw.Policies {
				for seed := int64(1); seed <= int64(sw.Runs); seed++ {
					row, err := sw.one(p, d, cong, seed)
					if err != nil {
						return err
					}
					if err := emit(row); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// one is the run of policy p at DWPP d and congestion cong, mix seed.
func (sw Sweep) one(p bbos.Policy, d float64, cong string, seed int64) (Summary, error) {
	mix, err := workload.GenCkptMix(workload.MixOptions{Buffer: int64(sw.S), Size: int64(sw.Ckpt), Period: sw.Period, Periods: sw.Periods,
		DWPP: d, Classes: sw.Classes, Congestion: cong, MTBFMax: sw.MTBFMax, Seed: seed})
	if err != nil {
		return Summary{}, err
	}
	t0 := time.Now()
	res, err := Run(Config{Mix: mix, Policy: p, S: sw.S, Rates: sw.Rates, Bypass: sw.Bypass, NoVersions: !sw.Versions,
		Restarts: sw.Restarts, AdmitAll: sw.AdmitAll})
	if err != nil {
		return Summary{}, err
	}
	row := Summarise(res, mix, sw.Period)
	row.Machine, row.DWPP, row.Congestion, row.Classes, row.Seed = sw.Machine, d, cong, sw.ClassesText, seed
	row.MTBFMax, row.Bypass, row.Versions, row.WallSeconds = sw.MTBFMax.Minutes(), sw.Bypass && p == bbos.BBOS, sw.Versions, time.Since(t0).Seconds()
	if sw.AdmitAll {
		row.AdmitAll, row.Admitted, row.AdmittedS = true, len(mix.Apps), d
	}
	return row, nil
}

// Summary is one run of a Sweep: one JSON line of `sluice sim bb`'s
// results.
type Summary struct {
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

// Summarise is a run's figures.
func Summarise(res *Result, mix workload.CkptMix, T time.Duration) Summary {
	end := T * time.Duration(mix.Periods)
	row := Summary{Policy: res.Policy, S: res.S, Period: T.Seconds(), Apps: len(mix.Apps), Admitted: len(res.Admitted),
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

// Plot draws, for each congestion of rows, each policy's served bytes
// per period, failure hit ratio and mean checkpoint time against DWPP
// (the median over the runs of a case).
func Plot(dir, machine string, rows []Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type key struct {
		cong, pol string
		dwpp      float64
	}
	var congs, pols []string
	by := map[key][]Summary{}
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
		y           func(Summary) float64
	}{
		{"served", "served per period (× S)", func(r Summary) float64 { return r.ServedS }},
		{"hits", "failures hitting the buffer (%)", func(r Summary) float64 { return 100 * r.Hits }},
		{"ckpt", "mean checkpoint time (s)", func(r Summary) float64 { return r.CkptMean }},
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
