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
//	servers            one per line: TIER ID [cap=SIZE] [used=SIZE] [reserve=SIZE] [domain=D] [down]
//	place ino=N idx=N chunk=SIZE [count=N] [unit=SIZE] [exclude=ID,ID] [seq=N] [wait=true] [copies=TIER:N]
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
