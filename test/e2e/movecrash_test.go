package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// cli runs the sluice command line through the helper shell (never forked
// from the test process, which may hold mount files open while a daemon is
// down: see restart).
func (c *cluster) cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	q := []string{fmt.Sprintf("%q", sluiceBin)}
	for _, a := range append(args[:1:1], append([]string{"--dir", c.dir}, args[1:]...)...) {
		q = append(q, fmt.Sprintf("%q", a))
	}
	return c.helper.run(strings.Join(q, " "))
}

// serverID is the id of the (first) data server of tier.
func (c *cluster) serverID(t *testing.T, tier string) string {
	t.Helper()
	out, err := c.sluice("cluster", "status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(\d+)\s+data\s+` + tier + `\s`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s data server in\n%s", tier, out)
	}
	return m[1]
}

// logCount counts the lines of daemon name's log that contain every one of
// subs.
func (c *cluster) logCount(name string, subs ...string) int {
	b, _ := os.ReadFile(filepath.Join(c.dir, "logs", name+".log"))
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			n++
		}
	}
	return n
}

// TestMigrationCrashPoints: a file's first chunk is held at each step of
// its migration from the mem to the ssd tier (fault points: sessions begun
// at the source, half the chunk copied, source stopped with the written
// ranges copied again, location committed before the servers hear of it),
// writes and fsyncs land in it meanwhile, and then one daemon is killed
// with SIGKILL and restarted: the source data server, the destination
// (the one copying), the metadata daemon, or the forwarding daemons. In
// every case every fsynced byte is in the file afterwards (a write that
// failed may or may not be), no chunk points at a half copy, and the file
// migrates to ssd and back to mem cleanly.
func TestMigrationCrashPoints(t *testing.T) {
	c := startCluster(t, "--mem", "256M", "--meta-flags", "--tiering manual")
	ssd := c.serverID(t, "ssd")
	points := []struct {
		name string
		meta bool // held in the metadata service (else at the destination)
	}{{"move-begun", false}, {"move-copying", false}, {"move-stopped", false}, {"move-committed", true}}
	victims := map[string][]string{"source": {"data-mem"}, "destination": {"data-ssd"}, "meta": {"meta"}, "fwd": {"fwd-0", "fwd-1"}}
	seed := 0
	for _, pt := range points {
		for _, victim := range []string{"source", "destination", "meta", "fwd"} {
			seed++
			t.Run(pt.name+"/"+victim, func(t *testing.T) {
				const size = 12 << 20 // three chunks; the first is held
				p := c.path(fmt.Sprintf("crash-%02d", seed))
				model := pattern(1000+seed, size)
				alt := make([]byte, size) // bytes of writes that failed: either may be there
				unsure := make([]bool, size)
				mustWrite(t, p, model)
				holder, where := "data-ssd", []string{"--server", ssd}
				if pt.meta {
					holder, where = "meta", []string{"--meta-service"}
				}
				paused := c.logCount(holder, "paused at fault point", "point="+pt.name)
				if out, err := c.cli(t, append(append([]string{"fault"}, where...), "--pause", pt.name)...); err != nil {
					t.Fatalf("arming %s: %v %s", pt.name, err, out)
				}
				if out, err := c.cli(t, "migrate", "--no-wait", "--tier", "ssd", p); err != nil {
					t.Fatalf("migrate: %v %s", err, out)
				}
				eventually(t, 20*time.Second, func() bool {
					return c.logCount(holder, "paused at fault point", "point="+pt.name) > paused
				}, "the migration to reach "+pt.name)

				// writes and fsyncs into the held chunk (they wait while
				// the source is stopped)
				var mu sync.Mutex // guards model, alt, unsure, acked, failed
				var acked, failed int
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 3; i++ {
						off, b := i*1300<<10+777, pattern(5000+seed*10+i, 64<<10)
						err := func() error {
							f, err := os.OpenFile(p, os.O_WRONLY, 0)
							if err != nil {
								return err
							}
							defer f.Close()
							if _, err := f.WriteAt(b, int64(off)); err != nil {
								return err
							}
							return f.Sync()
						}()
						mu.Lock()
						if err == nil {
							acked++
							copy(model[off:], b)
						} else {
							failed++
							copy(alt[off:], b)
							for j := range b {
								unsure[off+j] = true
							}
						}
						mu.Unlock()
					}
				}()
				time.Sleep(300 * time.Millisecond)
				for _, d := range victims[victim] {
					c.kill9(d)
				}
				for _, d := range victims[victim] {
					c.restart(d)
				}
				if holder != victims[victim][0] { // a restarted holder forgot its pause point
					if out, err := c.cli(t, append(append([]string{"fault"}, where...), "--resume", pt.name)...); err != nil {
						t.Fatalf("releasing %s: %v %s", pt.name, err, out)
					}
				}
				done := make(chan struct{})
				go func() { wg.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(90 * time.Second):
					t.Fatal("writes into the migrating chunk did not end within 90 s")
				}
				check := func(when string) {
					t.Helper()
					var got []byte
					var err error
					eventually(t, 30*time.Second, func() bool {
						got, err = os.ReadFile(p)
						return err == nil
					}, "the file to read back "+when)
					mu.Lock()
					defer mu.Unlock()
					if len(got) != size {
						t.Fatalf("%s: %d bytes, want %d", when, len(got), size)
					}
					for i := range got {
						if got[i] != model[i] && !(unsure[i] && got[i] == alt[i]) {
							out, _ := c.sluice("file", "stat", p)
							t.Fatalf("%s: byte %d (chunk %d) differs from what was written and fsynced\n%s", when, i, i>>22, out)
						}
					}
				}
				check("after the crash")
				t.Logf("%d writes fsynced during the migration, %d failed; chunks on %v after the crash", acked, failed, c.chunkTiers(t, p))
				for _, tier := range []string{"ssd", "mem"} {
					eventually(t, 60*time.Second, func() bool {
						out, err := c.cli(t, "migrate", "--tier", tier, p)
						if err != nil && !strings.Contains(out, "migrating already") {
							t.Logf("migrate to %s: %v %s", tier, err, out)
						}
						return err == nil
					}, "a clean migration to "+tier+" after the crash")
					check("after migrating to " + tier)
					for _, got := range c.chunkTiers(t, p) {
						if got != tier {
							t.Fatalf("chunks on %v after migrating to %s", c.chunkTiers(t, p), tier)
						}
					}
				}
				// every migration of the file ended: no intent is left
				// waiting for a server's acknowledgement
				eventually(t, 30*time.Second, func() bool {
					out, _ := c.sluice("file", "stat", p)
					return strings.Contains(out, "migration:   none") && !strings.Contains(out, " → ")
				}, "the file's migrations to end")
			})
		}
	}
}
