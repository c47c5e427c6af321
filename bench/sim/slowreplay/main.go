// Command slowreplay replays a live run's Beacon records (`sluice monitor records
// --json`) through the fail-slow detector the manager runs
// (policy/failslow), as of every second after a fault, to tell when the
// records themselves first allow a detection from when the manager's
// checks, which come every few seconds at a phase of their own, made it
// (bench/sim/liveslow.sh, RECORDS=1; docs/experiments/sim.md, "Fail-slow
// targets, live and on --machine local").
//
//	slowreplay --fault UNIXNS [--window 1s] [--span 30s] [--lag 1s] < records.jsonl
//
// It prints, for the data servers, each window's operations and mean
// latency per server, then for each second t after the fault whether a
// check at t, seeing the windows that ended at least lag before t, names
// a server, and the first such t.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/failslow"
)

func main() {
	fault := flag.Int64("fault", 0, "when the fault was injected, unix ns")
	window := flag.Duration("window", time.Second, "the daemons' record window")
	span := flag.Duration("span", 30*time.Second, "the history a check looks at (the manager's --detect-span)")
	lag := flag.Duration("lag", time.Second, "how long after its end a window's records reach the manager")
	upTo := flag.Duration("for", 40*time.Second, "how long after the fault to replay")
	flag.Parse()
	if *fault == 0 {
		fmt.Fprintln(os.Stderr, "slowreplay: --fault is required")
		os.Exit(2)
	}
	var recs []beacon.Record
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r beacon.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, "slowreplay:", err)
			os.Exit(1)
		}
		recs = append(recs, r)
	}

	// the data servers' windows, per server: operations and mean latency
	type cell struct {
		ops    uint64
		latSum int64
	}
	byWin := map[int64]map[string]*cell{}
	servers := map[string]bool{}
	for _, r := range recs {
		if r.Layer != beacon.LayerData || !r.IsData() {
			continue
		}
		m := byWin[r.Window]
		if m == nil {
			m = map[string]*cell{}
			byWin[r.Window] = m
		}
		c := m[r.Server]
		if c == nil {
			c = &cell{}
			m[r.Server] = c
		}
		c.ops += r.Count
		c.latSum += r.LatSum
		servers[r.Server] = true
	}
	var wins []int64
	for w := range byWin {
		wins = append(wins, w)
	}
	sort.Slice(wins, func(i, j int) bool { return wins[i] < wins[j] })
	var names []string
	for s := range servers {
		names = append(names, s)
	}
	sort.Strings(names)
	fmt.Printf("%-8s", "window")
	for _, s := range names {
		fmt.Printf(" %18s", s)
	}
	fmt.Println()
	for _, w := range wins {
		fmt.Printf("%+7.1fs", float64(w-*fault)/1e9)
		for _, s := range names {
			if c := byWin[w][s]; c != nil && c.ops > 0 {
				fmt.Printf(" %5d ops %7.1fms", c.ops, float64(c.latSum)/float64(c.ops)/1e6)
			} else {
				fmt.Printf(" %18s", "-")
			}
		}
		fmt.Println()
	}

	first := time.Duration(-1)
	for t := time.Second; t <= *upTo; t += time.Second {
		now := *fault + int64(t)
		var seen []beacon.Record
		for _, r := range recs {
			if r.Window >= now-int64(*span) && r.Window+int64(*window)+int64(*lag) <= now {
				seen = append(seen, r)
			}
		}
		slow := failslow.Detect(seen, failslow.Options{})
		fmt.Printf("check at +%2.0fs:", t.Seconds())
		if len(slow) == 0 {
			fmt.Println(" none")
			continue
		}
		for _, s := range slow {
			fmt.Printf(" %s", s.Server)
		}
		fmt.Println()
		if first < 0 {
			first = t
		}
	}
	if first >= 0 {
		fmt.Printf("first check that names a server: +%.0fs\n", first.Seconds())
	} else {
		fmt.Println("no check names a server")
	}
}
