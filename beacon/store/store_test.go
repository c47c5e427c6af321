package store

import (
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestStoreQueryTrim(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Retention: time.Hour, MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all []beacon.Record
	for w := 0; w < 10; w++ {
		for _, job := range []string{"a", "b"} {
			all = append(all, beacon.Record{Window: t0.Add(time.Duration(w) * time.Second).UnixNano(), Layer: beacon.LayerFwd,
				Server: "fwd-1", Op: beacon.OpWrite, Ino: uint64(w), Count: 1, Bytes: 10, Who: wire.Who{Job: job, Node: "n" + job}})
		}
	}
	if err := s.Put(beacon.Encode(all)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Query(beacon.Filter{Job: "a", From: t0.Add(2 * time.Second), To: t0.Add(5 * time.Second)})
	if err != nil || len(got) != 3 {
		t.Fatalf("by job and time: %d %v", len(got), err)
	}
	for _, r := range got {
		if r.Job != "a" {
			t.Fatalf("wrong job %q", r.Job)
		}
	}
	if got, _ := s.Query(beacon.Filter{Node: "nb"}); len(got) != 10 {
		t.Fatalf("by node: %d", len(got))
	}
	if got, _ := s.Query(beacon.Filter{Ino: 4}); len(got) != 2 {
		t.Fatalf("by file: %d", len(got))
	}
	if js := s.Jobs(); len(js) != 2 || js[0].Ops != 10 || js[0].Bytes != 100 {
		t.Fatalf("jobs: %+v", js)
	}
	// retention: an hour after window 5, windows 0-4 go
	if n, err := s.Trim(t0.Add(time.Hour + 5*time.Second)); err != nil || n != 5 {
		t.Fatalf("trim: %d %v", n, err)
	}
	if got, _ := s.Query(beacon.Filter{Job: "b"}); len(got) != 5 {
		t.Fatalf("after trim: %d", len(got))
	}
	// size bound
	s.maxBytes = s.Bytes() / 2
	if _, err := s.Trim(t0); err != nil {
		t.Fatal(err)
	}
	if s.Bytes() > s.maxBytes {
		t.Fatalf("store holds %d > %d", s.Bytes(), s.maxBytes)
	}
}

// job builds records of a synthetic job: fn(rank, window) → records.
