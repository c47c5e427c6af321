package failslow

import (
	"math/rand"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

func TestDetect(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var recs []beacon.Record
	for w := 0; w < 10; w++ {
		for _, s := range []string{"fwd-1", "fwd-2", "fwd-3"} {
			lat := time.Duration(90+rng.Intn(20)) * time.Microsecond
			if s == "fwd-2" && w >= 4 {
				lat *= 10
			}
			recs = append(recs, fwdRec(s, "j", w, 100, lat))
		}
	}
	got := Detect(recs, Options{})
	if len(got) != 1 || got[0].Server != "fwd-2" || got[0].Windows != 6 || got[0].Ratio < 7 ||
		got[0].Since != t0.Add(4*time.Second).UnixNano() {
		t.Fatalf("fail-slow: %+v", got)
	}
	// a busier node is not slow for being busier
	recs = nil
	for w := 0; w < 10; w++ {
		recs = append(recs, fwdRec("fwd-1", "j", w, 1000, time.Millisecond), fwdRec("fwd-2", "j", w, 100, 100*time.Microsecond))
	}
	if got := Detect(recs, Options{}); len(got) != 0 {
		t.Fatalf("loaded node flagged: %+v", got)
	}
}

var t0 = time.Unix(1_800_000_000, 0)

func fwdRec(server, job string, w int, ops uint64, lat time.Duration) beacon.Record {
	return beacon.Record{Window: t0.Add(time.Duration(w) * time.Second).UnixNano(), Layer: beacon.LayerFwd, Server: server, Op: beacon.OpRead, Size: 4096, Count: ops, Bytes: ops * 4096, LatSum: int64(ops) * int64(lat), Who: wire.Who{Job: job}}
}
