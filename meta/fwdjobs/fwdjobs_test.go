package fwdjobs

import (
	"testing"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestJobsKept: the jobs saved are what a reopened engine lists, less
// those deleted, on every engine.
func TestJobsKept(t *testing.T) {
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		j := Open(reopen())
		for _, id := range []string{"7", "8", "9"} {
			if err := j.SaveJob(id, []byte(`{"id":"`+id+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.DeleteJob("8"); err != nil {
			t.Fatal(err)
		}
		if err := j.SaveJob("9", []byte(`{"v":2}`)); err != nil {
			t.Fatal(err)
		}
		if t.Name() != "TestJobsKept/mem" {
			j = Open(reopen())
		}
		got, err := j.Jobs()
		if err != nil || len(got) != 2 || string(got["7"]) != `{"id":"7"}` || string(got["9"]) != `{"v":2}` {
			t.Fatalf("jobs %q (%v), want 7 and 9's last", got, err)
		}
	})
}
