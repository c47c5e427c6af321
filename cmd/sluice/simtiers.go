package main

import (
	"encoding/json"
	"fmt"
	"github.com/spf13/pflag"
	"os"

	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/sim/tiers"
)

// cmdSimTiers runs the tiering scenario (sim/tiers; docs/sim.md
// "Tiering"): a writer's files through a mem tier in front of an ssd tier,
// under policy/tiering (auto) or spill on full (manual).
var simTiersCmd = spec{use: "tiers", short: "a writer's files through a mem tier in front of an ssd tier, auto or manual tiering",
	example: "sluice sim tiers --mem 64M --tiering auto --json", setup: setupSimTiers}

func setupSimTiers(fs *pflag.FlagSet) func([]string) error {
	mem := fs.String("mem", "64M", "the mem tier's capacity")
	memMBps := fs.Float64("mem-mbps", 600, "the mem tier's write bandwidth, MB/s")
	ssdMBps := fs.Float64("ssd-mbps", 20, "the ssd tier's write bandwidth, MB/s")
	mode := fs.String("tiering", "auto", "auto (policy/tiering moves files down by the thresholds) or manual (nothing moves; a full mem tier spills)")
	free := fs.String("tier-free", "4M,12M,24M", "the mem server's thresholds Cs-w,Cf-m,Cn-m (as sluice meta --tier-free)")
	writer := fs.Float64("writer-mbps", 262, "the writer's own speed onto an idle tier, MB/s (bench/tiers: the median first burst)")
	file := fs.String("file", "4M", "bytes per file (each file one chunk)")
	total := fs.String("total", "", "bytes written in all (default 4 × --mem)")
	burst := fs.String("burst-size", "", "bytes per burst (default: one stream)")
	pause := fs.Duration("burst-gap", 0, "pause between bursts")
	asJSON := fs.Bool("json", false, "print the whole result (bursts, timeline) as JSON")
	return func(args []string) error {
		sz := func(name, v string, def uint64) (uint64, error) {
			if v == "" {
				return def, nil
			}
			n, err := size.Parse(v)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("--%s %q: not a size", name, v)
			}
			return uint64(n), nil
		}
		m, err := sz("mem", *mem, 0)
		if err != nil {
			return err
		}
		c := tiers.Config{MemBytes: m, MemRate: *memMBps * 1e6, SsdRate: *ssdMBps * 1e6, WriterRate: *writer * 1e6, Pause: *pause}
		if c.FileBytes, err = sz("file", *file, 0); err != nil {
			return err
		}
		if c.Total, err = sz("total", *total, 4*m); err != nil {
			return err
		}
		if c.Burst, err = sz("burst-size", *burst, 0); err != nil {
			return err
		}
		switch *mode {
		case "auto":
			c.Auto = true
			if c.Policy.Thresholds, err = parseThresholds(*free); err != nil {
				return fmt.Errorf("--tier-free: %v", err)
			}
			c.Policy.ChunkSize = c.FileBytes
		case "manual":
		default:
			return fmt.Errorf("--tiering %q: want auto or manual", *mode)
		}
		res, err := tiers.Simulate(c)
		if err != nil {
			return err
		}
		if *asJSON {
			e := json.NewEncoder(os.Stdout)
			e.SetIndent("", "  ")
			return e.Encode(res)
		}
		fmt.Printf("writer %.1f MB/s over %.2f s of writing; slowest file %.2f s\n", res.MBps, res.WriteSecs, res.SlowestFile)
		for i, b := range res.Bursts {
			fmt.Printf("  burst %d at %.2f s: %s in %.2f s, %.1f MB/s\n", i+1, b.At, size.Format(b.Bytes), b.Seconds, b.MBps)
		}
		fmt.Printf("files %d: %d on mem, %d migrated, %d spilled at write; %d moves, %d chunks waited at Cs-w\n",
			res.Files, res.FilesOnMem, res.FilesMigrated, res.Spilled, res.Moves, res.Stalls)
		return nil
	}
}
