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

// A mem tier in front of another becomes the machine's mem tier: its
// servers as one, of their capacities and rates together, with the
// cluster's thresholds and mode; the tier behind it is the storage.
func TestFromLocalMemTier(t *testing.T) {
	l := Local{Fwds: []LocalServer{{}},
		Mem:           []LocalServer{{Name: "data-mem", BW: 600e6, Capacity: 64 << 20}, {Name: "data-mem-1", Measured: 900e6, Capacity: 32 << 20}},
		Data:          []LocalServer{{Name: "data-ssd", BW: 20e6, Measured: 19e6}},
		MemThresholds: [3]float64{4 << 20, 12 << 20, 24 << 20}, MemManual: true}
	m, err := FromLocal(l)
	if err != nil {
		t.Fatal(err)
	}
	mt := m.MemTier
	if mt == nil || mt.Capacity != 96<<20 || mt.BW != 600e6+900e6 || !mt.Manual || mt.Thresholds != l.MemThresholds {
		t.Fatalf("mem tier %+v", mt)
	}
	if m.Storage.Targets != 1 || m.Storage.TargetBWs[0] != 19e6 {
		t.Fatalf("storage %+v: want the ssd at what it measured", m.Storage)
	}
	// without a mem tier, none
	l.Mem = nil
	if m, err = FromLocal(l); err != nil || m.MemTier != nil {
		t.Fatalf("no mem servers: %v, mem tier %+v", err, m.MemTier)
	}
	// a mem server without a capacity is an error, not an endless tier
	l.Mem = []LocalServer{{Name: "data-mem"}}
	if _, err := FromLocal(l); err == nil || !strings.Contains(err.Error(), "data-mem") {
		t.Fatalf("a mem server without capacity: %v", err)
	}
}
