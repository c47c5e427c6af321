package sim

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// The DFRA experiments' forwarding nodes (bench/dfra/pairwise.sh and
// scarce.sh: --fwd-max-mbps 40, --fwd-max-iops 800) and the scarce
// experiment's set-up (--fwd-ratio 2, --dfra-vmin 16M, jobs launched 0.3 s
// apart).
const (
	dfraFwdBW   = 40e6
	dfraFwdOps  = 800
	dfraStagger = 0.3
)

// dfraKinds are the workload generator's behaviours, each its own
// interference class in the validation.
var dfraKinds = []string{"nn", "n1", "11", "meta", "iops", "ckpt", "read", "log"}

// dfraMachine is the local cluster of the DFRA experiments: fwds
// forwarding nodes of 40 MB/s and 800 requests/s, ratio compute nodes per
// forwarding node under the fixed mapping, the mem data servers and the
// metadata service not limiting (they did not in the runs).
func dfraMachine(fwds, ratio int) *machine.Machine {
	return ForwardingMachine("dfra-local", fwds, ratio, dfraFwdBW, dfraFwdOps, dfraKinds)
}

// dfraRow is one job of bench/dfra/scarce.jsonl.
type dfraRow struct {
	Mode, Kind, Node, Job string
	Repeat                int
	Bytes, Ops            float64
	Slowest               float64 `json:"slowest_ns"`
	Elapsed               float64 `json:"elapsed_ns"`
	Start                 float64 `json:"start_ns"` // registered
	End                   float64 `json:"end_ns"`
	FwdBytes              float64 `json:"fwd_bytes"` // through the forwarding layer, setup included
	FwdOps                float64 `json:"fwd_ops"`
	Decided               []string
}

// measured is the row's run alone as FromRun takes it. Its lead is the
// workload's start barrier (cmd/sluice/workload.go: 300 ms and 30 ms per
// rank; the iops behaviour runs one rank, the others two: kinds.sh).
func (r dfraRow) measured() Measured {
	ranks := 2.0
	if r.Kind == "iops" {
		ranks = 1
	}
	return Measured{Bytes: r.Bytes, Ops: r.Ops, Secs: r.Slowest / 1e9, SetupBytes: r.FwdBytes - r.Bytes, SetupOps: r.FwdOps - r.Ops,
		Lead: 0.3 + 0.03*ranks, Elapsed: r.Elapsed / 1e9}
}

func readJSONL(t *testing.T, path string, each func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		each(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// dfraFactors calibrates the interference factors from the pairwise
// experiment (its fixed-mapping runs: two jobs on one forwarding node).
func dfraFactors(t *testing.T, path string) map[string][2]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ident := map[string]string{}
	for _, k := range dfraKinds {
		ident[k] = k
	}
	factors, err := FactorsFromDFRA(f, ident, dfraFwdBW, dfraFwdOps)
	if err != nil {
		t.Fatal(err)
	}
	return factors
}

// TestValidateDFRA: the simulator against the DFRA experiment with
// forwarding nodes scarce (bench/dfra/scarce.sh, docs/experiments/dfra.md):
// six jobs of six behaviours launched 0.3 s apart on six compute nodes
// over three forwarding nodes, three repeats with the jobs on nodes drawn
// per repeat, under FFM and under DFRA, on real daemons. The simulator
// replays each repeat: every job as measured alone in that experiment
// (FromRun), on the node it ran on, with the profile DFRA decided from
// (bench/dfra/scarce-profiles.jsonl), its forwarding nodes from
// policy/dfra, and the interference between behaviours calibrated from the
// other experiment, the pairwise one (bench/dfra/pairwise.jsonl:
// CalibrateFactors). It must predict each job's I/O time within 15 % (or
// 0.05 s: the metadata job runs 0.1 s, where its own alone runs spread
// ±20 %) for at least 90 % of the jobs, make DFRA's decisions, and rank
// the policies as the real runs do.
//
// SLUICE_DFRA_RESULTS names another directory of the three files; with
// SLUICE_DFRA_SMOKE=1 (make dfra-smoke: the experiments' smoke runs, a
// few small jobs) the replay must give every job a time but the bars are
// only reported.
func TestValidateDFRA(t *testing.T) {
	dir := "../bench/dfra/"
	if d := os.Getenv("SLUICE_DFRA_RESULTS"); d != "" {
		dir = d
	}
	smoke := os.Getenv("SLUICE_DFRA_SMOKE") == "1"
	factors := dfraFactors(t, dir+"pairwise.jsonl")
	var rows []dfraRow
	readJSONL(t, dir+"scarce.jsonl", func(b []byte) {
		var r dfraRow
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	})
	nodes := 0 // the experiment's compute nodes: FWDS × FWD_RATIO (2)
	for _, r := range rows {
		n, err := strconv.Atoi(strings.TrimPrefix(r.Node, "cn"))
		if err != nil {
			t.Fatalf("node %q", r.Node)
		}
		nodes = max(nodes, n+1)
	}
	// the cluster as `sluice sim day --machine local` described it while the
	// runs ran (scarce.sh keeps it beside them), with the interference
	// between the behaviours calibrated from the pairwise runs; without
	// it, the same figures written here (the runs' caps)
	m := dfraMachine((nodes+1)/2, 2)
	if b, err := os.ReadFile(dir + "scarce-machine.json"); err == nil {
		if m, err = machine.Parse(b); err != nil {
			t.Fatalf("scarce-machine.json: %v", err)
		}
		if m.ComputeNodes < nodes {
			t.Fatalf("the local machine has %d compute nodes, the runs used %d", m.ComputeNodes, nodes)
		}
		t.Logf("machine: %s (`sluice sim day --machine local` of the cluster the runs ran on): %d forwarding nodes of %.0f MB/s and %.0f ops/s, %d compute nodes",
			dir+"scarce-machine.json", m.FwdNodes, m.FwdBW/1e6, m.FwdOps, m.ComputeNodes)
	} else {
		t.Logf("machine: the runs' caps (%d forwarding nodes of %.0f MB/s and %.0f ops/s); no scarce-machine.json", m.FwdNodes, m.FwdBW/1e6, m.FwdOps)
	}
	m.Interference = machine.Interference{Classes: dfraKinds, Factors: factors}
	var keys []string
	for k := range m.Interference.Factors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if f := m.Interference.Factors[k]; f != [2]float64{1, 1} {
			t.Logf("interference factor %-10s %.2f %.2f", k, f[0], f[1])
		}
	}
	profiles := map[[3]string]*beacon.Profile{}
	readJSONL(t, dir+"scarce-profiles.jsonl", func(b []byte) {
		var x struct {
			Mode    string
			Repeat  int
			Profile beacon.Profile
		}
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		p := x.Profile
		profiles[[3]string{x.Mode, strconv.Itoa(x.Repeat), p.Key}] = &p
	})
	alone := map[[2]string]dfraRow{}
	for _, r := range rows {
		if r.Repeat == 0 {
			alone[[2]string{r.Mode, r.Kind}] = r
		}
	}
	jobs, within, strict, decided := 0, 0, 0, 0
	// per policy: the worst slowdown and the last job's end of each repeat,
	// real and simulated
	type agg struct{ worst, last []float64 }
	realAgg, simAgg := map[string]*agg{}, map[string]*agg{}
	for _, mode := range []string{"ffm", "dfra"} {
		realAgg[mode], simAgg[mode] = &agg{}, &agg{}
		for rep := 1; ; rep++ {
			var mix []dfraRow
			for _, r := range rows {
				if r.Mode == mode && r.Repeat == rep {
					mix = append(mix, r)
				}
			}
			if len(mix) == 0 {
				break
			}
			var js []Job
			first := math.Inf(1)
			for _, r := range mix {
				first = math.Min(first, r.Start)
			}
			launch := func(i int, r dfraRow) float64 { // when it registered, from the repeat's first
				if r.Start > 0 {
					return (r.Start - first) / 1e9
				}
				return float64(i) * dfraStagger
			}
			for i, r := range mix {
				j := FromRun(r.Job, r.Kind, r.Kind, alone[[2]string{mode, r.Kind}].measured(), dfraFwdBW, dfraFwdOps)
				j.Submit = launch(i, r)
				n, err := strconv.Atoi(strings.TrimPrefix(r.Node, "cn"))
				if err != nil {
					t.Fatalf("node %q", r.Node)
				}
				j.OnNodes = []int{n}
				j.Profile = profiles[[3]string{mode, strconv.Itoa(rep), r.Kind}]
				js = append(js, j)
			}
			res := run(t, Config{Machine: m, Jobs: js, Policy: mode, DFRA: dfra.Config{Ratio: 2, VMin: 16 << 20}})
			got := map[string]JobResult{}
			for _, jr := range res.Jobs {
				got[jr.ID] = jr
			}
			var rw, sw, rl, sl float64
			for _, r := range mix {
				g, ok := got[r.Job]
				if !ok || g.IOTime <= 0 {
					t.Fatalf("%s: no simulated I/O time (%+v)", r.Job, g)
				}
				real := r.Slowest / 1e9
				a := alone[[2]string{mode, r.Kind}].Slowest / 1e9
				e := g.IOTime - real
				ok = math.Abs(e) <= 0.15*real || math.Abs(e) <= 0.05
				jobs++
				if ok {
					within++
				}
				if math.Abs(e) <= 0.15*real {
					strict++
				}
				fwds := make([]string, len(g.FwdIDs))
				for k, f := range g.FwdIDs { // fwd0000 is the real fwd-1
					n, _ := strconv.Atoi(strings.TrimPrefix(f, "fwd"))
					fwds[k] = "fwd-" + strconv.Itoa(n+1)
				}
				same := strings.Join(fwds, ",") == strings.Join(r.Decided, ",")
				if same {
					decided++
				}
				mark := ""
				if !ok {
					mark = "  ← off"
				}
				t.Logf("%-4s repeat %d %-4s on %s: real %5.2f s (×%.2f) on %v, simulated %5.2f s (×%.2f) on %v: %+6.1f %%%s",
					mode, rep, r.Kind, r.Node, real, real/a, r.Decided, g.IOTime, g.IOTime/a, fwds, 100*e/real, mark)
				rw, sw = math.Max(rw, real/a), math.Max(sw, g.IOTime/a)
				rl, sl = math.Max(rl, (r.End-first)/1e9), math.Max(sl, g.End)
			}
			realAgg[mode].worst = append(realAgg[mode].worst, rw)
			simAgg[mode].worst = append(simAgg[mode].worst, sw)
			realAgg[mode].last = append(realAgg[mode].last, rl)
			simAgg[mode].last = append(simAgg[mode].last, sl)
		}
	}
	if jobs == 0 {
		t.Fatal("no repeats in the stored results")
	}
	t.Logf("%d of %d jobs within 15 %% or 0.05 s (%d within 15 %%); %d of %d given the forwarding nodes the real decision gave",
		within, jobs, strict, decided, jobs)
	if smoke {
		t.Logf("smoke run: the bars are not checked")
		return
	}
	if within*10 < jobs*9 {
		t.Errorf("%d of %d jobs within 15 %% or 0.05 s, want ≥ 90 %%", within, jobs)
	}
	if decided != jobs {
		t.Errorf("%d of %d jobs got the real decision's forwarding nodes", decided, jobs)
	}
	med := func(x []float64) float64 {
		x = append([]float64(nil), x...)
		sort.Float64s(x)
		return x[len(x)/2]
	}
	for _, what := range []string{"worst slowdown", "last job ended"} {
		pick := func(a *agg) []float64 {
			if what == "worst slowdown" {
				return a.worst
			}
			return a.last
		}
		rf, rd := med(pick(realAgg["ffm"])), med(pick(realAgg["dfra"]))
		sf, sd := med(pick(simAgg["ffm"])), med(pick(simAgg["dfra"]))
		t.Logf("%s (median of repeats): real FFM %.2f, DFRA %.2f; simulated FFM %.2f, DFRA %.2f", what, rf, rd, sf, sd)
		if (rf > rd) != (sf > sd) {
			t.Errorf("%s: the real runs rank FFM %.2f against DFRA %.2f, the simulator %.2f against %.2f", what, rf, rd, sf, sd)
		}
	}
}
