package bbos

import (
	"strings"
	"testing"
)

// paperRates make MaxDWPP 2.1 S, like the paper's MaxEff and BBOS.
var paperRates = Rates{WriteMax: 1000e6, WriteMin: 700e6, DemoteMin: 100e6, DemoteMax: 367e6}

// admitted grants jobs one by one until the policy refuses one.
func admitted(t *testing.T, p Policy, s float64, job Grant) int {
	var grants []Grant
	for n := 0; n < 100; n++ {
		a, err := Admit(p, s, paperRates, grants, job)
		if err != nil {
			t.Fatal(err)
		}
		if !a.OK {
			if a.Reason == "" || a.Load <= a.Limit && !strings.Contains(a.Reason, "period") {
				t.Fatalf("%s refused without a reason: %+v", p, a)
			}
			return n
		}
		grants = append(grants, job)
	}
	t.Fatalf("%s admits without end", p)
	return 0
}

func TestAdmitOverSubscribes(t *testing.T) {
	const s = 100e9
	job := Grant{Size: 30e9, Period: 3600}
	got := map[Policy]int{}
	for _, p := range Policies {
		got[p] = admitted(t, p, s, job)
	}
	// dedicated: 3 × 30 GB in 100 GB; the demoting policies: up to
	// MaxDWPP = 2.1 S per period; maxbw demotes in the idle time of an
	// hour, which could take more, capped at the same 2.1 S
	want := map[Policy]int{Dedicated: 3, MaxBW: 7, MaxEff: 7, LRU: 7, FIFO: 7, BBOS: 7}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("%s admits %d jobs of 30 GB, want %d", p, got[p], n)
		}
	}
	// a period too short to demote a full buffer after its writes
	short := Grant{Size: 30e9, Period: 200}
	if n := admitted(t, BBOS, s, short); n != 3 {
		t.Errorf("bbos admits %d jobs writing 30 GB every 200 s, want 3 (the buffer cannot drain between periods)", n)
	}
	// in 200 s maxbw writes and demotes 200·1000·367/1367 MB = 53.7 GB
	if n := admitted(t, MaxBW, s, short); n != 1 {
		t.Errorf("maxbw admits %d jobs writing 30 GB every 200 s, want 1 (what its idle time demotes)", n)
	}
	if l := MaxBWLimit(s, 0, paperRates); l != s {
		t.Errorf("maxbw with no period known admits %.0f, want S", l)
	}
	// a job that checkpoints twice per planning period counts twice
	a, _ := Admit(BBOS, s, paperRates, []Grant{{Size: 30e9, Period: 3600}}, Grant{Size: 30e9, Period: 1800})
	if !a.OK || a.Load != 90e9 || a.Period != 3600 {
		t.Errorf("mixed periods: %+v", a)
	}
	// unknown periods hold their size for the job's lifetime
	a, _ = Admit(BBOS, s, paperRates, []Grant{{Size: 60e9}}, Grant{Size: 50e9})
	if !a.OK || a.Load != 110e9 {
		t.Errorf("lifetime holds under bbos: %+v", a)
	}
	if a, _ := Admit(Dedicated, s, paperRates, []Grant{{Size: 60e9}}, Grant{Size: 50e9}); a.OK {
		t.Errorf("dedicated admitted 110 GB in 100: %+v", a)
	}
	if _, err := Admit(BBOS, s, Rates{}, nil, job); err == nil {
		t.Error("bbos admitted with no rates")
	}
	if _, err := Admit(BBOS, s, paperRates, nil, Grant{Size: -1}); err == nil {
		t.Error("a negative grant was judged")
	}
}
