package dfra

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sluice-hpc/sluice/beacon"
	units "github.com/sluice-hpc/sluice/internal/size"
)

// TestDecideDataDriven runs testdata/decide, situations and the decisions
// DFRA must take in them:
//
//	config [ratio=N] [highbw=F] [maxfwds=N] [nospread]
//	fwds n=N [cap=SIZE/s] [slow=ID,...] [down=ID,...]
//	decide job=ID nodes=PREFIX:N [volume=SIZE] [ionodes=N] [nodebw=SIZE/s]
//	       [mode=M] [metarate=F] [runbw=SIZE/s runfwds=N] [place]
//	                 prints the assignment; with place it joins the
//	                 running jobs later decisions see
//	mark slow=ID | down=ID | well=ID   a forwarding node's state changes
//	finish job=ID    the job ends
//	remap            Remap of the running jobs: what moved
func TestDecideDataDriven(t *testing.T) {
	var (
		cfg    Config
		fs     []Fwd
		placed []Assignment
		jobs   map[string]Job
	)
	bytes := func(v string) float64 {
		n, err := units.Parse(strings.TrimSuffix(v, "/s"))
		if err != nil {
			t.Fatal(err)
		}
		return float64(n)
	}
	list := func(v []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range v {
			m[x] = true
		}
		return m
	}
	datadriven.RunTest(t, "testdata/decide", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "config":
			cfg = Config{}
			for _, a := range d.CmdArgs {
				switch a.Key {
				case "ratio":
					cfg.Ratio, _ = strconv.Atoi(a.Vals[0])
				case "highbw":
					cfg.HighBW, _ = strconv.ParseFloat(a.Vals[0], 64)
				case "maxfwds":
					cfg.MaxFwds, _ = strconv.Atoi(a.Vals[0])
				case "nospread":
					cfg.NoSpread = true
				default:
					t.Fatalf("unknown config %q", a.Key)
				}
			}
			return ""
		case "fwds":
			fs, placed, jobs = nil, nil, map[string]Job{}
			n, capacity := 0, 1000e6
			var slow, down map[string]bool
			for _, a := range d.CmdArgs {
				switch a.Key {
				case "n":
					n, _ = strconv.Atoi(a.Vals[0])
				case "cap":
					capacity = bytes(a.Vals[0])
				case "slow":
					slow = list(a.Vals)
				case "down":
					down = list(a.Vals)
				}
			}
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("fwd-%02d", i)
				fs = append(fs, Fwd{ID: id, Capacity: capacity, Alive: !down[id], Slow: slow[id]})
			}
			return ""
		case "decide":
			var job Job
			var p beacon.Profile
			hasProfile, place := false, false
			for _, a := range d.CmdArgs {
				v := ""
				if len(a.Vals) > 0 {
					v = a.Vals[0]
				}
				switch a.Key {
				case "job":
					job.ID = v
				case "nodes":
					prefix, count, _ := strings.Cut(v, ":")
					n, _ := strconv.Atoi(count)
					for i := 0; i < n; i++ {
						job.Nodes = append(job.Nodes, fmt.Sprintf("%s%03d", prefix, i))
					}
				case "place":
					place = true
				default:
					hasProfile = true
					switch a.Key {
					case "volume":
						p.Volume = uint64(bytes(v))
					case "ionodes":
						p.IONodes, _ = strconv.Atoi(v)
					case "nodebw":
						p.NodeBW = bytes(v)
					case "mode":
						p.Mode = v
					case "metarate":
						p.MetaRate, _ = strconv.ParseFloat(v, 64)
					case "runbw":
						p.RunBW = bytes(v)
					case "runfwds":
						p.RunFwds, _ = strconv.Atoi(v)
					default:
						t.Fatalf("unknown job field %q", a.Key)
					}
				}
			}
			if hasProfile {
				job.Profile = &p
			}
			a := Decide(cfg, fs, placed, job)
			if place {
				placed = append(placed, a)
				jobs[job.ID] = job
			}
			return show(a)
		case "mark":
			for _, a := range d.CmdArgs {
				for i := range fs {
					if fs[i].ID == a.Vals[0] {
						switch a.Key {
						case "slow":
							fs[i].Slow = true
						case "down":
							fs[i].Alive = false
						case "well":
							fs[i].Slow, fs[i].Alive = false, true
						}
					}
				}
			}
			return ""
		case "finish":
			id := d.CmdArgs[0].Vals[0]
			keep := placed[:0]
			for _, a := range placed {
				if a.Job != id {
					keep = append(keep, a)
				}
			}
			placed = keep
			delete(jobs, id)
			return ""
		case "remap":
			next, moved := Remap(cfg, fs, placed, jobs)
			var b strings.Builder
			for _, i := range moved {
				b.WriteString("moved " + show(next[i]))
			}
			placed = next
			if b.Len() == 0 {
				return "nothing moved\n"
			}
			return b.String()
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

func show(a Assignment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %v", a.Job, a.Policy, a.Fwds)
	if a.Dedicated {
		b.WriteString(" dedicated")
	}
	if a.Isolate {
		b.WriteString(" isolate")
	}
	b.WriteString("\n")
	for _, r := range a.Reasons {
		b.WriteString("  " + r + "\n")
	}
	return b.String()
}
