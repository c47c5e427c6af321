package place

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

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
//	servers            one per line: TIER ID [cap=SIZE] [used=SIZE] [reserve=SIZE] [down]
//	place ino=N idx=N chunk=SIZE [count=N] [unit=SIZE] [exclude=ID,ID] [seq=N] [wait=true]
//	                   prints the decision and charges it to the servers
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
					case "down":
						s.Alive = false
					default:
						t.Fatalf("unknown server field %q", k)
					}
				}
				servers = append(servers, s)
			}
			return ""
		case "place":
			c := Chunk{StripeCount: 1}
			for _, a := range d.CmdArgs {
				v := a.Vals[0]
				switch a.Key {
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
			dec, err := Choose(servers, c)
			if err != nil {
				return "error: " + err.Error()
			}
			for i, id := range dec.Servers {
				for j := range servers {
					if servers[j].ID == id {
						servers[j].Used += dec.Charge[i]
					}
				}
			}
			return fmt.Sprintf("%s %v charge %v", dec.Tier, dec.Servers, dec.Charge)
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}
