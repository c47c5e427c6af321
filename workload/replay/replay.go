package replay

import (
	"bytes"
	"context"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/workload"
)

// Package replay runs a checkpoint mix (workload.CkptMix) on a running
// cluster's burst buffer, as Slurm would run its jobs, and records what
// happened; the simulator's burst-buffer model (sim/bb) replays the same
// mix. It owns the run's schedule and record; the buffer's decisions are
// the metadata daemon's.
//
// `sluice bb replay` runs a checkpoint mix (`sluice workload --gen
// ckpt-mix`) on a running cluster's burst buffer, as Slurm would run its
// jobs: every application asks for its grant (a refused one does not
// run), writes each checkpoint at its time as a process of its job (direct
// I/O, fsynced; an application is blocked while its previous checkpoint is
// written; checkpoints due at the same instant start in the mix's order,
// each once the one before has created its file), and fails at the mix's
// failure times, when the newest checkpoint it finished is looked up: a
// hit if the buffer holds all of it.
// After the run, the applications the mix draws restart: their newest
// checkpoints are read and timed. It prints what happened as JSON, with
// the manager's state sampled every second (docs/experiments/bbos.md).

// Result is the replay's record.
type Result struct {
	Mix        workload.CkptMix
	Policy     string
	Admitted   []string
	Refused    []string
	Checkpoint []CkptRecord
	Failures   []FailureRecord
	Restarts   []RestartRecord
	Timeline   []TimelineSample
	Final      api.BBState
	// Started is when the run began (Unix µs), the origin of the times
	// above: the daemons' logs give theirs in Unix µs
	Started int64
}

// tieWait is how long the next of the checkpoints due at one instant
// waits at most for the one before to create its file.
const tieWait = 20 * time.Millisecond

// awaitFile closes opened once file p exists, or after tieWait, and
// says how long it waited (0: the file did not come).
func awaitFile(p string, opened chan<- struct{}) time.Duration {
	defer close(opened)
	start := time.Now()
	for end := start.Add(tieWait); time.Now().Before(end); time.Sleep(200 * time.Microsecond) {
		if _, err := os.Stat(p); err == nil {
			return time.Since(start)
		}
	}
	return 0
}

type CkptRecord struct {
	App     string
	Version int
	Bytes   int64
	At      float64 // scheduled, seconds from the start
	Start   float64 // when its process started (later if the previous one ran late)
	// Opened is, for one of checkpoints due at the same instant, how long
	// after its start its file was seen (the next waited for it; 0: not
	// within tieWait)
	Opened float64 `json:",omitempty"`
	End    float64
	Err    string `json:",omitempty"`
}

type FailureRecord struct {
	App     string
	At      float64
	Version int
	Hit     bool
}

type RestartRecord struct {
	App     string
	Version int
	Hit     bool
	Bytes   int64
	Seconds float64
}

type TimelineSample struct {
	T        float64
	Pool     api.BBPoolState
	Totals   api.BBTotals
	Buffered int // checkpoints wholly on the buffer
}

// Run replays mix on the burst buffer of the cluster mounted at mount
// (its metadata service mc): every application asks pool for its grant
// (a refused one does not run), writes its checkpoints at their times
// and fails at the mix's failure times; after the run restarts of them
// are read (restarts at most). It records what happened.
func Run(ctx context.Context, mc *rpc.Client, mount string, mix workload.CkptMix, pool string, restarts int) (*Result, error) {
	r := &replayer{ctx: ctx, mc: mc, mix: mix, root: filepath.Join(mount, "bbos"), res: &Result{Mix: mix},
		admitted: make([]bool, len(mix.Apps)), newest: make([]int, len(mix.Apps)), failures: mix.Failures()}
	if err := r.grants(pool); err != nil {
		return nil, err
	}
	if st, err := r.status(); err == nil {
		r.res.Policy = string(st.Policy)
	}
	r.start = time.Now()
	r.res.Started = r.start.UnixMicro()
	stop, polled := make(chan struct{}), make(chan struct{})
	go r.poll(stop, polled)
	r.checkpoints()
	r.wait(mix.Period * time.Duration(mix.Periods)) // the run lasts its periods
	time.Sleep(300 * time.Millisecond)              // a last sample of the buffer
	err := r.restarts(restarts)
	close(stop)
	<-polled
	if err != nil {
		return nil, err
	}
	if r.res.Final, err = r.status(); err != nil {
		return nil, err
	}
	for _, a := range r.res.Admitted {
		rpc.Do(ctx, mc, api.BBRelease, &api.JobRef{Job: "bb-" + a})
	}
	return r.res, nil
}

// replayer is one replay's state.
type replayer struct {
	ctx      context.Context
	mc       *rpc.Client
	mix      workload.CkptMix
	root     string
	admitted []bool // by application, set before the run
	start    time.Time
	failures []workload.Failure
	fi       int // the next of failures to look at (the run's loop only)

	mu     sync.Mutex // guards res.Checkpoint, res.Failures, res.Timeline, latest, newest
	res    *Result
	latest api.BBState // the manager's state, sampled
	newest []int       // each application's newest finished version
}

// grants asks for every application's grant; a refused one does not run.
func (r *replayer) grants(pool string) error {
	for i, a := range r.mix.Apps {
		if err := os.MkdirAll(filepath.Join(r.root, a.Name), 0o755); err != nil {
			return err
		}
		g := api.Grant{Job: "bb-" + a.Name, Pool: pool, Size: uint64(a.Size), Period: a.Period.Seconds(), App: a.Name,
			Checkpoint: "/bbos/" + a.Name + "/ckpt.*", MTBF: a.MTBF.Seconds()}
		if ans, err := rpc.Do(r.ctx, r.mc, api.BBGrantOp, &g); err != nil || !ans.OK {
			r.res.Refused = append(r.res.Refused, a.Name)
			continue
		}
		r.admitted[i] = true
		r.res.Admitted = append(r.res.Admitted, a.Name)
	}
	return nil
}

func (r *replayer) status() (api.BBState, error) {
	st, err := rpc.Do(r.ctx, r.mc, api.BBStatus, &wire.Empty{})
	if err != nil {
		return api.BBState{}, err
	}
	return *st, nil
}

func (r *replayer) since() float64 { return time.Since(r.start).Seconds() }

// poll samples the manager's state every 200 ms (into the timeline every
// second) until stop, then closes polled.
func (r *replayer) poll(stop <-chan struct{}, polled chan<- struct{}) {
	defer close(polled)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st, err := r.status()
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.latest = st
		if n%5 == 0 && len(st.Pools) > 0 {
			buffered := 0
			for _, v := range st.Versions {
				if v.Chunks > 0 && v.Buffered == v.Chunks {
					buffered++
				}
			}
			r.res.Timeline = append(r.res.Timeline, TimelineSample{T: r.since(), Pool: st.Pools[0], Totals: st.Totals, Buffered: buffered})
		}
		r.mu.Unlock()
	}
}

// onBufferLocked says whether the latest sample has version of app
// wholly on the buffer.
func (r *replayer) onBufferLocked(app, version int) bool {
	name := ckptName(version)
	for _, v := range r.latest.Versions {
		if v.Sequence == "/bbos/"+r.mix.Apps[app].Name+"/ckpt.*" && v.Name == name {
			return v.Chunks > 0 && v.Buffered == v.Chunks
		}
	}
	return false
}

// lookFailures records the failures due until then: a hit if the
// buffer holds the newest checkpoint the application finished.
func (r *replayer) lookFailures(until time.Duration) {
	failures := r.failures
	for ; r.fi < len(failures) && failures[r.fi].At <= until; r.fi++ {
		f := failures[r.fi]
		if !r.admitted[f.App] {
			continue
		}
		r.mu.Lock()
		if v := r.newest[f.App]; v > 0 {
			r.res.Failures = append(r.res.Failures, FailureRecord{App: r.mix.Apps[f.App].Name, At: f.At.Seconds(), Version: v, Hit: r.onBufferLocked(f.App, v)})
		}
		r.mu.Unlock()
	}
}

// wait sleeps until at from the start, looking at the failures due on
// the way.
func (r *replayer) wait(at time.Duration) {
	failures := r.failures
	for {
		next := at
		if r.fi < len(failures) && failures[r.fi].At < next {
			next = failures[r.fi].At
		}
		if d := time.Until(r.start.Add(next)); d > 0 {
			time.Sleep(d)
		}
		r.lookFailures(next)
		if next == at {
			return
		}
	}
}

// checkpoints writes the applications' checkpoints at their times, one
// at a time per application. Checkpoints due at the same instant start
// in the mix's order, each once the one before has created its file (or
// after tieWait): otherwise which of them reaches the buffer first is a
// race between their writers' processes, which no model of the run can
// follow.
func (r *replayer) checkpoints() {
	appMu := make([]sync.Mutex, len(r.mix.Apps))
	var wg sync.WaitGroup
	events := r.mix.Events()
	prevAt, prevOpened := time.Duration(-1), make(chan struct{})
	for i, e := range events {
		if !r.admitted[e.App] {
			continue
		}
		r.wait(e.At)
		if e.At == prevAt {
			select {
			case <-prevOpened:
			case <-time.After(tieWait):
			}
		}
		opened := make(chan struct{})
		prevAt, prevOpened = e.At, opened
		tied := i+1 < len(events) && events[i+1].At == e.At
		wg.Add(1)
		go func(e workload.CkptEvent) {
			defer wg.Done()
			appMu[e.App].Lock()
			defer appMu[e.App].Unlock()
			r.checkpoint(e, tied, opened)
		}(e)
	}
	wg.Wait()
}

// checkpoint writes checkpoint e as a process of its application's job
// (direct I/O, fsynced); tied: the next is due at the same instant and
// waits for opened.
func (r *replayer) checkpoint(e workload.CkptEvent, tied bool, opened chan struct{}) {
	a := r.mix.Apps[e.App]
	rec := CkptRecord{App: a.Name, Version: e.Version, Bytes: a.Size, At: e.At.Seconds(), Start: r.since()}
	p := filepath.Join(r.root, a.Name, ckptName(e.Version))
	cmd := exec.Command("dd", "if=/dev/zero", "of="+p, "bs=1M", fmt.Sprintf("count=%d", a.Size>>20), "oflag=direct", "conv=fsync")
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=bb-"+a.Name, "SLUICE_APP="+a.Name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	var seen chan time.Duration
	if err == nil && tied {
		seen = make(chan time.Duration, 1)
		go func() { seen <- awaitFile(p, opened) }()
	} else {
		close(opened)
	}
	if err == nil {
		err = cmd.Wait()
	}
	if seen != nil {
		rec.Opened = (<-seen).Seconds()
	}
	if err != nil {
		rec.Err = fmt.Sprintf("%v: %s", err, strings.TrimSpace(out.String()))
	}
	rec.End = r.since()
	r.mu.Lock()
	r.res.Checkpoint = append(r.res.Checkpoint, rec)
	if rec.Err == "" && e.Version > r.newest[e.App] {
		r.newest[e.App] = e.Version
	}
	r.mu.Unlock()
}

// restarts reads, after the run, the newest checkpoints of the
// applications drawn by failure rate, in turn (n at most).
func (r *replayer) restarts(n int) error {
	for _, i := range r.mix.Restarts(len(r.mix.Apps)) {
		if len(r.res.Restarts) == n {
			break
		}
		r.mu.Lock()
		v := r.newest[i]
		hit := v > 0 && r.onBufferLocked(i, v)
		r.mu.Unlock()
		if !r.admitted[i] || v == 0 {
			continue
		}
		p := filepath.Join(r.root, r.mix.Apps[i].Name, ckptName(v))
		t0 := time.Now()
		out, err := exec.Command("dd", "if="+p, "of=/dev/null", "bs=1M", "iflag=direct").CombinedOutput()
		if err != nil {
			return fmt.Errorf("restart read of %s: %v: %s", p, err, out)
		}
		r.res.Restarts = append(r.res.Restarts, RestartRecord{App: r.mix.Apps[i].Name, Version: v, Hit: hit, Bytes: r.mix.Apps[i].Size,
			Seconds: time.Since(t0).Seconds()})
	}
	return nil
}

func ckptName(version int) string { return fmt.Sprintf("ckpt.%03d", version) }
