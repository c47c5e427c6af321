package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
)

// memServers returns the mem-tier data servers `sluice cluster status` lists, by
// id, with the max_perf each shows (MB/s; 0: none).
func (c *cluster) memServers(t *testing.T) map[string]float64 {
	t.Helper()
	out, err := c.sluice("cluster", "status")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\s+data\s+mem\s.*?\s(\d+(?:\.\d+)?)MB/s\s`).FindAllStringSubmatch(out, -1) {
		got[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return got
}

// chunkServers counts the chunks of the files under dir by the server
// `sluice file stat` says holds them.
func (c *cluster) chunkServers(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	got := map[string]int{}
	for _, f := range files {
		out, err := c.sluice("file", "stat", f)
		if err != nil {
			t.Fatalf("stat %s: %v %s", f, err, out)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s+chunk \d+\s+tier \S+\s+servers \[(\d+)\]`).FindAllStringSubmatch(out, -1) {
			got[m[1]]++
		}
	}
	return got
}

// TestResourcePools: data servers measure their own max_perf (a write
// probe through their emulated device); an N-N job spreads its chunks
// by it under the perf placement; a directory bound to a pool and a job
// bound to one put their data on the pool's servers only; `sluice pool
// list` shows them.
func TestResourcePools(t *testing.T) {
	c := startCluster(t, "--mem-servers", "3", "--mem", "512M", "--ssd", "0", "--data-max-mbps", "40,20,10")
	perf := c.memServers(t)
	if len(perf) != 3 {
		t.Fatalf("want 3 mem servers with a max_perf, got %v", perf)
	}
	var fast, slow []string // ids by measured max_perf
	for id, mb := range perf {
		switch {
		case mb >= 34 && mb <= 48:
			fast = append(fast, id)
		case mb >= 8 && mb <= 13:
			slow = append(slow, id)
		case mb < 17 || mb > 25:
			t.Fatalf("server %s measured %v MB/s, caps are 40, 20, 10", id, mb)
		}
	}
	if len(fast) != 1 || len(slow) != 1 {
		t.Fatalf("measured %v", perf)
	}
	// an N-N job: the 40 MB/s server gets the most chunks, the 10 MB/s
	// the fewest
	c.workload(t, "nn", "--kind", "ckpt", "--bursts", "1", "--ranks", "6", "--size", "16M", c.path("nn"))
	got := c.chunkServers(t, c.path("nn"))
	t.Logf("chunks by server: %v (max_perf %v)", got, perf)
	for id := range perf {
		if id != fast[0] && got[id] >= got[fast[0]] || id != slow[0] && got[id] <= got[slow[0]] {
			t.Fatalf("chunks by server %v do not follow max_perf %v", got, perf)
		}
	}

	// a pool of the two slower servers, the slowest at the pool's own 30
	var members []string
	for id := range perf {
		if id != fast[0] {
			members = append(members, id)
		}
	}
	if out, err := c.sluice("pool", "create", "small", "--servers", strings.Join(members, ","), "--perf", slow[0]+"=30"); err != nil {
		t.Fatalf("pool create: %v %s", err, out)
	}
	if out, err := c.sluice("pool", "create", "bad", "--servers", "9999"); err == nil {
		t.Fatalf("a pool of an unknown server was created: %s", out)
	}
	os.MkdirAll(c.path("bound/sub"), 0o755)
	if out, err := c.sluice("pool", "bind", c.path("bound"), "small"); err != nil {
		t.Fatalf("pool bind: %v %s", err, out)
	}
	c.workload(t, "dirjob", "--kind", "ckpt", "--bursts", "1", "--ranks", "4", "--size", "8M", c.path("bound/sub"))
	if got := c.chunkServers(t, c.path("bound/sub")); got[fast[0]] != 0 || len(got) == 0 {
		t.Fatalf("the bound directory's chunks went to %v (the pool is %v)", got, members)
	}
	// a job bound to the pool, writing outside the directory
	if out, err := c.sluice("pool", "bind", "--job", "777", "small"); err != nil {
		t.Fatalf("pool bind --job: %v %s", err, out)
	}
	c.workload(t, "777", "--kind", "ckpt", "--bursts", "1", "--ranks", "4", "--size", "8M", c.path("jobout"))
	if got := c.chunkServers(t, c.path("jobout")); got[fast[0]] != 0 || len(got) == 0 {
		t.Fatalf("job 777's chunks went to %v (the pool is %v)", got, members)
	}
	if out, err := c.sluice("pool", "rm", "small"); err == nil || !strings.Contains(out, "bound") {
		t.Fatalf("a bound pool was removed: %v %s", err, out)
	}
	out, err := c.sluice("pool", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var l api.PoolList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(l.Pools) != 1 || l.Pools[0].Name != "small" || len(l.DirPools) != 1 || l.Jobs["777"] != "small" || l.Placement != "perf" {
		t.Fatalf("pool list: %+v", l)
	}
	if out, err := c.sluice("pool", "list"); err != nil || !strings.Contains(out, "pool small: 2 servers") || !strings.Contains(out, "job 777 → small") {
		t.Fatalf("pool list: %v\n%s", err, out)
	}
}

// TestSlowedServerMaxPerf: a data server whose device turns slow while it
// is busy is never idle long enough to be probed again; its max_perf
// falls to the rate it sustains once it has been saturated for 10 s
// (data/perf.go), so placement stops counting on its old speed. Under
// the earlier rule (the higher of probe and sustained rate) it kept its
// probe's figure.
func TestSlowedServerMaxPerf(t *testing.T) {
	c := startCluster(t, "--mem-servers", "2", "--mem", "1G", "--ssd", "0", "--data-max-mbps", "40")
	perf := c.memServers(t)
	var slowID string
	for id, mb := range perf {
		if mb < 30 || mb > 48 {
			t.Fatalf("server %s probed %v MB/s, capped at 40", id, mb)
		}
		slowID = max(slowID, id)
	}
	if len(perf) != 2 {
		t.Fatalf("want 2 mem servers, got %v", perf)
	}
	if out, err := c.sluice("cluster", "fault", "--server", slowID, "--slow", "4"); err != nil {
		t.Fatalf("fault: %v %s", err, out)
	}
	start := time.Now()
	for i := 0; ; i++ {
		c.workload(t, "load", "--kind", "nn", "--ranks", "4", "--size", "16M", c.path(fmt.Sprintf("load%d", i)))
		perf = c.memServers(t)
		if perf[slowID] <= 14 {
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("the slowed server (10 MB/s) still reports %v MB/s after %v", perf[slowID], time.Since(start).Round(time.Second))
		}
	}
	t.Logf("max_perf %v MB/s after %v (server %s slowed to 10)", perf, time.Since(start).Round(time.Second), slowID)
	for id, mb := range perf {
		if id != slowID && mb < 30 {
			t.Fatalf("the healthy server %s fell to %v MB/s", id, mb)
		}
		if id == slowID && mb < 7 {
			t.Fatalf("the slowed server reports %v MB/s, below its 10", mb)
		}
	}
}
