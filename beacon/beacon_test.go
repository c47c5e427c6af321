package beacon

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestEncodeDecode(t *testing.T) {
	recs := []Record{
		{Window: 1, Layer: LayerFwd, Server: "fwd-1", Uid: 1000, Op: OpWrite,
			Ino: 9, Size: 1 << 20, Count: 5, Bytes: 5 << 20, Seq: 4, OffMin: 0, OffMax: 5 << 20, First: 10, Last: 20,
			LatSum: 500, LatMax: 200, Wait: 7, QoSWait: 3, Errors: 1, Who: wire.Who{Job: "42", App: "ior", Rank: 3, Node: "cn7"}},
		{Window: -5, Layer: LayerData, Op: "meta:lookup", Who: wire.Who{Rank: -1}},
	}
	got, err := Decode(Encode(recs))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n%+v\n%+v", got, recs)
	}
	if _, err := Decode([]byte("not zstd")); err == nil {
		t.Fatal("garbage decoded")
	}
	// a version-1 batch (stored before QoSWait) decodes with none
	one := recs[1]
	b, _ := decoder.DecodeAll(Encode([]Record{one}), nil)
	b[0] = 1
	got, err = Decode(encoder.EncodeAll(b[:len(b)-1], nil))
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], one) {
		t.Fatalf("version 1: %+v %v", got, err)
	}
	b[0] = 3
	if _, err := Decode(encoder.EncodeAll(b, nil)); err == nil {
		t.Fatal("an unknown version decoded")
	}
}

func FuzzDecodeRecords(f *testing.F) {
	f.Add(Encode([]Record{{Window: 1, Op: OpRead, Count: 2, Who: wire.Who{Job: "j"}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := Decode(b)
		if err != nil {
			return
		}
		// what decodes re-encodes to the same records
		again, err := Decode(Encode(recs))
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

// TestCollectorDedup: runs of equal operations collapse into one record
// per window with counts, sequential detection and latency sums.
func TestCollectorDedup(t *testing.T) {
	c := NewCollector(LayerFwd, "fwd-1", time.Second)
	for i := 0; i < 1000; i++ {
		c.Add(Op{Start: t0.Add(time.Duration(i) * time.Millisecond), Name: OpWrite,
			Ino: 5, Off: uint64(i) * 4096, Size: 4096, Lat: 100 * time.Microsecond, Wait: time.Microsecond, QoSWait: 300 * time.Nanosecond, Who: wire.Who{Job: "7", Rank: 0, Node: "n1"}})
	}
	// a second window, another rank
	c.Add(Op{Start: t0.Add(1500 * time.Millisecond), Name: OpRead, Ino: 5, Size: 8192, Who: wire.Who{Job: "7", Rank: 1, Node: "n1"}})
	if got := c.Drain(t0.Add(999*time.Millisecond), false); len(got) != 0 {
		t.Fatalf("open window drained: %+v", got)
	}
	got := c.Drain(t0.Add(time.Second), false)
	if len(got) != 1 {
		t.Fatalf("want 1 record, got %d", len(got))
	}
	r := got[0]
	if r.Count != 1000 || r.Bytes != 1000*4096 || r.Seq != 999 || r.OffMax != 1000*4096 ||
		r.LatSum != int64(1000*100*time.Microsecond) || r.Wait != int64(1000*time.Microsecond) || r.QoSWait != int64(300*time.Microsecond) {
		t.Fatalf("aggregate: %+v", r)
	}
	if rest := c.Drain(t0, true); len(rest) != 1 || rest[0].Op != OpRead || rest[0].Rank != 1 {
		t.Fatalf("final drain: %+v", rest)
	}
	// compression: a window of 1000 identical ops is tiny on the wire
	if n := len(Encode(got)); n > 200 {
		t.Fatalf("encoded window is %d bytes", n)
	}
	// a create storm touches a new file with every operation: it still
	// collapses into one record per operation kind
	for i := 0; i < 1000; i++ {
		c.Add(Op{Start: t0.Add(time.Duration(i) * time.Millisecond), Name: "meta:create", Ino: uint64(100 + i),
			Lat: 50 * time.Microsecond, Who: wire.Who{Job: "8"}})
		c.Add(Op{Start: t0.Add(time.Duration(i) * time.Millisecond), Name: "meta:unlink", Ino: uint64(100 + i), Who: wire.Who{Job: "8"}})
	}
	storm := c.Drain(t0.Add(time.Second), false)
	if len(storm) != 2 || storm[0].Count != 1000 || storm[1].Count != 1000 {
		t.Fatalf("metadata storm: %d records %+v", len(storm), storm)
	}
	if n := len(Encode(storm)); n > 200 {
		t.Fatalf("encoded storm is %d bytes", n)
	}
	// a batch of creates sent at once counts each
	c.Add(Op{Start: t0, Name: "meta:createbatch", N: 512, Lat: 512 * time.Microsecond, Who: wire.Who{Job: "9"}})
	c.Add(Op{Start: t0, Name: "meta:createbatch", N: 3, Lat: 3 * time.Microsecond, Who: wire.Who{Job: "9"}})
	if b := c.Drain(t0.Add(time.Second), false); len(b) != 1 || b[0].Count != 515 || b[0].LatSum/int64(b[0].Count) != 1000 {
		t.Fatalf("batches: %+v", b)
	}
}

func TestCollectorBounded(t *testing.T) {
	c := NewCollector(LayerData, "data-mem-1", time.Second)
	for i := 0; i < 3*maxKeys; i++ {
		c.Add(Op{Start: t0, Name: OpRead, Ino: uint64(i), Size: uint64(1 + i%5000), Who: wire.Who{Job: "x"}})
	}
	c.mu.Lock()
	n := len(c.cur)
	c.mu.Unlock()
	if n > maxKeys+64 {
		t.Fatalf("collector holds %d records", n)
	}
	var ops uint64
	for _, r := range c.Drain(t0, true) {
		ops += r.Count
	}
	if ops != 3*maxKeys {
		t.Fatalf("lost operations: %d", ops)
	}
}

func synth(job string, ranks, windows int, fn func(rank, w int) []Record) []Record {
	var out []Record
	for w := 0; w < windows; w++ {
		for r := 0; r < ranks; r++ {
			for _, rec := range fn(r, w) {
				rec.Job, rec.Rank, rec.Layer, rec.Server = job, int32(r), LayerClient, "client@n"
				rec.Node = fmt.Sprintf("n%d", r/2)
				rec.Window = t0.Add(time.Duration(w) * time.Second).UnixNano()
				out = append(out, rec)
			}
		}
	}
	return out
}

func TestAnalyzeModesAndClasses(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name    string
		recs    []Record
		mode    string
		classes []string
	}{
		{"N-N bandwidth", synth("j", 4, 5, func(r, w int) []Record {
			return []Record{{Op: OpWrite, Ino: uint64(100 + r), Size: mib, Count: 20, Bytes: 20 * mib, Seq: 20, LatSum: 1e6}}
		}), ModeNN, []string{ClassBandwidth}},
		{"N-1", synth("j", 4, 5, func(r, w int) []Record {
			return []Record{{Op: OpWrite, Ino: 7, Size: mib, Count: 20, Bytes: 20 * mib, LatSum: 1e6}}
		}), ModeN1, []string{ClassBandwidth}},
		{"1-1", synth("j", 4, 5, func(r, w int) []Record {
			if r != 0 {
				return []Record{{Op: "meta:getattr", Count: 1}}
			}
			return []Record{{Op: OpWrite, Ino: 9, Size: mib, Count: 100, Bytes: 100 * mib, LatSum: 1e6}}
		}), Mode1, []string{ClassBandwidth}},
		{"metadata", synth("j", 2, 5, func(r, w int) []Record {
			return []Record{{Op: "meta:mknod", Count: 500}, {Op: "meta:getattr", Count: 500}}
		}), ModeNone, []string{ClassMetadata}},
		{"iops", synth("j", 2, 5, func(r, w int) []Record {
			return []Record{{Op: OpRead, Ino: uint64(50 + r), Size: 4096, Count: 1000, Bytes: 4096000, LatSum: 1e6}}
		}), ModeNN, []string{ClassIOPS}},
		{"checkpoint", synth("j", 4, 12, func(r, w int) []Record {
			if w%4 != 0 {
				return nil
			}
			return []Record{{Op: OpWrite, Ino: uint64(1000*w + r), Size: mib, Count: 16, Bytes: 16 * mib, LatSum: 1e6}}
		}), ModeNN, []string{ClassCheckpoint}},
		{"N-M", synth("j", 4, 3, func(r, w int) []Record {
			return []Record{{Op: OpWrite, Ino: uint64(r / 2), Size: mib, Count: 30, Bytes: 30 * mib}}
		}), ModeNM, []string{ClassBandwidth}},
	}
	for _, c := range cases {
		rep := Analyze("j", c.recs, time.Second, Thresholds{})
		if rep.Mode != c.mode || !reflect.DeepEqual(rep.Classes, c.classes) {
			t.Errorf("%s: mode %s classes %v, want %s %v", c.name, rep.Mode, rep.Classes, c.mode, c.classes)
		}
	}
	// the checkpointing job: 3 bursts of 4 × 16 MiB, one every 4 s
	ck := Analyze("j", cases[5].recs, time.Second, Thresholds{})
	if ck.Bursts != 3 || ck.BurstBytes != 64*mib || ck.BurstEvery != 4*time.Second {
		t.Fatalf("checkpoint bursts %d of %d bytes every %v, want 3 of 64 MiB every 4s", ck.Bursts, ck.BurstBytes, ck.BurstEvery)
	}
	if p := ProfileOf(ck); p.CkptBytes != 64*mib || p.CkptPeriod != 4 {
		t.Fatalf("checkpoint profile %d bytes every %v s", p.CkptBytes, p.CkptPeriod)
	}
	rep := Analyze("j", cases[0].recs, time.Second, Thresholds{})
	if rep.IORanks != 4 || rep.IONodes != 2 || rep.WriteBytes != 4*5*20*mib || rep.SeqShare != 1 || rep.Imbalance != 1 ||
		rep.Active != 5*time.Second || len(rep.Timeline) != 5 || rep.MeanRequest != mib {
		t.Fatalf("report: %+v", rep)
	}
}

func TestImbalance(t *testing.T) {
	recs := synth("j", 5, 1, func(r, w int) []Record {
		lat := int64(1e6)
		if r == 4 {
			lat = 4e6
		}
		return []Record{{Op: OpWrite, Ino: uint64(r), Size: 1 << 20, Count: 1, Bytes: 1 << 20, LatSum: lat}}
	})
	if rep := Analyze("j", recs, time.Second, Thresholds{}); rep.Imbalance != 4 {
		t.Fatalf("imbalance %v", rep.Imbalance)
	}
}

func fwdRec(server, job string, w int, ops uint64, lat time.Duration) Record {
	return Record{Window: t0.Add(time.Duration(w) * time.Second).UnixNano(), Layer: LayerFwd, Server: server,
		Op: OpRead, Size: 4096, Count: ops, Bytes: ops * 4096, LatSum: int64(ops) * int64(lat), Who: wire.Who{Job: job}}
}

func TestDetectInterference(t *testing.T) {
	var recs []Record
	for w := 0; w < 10; w++ {
		lat := 100 * time.Microsecond
		if w >= 5 {
			lat = 800 * time.Microsecond // b arrived
			recs = append(recs, fwdRec("fwd-1", "b", w, 50, time.Millisecond))
		}
		recs = append(recs, fwdRec("fwd-1", "a", w, 100, lat))
		// c on another node is unaffected
		recs = append(recs, fwdRec("fwd-2", "c", w, 100, 100*time.Microsecond))
	}
	got := DetectInterference(recs, InterferenceOptions{})
	if len(got) != 1 || got[0].Victim != "a" || got[0].Aggressor != "b" || got[0].Server != "fwd-1" ||
		got[0].Inflation < 7.9 || got[0].Inflation > 8.1 || got[0].Shared != 5 || got[0].Alone != 5 {
		t.Fatalf("interference: %+v", got)
	}
}

func TestProfile(t *testing.T) {
	recs := synth("j", 4, 5, func(r, w int) []Record {
		return []Record{{Op: OpWrite, Ino: uint64(r), Size: 1 << 20, Count: 10, Bytes: 10 << 20, Uid: 1000, Who: wire.Who{App: "ior"}}}
	})
	rep := Analyze("j", recs, time.Second, Thresholds{})
	p := ProfileOf(rep)
	if p.Key != "ior@1000" || p.Volume != 200<<20 || p.IONodes != 2 || p.Mode != ModeNN || p.NodeBW != float64(40<<20)/2 {
		t.Fatalf("profile: %+v", p)
	}
	q := p.Merge(ProfileOf(rep))
	if q.Runs != 2 || q.Volume != p.Volume {
		t.Fatalf("merge: %+v", q)
	}
	// checkpoint figures average over the runs that showed them, and a
	// run that did not keeps them
	a, b := Profile{Runs: 1, CkptBytes: 100, CkptPeriod: 60}, Profile{Runs: 1, CkptBytes: 200, CkptPeriod: 120}
	if m := a.Merge(b); m.CkptBytes != 150 || m.CkptPeriod != 90 {
		t.Fatalf("merged checkpoints %d every %v", m.CkptBytes, m.CkptPeriod)
	}
	if m := a.Merge(Profile{Runs: 1}); m.CkptBytes != 100 || m.CkptPeriod != 60 {
		t.Fatalf("a run without bursts dropped the checkpoint figures: %+v", m)
	}
	if AppKey("tag:climate", 5) != "climate" {
		t.Fatal("tag key")
	}
}

// TestBusyTime: bandwidth is measured over the part of each window the job
// was busy, so a run of 1.5 windows is not taken for two.
func TestBusyTime(t *testing.T) {
	w0 := t0.UnixNano()
	mk := func(w int64, from, to time.Duration, bytes uint64) Record {
		win := w0 + w*int64(time.Second)
		return Record{Window: win, Layer: LayerClient, Server: "client@n", Op: OpWrite, Ino: 1,
			Size: 1 << 20, Count: bytes >> 20, Bytes: bytes, First: win + int64(from), Last: win + int64(to), Who: wire.Who{Job: "j", Node: "n"}}
	}
	// 100 MB/s from 0.5 s to 2.0 s: 50 MB in window 0, 100 MB in window 1
	recs := []Record{mk(0, 500*time.Millisecond, time.Second, 50e6), mk(1, 0, time.Second, 100e6)}
	rep := Analyze("j", recs, time.Second, Thresholds{})
	if rep.Active != 1500*time.Millisecond || math.Abs(rep.BW-100e6) > 1e3 || math.Abs(rep.PeakBW-100e6) > 1e3 {
		t.Fatalf("active %v, bw %.0f, peak %.0f", rep.Active, rep.BW, rep.PeakBW)
	}
	// a 10 ms blip counts as a quarter window at most for the peak
	rep = Analyze("j", []Record{mk(0, 0, 10*time.Millisecond, 1e6)}, time.Second, Thresholds{})
	if rep.PeakBW > 4e6+1 {
		t.Fatalf("blip peak %.0f", rep.PeakBW)
	}
}

// TestQueued: the time a job's requests waited in server queues is summed
// per server and in all; another job's waits do not count.
func TestQueued(t *testing.T) {
	a1, a2, b := fwdRec("fwd-1", "a", 0, 10, time.Millisecond), fwdRec("fwd-2", "a", 1, 10, time.Millisecond), fwdRec("fwd-1", "b", 0, 10, time.Millisecond)
	a1.Wait, a2.Wait, b.Wait = int64(2*time.Second), int64(500*time.Millisecond), int64(time.Hour)
	a1.QoSWait, b.QoSWait = int64(time.Second), int64(time.Hour)
	rep := Analyze("a", []Record{a1, a2, b}, time.Second, Thresholds{})
	if rep.Queued != 2500*time.Millisecond || len(rep.Servers) != 2 {
		t.Fatalf("queued %v over servers %+v, want 2.5 s over two", rep.Queued, rep.Servers)
	}
	if rep.QoSWaited != time.Second {
		t.Fatalf("waited %v for QoS, want 1 s", rep.QoSWaited)
	}
}

// TestInputs: a job's inputs are the files it read and did not write, in
// the order of its first read of each; a profile counts the runs in a row
// that read mostly the same files.
func TestInputs(t *testing.T) {
	w := t0.UnixNano()
	rec := func(op string, ino uint64, first time.Duration) Record {
		return Record{Window: w, Layer: LayerClient, Server: "client@n", Op: op, Ino: ino, Size: 4096, Count: 1, Bytes: 4096,
			First: w + int64(first), Last: w + int64(first), Who: wire.Who{Job: "j", App: "tag:periodic", Node: "n"}}
	}
	recs := []Record{rec(OpRead, 3, 10), rec(OpRead, 1, 20), rec(OpRead, 3, 30), rec(OpRead, 2, 40),
		rec(OpWrite, 4, 50), rec(OpRead, 4, 60), rec(OpRead, 5, 5), rec(OpWrite, 5, 70)}
	rep := Analyze("j", recs, time.Second, Thresholds{})
	if fmt.Sprint(rep.Inputs) != "[3 1 2]" {
		t.Fatalf("inputs %v, want [3 1 2] (4 and 5 were written)", rep.Inputs)
	}
	p := ProfileOf(rep)
	if p.InputRuns != 1 || p.Merge(ProfileOf(rep)).InputRuns != 2 {
		t.Fatalf("input runs %d, then %d after the same inputs again", p.InputRuns, p.Merge(ProfileOf(rep)).InputRuns)
	}
	other := ProfileOf(Analyze("j", []Record{rec(OpRead, 9, 10)}, time.Second, Thresholds{}))
	if q := p.Merge(ProfileOf(rep)).Merge(other); q.InputRuns != 1 || fmt.Sprint(q.Inputs) != "[9]" {
		t.Fatalf("after a run reading other files: %d runs, inputs %v", q.InputRuns, q.Inputs)
	}
}
