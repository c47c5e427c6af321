package tiering

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	units "github.com/sluice-hpc/sluice/internal/size"
)

var t0 = time.Unix(1_800_000_000, 0)

// TestPlanDataDriven runs testdata/plan:
//
//	server cap=SIZE used=SIZE [writebw=SIZE/s] [inflight=N] [rank=R]
//	  one file per line: INO SIZE (open|closed) [closed=DUR] [access=DUR]
//	                     [tco=DUR] [toc=DUR] [pinned] [migrating]
//	  (closed= and access= are how long ago)
//	targets
//	  one per line: ID TIER RANK (free=SIZE|unbounded) [bw=SIZE/s] [down]
//	plan [cs-w=SIZE cf-m=SIZE cn-m=SIZE] [max=N]
//	  prints the decision at t0
func TestPlanDataDriven(t *testing.T) {
	var (
		srv     Server
		rank    uint32
		targets []Target
	)
	num := func(v string) uint64 {
		n, err := units.Parse(strings.TrimSuffix(v, "/s"))
		if err != nil {
			t.Fatal(err)
		}
		return uint64(n)
	}
	dur := func(v string) time.Duration {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	datadriven.RunTest(t, "testdata/plan", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "server":
			srv, rank = Server{ID: 1, Tier: "mem"}, 0
			for _, a := range d.CmdArgs {
				switch a.Key {
				case "cap":
					srv.Capacity = num(a.Vals[0])
				case "used":
					srv.Used = num(a.Vals[0])
				case "writebw":
					srv.WriteBW = float64(num(a.Vals[0]))
				case "inflight":
					srv.InFlight, _ = strconv.Atoi(a.Vals[0])
				case "rank":
					r, _ := strconv.Atoi(a.Vals[0])
					rank = uint32(r)
				default:
					t.Fatalf("unknown server field %q", a.Key)
				}
			}
			for _, line := range lines(d.Input) {
				f := strings.Fields(line)
				ino, _ := strconv.ParseUint(f[0], 10, 64)
				file := File{Ino: ino, Bytes: num(f[1]), Open: f[2] == "open", LastClose: t0, LastAccess: t0}
				for _, kv := range f[3:] {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "closed":
						file.LastClose = t0.Add(-dur(v))
					case "access":
						file.LastAccess = t0.Add(-dur(v))
					case "tco":
						file.MeanTco = dur(v)
					case "toc":
						file.MeanToc = dur(v)
					case "pinned":
						file.Pinned = true
					case "migrating":
						file.Migrating = true
					default:
						t.Fatalf("unknown file field %q", k)
					}
				}
				srv.Files = append(srv.Files, file)
			}
			return ""
		case "targets":
			targets = nil
			for _, line := range lines(d.Input) {
				f := strings.Fields(line)
				id, _ := strconv.ParseUint(f[0], 10, 64)
				r, _ := strconv.Atoi(f[2])
				tg := Target{ID: id, Tier: f[1], Rank: uint32(r), Alive: true}
				for _, kv := range f[3:] {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "free":
						tg.Free = num(v)
					case "unbounded":
						tg.Unbounded = true
					case "bw":
						tg.StreamBW = float64(num(v))
					case "down":
						tg.Alive = false
					default:
						t.Fatalf("unknown target field %q", k)
					}
				}
				targets = append(targets, tg)
			}
			return ""
		case "plan":
			var cfg Config
			for _, a := range d.CmdArgs {
				switch a.Key {
				case "cs-w":
					cfg.Thresholds.StallWrite = num(a.Vals[0])
				case "cf-m":
					cfg.Thresholds.ForcedOut = num(a.Vals[0])
				case "cn-m":
					cfg.Thresholds.NormalOut = num(a.Vals[0])
				case "max":
					cfg.MaxConcurrent, _ = strconv.Atoi(a.Vals[0])
				default:
					t.Fatalf("unknown plan field %q", a.Key)
				}
			}
			dec := Plan(t0, cfg, srv, rank, targets)
			var b strings.Builder
			th := dec.Thresholds
			fmt.Fprintf(&b, "free %s: %s (Cs-w %s, Cf-m %s, Cn-m %s), N = %d\n", units.Format(srv.Free()), dec.Mode,
				units.Format(th.StallWrite), units.Format(th.ForcedOut), units.Format(th.NormalOut), dec.Concurrency)
			for _, m := range dec.Moves {
				kind := "closed"
				if m.Forced {
					kind = "open"
				}
				fmt.Fprintf(&b, "move %d (%s, %s) to %s %d, coolness %.4g\n", m.Ino, units.Format(m.Bytes), kind, m.Tier, m.To, m.Coolness)
			}
			fmt.Fprintf(&b, "stop: %s\n", dec.Reason)
			return b.String()
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestConcurrency(t *testing.T) {
	// ONFS §8.2: DS-m writes 3400 MB/s, one HDD stream 112 MB/s: N ≈ 31
	if n := Concurrency(3400e6, 112e6, 4, 64); n != 30 {
		t.Fatalf("N = %d, want 30 (3400/112 = 30.4)", n)
	}
	if n := Concurrency(0, 112e6, 4, 64); n != 4 {
		t.Fatalf("unmeasured: N = %d, want the default", n)
	}
	if n := Concurrency(10e9, 1e6, 4, 64); n != 64 {
		t.Fatalf("N = %d, want the cap", n)
	}
	if n := Concurrency(1e6, 1e9, 4, 64); n != 1 {
		t.Fatalf("N = %d, want at least 1", n)
	}
}

func TestThresholdsOrdered(t *testing.T) {
	for _, c := range []struct{ capacity, chunk, avg uint64 }{
		{64 << 30, 4 << 20, 8 << 20}, {1 << 30, 4 << 20, 1 << 30}, {16 << 20, 4 << 20, 8 << 20}, {100, 4 << 20, 0},
	} {
		for _, n := range []int{0, 1, 31, 64} {
			th := DefaultThresholds(c.capacity, c.chunk, n, c.avg)
			if err := th.Valid(); err != nil {
				t.Errorf("cap %d n %d: %v", c.capacity, n, err)
			}
			if th.NormalOut >= c.capacity {
				t.Errorf("cap %d n %d: Cn-m %d not below the capacity", c.capacity, n, th.NormalOut)
			}
		}
	}
}

// TestStuck: a server short of space whose look found nothing to move is
// stuck only if nothing was moving off it at that look and nothing is now.
func TestStuck(t *testing.T) {
	s := Server{ID: 1, Tier: "mem", Capacity: 100 << 20, Used: 90 << 20}
	cfg := Config{Thresholds: Thresholds{StallWrite: 4 << 20, ForcedOut: 8 << 20, NormalOut: 30 << 20}}
	idle := Plan(time.Unix(1e6, 0), cfg, s, 0, nil) // no files: nothing to move
	if idle.Mode == Calm || len(idle.Moves) != 0 || idle.InFlight != 0 {
		t.Fatalf("idle look: %+v", idle)
	}
	if !Stuck(idle, 0) {
		t.Fatal("nothing to move and nothing moving: not stuck")
	}
	if Stuck(idle, 1) {
		t.Fatal("stuck with a move under way")
	}
	s.InFlight = 2
	busy := Plan(time.Unix(1e6, 0), cfg, s, 0, nil)
	if busy.InFlight != 2 || len(busy.Moves) != 0 {
		t.Fatalf("busy look: %+v", busy)
	}
	if Stuck(busy, 0) {
		t.Fatal("a look made with moves in flight counts as stuck once they end")
	}
	if calm := Plan(time.Unix(1e6, 0), cfg, Server{ID: 1, Capacity: 100 << 20, Used: 10 << 20}, 0, nil); Stuck(calm, 0) {
		t.Fatal("a calm server is stuck")
	}
}
