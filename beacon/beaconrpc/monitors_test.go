package beaconrpc

import (
	"fmt"
	"testing"
)

// TestOrderSpreads: the monitors divide the jobs about evenly, and a
// monitor's removal moves only its own jobs.
func TestOrderSpreads(t *testing.T) {
	three := &Monitors{addrs: []string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"}}
	two := &Monitors{addrs: []string{"10.0.0.1:7400", "10.0.0.3:7400"}}
	count := map[int]int{}
	moved := 0
	const n = 3000
	for j := range n {
		job := fmt.Sprint(100000 + j)
		o := three.Order(job)
		count[o[0]]++
		owner3, owner2 := three.addrs[o[0]], two.addrs[two.Order(job)[0]]
		if owner3 != "10.0.0.2:7400" && owner3 != owner2 {
			moved++
		}
		if owner3 == "10.0.0.2:7400" && owner2 != three.addrs[o[1]] {
			t.Fatalf("job %s: its monitor gone, it went to %s, not the next of its order %s", job, owner2, three.addrs[o[1]])
		}
	}
	for i := range 3 {
		if count[i] < n/3*8/10 || count[i] > n/3*12/10 {
			t.Fatalf("jobs per monitor %v: want about %d each", count, n/3)
		}
	}
	if moved != 0 {
		t.Fatalf("%d jobs of the monitors that stayed moved", moved)
	}
}
