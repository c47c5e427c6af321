package live

import (
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/sim"
	"github.com/sluice-hpc/sluice/workload"
)

// What --as-run prints is what runs: PlanOf of it, unscaled, is the live
// job again, and its bytes are what the live job moves (Plan.bytes,
// the --max-bytes guard's own count).
func TestAsRunIsWhatRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	patterns := []string{"N-N", "N-M", "N-1", "1-1"}
	classes := []string{"bw", "n1", "single", "meta", "iops"}
	kinds := map[string]int{}
	for i := 0; i < 3000; i++ {
		j := sim.Job{ID: fmt.Sprint(i), App: "a", Submit: rng.Float64() * 100, Nodes: 1 + rng.Intn(12),
			Compute: rng.Float64() * 50, Pattern: patterns[rng.Intn(4)], Class: classes[rng.Intn(5)],
			Phases: 1 + rng.Intn(4), MetaOps: float64(rng.Intn(5000)), Lead: rng.Float64() * 3}
		if rng.Intn(4) > 0 {
			j.Write = rng.Float64() * 1e9
		}
		if rng.Intn(3) > 0 {
			j.Read = rng.Float64() * 1e9
		}
		if rng.Intn(3) == 0 {
			j.Requests = float64(rng.Intn(100000))
		}
		if rng.Intn(2) == 0 {
			for k := 0; k < j.Nodes; k++ {
				j.OnNodes = append(j.OnNodes, 3*k+1)
			}
		}
		o := Options{TimeScale: 0.01 + rng.Float64(), VolScale: 0.001 + rng.Float64()*0.1, MaxRanks: 1 + rng.Intn(4)}
		block := int64(1 << (16 + rng.Intn(5)))
		lj := PlanOf(j, o, block)
		a := asRun(j, lj)
		again := PlanOf(a, Options{TimeScale: 1, VolScale: 1, MaxRanks: o.MaxRanks}, block)
		if !reflect.DeepEqual(again, lj) {
			t.Fatalf("job %+v\nruns as %+v\nas run %+v\nwhich runs as %+v", j, lj, a, again)
		}
		if got := int64(a.Read + a.Write + a.SetupBytes); got != lj.bytes() {
			t.Fatalf("job %+v runs as %+v: as run it moves %d bytes, live %d", j, lj, got, lj.bytes())
		}
		if a.Nodes != lj.Ranks || a.Lead < 0 || a.Compute < 0 || a.Phases < 1 {
			t.Fatalf("job %+v as run: %+v", j, a)
		}
		kinds[lj.Kind]++
	}
	for _, k := range []string{workload.NN, workload.N1, workload.OneOne, workload.Meta, workload.IOPS, workload.Checkpoint, workload.Read} {
		if kinds[k] == 0 {
			t.Errorf("no job ran as %s: %v", k, kinds)
		}
	}
}

// With compute nodes the live jobs wait for theirs as the simulator's do:
// first come first served, no job overtaking the first in the queue, no
// node given to two jobs at once.
func TestScheduleLive(t *testing.T) {
	jobs := []sim.Job{
		{ID: "a", Nodes: 2, Submit: 0},
		{ID: "b", Nodes: 2, Submit: 0.02},
		{ID: "c", Nodes: 1, Submit: 0.04},                    // fits beside a, but b is first in the queue
		{ID: "d", Nodes: 1, Submit: 0.06, OnNodes: []int{2}}, // behind c
	}
	run := map[string]time.Duration{"a": 300 * time.Millisecond, "b": 300 * time.Millisecond, "c": 100 * time.Millisecond, "d": 100 * time.Millisecond}
	for _, nodes := range []int{3, 0} {
		plans := make([]Plan, len(jobs))
		for i, j := range jobs {
			plans[i] = PlanOf(j, Options{TimeScale: 1, VolScale: 1, MaxRanks: 4}, 1<<20)
		}
		var mu sync.Mutex
		got := map[string]Result{}
		on := map[string][]string{}
		schedule(jobs, plans, nodes, 1, func(j sim.Job, lj Plan) Result {
			time.Sleep(run[j.ID])
			return Result{ID: j.ID, Nodes: len(lj.Nodes)}
		}, func(r Result) {
			mu.Lock()
			defer mu.Unlock()
			got[r.ID] = r
		})
		for i, j := range jobs {
			on[j.ID] = plans[i].Nodes
		}
		if len(got) != len(jobs) {
			t.Fatalf("nodes %d: %d results of %d jobs", nodes, len(got), len(jobs))
		}
		const slack = 0.05
		if nodes == 0 { // every job at its submit time
			for _, j := range jobs {
				if r := got[j.ID]; r.Start < j.Submit || r.Start > j.Submit+slack {
					t.Errorf("unscheduled: job %s submitted at %.2f started at %.3f", j.ID, j.Submit, r.Start)
				}
			}
			continue
		}
		a, b, c, d := got["a"], got["b"], got["c"], got["d"]
		if b.Start < a.End-0.01 || c.Start < b.Start || d.Start < c.Start || d.Start < a.End-0.01 {
			t.Errorf("not first come first served: %+v", got)
		}
		if a.Start > slack || b.Start > a.End+slack || c.Start > b.Start+slack {
			t.Errorf("a job waited for nothing: %+v", got)
		}
		for x, rx := range got {
			for y, ry := range got {
				if x < y && rx.Start < ry.End && ry.Start < rx.End {
					for _, n := range on[x] {
						for _, m := range on[y] {
							if n == m {
								t.Errorf("jobs %s and %s ran on %s at once: %+v %+v", x, y, n, rx, ry)
							}
						}
					}
				}
			}
		}
		if !reflect.DeepEqual(on["d"], []string{"cn2"}) {
			t.Errorf("job d ran on %v, not its own node cn2", on["d"])
		}
		for id, r := range got {
			var names []string
			for _, n := range r.OnNodes {
				names = append(names, fmt.Sprintf("cn%d", n))
			}
			if !reflect.DeepEqual(names, on[id]) {
				t.Errorf("job %s: result says nodes %v, ran on %v", id, r.OnNodes, on[id])
			}
		}
	}
}
