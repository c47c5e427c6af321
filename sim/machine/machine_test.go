package machine

import (
	"encoding/json"
	"os"
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

func TestPairsFromDFRA(t *testing.T) {
	in := `{"mode":"ffm","kind":"nn","with":"","run":{"Slowest":10}}
{"mode":"ffm","kind":"meta","with":"","run":{"Slowest":4}}
{"mode":"ffm","kind":"nn","with":"meta","run":{"Slowest":30}}
{"mode":"ffm","kind":"meta","with":"nn","run":{"Slowest":6}}
{"mode":"ffm","kind":"nn","with":"nn","run":{"Slowest":21}}
{"mode":"dfra","kind":"nn","with":"meta","run":{"Slowest":11}}
{"mode":"ffm","kind":"ckpt","with":"nn","run":{"Slowest":9}}
`
	p, err := PairsFromDFRA(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 || p["bw/bw"] != [2]float64{2.1, 2.1} {
		t.Fatalf("%v", p)
	}
	if x, ok := p["bw/meta"]; ok && x != [2]float64{3, 1.5} {
		t.Fatalf("bw/meta %v", x)
	} else if y, ok2 := p["meta/bw"]; !ok && (!ok2 || y != [2]float64{1.5, 3}) {
		t.Fatalf("%v", p)
	}
}

// TestOurPairs reads the project's own pairwise results.
func TestOurPairs(t *testing.T) {
	f, err := os.Open("../../bench/dfra/pairwise.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := PairsFromDFRA(f)
	if err != nil || len(p) < 10 {
		t.Fatalf("%d pairs: %v", len(p), err)
	}
}

// A description's changes are read and checked against the machine.
func TestChangesInDescription(t *testing.T) {
	m, _ := Load("tiny")
	m.Changes = []Change{{At: 3600, For: 600, Fwds: []string{"fwd0000..fwd0003"}, Groups: []int{1}, Factor: 0, Note: "cabinet 0"}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil || len(back.Changes) != 1 || back.Changes[0].Note != "cabinet 0" || !back.Changes[0].Down() {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	m.Changes[0].Fwds = []string{"fwd0008"} // tiny has fwd0000..fwd0007
	b, _ = json.Marshal(m)
	if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), "fwd0008") {
		t.Fatalf("a change naming fwd0008 on 8 forwarding nodes: %v", err)
	}
}
