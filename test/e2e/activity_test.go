package e2e

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestFileActivity: the metadata service keeps each file's open/close
// history (the input of file coolness) and `sluice file stat` shows it with
// the coolness the tiering policy gives it.
func TestFileActivity(t *testing.T) {
	c := startCluster(t)
	p := c.path("act")
	mustWrite(t, p, []byte("x"))
	for i := 0; i < 3; i++ {
		time.Sleep(150 * time.Millisecond)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		f.Close()
	}
	time.Sleep(100 * time.Millisecond) // the release reaches the service after close returns
	out, err := c.sluice("file", "stat", p)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\d+) open handles; opened (\d+) times`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no activity in:\n%s", out)
	}
	if open, _ := strconv.Atoi(m[1]); open != 0 {
		t.Fatalf("%d handles open after every close:\n%s", open, out)
	}
	if n, _ := strconv.Atoi(m[2]); n < 3 {
		t.Fatalf("opened %d times, want at least the 3 reopens:\n%s", n, out)
	}
	mt := regexp.MustCompile(`mean open→close (\S+), close→open (\S+)`).FindStringSubmatch(out)
	if mt == nil {
		t.Fatalf("no means in:\n%s", out)
	}
	toc, err1 := time.ParseDuration(mt[1])
	tco, err2 := time.ParseDuration(mt[2])
	if err1 != nil || err2 != nil || toc < 30*time.Millisecond || tco < 100*time.Millisecond || tco > 10*time.Second {
		t.Fatalf("means open→close %q, close→open %q: want about 50 ms and 150 ms:\n%s", mt[1], mt[2], out)
	}
	if !regexp.MustCompile(`coolness:\s+[0-9.e+]+ for normal out`).MatchString(out) {
		t.Fatalf("no coolness for a closed file:\n%s", out)
	}
	// the forwarding daemon reports the write as the last access
	eventually(t, 5*time.Second, func() bool {
		out, _ := c.sluice("file", "stat", p)
		return regexp.MustCompile(`last read or write \S+ ago`).MatchString(out)
	}, "the last access to be reported")
}
