package qos

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

// server simulates one server of capacity bytesPerSec serving a queue
// that clients keep full: each flow in load always has depth requests of
// its size queued. It runs until end and returns the bytes each flow got
// per window.
type server struct {
	s     *Sched
	now   time.Time
	cap   float64
	load  map[string]Req // job → its requests (Job set)
	depth int
	ids   map[uint64]string
	got   map[string][]float64 // per window
	win   time.Duration
}

func newServer(s *Sched, capacity float64, depth int) *server {
	return &server{s: s, now: t0, cap: capacity, load: map[string]Req{}, depth: depth, ids: map[uint64]string{},
		got: map[string][]float64{}, win: time.Second}
}

func (v *server) queued(job string) int {
	n := 0
	for _, j := range v.ids {
		if j == job {
			n++
		}
	}
	return n
}

func (v *server) run(d time.Duration) {
	end := v.now.Add(d)
	for v.now.Before(end) {
		for job, q := range v.load {
			for v.queued(job) < v.depth {
				v.ids[v.s.Enqueue(v.now, q)] = job
			}
		}
		id, ok, wake := v.s.Next(v.now)
		if !ok {
			if wake.IsZero() {
				v.now = end
				break
			}
			v.now = wake
			continue
		}
		job := v.ids[id]
		delete(v.ids, id)
		b := float64(v.load[job].Bytes)
		v.now = v.now.Add(time.Duration(b / v.cap * float64(time.Second)))
		w := int(v.now.Sub(t0) / v.win)
		for len(v.got[job]) <= w {
			v.got[job] = append(v.got[job], 0)
		}
		v.got[job][w] += b
	}
}

func sum(xs []float64, from, to int) float64 {
	t := 0.0
	for i := from; i < to && i < len(xs); i++ {
		t += xs[i]
	}
	return t
}

func rule(t *testing.T, name string, words ...string) Rule {
	t.Helper()
	r, err := ParseRule(name, words)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestShares3to1UnderSaturation(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "a", "job=A", "share=3"), rule(t, "b", "job=B", "share=1")}, t0)
	v := newServer(s, 100e6, 8)
	v.load["A"] = Req{Job: "A", Class: Write, Bytes: 1 << 20}
	v.load["B"] = Req{Job: "B", Class: Write, Bytes: 1 << 20}
	v.run(20 * time.Second)
	a, b := sum(v.got["A"], 0, 20), sum(v.got["B"], 0, 20)
	if r := a / b; math.Abs(r-3) > 0.03 {
		t.Fatalf("A:B = %.3f, want 3 (A %.0f B %.0f)", r, a, b)
	}
	// and second by second, not only on average
	for w := 0; w < 19; w++ {
		if r := v.got["A"][w] / v.got["B"][w]; math.Abs(r-3) > 0.3 {
			t.Fatalf("second %d: A:B = %.2f", w, r)
		}
	}
}

func TestUnmatchedJobsShareFairly(t *testing.T) {
	s := NewSched()
	v := newServer(s, 50e6, 4)
	// B sends twice as many requests of half the size: still even
	v.load["A"] = Req{Job: "A", Bytes: 1 << 20}
	v.load["B"] = Req{Job: "B", Bytes: 512 << 10}
	v.depth = 8
	v.run(10 * time.Second)
	a, b := sum(v.got["A"], 0, 10), sum(v.got["B"], 0, 10)
	if r := a / b; math.Abs(r-1) > 0.05 {
		t.Fatalf("A:B = %.3f, want 1", r)
	}
}

func TestCapHeldOverEveryWindow(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "cap", "job=A", "rate=20M")}, t0)
	v := newServer(s, 200e6, 16)
	v.win = 5 * time.Second
	v.load["A"] = Req{Job: "A", Bytes: 1 << 20}
	v.load["B"] = Req{Job: "B", Bytes: 1 << 20}
	v.run(60 * time.Second)
	limit := 20.0 * (1 << 20) * 5
	for w, got := range v.got["A"][:11] {
		if got > 1.05*limit || got < 0.95*limit {
			t.Fatalf("window %d: %.1f MiB in 5 s, cap %.1f", w, got/(1<<20), limit/(1<<20))
		}
	}
	// the rest of the server goes to B
	if b := sum(v.got["B"], 0, 11) / 55; b < 150e6 {
		t.Fatalf("B got %.0f B/s of a 200 MB/s server beside a 20 MiB/s cap", b)
	}
	// and sliding: no 5 s span starting anywhere exceeds it by 5 %
	s2 := NewSched()
	s2.SetRules([]Rule{rule(t, "cap", "job=A", "rate=20M")}, t0)
	v2 := newServer(s2, 200e6, 16)
	v2.win = 100 * time.Millisecond
	v2.load["A"] = Req{Job: "A", Bytes: 4 << 20}
	v2.run(30 * time.Second)
	for w := 0; w+50 <= len(v2.got["A"]); w++ {
		if got := sum(v2.got["A"], w, w+50); got > 1.05*limit {
			t.Fatalf("5 s from %v: %.1f MiB, cap %.1f", time.Duration(w)*v2.win, got/(1<<20), limit/(1<<20))
		}
	}
}

func TestOpsCap(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "md", "op=meta", "iops=200")}, t0)
	v := newServer(s, 1e9, 4)
	v.load["A"] = Req{Job: "A", Class: Meta}
	v.run(10 * time.Second)
	// Bytes is 0: count operations by their ids handed out
	st := s.Stats(v.now)
	var n uint64
	for _, f := range st {
		if f.Rule == "md" {
			n = f.N
		}
	}
	if n < 1900 || n > 2030 {
		t.Fatalf("%d operations in 10 s under iops=200", n)
	}
}

func TestIdleShareGoesToOthers(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "a", "job=A", "share=3"), rule(t, "b", "job=B", "share=1")}, t0)
	v := newServer(s, 100e6, 8)
	v.load["B"] = Req{Job: "B", Bytes: 1 << 20}
	v.run(5 * time.Second)
	if b := sum(v.got["B"], 0, 5) / 5; b < 95e6 {
		t.Fatalf("B alone got %.0f B/s of 100 MB/s while A (share 3) was idle", b)
	}
	// A comes back after five idle seconds: it banked no credit, so B keeps
	// its quarter from the first second on
	v.load["A"] = Req{Job: "A", Bytes: 1 << 20}
	v.run(5 * time.Second)
	for w := 5; w < 9; w++ {
		a, b := v.got["A"][w], v.got["B"][w]
		if r := a / b; math.Abs(r-3) > 0.3 {
			t.Fatalf("second %d after A's return: A:B = %.2f", w, r)
		}
	}
}

func TestRulesChangeWhileJobsRun(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "a", "job=A", "share=3")}, t0)
	v := newServer(s, 100e6, 8)
	v.load["A"] = Req{Job: "A", Bytes: 1 << 20}
	v.load["B"] = Req{Job: "B", Bytes: 1 << 20}
	v.run(5 * time.Second)
	// now B gets the big share and A a cap; requests already queued move
	s.SetRules([]Rule{rule(t, "b", "job=B", "share=4"), rule(t, "a", "job=A", "rate=10M")}, v.now)
	v.run(10 * time.Second)
	a := sum(v.got["A"], 7, 15) / 8
	if a > 10.5*(1<<20) || a < 9.5*(1<<20) {
		t.Fatalf("A got %.1f MiB/s after its cap of 10 MiB/s", a/(1<<20))
	}
	if r := sum(v.got["A"], 1, 4) / sum(v.got["B"], 1, 4); math.Abs(r-3) > 0.1 {
		t.Fatalf("before the change A:B = %.2f, want 3", r)
	}
	// removing every rule: even again
	s.SetRules(nil, v.now)
	v.run(5 * time.Second)
	if r := sum(v.got["A"], 16, 20) / sum(v.got["B"], 16, 20); math.Abs(r-1) > 0.05 {
		t.Fatalf("without rules A:B = %.2f, want 1", r)
	}
	if s.Pending() != len(v.ids) {
		t.Fatalf("%d requests queued, the scheduler knows %d", len(v.ids), s.Pending())
	}
}

func TestCancelAndStats(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "a", "job=A", "rate=1M")}, t0)
	id1 := s.Enqueue(t0, Req{Job: "A", Bytes: 2 << 20})
	id2 := s.Enqueue(t0, Req{Job: "A", Bytes: 1 << 20})
	if id, ok, _ := s.Next(t0); !ok || id != id1 {
		t.Fatalf("first request: %d %v", id, ok)
	}
	// the bucket is in debt by 2 MiB - 100 ms of burst: the next waits
	id, ok, wake := s.Next(t0)
	if ok || wake.Sub(t0) < 1800*time.Millisecond || wake.Sub(t0) > 2*time.Second {
		t.Fatalf("second request: %d %v, wake after %v", id, ok, wake.Sub(t0))
	}
	st := s.Stats(t0)
	if len(st) != 1 || st[0].Depth != 1 || st[0].Rule != "a" || st[0].Rate != 1<<20 || st[0].Bytes != 2<<20 {
		t.Fatalf("stats %+v", st)
	}
	s.Cancel(id2)
	if _, ok, wake := s.Next(wake); ok || !wake.IsZero() || s.Pending() != 0 {
		t.Fatal("a cancelled request was handed out or still waits")
	}
}

// TestCappedCountsHeldRequests: a request counts as capped when its flow's
// cap held it back, not when it merely moved bytes under an ops-only cap.
func TestCappedCountsHeldRequests(t *testing.T) {
	s := NewSched()
	s.SetRules([]Rule{rule(t, "ops", "job=A", "iops=10"), rule(t, "bw", "job=B", "rate=1M")}, t0)
	for i := 0; i < 3; i++ {
		s.Enqueue(t0, Req{Job: "A", Bytes: 1 << 20})
		s.Enqueue(t0, Req{Job: "B", Bytes: 1 << 20})
	}
	now := t0
	for s.Pending() > 0 {
		if _, ok, wake := s.Next(now); !ok {
			now = wake
		}
	}
	for _, f := range s.Stats(now) {
		// A: a burst of 1 op (100 ms of 10/s) lets one go, the others wait;
		// B: 100 KiB of burst, the first goes into debt, the others wait
		if f.Capped != 2 || f.N != 3 {
			t.Errorf("%s: %d of %d requests capped, want 2 of 3", f.Key, f.Capped, f.N)
		}
	}
	// requests that waited for a slot, not for their generous cap
	s = NewSched()
	s.SetRules([]Rule{rule(t, "c", "job=C", "iops=1000")}, t0)
	for i := 0; i < 3; i++ {
		s.Enqueue(t0, Req{Job: "C", Bytes: 1 << 20})
	}
	for i := 1; i <= 3; i++ {
		if _, ok, _ := s.Next(t0.Add(time.Duration(i) * time.Millisecond)); !ok {
			t.Fatal("held back under iops=1000")
		}
	}
	if st := s.Stats(t0); st[0].Capped != 0 {
		t.Errorf("%d requests counted capped under a cap that never held them", st[0].Capped)
	}
}

func TestParseRule(t *testing.T) {
	r, err := ParseRule("ckpt", strings.Fields("job=12* uid=1000 node=cn[0-3] app=tag:wrf op=write rate=100M iops=500 share=3"))
	if err != nil {
		t.Fatal(err)
	}
	want := Rule{Name: "ckpt", Job: "12*", Uid: 1000, Gid: -1, Node: "cn[0-3]", App: "tag:wrf", Op: Write,
		Rate: 100 << 20, Ops: 500, Share: 3}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v", r)
	}
	back, err := ParseRule(r.Name, r.Words())
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if got := r.String(); got != "ckpt job=12* uid=1000 node=cn[0-3] app=tag:wrf op=write rate=100M iops=500 share=3" {
		t.Fatalf("printed as %q", got)
	}
	if !r.Matches(Req{Job: "1234", Uid: 1000, Node: "cn2", App: "tag:wrf", Class: Write}) ||
		r.Matches(Req{Job: "1234", Uid: 1000, Node: "cn4", App: "tag:wrf", Class: Write}) ||
		r.Matches(Req{Job: "1234", Uid: 1000, Node: "cn2", App: "tag:wrf", Class: Read}) ||
		r.Matches(Req{Job: "999", Uid: 1000, Node: "cn2", App: "tag:wrf", Class: Write}) {
		t.Fatal("matching")
	}
	for _, bad := range []string{"", "job=1", "rate=1M", "job=1 rate=x", "job=[ rate=1", "job=1 job=2 share=1",
		"uid=-1 share=1", "op=delete share=1", "job=1 share=0", "color=red share=1", "job=1 rate"} {
		if _, err := ParseRule("x", strings.Fields(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ParseRule("a b", []string{"job=1", "share=1"}); err == nil {
		t.Error("a name with a space parsed")
	}
	if i := Classify([]Rule{rule(t, "x", "job=9", "share=1"), rule(t, "y", "job=1*", "share=1"), rule(t, "z", "op=read", "share=1")},
		Req{Job: "12", Class: Read}); i != 1 {
		t.Fatalf("the first matching rule wins: got %d", i)
	}
}

func FuzzParseRule(f *testing.F) {
	f.Add("job=12* uid=1000 op=write rate=100M share=3")
	f.Add("node=cn[0-3] iops=5")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule("f", strings.Fields(s))
		if err != nil {
			return
		}
		back, err := ParseRule("f", r.Words())
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("%q: %+v does not round-trip: %+v %v", s, r, back, err)
		}
	})
}
