package machine

import (
	"strings"
	"testing"
)

// A local cluster becomes a machine: its caps where set, defaults where
// not, a data server's measured rate where it is below its cap or it has
// none, one storage group, the fixed mapping's ratio.
func TestFromLocal(t *testing.T) {
	m, err := FromLocal(Local{FFMRatio: 2,
		Fwds: []LocalServer{{BW: 40e6, Ops: 800}, {BW: 40e6, Ops: 800}, {BW: 60e6}},
		Data: []LocalServer{{BW: 150e6, Measured: 900e6}, {Measured: 300e6}, {BW: 200e6, Measured: 120e6}, {}}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "local" || m.FwdNodes != 3 || m.FwdBW != 40e6 || m.FwdOps != 800 || m.FFMRatio != 2 || m.ComputeNodes != 6 {
		t.Fatalf("forwarding layer: %+v", m)
	}
	want := []float64{150e6, 300e6, 120e6, LocalDefaults.DataBW}
	if m.Storage.Groups != 1 || m.Storage.Targets != 4 || len(m.Storage.TargetBWs) != 4 {
		t.Fatalf("storage %+v", m.Storage)
	}
	for i, w := range want {
		if m.Storage.TargetBWs[i] != w {
			t.Fatalf("target %d: %.0f, want %.0f", i, m.Storage.TargetBWs[i], w)
		}
	}
	if got := m.StorageBW(); got != 150e6+300e6+120e6+LocalDefaults.DataBW {
		t.Fatalf("storage bandwidth %.0f", got)
	}
	if len(m.Interference.Pairs) == 0 || m.NodeBW != LocalDefaults.NodeBW || m.MetaOps != LocalDefaults.MetaOps {
		t.Fatalf("defaults: %+v", m)
	}
	if _, err := FromLocal(Local{Fwds: []LocalServer{{}}}); err == nil || !strings.Contains(err.Error(), "data servers") {
		t.Fatalf("no data server: %v", err)
	}
}
