package client

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// TestChooseFwd: the fixed mapping is stable for a node, spreads nodes over
// the live forwarding nodes, and skips dead ones and other roles.
func TestChooseFwd(t *testing.T) {
	servers := []wire.ServerInfo{
		{ID: 9, Role: "fwd", Alive: true, Addr: "a"},
		{ID: 3, Role: "fwd", Alive: true, Addr: "b"},
		{ID: 4, Role: "fwd", Alive: false, Addr: "dead"},
		{ID: 5, Role: "data", Alive: true, Addr: "data"},
	}
	seen := map[string]int{}
	for i := 0; i < 200; i++ {
		node := "cn" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		si, err := ChooseFwd(servers, node)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := ChooseFwd(servers, node)
		if again.ID != si.ID {
			t.Fatal("mapping not stable")
		}
		seen[si.Addr]++
	}
	if len(seen) != 2 || seen["dead"] > 0 || seen["data"] > 0 || seen["a"] < 50 || seen["b"] < 50 {
		t.Fatalf("distribution %v", seen)
	}
	if _, err := ChooseFwd(servers[2:], "x"); err == nil {
		t.Fatal("chose a dead forwarding node")
	}
}
