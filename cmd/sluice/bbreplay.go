package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// replayResult is the replay's record.
type replayResult struct {
	Mix        workload.CkptMix
	Policy     string
	Admitted   []string
	Refused    []string
	Checkpoint []ckptRecord
	Failures   []failureRecord
	Restarts   []restartRecord
	Timeline   []timelineSample
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

type ckptRecord struct {
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

type failureRecord struct {
	App     string
	At      float64
	Version int
	Hit     bool
}

type restartRecord struct {
	App     string
	Version int
	Hit     bool
	Bytes   int64
	Seconds float64
}

type timelineSample struct {
	T        float64
	Pool     api.BBPoolState
	Totals   api.BBTotals
	Buffered int // checkpoints wholly on the buffer
}

func cmdBBReplay(mc *rpc.Client, mount, mixFile, pool string, restarts int) error {
	b, err := os.ReadFile(mixFile)
	if err != nil {
		return err
	}
	var mix workload.CkptMix
	if err := json.Unmarshal(b, &mix); err != nil {
		return fmt.Errorf("%s: %v", mixFile, err)
	}
	ctx := context.Background()
	res := replayResult{Mix: mix}
	root := filepath.Join(mount, "bbos")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	admitted := make([]bool, len(mix.Apps))
	for i, a := range mix.Apps {
		if err := os.MkdirAll(filepath.Join(root, a.Name), 0o755); err != nil {
			return err
		}
		g := api.Grant{Job: "bb-" + a.Name, Pool: pool, Size: uint64(a.Size), Period: a.Period.Seconds(), App: a.Name,
			Checkpoint: "/bbos/" + a.Name + "/ckpt.*", MTBF: a.MTBF.Seconds()}
		if err := bbGrant(ctx, mc, g, 0); err != nil {
			res.Refused = append(res.Refused, a.Name)
			continue
		}
		admitted[i] = true
		res.Admitted = append(res.Admitted, a.Name)
	}
	status := func() (api.BBState, error) {
		st, err := rpc.Do(ctx, mc, api.BBStatus, &wire.Empty{})
		if err != nil {
			return api.BBState{}, err
		}
		return *st, nil
	}
	if st, err := status(); err == nil {
		res.Policy = string(st.Policy)
	}
	start := time.Now()
	res.Started = start.UnixMicro()
	since := func() float64 { return time.Since(start).Seconds() }
	var mu sync.Mutex // guards latest, newest, res.Checkpoint, res.Timeline
	var latest api.BBState
	newest := make([]int, len(mix.Apps)) // each application's newest finished version
	// the manager's state, sampled
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			st, err := status()
			if err != nil {
				continue
			}
			mu.Lock()
			latest = st
			if n%5 == 0 && len(st.Pools) > 0 {
				buffered := 0
				for _, v := range st.Versions {
					if v.Chunks > 0 && v.Buffered == v.Chunks {
						buffered++
					}
				}
				res.Timeline = append(res.Timeline, timelineSample{T: since(), Pool: st.Pools[0], Totals: st.Totals, Buffered: buffered})
			}
			mu.Unlock()
			n++
		}
	}()
	onBuffer := func(app, version int) bool {
		name := ckptName(version)
		for _, v := range latest.Versions {
			if v.Sequence == "/bbos/"+mix.Apps[app].Name+"/ckpt.*" && v.Name == name {
				return v.Chunks > 0 && v.Buffered == v.Chunks
			}
		}
		return false
	}
	// the applications' checkpoints, one at a time per application
	appMu := make([]sync.Mutex, len(mix.Apps))
	var wg sync.WaitGroup
	events, failures := mix.Events(), mix.Failures()
	fi := 0
	lookFailures := func(until time.Duration) {
		for ; fi < len(failures) && failures[fi].At <= until; fi++ {
			f := failures[fi]
			if !admitted[f.App] {
				continue
			}
			mu.Lock()
			if v := newest[f.App]; v > 0 {
				res.Failures = append(res.Failures, failureRecord{App: mix.Apps[f.App].Name, At: f.At.Seconds(), Version: v, Hit: onBuffer(f.App, v)})
			}
			mu.Unlock()
		}
	}
	wait := func(at time.Duration) {
		for {
			next := at
			if fi < len(failures) && failures[fi].At < next {
				next = failures[fi].At
			}
			if d := time.Until(start.Add(next)); d > 0 {
				time.Sleep(d)
			}
			lookFailures(next)
			if next == at {
				return
			}
		}
	}
	// checkpoints due at the same instant start in the mix's order, each
	// once the one before has created its file (or after tieWait):
	// otherwise which of them reaches the buffer first is a race between
	// their writers' processes, which no model of the run can follow
	prevAt, prevOpened := time.Duration(-1), make(chan struct{})
	for i, e := range events {
		if !admitted[e.App] {
			continue
		}
		wait(e.At)
		if e.At == prevAt {
			select {
			case <-prevOpened:
			case <-time.After(tieWait):
			}
		}
		opened := make(chan struct{})
		prevAt, prevOpened = e.At, opened
		a := mix.Apps[e.App]
		wg.Add(1)
		go func(e workload.CkptEvent) {
			defer wg.Done()
			appMu[e.App].Lock()
			defer appMu[e.App].Unlock()
			rec := ckptRecord{App: a.Name, Version: e.Version, Bytes: a.Size, At: e.At.Seconds(), Start: since()}
			p := filepath.Join(root, a.Name, ckptName(e.Version))
			cmd := exec.Command("dd", "if=/dev/zero", "of="+p, "bs=1M", fmt.Sprintf("count=%d", a.Size>>20), "oflag=direct", "conv=fsync")
			cmd.Env = append(os.Environ(), "SLURM_JOB_ID=bb-"+a.Name, "SLUICE_APP="+a.Name)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Start()
			var seen chan time.Duration
			if tied := i+1 < len(events) && events[i+1].At == e.At; err == nil && tied {
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
			rec.End = since()
			mu.Lock()
			res.Checkpoint = append(res.Checkpoint, rec)
			if rec.Err == "" && e.Version > newest[e.App] {
				newest[e.App] = e.Version
			}
			mu.Unlock()
		}(e)
	}
	wg.Wait()
	wait(mix.Period * time.Duration(mix.Periods)) // the run lasts its periods
	time.Sleep(300 * time.Millisecond)            // a last sample of the buffer
	// restarts after the run: the newest checkpoints of the applications
	// drawn by failure rate, read in turn
	for _, i := range mix.Restarts(len(mix.Apps)) {
		if len(res.Restarts) == restarts {
			break
		}
		mu.Lock()
		v, hit := newest[i], newest[i] > 0 && onBuffer(i, newest[i])
		mu.Unlock()
		if !admitted[i] || v == 0 {
			continue
		}
		p := filepath.Join(root, mix.Apps[i].Name, ckptName(v))
		t0 := time.Now()
		out, err := exec.Command("dd", "if="+p, "of=/dev/null", "bs=1M", "iflag=direct").CombinedOutput()
		if err != nil {
			return fmt.Errorf("restart read of %s: %v: %s", p, err, out)
		}
		res.Restarts = append(res.Restarts, restartRecord{App: mix.Apps[i].Name, Version: v, Hit: hit, Bytes: mix.Apps[i].Size,
			Seconds: time.Since(t0).Seconds()})
	}
	close(stop)
	<-polled
	if res.Final, err = status(); err != nil {
		return err
	}
	for _, a := range res.Admitted {
		rpc.Do(ctx, mc, api.BBRelease, &api.JobRef{Job: "bb-" + a})
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func ckptName(version int) string { return fmt.Sprintf("ckpt.%03d", version) }
