package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/cluster"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/workload"
)

// localMachine describes the local cluster in state directory dir for the
// simulator (`sluice sim day --machine local --dir DIR`): the forwarding
// daemons' and data servers' caps from the flags it was started with
// (cluster.json), the data servers' measured bandwidth from the metadata
// service's registry, the fixed mapping's ratio from the metadata
// daemon's flags, the metadata latency from a probe of probeFiles files
// through its mount (metaLatency; 0: none). Data servers of the fastest
// tier it has are the storage (a local cluster's jobs write there), but
// a mem tier in front of another tier is the machine's mem tier, with
// the metadata service's thresholds and mode (--tier-free, --tiering),
// and the tier behind it the storage.
func localMachine(dir string, probeFiles int) (*machine.Machine, error) {
	if dir == "" {
		return nil, fmt.Errorf("--machine local needs --dir, the state directory of a running local cluster (sluice cluster up --dir)")
	}
	c, err := cluster.Load(dir)
	if err != nil {
		return nil, err
	}
	secret, err := readSecret(c.SecretFile())
	if err != nil {
		return nil, err
	}
	mc := rpc.NewClient(c.MetaAddr, secret, rpc.ClientOptions{Timeout: 10 * time.Second, Name: "metadata service " + c.MetaAddr})
	defer mc.Close()
	servers, err := listServers(mc)
	if err != nil {
		return nil, fmt.Errorf("the cluster in %s: %w", dir, err)
	}
	measured := map[string]float64{}
	for _, s := range servers {
		if s.Role == "data" && s.Alive {
			measured[s.Addr] = float64(s.MaxPerf)
		}
	}
	var l machine.Local
	tiers := map[string][]machine.LocalServer{}
	for _, d := range c.Daemons {
		switch {
		case d.Name == "meta":
			if r, ok := flagValue(d.Args, "--fwd-ratio"); ok {
				if l.FFMRatio, err = strconv.Atoi(r); err != nil {
					return nil, fmt.Errorf("meta --fwd-ratio %q: %w", r, err)
				}
			}
			if v, ok := flagValue(d.Args, "--tier-free"); ok && v != "" {
				th, err := parseThresholds(v)
				if err != nil {
					return nil, fmt.Errorf("meta --tier-free %q: %w", v, err)
				}
				l.MemThresholds = [3]float64{float64(th.StallWrite), float64(th.ForcedOut), float64(th.NormalOut)}
			}
			if v, _ := flagValue(d.Args, "--tiering"); v == "manual" {
				l.MemManual = true
			}
		case strings.HasPrefix(d.Name, "fwd"):
			l.Fwds = append(l.Fwds, machine.LocalServer{Name: d.Name, BW: flagFloat(d.Args, "--max-mbps") * 1e6, Ops: flagFloat(d.Args, "--max-iops")})
		case len(d.Args) > 0 && d.Args[0] == "data":
			tier, _ := flagValue(d.Args, "--tier")
			addr, _ := flagValue(d.Args, "--listen")
			tiers[tier] = append(tiers[tier], machine.LocalServer{Name: d.Name, BW: flagFloat(d.Args, "--max-mbps") * 1e6,
				Ops: flagFloat(d.Args, "--max-iops"), Measured: measured[addr], Capacity: flagFloat(d.Args, "--capacity")})
		}
	}
	// jobs write to the fastest tier; a mem tier in front of another is
	// the machine's mem tier, the other its storage
	var present []string
	for _, t := range []string{"mem", "ssd", "hdd", "pfs"} {
		if len(tiers[t]) > 0 {
			present = append(present, t)
		}
	}
	if len(present) > 0 {
		l.Data = tiers[present[0]]
	}
	if len(present) > 1 && present[0] == "mem" {
		l.Mem, l.Data = tiers["mem"], tiers[present[1]]
	}
	if l.FFMRatio == 0 {
		l.FFMRatio = 4 // sluice meta's default
	}
	if probeFiles > 0 {
		if l.MetaLatency, err = metaLatency(c.Mount, probeFiles); err != nil {
			return nil, err
		}
	}
	return machine.FromLocal(l)
}

// metaLatency measures what one metadata operation takes a process
// through the cluster's mount: one rank of the workload's metadata storm
// (the live jobs' metadata behaviour: create, stat, list and remove
// files of its own, one call at a time) in a directory of its own,
// seconds per operation.
func metaLatency(mount string, files int) (float64, error) {
	dir, err := os.MkdirTemp(mount, ".sluice-sim-probe-")
	if err != nil {
		return 0, fmt.Errorf("the metadata probe through the mount %s (--meta-probe 0: none): %w", mount, err)
	}
	defer os.RemoveAll(dir)
	r, err := workload.Run(workload.Meta, workload.Params{Dir: dir, Ops: files})
	if err != nil || r.Ops == 0 {
		return 0, fmt.Errorf("the metadata probe in %s: %d operations: %v", dir, r.Ops, err)
	}
	return r.IOTime.Seconds() / float64(r.Ops), nil
}

// flagValue finds flag name in a daemon's arguments, as "--name value" or
// "--name=value".
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func flagFloat(args []string, name string) float64 {
	v, ok := flagValue(args, name)
	if !ok {
		return 0
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f
}
