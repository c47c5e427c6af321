package swf

import (
	"strings"
	"testing"
)

const sample = `; Version: 2.2
; Computer: test
    1        0     -1   1451  128     -1    -1   -1     -1    -1 -1   1   1  -1 -1 -1 -1 -1
    2     1460     30   3726   64     -1    -1   64   4000    -1  1   2   1   7  1 -1 -1 -1
    3     5198     -1     -1  128     -1    -1   -1     -1    -1 -1   1   1  -1 -1 -1 -1 -1
`

func TestParse(t *testing.T) {
	jobs, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2 (the one without a run time skipped)", len(jobs))
	}
	j := jobs[1]
	if j.ID != 2 || j.Submit != 1460 || j.Start() != 1490 || j.Run != 3726 || j.Procs != 64 || j.User != 2 || j.App != 7 || j.ReqTime != 4000 {
		t.Fatalf("job 2: %+v", j)
	}
	if _, err := Parse(strings.NewReader("1 2 3\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("short line: %v", err)
	}
}

// TestRealLog reads the shared NASA iPSC log when it is there.
func TestRealLog(t *testing.T) {
	jobs, err := ParseFile("../testdata/NASA-iPSC-1993-3.1-cln.swf.gz")
	if err != nil {
		t.Skip("shared log not found:", err)
	}
	if len(jobs) < 18000 {
		t.Fatalf("%d jobs", len(jobs))
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].Submit < jobs[i-1].Submit {
			t.Fatalf("job %d submitted before its predecessor", jobs[i].ID)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("; only a comment\n"))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, err := Parse(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.Run <= 0 || j.Procs <= 0 || j.Submit < 0 {
				t.Fatalf("kept a job it should skip: %+v", j)
			}
		}
	})
}
