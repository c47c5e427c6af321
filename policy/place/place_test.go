package place

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	units "github.com/sluice-hpc/sluice/internal/size"
)

var ranks = map[string]uint32{"mem": 0, "ssd": 1, "hdd": 2, "pfs": 3}

func size(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := units.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(n)
}

// TestPlace runs testdata/place:
//
//	servers            one per line: TIER ID [cap=SIZE] [used=SIZE] [reserve=SIZE] [domain=D] [perf=MB/s] [pending=SIZE] [down]
//	place ino=N idx=N chunk=SIZE [count=N] [unit=SIZE] [exclude=ID,ID] [seq=N] [wait=true] [copies=TIER:N]
//	      [policy=perf|rr|wrandom] [pool=(ID,ID)] [poolperf=(ID:MB/s,...)]
//	                   prints the decision and charges it to the servers
//	replica tier=T have=(ID,ID) chunk=SIZE [exclude=(ID,ID)] [seq=N]
//	                   prints ChooseReplica's server for another copy of an
//	                   unstriped chunk with copies on the servers have
func TestPlace(t *testing.T) {
	var servers []Server
	datadriven.RunTest(t, "testdata/place", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "servers":
			servers = nil
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				f := strings.Fields(line)
				id, _ := strconv.ParseUint(f[1], 10, 64)
				s := Server{ID: id, Tier: f[0], Rank: ranks[f[0]], Alive: true}
				for _, kv := range f[2:] {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "cap":
						s.Capacity = size(t, v)
					case "used":
						s.Used = size(t, v)
					case "reserve":
						s.Reserve = size(t, v)
					case "domain":
						s.Domain = v
					case "perf":
						mb, _ := strconv.ParseUint(v, 10, 64)
						s.MaxPerf = mb * 1e6
					case "pending":
						s.Pending = size(t, v)
					case "down":
						s.Alive = false
					default:
						t.Fatalf("unknown server field %q", k)
					}
				}
				servers = append(servers, s)
			}
			return ""
		case "place", "replica":
			c := Chunk{StripeCount: 1}
			var tier string
			var have []uint64
			for _, a := range d.CmdArgs {
				v := a.Vals[0]
				switch a.Key {
				case "tier":
					tier = v
					c.Tier = v // place: the tier to try first
				case "have":
					for _, x := range a.Vals {
						id, _ := strconv.ParseUint(x, 10, 64)
						have = append(have, id)
					}
				case "copies":
					t, n, _ := strings.Cut(v, ":")
					c.Copies = map[string]int{}
					c.Copies[t], _ = strconv.Atoi(n)
				case "policy":
					c.Policy = Policy(v)
				case "pool":
					for _, x := range a.Vals {
						id, _ := strconv.ParseUint(x, 10, 64)
						c.Pool = append(c.Pool, id)
					}
				case "poolperf":
					c.PoolPerf = map[uint64]uint64{}
					for _, x := range a.Vals {
						i, mb, _ := strings.Cut(x, ":")
						id, _ := strconv.ParseUint(i, 10, 64)
						n, _ := strconv.ParseUint(mb, 10, 64)
						c.PoolPerf[id] = n * 1e6
					}
				case "ino":
					c.Ino, _ = strconv.ParseUint(v, 10, 64)
				case "idx":
					c.Idx, _ = strconv.ParseUint(v, 10, 64)
				case "chunk":
					c.ChunkSize = int64(size(t, v))
				case "count":
					c.StripeCount, _ = strconv.Atoi(v)
				case "unit":
					c.StripeUnit = int64(size(t, v))
				case "seq":
					c.Seq, _ = strconv.ParseUint(v, 10, 64)
				case "wait":
					c.MayWait = v == "true"
				case "exclude":
					for _, x := range a.Vals {
						id, _ := strconv.ParseUint(x, 10, 64)
						c.Exclude = append(c.Exclude, id)
					}
				default:
					t.Fatalf("unknown argument %q", a.Key)
				}
			}
			var dec Decision
			var err error
			if d.Cmd == "place" {
				dec, err = Choose(servers, c)
			} else {
				var groups [][]uint64 // one-server groups
				for _, id := range have {
					groups = append(groups, []uint64{id})
				}
				dec, err = ChooseReplica(servers, c, tier, groups...)
			}
			if err != nil {
				return "error: " + err.Error()
			}
			charge := func(ids, by []uint64) {
				for i, id := range ids {
					for j := range servers {
						if servers[j].ID == id {
							servers[j].Used += by[i]
						}
					}
				}
			}
			charge(dec.Servers, dec.Charge)
			charge(dec.Replicas, dec.ReplicaCharge)
			out := fmt.Sprintf("%s %v charge %v", dec.Tier, dec.Servers, dec.Charge)
			if len(dec.Replicas) > 0 {
				out += fmt.Sprintf(" replicas %v charge %v", dec.Replicas, dec.ReplicaCharge)
			}
			return out
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

// sunway is the resource pool of the Sunway paper's placement experiment
// (Table 2), MB/s.
var sunway = []uint64{500, 300, 500, 200, 300, 100, 500, 200}

// placeOpen places n files of one chunk each at once (nothing written
// yet) on the Sunway pool with policy p and returns how many each server
// got.
func placeOpen(t *testing.T, p Policy, n int) []int {
	t.Helper()
	var ss []Server
	for i, mb := range sunway {
		ss = append(ss, Server{ID: uint64(i + 1), Tier: "mem", Alive: true, MaxPerf: mb * 1e6})
	}
	got := make([]int, len(ss))
	for f := 0; f < n; f++ {
		d, err := Choose(ss, Chunk{Ino: uint64(100 + f), ChunkSize: 4 << 20, StripeCount: 1, Seq: uint64(f), Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		ss[d.Servers[0]-1].Pending += 4 << 20
		got[d.Servers[0]-1]++
	}
	return got
}

// TestPerfProportional: the performance-aware rule spreads files written
// at once in proportion to max_perf, to within one file of the exact share at every
// scale (the paper's "deterministic" property: no probabilistic skew at
// small N), where round-robin spreads them evenly and the weighted random
// draw only in expectation.
func TestPerfProportional(t *testing.T) {
	sum := uint64(0)
	for _, mb := range sunway {
		sum += mb
	}
	for _, n := range []int{8, 26, 100, 128, 1000} {
		got := placeOpen(t, Perf, n)
		for i, mb := range sunway {
			share := float64(n) * float64(mb) / float64(sum)
			if d := float64(got[i]) - share; d > 1 || d < -1 {
				t.Errorf("perf, %d files: server %d (%d MB/s) got %d, share %.1f (all %v)", n, i+1, mb, got[i], share, got)
			}
		}
		rr := placeOpen(t, RR, n)
		for i := range rr {
			if rr[i] < n/len(sunway) || rr[i] > n/len(sunway)+1 {
				t.Errorf("rr, %d files: %v not even", n, rr)
			}
		}
	}
	// weighted random at scale: within 25 % of the share on every server
	got := placeOpen(t, WRandom, 4000)
	for i, mb := range sunway {
		share := 4000 * float64(mb) / float64(sum)
		if float64(got[i]) < 0.75*share || float64(got[i]) > 1.25*share {
			t.Errorf("wrandom: server %d got %d of 4000, share %.0f (all %v)", i+1, got[i], share, got)
		}
	}
}

// TestPerfOrderDeterministic: the same state gives the same decision.
func TestPerfOrderDeterministic(t *testing.T) {
	for _, p := range Policies {
		a, b := placeOpen(t, p, 300), placeOpen(t, p, 300)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: %v then %v", p, a, b)
		}
	}
}

// TestBacklog: placed bytes are pending until the server reports them
// written; between reports they drain at the rate it last wrote.
func TestBacklog(t *testing.T) {
	var b Backlog
	t0 := time.Unix(1000, 0)
	if b.Pending(t0, 0) != 0 {
		t.Fatal("an idle server has a backlog")
	}
	b.Report(t0, 500) // written before: no backlog
	b.Add(t0, 40e6, 0)
	if got := b.Pending(t0.Add(time.Second), 0); got != 40e6 {
		t.Fatalf("placed, not reported: %d pending", got)
	}
	b.Report(t0.Add(time.Second), 500+10e6) // 10 MB/s
	for _, c := range []struct {
		at   time.Duration
		want uint64
	}{{time.Second, 30e6}, {1500 * time.Millisecond, 25e6}, {10 * time.Second, 0}} {
		if got := b.Pending(t0.Add(c.at), 0); got+1 < c.want || got > c.want+1 {
			t.Errorf("pending at +%v: %d, want %d", c.at, got, c.want)
		}
	}
	b.Add(t0, 4e6, 0) // placed since the report: pending whole until reported
	if got := b.Pending(t0.Add(10*time.Second), 0); got != 4e6 {
		t.Errorf("after a new chunk: %d", got)
	}
	b.Report(t0.Add(2*time.Second), 1000) // restarted: its count began again
	if got := b.Pending(t0.Add(2*time.Second), 0); got != 34e6-1000 {
		t.Errorf("after a restart: %d", got)
	}
}

// TestBacklogQueueFloor: with max_perf known, a server's backlog is never
// below what a queue at max_perf would still hold — chunks placed on a
// busy server wait for the ones before them — however much a report
// drained it; an idle server's queue starts at the placement.
func TestBacklogQueueFloor(t *testing.T) {
	var b Backlog
	t0 := time.Unix(1000, 0)
	const mp = 10e6 // 10 MB/s
	b.Report(t0, 0)
	for range 3 {
		b.Add(t0, 10e6, mp) // 3 s of work at max_perf
	}
	// it reports 25 MB written after 1 s (a period at its burst): the
	// reports say 5 MB left, the queue 20
	b.Report(t0.Add(time.Second), 25e6)
	if got := b.Pending(t0.Add(time.Second), mp); got != 20e6 {
		t.Fatalf("pending %d, want the queue's 20e6", got)
	}
	if got := b.Pending(t0.Add(time.Second), 0); got != 5e6 {
		t.Fatalf("without max_perf: %d, want the reports' 5e6", got)
	}
	// a server slower than its max_perf: the reports win
	b.Report(t0.Add(2*time.Second), 26e6)
	b.Add(t0.Add(2*time.Second), 10e6, mp)
	if got := b.Pending(t0.Add(3500*time.Millisecond), mp); got < 10e6 {
		t.Fatalf("a slow server's pending %d, want at least the new chunk", got)
	}
	// between reports a server drains at its max_perf, not at the rate of
	// a period that caught it between requests
	var d Backlog
	d.Report(t0, 0)
	d.Add(t0, 10e6, mp)
	d.Report(t0.Add(time.Second), 1e6) // 1 MB in its first second
	if got := d.Pending(t0.Add(1500*time.Millisecond), mp); got+1 < 4e6 || got > 4e6+1 {
		t.Fatalf("half a second after a report of 9 MB left: %d, want 4e6 (drained at max_perf)", got)
	}
	if got := d.Pending(t0.Add(1500*time.Millisecond), 0); got+1 < 8.5e6 || got > 8.5e6+1 {
		t.Fatalf("without max_perf: %d, want 8.5e6 (drained at the period's rate)", got)
	}
	// idle a minute: the queue starts at the next placement, not at the
	// end of the last one; a report claiming it all written (a burst)
	// leaves the queue's figure
	var c Backlog
	c.Report(t0, 0)
	c.Add(t0, 10e6, mp)
	at := t0.Add(time.Minute)
	c.Add(at, 10e6, mp)
	c.Add(at, 10e6, mp)
	c.Report(at.Add(100*time.Millisecond), 30e6)
	if got := c.Pending(at.Add(500*time.Millisecond), mp); got+1 < 15e6 || got > 15e6+1 {
		t.Fatalf("queue half a second into 2 s of work after an idle minute: %d, want 15e6", got)
	}
}

// TestBacklogSettle: room placed for a new chunk that a file closed short
// of leaves the backlog and the max_perf queue at once, whether the
// server has reported since the placement or not.
func TestBacklogSettle(t *testing.T) {
	var b Backlog
	t0 := time.Unix(1000, 0)
	const mp = 4e6 // 4 MB/s: a 4 MB chunk is a second of queue
	b.Report(t0, 0)
	for range 3 {
		b.Add(t0, 4e6, mp)
	}
	b.Settle(t0, 4e6-4096, mp) // a 4 KiB file
	if got := b.Pending(t0, mp); got != 8e6+4096 {
		t.Fatalf("pending %d after settling one chunk, want %d", got, uint64(8e6+4096))
	}
	b.Report(t0.Add(100*time.Millisecond), 4096) // its 4 KiB written
	b.Settle(t0.Add(100*time.Millisecond), 4e6-8192, mp)
	if got := b.Pending(t0.Add(100*time.Millisecond), mp); got != 4e6+8192 {
		t.Fatalf("pending %d after settling a reported chunk", got)
	}
	b.Settle(t0.Add(100*time.Millisecond), 100e6, mp) // more than there is
	if got := b.Pending(t0.Add(100*time.Millisecond), mp); got != 0 {
		t.Fatalf("pending %d after settling everything", got)
	}
}
