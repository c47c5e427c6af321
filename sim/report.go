package sim

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/sluice-hpc/sluice/sim/engine"
)

// Stats summarise one run.
type Stats struct {
	Jobs           int     `json:"jobs"`
	MeanIO         float64 `json:"mean_io_s"`
	MedianIO       float64 `json:"median_io_s"`
	TotalIO        float64 `json:"total_io_s"`
	MedianSlowdown float64 `json:"median_slowdown"`
	P95Slowdown    float64 `json:"p95_slowdown"`
	MeanFwds       float64 `json:"mean_fwds"`
	MeanWait       float64 `json:"mean_wait_s"`
	Makespan       float64 `json:"makespan_s"`
	Events         uint64  `json:"events"`
	// Recomputes is the flow model's rate recomputations, GroupFallbacks
	// those whose sharing by job and rule found no fixed point.
	Recomputes     uint64 `json:"recomputes"`
	GroupFallbacks uint64 `json:"group_fallbacks"`
	// I/O-intensive jobs: volume over 1 GiB on more than one I/O node
	// (what DFRA may scale up), and their mean I/O time.
	Intensive       int     `json:"intensive"`
	IntensiveMeanIO float64 `json:"intensive_mean_io_s"`
	// MeanBW is the jobs' mean I/O bandwidth: bytes over I/O time.
	MeanBW float64 `json:"mean_bw"`
}

// intensive says whether a job is I/O-intensive: over 1 GiB on more than
// one I/O node (what DFRA may scale up).
func intensive(j JobResult) bool { return j.Bytes > 1<<30 && j.IONodes > 1 }

// Summarise is a run's summary (warm-up jobs left out).
func Summarise(r *Result) Stats {
	st := Stats{Events: r.Events, Makespan: r.End.Seconds(), Recomputes: r.Recomputes, GroupFallbacks: r.GroupFallbacks}
	var io, sl []float64
	for _, j := range r.Jobs {
		if j.Warmup {
			continue
		}
		st.Jobs++
		if j.IOTime > 0 {
			st.MeanBW += j.Bytes / j.IOTime
		}
		if intensive(j) {
			st.Intensive++
			st.IntensiveMeanIO += j.IOTime
		}
		io = append(io, j.IOTime)
		sl = append(sl, j.Slowdown)
		st.TotalIO += j.IOTime
		st.MeanFwds += float64(j.Fwds)
		st.MeanWait += j.Wait
	}
	if st.Jobs == 0 {
		return st
	}
	if st.Intensive > 0 {
		st.IntensiveMeanIO /= float64(st.Intensive)
	}
	n := float64(st.Jobs)
	st.MeanIO, st.MeanFwds, st.MeanWait, st.MeanBW = st.TotalIO/n, st.MeanFwds/n, st.MeanWait/n, st.MeanBW/n
	st.MedianIO = quantile(io, 0.5)
	st.MedianSlowdown = quantile(sl, 0.5)
	st.P95Slowdown = quantile(sl, 0.95)
	return st
}

// Comparison is DFRA's run against FFM's, job by job.
type Comparison struct {
	Jobs          int     `json:"jobs"`
	MedianSpeedup float64 `json:"median_speedup"`
	P90Speedup    float64 `json:"p90_speedup"`
	MaxSpeedup    float64 `json:"max_speedup"`
	// Intensive jobs: volume over 1 GiB on more than one I/O node (what
	// DFRA may scale up); IntensiveSaved their mean I/O time saved (s).
	Intensive      int     `json:"intensive"`
	IntensiveSaved float64 `json:"intensive_saved_s"`
	// Scaled: jobs DFRA gave more forwarding nodes than FFM; ScaledSaved
	// their mean I/O time saved (s).
	Scaled      int     `json:"scaled"`
	ScaledSaved float64 `json:"scaled_saved_s"`
	Slower      int     `json:"slower"` // jobs whose I/O took > 10 % longer under DFRA
	// Speedups is every job's FFM I/O time over its DFRA I/O time.
	Speedups []float64 `json:"-"`
}

// Compare matches the jobs of two runs of one workload (by id; warm-up
// jobs left out).
func Compare(ffm, dfra *Result) Comparison {
	by := map[string]JobResult{}
	for _, j := range ffm.Jobs {
		by[j.ID] = j
	}
	var c Comparison
	for _, d := range dfra.Jobs {
		f, ok := by[d.ID]
		if !ok || d.Warmup || d.IOTime <= 0 || f.IOTime <= 0 {
			continue
		}
		c.Jobs++
		sp := f.IOTime / d.IOTime
		c.Speedups = append(c.Speedups, sp)
		if d.IOTime > 1.1*f.IOTime {
			c.Slower++
		}
		if intensive(d) {
			c.Intensive++
			c.IntensiveSaved += f.IOTime - d.IOTime
		}
		if d.Fwds > f.Fwds {
			c.Scaled++
			c.ScaledSaved += f.IOTime - d.IOTime
		}
	}
	if c.Intensive > 0 {
		c.IntensiveSaved /= float64(c.Intensive)
	}
	if c.Scaled > 0 {
		c.ScaledSaved /= float64(c.Scaled)
	}
	c.MedianSpeedup = quantile(c.Speedups, 0.5)
	c.P90Speedup = quantile(c.Speedups, 0.9)
	c.MaxSpeedup = quantile(c.Speedups, 1)
	return c
}

// quantile is the q-quantile of xs (nearest rank; 0 for none).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

// WriteTimeline writes a timeline as CSV.
func WriteTimeline(w io.Writer, t []Sample) error {
	if _, err := fmt.Fprintln(w, "t_s,running,queued,nodes_busy,fwds_busy,fwd_use,storage_use,flows,fwds_down,targets_down"); err != nil {
		return err
	}
	for _, s := range t {
		if _, err := fmt.Fprintf(w, "%.0f,%d,%d,%d,%d,%.4f,%.4f,%d,%d,%d\n", s.T, s.Running, s.Queued, s.NodesBusy, s.FwdsBusy, s.FwdUse, s.StorageUse, s.Flows, s.FwdsDown, s.TargetsDown); err != nil {
			return err
		}
	}
	return nil
}

// ETA estimates the wall time a run has left, given the wall time it has
// taken so far, the simulated time reached, the last job's submit time
// (a lower bound of when the run ends) and the jobs done: progress is the
// larger of the share of jobs done and the share of the submit span
// simulated, so a run in which jobs queue up (few done, time advancing)
// and one whose jobs all arrive at once (no span, jobs finishing) both
// get an estimate. Zero until there is progress.
func ETA(elapsed time.Duration, now engine.Time, lastSubmit float64, done, total int) time.Duration {
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if lastSubmit > 0 {
		// the simulated span is at most 95 % of the run: jobs submitted
		// last still have to run
		frac = max(frac, min(now.Seconds()/lastSubmit, 1)*0.95)
	}
	if frac <= 0 {
		return 0
	}
	if frac >= 1 {
		return 0
	}
	return time.Duration(float64(elapsed) * (1 - frac) / frac)
}
