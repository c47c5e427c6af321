package sim

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"sort"
	"testing"

	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// TestValidatePlacement: the simulator against real runs. The placement
// experiment (bench/placement/run.sh, docs/experiments/placement.md) ran
// an N-N job of N = 8…128 ranks on real daemons (`sluice cluster up`, 8 mem data
// servers capped at the Sunway Table 2 ratios) under each placement
// policy, three runs each; its raw results are in
// bench/placement/results.jsonl. The simulator runs the same scenario on
// a machine of the same caps (`local`: one storage group of those 8
// targets, chunks of the run's size — 1 or 4 MiB — placed one by one by
// policy/place, the forwarding
// layer and the links not limiting, as they were not in the real runs)
// and must predict each case's I/O time (the median of its three runs)
// within 15 % for at least 90 % of the cases, and rank the policies as
// the real runs do at every N.
func TestValidatePlacement(t *testing.T) {
	f, err := os.Open("../bench/placement/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type run struct {
		Policy string
		N      int
		Chunk  int64
		Caps   []float64
		Bytes  float64
		Span   float64
	}
	byChunk := map[int64]map[string]map[int][]float64{}
	var caps []float64
	var bytes float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Chunk == 0 {
			r.Chunk = 4 << 20 // runs before the field was kept
		}
		if byChunk[r.Chunk] == nil {
			byChunk[r.Chunk] = map[string]map[int][]float64{}
		}
		spans := byChunk[r.Chunk]
		if spans[r.Policy] == nil {
			spans[r.Policy] = map[int][]float64{}
		}
		spans[r.Policy][r.N] = append(spans[r.Policy][r.N], r.Span)
		caps, bytes = r.Caps, r.Bytes
	}
	if len(byChunk) == 0 {
		t.Fatal("no stored runs")
	}
	for chunk, spans := range byChunk {
		validatePlacement(t, chunk, spans, caps, bytes)
	}
}

func validatePlacement(t *testing.T, chunk int64, spans map[string]map[int][]float64, caps []float64, bytes float64) {
	m := tiny(t)
	m.Name = "local"
	m.Storage = machine.Storage{Groups: 1, Targets: len(caps), ChunkSize: float64(chunk)}
	for _, c := range caps {
		m.Storage.TargetBWs = append(m.Storage.TargetBWs, c*1e6)
	}
	m.FwdNodes, m.StaticFwds, m.FwdBW, m.NodeBW = 1, 1, 1e12, 1e12
	pred := map[string]map[int]float64{}
	cases, within := 0, 0
	for pol, byN := range spans {
		pred[pol] = map[int]float64{}
		for n, runs := range byN {
			m.ComputeNodes, m.FFMRatio = n, n
			// weighted random: the median of as many draws as real runs
			var draws []float64
			for seed := int64(1); seed <= map[bool]int64{true: int64(len(runs)), false: 1}[pol == "wrandom"]; seed++ {
				draws = append(draws, run1(t, Config{Machine: m, Policy: "ffm", Placement: place.Policy(pol), PlaceSeed: seed,
					Jobs: []Job{{ID: "job", App: "job", Nodes: n, Pattern: "N-N", Class: "bw", Write: bytes, Phases: 1}}}))
			}
			sort.Float64s(draws)
			r := draws[len(draws)/2]
			sort.Float64s(runs)
			real := runs[len(runs)/2]
			pred[pol][n] = r
			e := math.Abs(r-real) / real
			cases++
			if e <= 0.15 {
				within++
			}
			t.Logf("%d MiB chunks %-8s N=%-4d real %6.2f s (runs %.2f–%.2f), simulated %6.2f s: %+5.1f %%", chunk>>20, pol, n, real, runs[0], runs[len(runs)-1], r, 100*(r-real)/real)
		}
	}
	if within*10 < cases*9 {
		t.Errorf("%d MiB chunks: %d of %d cases within 15 %%, want ≥ 90 %%", chunk>>20, within, cases)
	}
	for n := range spans["perf"] {
		med := func(pol string) float64 {
			x := append([]float64(nil), spans[pol][n]...)
			sort.Float64s(x)
			return x[len(x)/2]
		}
		realOrder := sortPolicies(map[string]float64{"perf": med("perf"), "rr": med("rr"), "wrandom": med("wrandom")})
		simOrder := sortPolicies(map[string]float64{"perf": pred["perf"][n], "rr": pred["rr"][n], "wrandom": pred["wrandom"][n]})
		if realOrder != simOrder {
			t.Errorf("%d MiB chunks, N=%d: real runs rank %s, the simulator %s", chunk>>20, n, realOrder, simOrder)
		}
	}
}

func run1(t *testing.T, cfg Config) float64 {
	t.Helper()
	return run(t, cfg).Jobs[0].IOTime
}

func sortPolicies(x map[string]float64) string {
	var k []string
	for p := range x {
		k = append(k, p)
	}
	sort.Slice(k, func(i, j int) bool { return x[k[i]] < x[k[j]] })
	out := ""
	for _, p := range k {
		out += p + " "
	}
	return out
}
