package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/sim/bb"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// simBBCmd runs checkpointing workloads on a machine's burst buffer under
// the burst-buffer policies (sim/bb; docs/sim.md "Burst buffer").
var simBBCmd = spec{use: "bb", short: "checkpointing workloads on a machine's burst buffer under the burst-buffer policies",
	example: "sluice sim bb --machine cori-bb --dwpp 1.5,1.9 --congestion low,high --out runs.jsonl", setup: setupSimBB}

func setupSimBB(fs *pflag.FlagSet) func([]string) error {
	mach := fs.String("machine", "cori-bb", "machine with a burst buffer: a preset ("+strings.Join(machine.Presets(), ", ")+") or a description file")
	policies := fs.String("policy", "all", "burst-buffer policies, comma-separated ("+joinPolicies()+"), or all")
	dwpps := fs.Float64Slice("dwpp", []float64{1.9}, "data written per period as multiples of the buffer S, comma-separated")
	congs := fs.String("congestion", "low", "how close the I/O jobs come: low, med, high, comma-separated")
	ckSize := fs.String("size", "0", "checkpoint size (0: S/40, the paper's 80 GB of 3.2 TB)")
	period := fs.Duration("period", 0, "the planning period (0: 1.9 × S / Br_max, the paper's 3800 s on its testbed)")
	periods := fs.Int("periods", 3, "periods run")
	classes := fs.String("classes", "", "checkpoint periods as divisors of --period with shares, e.g. 1:1,2:1,3:1")
	mtbfMax := fs.Duration("mtbf-max", 100*time.Minute, "applications' MTBF drawn up to this (scaled by period/3800 s when --mtbf-scale)")
	mtbfScale := fs.Bool("mtbf-scale", false, "scale --mtbf-max by the period over the paper's 3800 s (as bench/bbos on its 6 s period)")
	runs := fs.Int("runs", 3, "runs of every case (mix seeds 1…runs)")
	bypass := fs.Bool("bypass", true, "bbos sends checkpoints it calls cold on arrival to the PFS")
	versions := fs.Bool("versions", true, "cold data by version, then MTBF (false: MTBF alone)")
	restarts := fs.Int("restarts", 8, "applications restarting at the end")
	admitAll := fs.Bool("admit-all", false, "run every application whatever admission says (the paper's utilisation runs)")
	out := fs.String("out", "", "append one JSON line per run to this file")
	plotDir := fs.String("plots", "", "draw the runs into this directory: per congestion, each policy's period served, failure hits and mean checkpoint time against DWPP (SVG, medians over the runs)")
	return func(args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		m, err := machine.Load(*mach)
		if err != nil {
			return err
		}
		ck, err := size.Parse(*ckSize)
		if err != nil {
			return fmt.Errorf("--size: %v", err)
		}
		sw, err := bb.NewSweep(m, *period, float64(ck))
		if err != nil {
			return err
		}
		if sw.Classes, err = parseClasses(*classes); err != nil {
			return err
		}
		sw.Policies = bbos.Policies
		if *policies != "all" {
			sw.Policies = nil
			for _, p := range strings.Split(*policies, ",") {
				sw.Policies = append(sw.Policies, bbos.Policy(p))
			}
		}
		for _, x := range *dwpps {
			if x <= 0 {
				return fmt.Errorf("--dwpp %v: want multiples of S above 0", *dwpps)
			}
		}
		sw.DWPPs, sw.Congestions, sw.ClassesText = *dwpps, strings.Split(*congs, ","), *classes
		sw.Periods, sw.Runs, sw.Bypass, sw.Versions, sw.Restarts, sw.AdmitAll = *periods, *runs, *bypass, *versions, *restarts, *admitAll
		sw.MTBFMax = *mtbfMax
		if *mtbfScale {
			sw.MTBFMax = time.Duration(float64(sw.MTBFMax) * sw.Period.Seconds() / 3800)
		}
		return runSimBB(sw, *out, *plotDir)
	}
}

// runSimBB runs sw, printing a line per run, appending them as JSON Lines
// to out and drawing them into plotDir.
func runSimBB(sw bb.Sweep, out, plotDir string) error {
	var w *bufio.Writer
	if out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = bufio.NewWriter(f)
		defer w.Flush()
	}
	r := sw.Rates
	fmt.Printf("%s: S %.3g B, write %.3g–%.3g B/s, demote %.3g–%.3g B/s, period %v, checkpoints %.3g B\n",
		sw.Machine, sw.S, r.WriteMin, r.WriteMax, r.DemoteMin, r.DemoteMax, sw.Period, sw.Ckpt)
	fmt.Printf("%-9s %5s %-5s %4s %9s %9s %6s %9s %7s %8s %9s %9s\n", "POLICY", "DWPP", "CONG", "SEED", "ADMIT(S)", "SERVED(S)", "LATE%", "CKPT(s)", "HITS%", "RESTART", "DEMOTED", "BYPASSED")
	var rows []bb.Summary
	err := sw.Run(func(row bb.Summary) error {
		fmt.Printf("%-9s %5.2f %-5s %4d %9.2f %9.2f %6.1f %9.1f %7.1f %5d/%-2d %9.3g %9.3g\n", row.Policy, row.DWPP, row.Congestion, row.Seed,
			row.AdmittedS, row.ServedS, 100*row.Late, row.CkptMean, 100*row.Hits, row.RestartHits, row.Restarts, row.Demoted, row.Bypassed)
		if w != nil {
			b, _ := json.Marshal(row)
			w.Write(append(b, '\n'))
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil || plotDir == "" {
		return err
	}
	return bb.Plot(plotDir, sw.Machine, rows)
}

func joinPolicies() string {
	var s []string
	for _, p := range bbos.Policies {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}
