package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimLocalMachine: `sluice sim day --machine local` describes a running
// cluster as the simulator's machine — its forwarding nodes' caps, its
// fixed mapping's ratio, its two mem data servers at their caps as the
// mem tier in front of its ssd data server (their budgets, the
// metadata service's thresholds and tiering mode), the metadata latency
// its probe measured through the mount (and left nothing there) — and
// the simulator runs a job log on it.
func TestSimLocalMachine(t *testing.T) {
	c := startCluster(t, "--mem-servers", "2", "--fwds", "3", "--fwd-max-mbps", "40", "--fwd-max-iops", "800",
		"--data-max-mbps", "150", "--ssd-max-mbps", "30", "--meta-flags", "--fwd-ratio 2 --tier-free 4M,12M,24M --tiering manual")
	out, err := c.sluice("sim", "day", "--machine", "local", "--print-machine")
	if err != nil {
		t.Fatalf("sim --print-machine: %v %s", err, out)
	}
	var m struct {
		Name         string  `json:"name"`
		ComputeNodes int     `json:"compute_nodes"`
		FwdNodes     int     `json:"fwd_nodes"`
		FwdBW        float64 `json:"fwd_bw"`
		FwdOps       float64 `json:"fwd_ops"`
		FFMRatio     int     `json:"ffm_ratio"`
		MetaLatency  float64 `json:"meta_latency"`
		Storage      struct {
			Groups    int       `json:"groups"`
			TargetBWs []float64 `json:"target_bws"`
		} `json:"storage"`
		MemTier *struct {
			Capacity   float64    `json:"capacity"`
			BW         float64    `json:"bw"`
			Thresholds [3]float64 `json:"thresholds"`
			Manual     bool       `json:"manual"`
		} `json:"mem_tier"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if m.Name != "local" || m.FwdNodes != 3 || m.FwdBW != 40e6 || m.FwdOps != 800 || m.FFMRatio != 2 || m.ComputeNodes != 6 {
		t.Fatalf("forwarding layer of the local machine: %+v", m)
	}
	if m.Storage.Groups != 1 || len(m.Storage.TargetBWs) != 1 || m.Storage.TargetBWs[0] <= 0 || m.Storage.TargetBWs[0] > 30e6 {
		t.Fatalf("storage: %+v (want the ssd data server, capped at 30 MB/s)", m.Storage)
	}
	if mt := m.MemTier; mt == nil || mt.Capacity != 2*512<<20 || mt.BW <= 0 || mt.BW > 2*150e6 || !mt.Manual ||
		mt.Thresholds != [3]float64{4 << 20, 12 << 20, 24 << 20} {
		t.Fatalf("mem tier %+v: want the two 512 MiB mem data servers at 150 MB/s each, manual, thresholds 4M,12M,24M", mt)
	}
	if m.MetaLatency <= 0 || m.MetaLatency > 0.05 {
		t.Fatalf("meta_latency %g s: want the probe's figure, 50–150 µs on this VM's loopback", m.MetaLatency)
	}
	if left, _ := filepath.Glob(filepath.Join(c.mnt, ".sluice-sim-probe-*")); len(left) > 0 {
		t.Fatalf("the metadata probe left %v", left)
	}
	t.Logf("meta_latency %.0f µs", m.MetaLatency*1e6)
	if out, err = c.sluice("sim", "day", "--machine", "local", "--meta-probe", "0", "--print-machine"); err != nil || strings.Contains(out, "meta_latency") {
		t.Fatalf("--meta-probe 0: %v %s", err, out)
	}
	dir := t.TempDir()
	swf, _ := filepath.Abs("../../sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz")
	out, err = c.sluice("sim", "day", "--machine", "local", "--swf", swf, "--for", "2h", "--quiet", "--out", dir)
	if err != nil {
		t.Fatalf("sim on the local machine: %v %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil || !strings.Contains(string(b), `"local"`) {
		t.Fatalf("summary: %s %v\n%s", b, err, out)
	}
	t.Logf("%s", out)
}
