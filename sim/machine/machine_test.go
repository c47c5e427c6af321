package machine

import (
	"strings"
	"testing"
)

func TestPresets(t *testing.T) {
	for _, name := range Presets() {
		m, err := Load(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.Name != name {
			t.Errorf("preset %s calls itself %s", name, m.Name)
		}
	}
	m, _ := Load("taihulight")
	if m.ComputeNodes != 40960 || m.FwdNodes != 240 || m.Static() != 80 || m.FFMRatio*m.Static() != m.ComputeNodes {
		t.Fatalf("taihulight: %+v", m)
	}
	if bw := m.StorageBW(); bw < 219e9 || bw > 221e9 {
		t.Fatalf("taihulight storage %.0f GB/s, want 220", bw/1e9)
	}
}

func TestFactor(t *testing.T) {
	in := Interference{Classes: []string{"a", "b"}, Pairs: map[string][2]float64{"a/b": {33.3, 1.0}, "a/a": {2, 2}}}
	if f := in.Factor("b", "a"); f < 0.116 || f > 0.118 {
		t.Fatalf("factor %v", f)
	}
	if in.Factor("a", "a") != 1 || in.Factor("b", "b") != 1 {
		t.Fatal("a fair share is no loss; an unknown pair none")
	}
}

func TestCheck(t *testing.T) {
	_, err := Parse([]byte(`{"name":"x","compute_nodes":0}`))
	if err == nil || !strings.Contains(err.Error(), "compute_nodes") {
		t.Fatalf("%v", err)
	}
	if _, err := Parse([]byte(`{"name":"x","bogus":1}`)); err == nil {
		t.Fatal("an unknown field was accepted")
	}
}
