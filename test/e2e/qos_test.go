package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/policy/qos"
)

// qosSample is what `sluice qos stats` showed of the data servers' gates
// at one moment: bytes handed out per flow, and the rules' version.
type qosSample struct {
	at      time.Time
	bytes   map[string]float64 // flow key → bytes
	version uint64
}

// qosSampler polls `sluice qos stats --json` until stopped.
type qosSampler struct {
	mu      sync.Mutex
	samples []qosSample
	stop    chan struct{}
	done    chan struct{}
}

func (c *cluster) sampleQoS(t *testing.T, every time.Duration) *qosSampler {
	s := &qosSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(every):
			}
			out, err := c.sluice("qos", "stats", "--json")
			at := time.Now()
			if err != nil {
				t.Logf("qos stats: %v %s", err, out)
				continue
			}
			var st []struct {
				Gates []qos.GateStats
			}
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Errorf("qos stats --json: %v: %s", err, out)
				return
			}
			smp := qosSample{at: at, bytes: map[string]float64{}}
			for _, srv := range st {
				for _, g := range srv.Gates {
					if g.Role != "data" {
						continue
					}
					smp.version = g.Version
					for _, f := range g.Flows {
						smp.bytes[f.Key] += float64(f.Bytes)
					}
				}
			}
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *qosSampler) end() []qosSample {
	close(s.stop)
	<-s.done
	return s.samples
}

// rate is flow key's bytes/s between samples i and j.
func rate(smp []qosSample, key string, i, j int) float64 {
	return (smp[j].bytes[key] - smp[i].bytes[key]) / smp[j].at.Sub(smp[i].at).Seconds()
}

// active returns the samples' index range over which every key moved
// bytes in each interval (both flows had demand), less a margin of
// samples at each end (start-up and wind-down).
func active(smp []qosSample, margin int, keys ...string) (int, int) {
	first, last := -1, -1
	for i := 1; i < len(smp); i++ {
		all := true
		for _, k := range keys {
			all = all && smp[i].bytes[k] > smp[i-1].bytes[k]
		}
		if all && first < 0 {
			first = i - 1
		}
		if !all && first >= 0 {
			break
		}
		if all {
			last = i
		}
	}
	return first + margin, last - margin
}

// TestQoS: two jobs behind one mount and one forwarding node write to one
// data server with rules giving them 3:1 and get within 10 % of 3:1 while
// both write; the job left alone gets the whole server; a capped job stays
// within 5 % of its cap over every 5 s window; a rule added while a job
// runs reaches the data server within a second and holds it to the new
// cap; Beacon reports the capped job's wait at the QoS gates; `sluice qos`
// lists and removes rules.
func TestQoS(t *testing.T) {
	const capMB = 40 // the data server's bandwidth, MB/s
	c := startCluster(t, "--mem-servers", "1", "--mem", "2G", "--ssd", "0", "--data-max-mbps", fmt.Sprint(capMB))
	mustSluice := func(args ...string) string {
		t.Helper()
		out, err := c.sluice(args...)
		if err != nil {
			t.Fatalf("sluice %s: %v %s", strings.Join(args, " "), err, out)
		}
		return out
	}
	mustSluice("qos", "add", "gold", "job=201", "share=3")
	mustSluice("qos", "add", "bronze", "job=202", "share=1")
	if out, err := c.sluice("qos", "add", "bad", "job=1"); err == nil {
		t.Fatalf("a rule without an action was taken: %s", out)
	}
	mustSluice("qos", "add", "capped", "job=203", "rate=10M", "--before", "gold")
	if out := mustSluice("qos", "list"); !strings.Contains(out, "capped job=203 rate=10M\ngold job=201 share=3\nbronze job=202 share=1") {
		t.Fatalf("qos list:\n%s", out)
	}
	raw := filepath.Join(os.TempDir(), "sluice-qos-"+t.Name()+".txt") // the samples, for a failure's post-mortem
	var log strings.Builder
	defer func() { os.WriteFile(raw, []byte(log.String()), 0o644) }()

	// 1. shares under saturation: both jobs write the same amount at once
	s := c.sampleQoS(t, 250*time.Millisecond)
	var wg sync.WaitGroup
	for _, job := range []string{"201", "202"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.workload(t, job, "--kind", "ckpt", "--bursts", "1", "--ranks", "4", "--size", "96M", c.path("j"+job))
		}()
	}
	wg.Wait()
	smp := s.end()
	for _, x := range smp {
		fmt.Fprintf(&log, "shares %.3f gold=%.0f bronze=%.0f\n", x.at.Sub(smp[0].at).Seconds(), x.bytes["rule:gold"], x.bytes["rule:bronze"])
	}
	i, j := active(smp, 4, "rule:gold", "rule:bronze")
	if j-i < 12 {
		t.Fatalf("both jobs wrote together for %d samples only (%s)", j-i, raw)
	}
	gold, bronze := rate(smp, "rule:gold", i, j), rate(smp, "rule:bronze", i, j)
	t.Logf("while both write (%.1f s): gold %.1f MB/s, bronze %.1f MB/s: %.2f:1", smp[j].at.Sub(smp[i].at).Seconds(), gold/1e6, bronze/1e6, gold/bronze)
	if r := gold / bronze; math.Abs(r-3)/3 > 0.10 {
		t.Errorf("shares 3:1 gave %.2f:1", r)
	}
	if sum := (gold + bronze) / 1e6; sum < 0.85*capMB {
		t.Errorf("the two jobs got %.1f MB/s of a %d MB/s server", sum, capMB)
	}
	// gold finished first: bronze alone has the whole server (gold's share
	// was not held for it)
	alone := -1
	for k := j; k < len(smp)-1; k++ {
		if smp[k+1].bytes["rule:gold"] == smp[k].bytes["rule:gold"] {
			alone = k
			break
		}
	}
	if alone < 0 || len(smp)-alone < 8 {
		t.Logf("bronze wrote alone for too short a time to measure (%d samples)", len(smp)-alone)
	} else if b := rate(smp, "rule:bronze", alone+2, len(smp)-3) / 1e6; b < 0.9*capMB {
		t.Errorf("bronze alone got %.1f MB/s of %d", b, capMB)
	} else {
		t.Logf("bronze alone: %.1f MB/s", b)
	}

	// 2. a cap over every 5 s window
	s = c.sampleQoS(t, 250*time.Millisecond)
	c.workload(t, "203", "--kind", "ckpt", "--bursts", "1", "--ranks", "4", "--size", "32M", c.path("j203"))
	smp = s.end()
	for _, x := range smp {
		fmt.Fprintf(&log, "cap %.3f capped=%.0f\n", x.at.Sub(smp[0].at).Seconds(), x.bytes["rule:capped"])
	}
	capB := 10.0 * (1 << 20)
	worst := 0.0
	for a := range smp {
		for b := a + 1; b < len(smp); b++ {
			if d := smp[b].at.Sub(smp[a].at); d >= 5*time.Second {
				worst = math.Max(worst, rate(smp, "rule:capped", a, b))
				break
			}
		}
	}
	t.Logf("capped job: worst 5 s window %.2f MiB/s under a 10 MiB/s cap", worst/(1<<20))
	if worst == 0 || worst > 1.05*capB {
		t.Errorf("the capped job's worst 5 s window: %.2f MiB/s (cap 10 MiB/s)", worst/(1<<20))
	}
	if worst < 0.9*capB {
		t.Errorf("the capped job got %.2f MiB/s at most of a 10 MiB/s cap on a %d MB/s server", worst/(1<<20), capMB)
	}

	// Beacon tells the capped job's user how long it waited for its rule
	// (about 128 MiB at 10 MiB/s from a window that takes 40 MB/s: most of
	// its ~12 s, summed over four ranks' queued requests)
	rep := c.job(t, "203")
	t.Logf("job 203: queued %v, of which %v at QoS gates", rep.Queued, rep.QoSWaited)
	if rep.QoSWaited < 5*time.Second || rep.QoSWaited > rep.Queued {
		t.Errorf("Beacon: job 203 waited %v for QoS (queued %v in all)", rep.QoSWaited, rep.Queued)
	}
	if out := mustSluice("job", "203"); !strings.Contains(out, "for its QoS rules") {
		t.Errorf("sluice job show 203 does not say it waited for QoS:\n%s", out)
	}

	// 3. a rule added while a job runs: in force within a second
	s = c.sampleQoS(t, 100*time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.workload(t, "204", "--kind", "ckpt", "--bursts", "1", "--ranks", "4", "--size", "48M", c.path("j204"))
	}()
	time.Sleep(3 * time.Second)
	added := time.Now()
	mustSluice("qos", "add", "late", "job=204", "rate=5M")
	var want uint64
	fmt.Sscanf(mustSluice("qos", "list"), "QoS rules version %d", &want)
	<-done
	smp = s.end()
	in := -1
	for k, x := range smp {
		fmt.Fprintf(&log, "late %.3f v%d job=%.0f late=%.0f\n", x.at.Sub(smp[0].at).Seconds(), x.version, x.bytes["job:204"], x.bytes["rule:late"])
		if in < 0 && x.version == want {
			in = k
		}
	}
	if in < 0 {
		t.Fatalf("the data server never ran version %d (%s)", want, raw)
	}
	took := smp[in].at.Sub(added)
	t.Logf("rule added while the job ran: in force at the data server after %v (sampled every 100 ms)", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("a rule took %v to reach the data server", took)
	}
	before := rate(smp, "job:204", 2, in-2) / (1 << 20)
	var after float64
	end := in + 10
	for end < len(smp)-1 && smp[end].at.Sub(smp[in].at) < 5*time.Second {
		end++
	}
	after = rate(smp, "rule:late", in+2, end) / (1 << 20)
	t.Logf("job 204: %.1f MiB/s before the rule, %.2f MiB/s after (cap 5 MiB/s)", before, after)
	if before < 2*5 || after > 5*1.05 || after < 5*0.8 {
		t.Errorf("job 204 went from %.1f to %.2f MiB/s under a new 5 MiB/s cap", before, after)
	}

	mustSluice("qos", "rm", "late")
	if out, err := c.sluice("qos", "rm", "late"); err == nil {
		t.Fatalf("a rule removed twice: %s", out)
	}
	if out := mustSluice("qos", "list"); strings.Contains(out, "late") {
		t.Fatalf("removed rule still listed:\n%s", out)
	}
	if out := mustSluice("qos", "stats"); !strings.Contains(out, "rule:gold") {
		t.Fatalf("qos stats shows no gold flow:\n%s", out)
	}
}
