package store

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// TestKilledKeepsRecords: a process that stored records and dies
// without closing the store (as a monitor killed -9 does) loses none of
// them. Pebble's write-ahead log, written without a sync, stays in
// memory until a block of it fills: a light load was lost whole.
func TestKilledKeepsRecords(t *testing.T) {
	if dir := os.Getenv("SLUICE_STORE_CHILD"); dir != "" {
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixNano()
		for i, job := range []string{"a", "b", "c"} {
			if err := s.PutRecords([]beacon.Record{{Window: now + int64(i), Server: "fwd-1", Who: wire.Who{Job: job}, Count: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutDecision("a", time.Now(), []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
		os.Exit(0) // no Close
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledKeepsRecords$")
	cmd.Env = append(os.Environ(), "SLUICE_STORE_CHILD="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if jobs := s.Jobs(); len(jobs) != 3 {
		t.Fatalf("after the process died: jobs %+v, want a, b and c", jobs)
	}
	if recs, err := s.Query(beacon.Filter{Job: "b"}); err != nil || len(recs) != 1 {
		t.Fatalf("job b's records after the process died: %d (%v)", len(recs), err)
	}
	if ds, err := s.Decisions("a"); err != nil || len(ds) != 1 {
		t.Fatalf("job a's decisions after the process died: %d (%v)", len(ds), err)
	}
}
