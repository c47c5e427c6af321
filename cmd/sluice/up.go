package main

import (
	"fmt"
	_ "net/http/pprof"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/cluster"
	"github.com/sluice-hpc/sluice/internal/size"
)

var upCmd = spec{use: "up --dir STATE --mount MNT", short: "start a local cluster on this host and mount it",
	example: "sluice cluster up --dir /tmp/sl --mount /tmp/sl/mnt --mem 1G --ssd 4G", setup: setupUp}

func setupUp(fs *pflag.FlagSet) func([]string) error {
	var o cluster.Options
	fs.StringVar(&o.Dir, "dir", "", "state directory")
	fs.StringVar(&o.Mount, "mount", "", "mount point")
	mem := fs.String("mem", "2G", "memory tier budget")
	ssd := fs.String("ssd", "8G", "ssd tier budget (0 disables the tier)")
	hdd := fs.String("hdd", "0", "hdd tier budget (0: no hdd tier)")
	fs.StringVar(&o.PFS, "pfs", "", "PFS directory for the pfs tier (default STATE/pfs; none: no pfs tier)")
	fs.IntVar(&o.Fwds, "fwds", 2, "forwarding daemons")
	fs.IntVar(&o.MemServers, "mem-servers", 1, "mem-tier data servers, each with the --mem budget")
	fs.IntVar(&o.MemReplicas, "mem-replicas", 1, "copies of each mem-tier chunk (2: on two mem servers, each its own failure domain)")
	fs.StringVar(&o.Engine, "engine", "pebble", "metadata engine: pebble, bolt, mem, or etcd (three etcd members of the cluster's own; needs etcd on PATH)")
	fs.IntVar(&o.MetaStandbys, "meta-standbys", 0, "metadata daemons standing by to take over from the active one (--engine etcd)")
	fs.IntVar(&o.Monitors, "monitor-daemons", 0, "monitor daemons keeping Beacon's records, each job's on one (0: the metadata daemon keeps them)")
	fs.IntVar(&o.Managers, "manager-daemons", 0, "manager daemons running the forwarding manager apart from the metadata daemons, one active (needs --engine etcd; 0: the active metadata daemon runs it)")
	fs.Float64Var(&o.FwdMBps, "fwd-max-mbps", 0, "bandwidth cap of each forwarding daemon, MB/s (also DFRA's B_f)")
	fs.Float64Var(&o.FwdIOPS, "fwd-max-iops", 0, "request rate cap of each forwarding daemon")
	dataMBps := fs.String("data-max-mbps", "0", "bandwidth cap of each mem-tier data server, MB/s; or one per server, in order: 50,30,50,...")
	fs.Float64Var(&o.DataIOPS, "data-max-iops", 0, "IOPS cap of each mem-tier data server")
	fs.Float64Var(&o.SSDMBps, "ssd-max-mbps", 0, "bandwidth cap of the ssd-tier data server, MB/s")
	fs.Float64Var(&o.HDDMBps, "hdd-max-mbps", 0, "bandwidth cap of the hdd-tier data server, MB/s")
	fs.Float64Var(&o.PFSMBps, "pfs-max-mbps", 0, "bandwidth cap of the pfs-tier data server, MB/s (an emulated disk-based PFS)")
	fs.DurationVar(&o.DeviceBurst, "device-burst", 0, "how much of its cap an idle emulated device serves at once (0: 50ms)")
	fs.DurationVar(&o.MemKeepFreed, "mem-keep-freed", 0, "how long the mem tier keeps deleted chunks' pages, within its size, for new chunks (0: 10m; <0: none)")
	metaFlags := fs.StringArray("meta-flags", nil, "extra flags of the metadata daemon, e.g. \"--fwd-ratio 8 --dfra-vmin 64M\" (repeatable)")
	dataFlags := fs.StringArray("data-flags", nil, "extra flags of every data server, e.g. \"--zero-copy=false\" (repeatable)")
	fwdFlags := fs.StringArray("fwd-flags", nil, "extra flags of every forwarding daemon, e.g. \"--workers 16,16,32\" (repeatable)")
	mountFlags := fs.StringArray("mount-flags", nil, "extra flags of the mount, e.g. \"--writeback-creates=false\" (repeatable)")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "request timeout of clients and daemons")
	fs.StringVar(&o.JobVar, "jobid-var", "SLURM_JOB_ID", "environment variable holding the job id")
	monitor := fs.Bool("monitor", true, "record every operation for Beacon in every daemon")
	fs.StringVar(&o.FwdPolicy, "fwd-policy", "dfra", "forwarding-node allocation of registered jobs: dfra or ffm")
	zeroCopy := fs.Bool("zero-copy", true, "zero-copy reads: sendfile in the data servers, splice in the forwarding daemons (one kind alone: --data-flags or --fwd-flags --zero-copy=false)")
	localSockets := fs.Bool("local-sockets", true, "daemons also listen on unix sockets, which peers on this host use instead of TCP (false: every hop over TCP, as between hosts)")
	fs.IntVar(&o.PprofBase, "pprof-base", 0, "serve each daemon's Go profiles on 127.0.0.1:PORT+i, i its index in cluster.json (0: off)")
	memHuge := fs.Bool("mem-huge", true, "give the mem tier a tmpfs of its own with large folios (huge=within_size; root only, else /dev/shm's): a new chunk costs a quarter of the kernel's time")
	exitWith := fs.String("exit-with", "", "take the cluster down (as down --purge) when process `PID` ends, e.g. the script that started it, even if it is killed (default $SLUICE_EXIT_WITH; empty or 0: never)")
	fs.BoolVar(&o.ExitRemove, "exit-remove", false, "with --exit-with: then delete the state directory too (default: $SLUICE_EXIT_REMOVE is 1)")
	pipeMax := fs.String("pipe-max-size", "4M", "as root, raise the kernel's fs.pipe-max-size to this if it is lower: pipes then hold a 1 MiB payload and a reply's header, so the mount splices reads into the FUSE device (--splice-reads) and payloads take one pipe (0: leave it)")
	fs.BoolVar(&o.Hosts, "hosts", false, "run every role on an emulated host of its own: a network namespace on a bridge, with an address of its own (root only; docs/deploy.md)")
	fs.IntVar(&o.ComputeHosts, "compute-hosts", 1, "with --hosts: compute hosts (the mount on the first, the others for more mounts)")
	fs.IntVar(&o.Procs, "procs", 0, "GOMAXPROCS of every daemon (not the mount), which share this host's cores (0: the Go default, one per core each)")
	return func(args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		if o.Dir == "" || o.Mount == "" {
			return fmt.Errorf("--dir and --mount are required")
		}
		if !fs.Changed("exit-with") {
			*exitWith = os.Getenv("SLUICE_EXIT_WITH")
		}
		if !fs.Changed("exit-remove") {
			o.ExitRemove = os.Getenv("SLUICE_EXIT_REMOVE") == "1"
		}
		o.TCPOnly = !*localSockets
		if *exitWith != "" {
			pid, err := strconv.Atoi(*exitWith)
			if err != nil || pid < 0 {
				return fmt.Errorf("--exit-with %q: want a process id", *exitWith)
			}
			o.ExitWith = pid
		}
		o.ZeroCopy = map[bool]string{true: "all", false: "none"}[*zeroCopy]
		if o.MemReplicas > 1 && o.MemServers < o.MemReplicas {
			return fmt.Errorf("--mem-replicas %d needs --mem-servers %d or more", o.MemReplicas, o.MemReplicas)
		}
		for i, f := range strings.Split(*dataMBps, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || v < 0 {
				return fmt.Errorf("--data-max-mbps: %q is not a rate", f)
			}
			if i == 0 {
				o.DataMBps = v
			}
			o.DataMBpsEach = append(o.DataMBpsEach, v)
		}
		if len(o.DataMBpsEach) == 1 {
			o.DataMBpsEach = nil // one cap for every server
		}
		o.NoMonitor, o.PlainMem = !*monitor, !*memHuge
		o.MetaFlags, o.MountFlags, o.FwdFlags, o.DataFlags = fields(*metaFlags), fields(*mountFlags), fields(*fwdFlags), fields(*dataFlags)
		var err error
		if o.MemBytes, err = size.Parse(*mem); err != nil {
			return fmt.Errorf("--mem: %v", err)
		}
		if o.SSDBytes, err = size.Parse(*ssd); err != nil {
			return fmt.Errorf("--ssd: %v", err)
		}
		if o.HDDBytes, err = size.Parse(*hdd); err != nil {
			return fmt.Errorf("--hdd: %v", err)
		}
		pm, err := size.Parse(*pipeMax)
		if err != nil {
			return fmt.Errorf("--pipe-max-size: %v", err)
		}
		return up(o, pm)
	}
}

// fields splits each of a repeatable flag's values into words.
func fields(vs []string) []string {
	var out []string
	for _, v := range vs {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

// up starts the cluster o describes, with fs.pipe-max-size raised to pm.
func up(o cluster.Options, pm int64) error {
	if was, raised := raisePipeMax(pm); raised {
		fmt.Fprintf(os.Stderr, "sluice cluster up: fs.pipe-max-size raised from %d to %d (zero-copy reads into the FUSE device; --pipe-max-size 0 leaves it)\n", was, pm)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Exe = exe
	c, err := cluster.Up(o)
	if err != nil {
		return err
	}
	if c.MemFSErr != "" && os.Geteuid() == 0 {
		fmt.Fprintf(os.Stderr, "sluice cluster up: the mem tier stays on /dev/shm's tmpfs, small pages (%s)\n", c.MemFSErr)
	}
	fmt.Printf("sluice is up: %s mounted (state in %s, metadata service %s)\n", c.Mount, c.Dir, c.MetaAddr)
	return nil
}

var downCmd = spec{use: "down", short: "unmount and stop a local cluster",
	example: "sluice cluster down --dir /tmp/sl --purge", setup: func(fs *pflag.FlagSet) func([]string) error {
		dir := fs.String("dir", "", "state directory (default: the cluster sluice cluster up started last)")
		purge := fs.Bool("purge", false, "also delete the mem tier's data (frees its memory)")
		whenGone := fs.Int("when-gone", 0, "first wait until process `PID` has ended (the watcher up --exit-with starts)")
		removeState := fs.Bool("remove-state", false, "then delete the state directory too (its ssd chunks, pfs directory and logs), unless the mount could not be taken down")
		return func(args []string) error {
			if err := wantArgs(args, 0, "no arguments"); err != nil {
				return err
			}
			return down(*dir, *purge, *whenGone, *removeState)
		}
	}}

func down(dir string, purge bool, whenGone int, removeState bool) error {
	d, err := stateDir(dir)
	if err != nil {
		return err
	}
	if whenGone > 0 {
		// SIGTERM (from a down meanwhile) ends the wait, and the process
		if err := cluster.WaitGone(whenGone); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: process %d ended: taking the cluster in %s down\n", time.Now().Format(time.RFC3339), whenGone, d)
		if _, err := cluster.Load(d); err != nil {
			return nil // never started, or its state is gone: nothing to stop
		}
	}
	if err := cluster.Down(d, purge); err != nil {
		return err
	}
	if removeState {
		return os.RemoveAll(d)
	}
	return nil
}

var restartCmd = spec{use: "restart NAME", short: "restart one daemon of a local cluster (names in STATE/run)",
	example: "sluice cluster restart fwd0", setup: func(fs *pflag.FlagSet) func([]string) error {
		dir := fs.String("dir", "", "state directory (default: the cluster sluice cluster up started last)")
		return func(args []string) error {
			d, err := stateDir(*dir)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return fmt.Errorf("want one daemon name (see %s/run)", d)
			}
			return cluster.Restart(d, args[0])
		}
	}}

// linkCmd cuts an emulated host off its network or connects it again.
func linkCmd(use, short string, up bool) spec {
	return spec{use: use + " HOST", short: short, example: "sluice cluster " + use + " compute-1",
		setup: func(fs *pflag.FlagSet) func([]string) error {
			dir := fs.String("dir", "", "state directory (default: the cluster sluice cluster up started last)")
			return func(args []string) error {
				d, err := stateDir(*dir)
				if err != nil {
					return err
				}
				if err := wantArgs(args, 1, "one host name (sluice cluster status lists them)"); err != nil {
					return err
				}
				return cluster.SetLink(d, args[0], up)
			}
		}}
}

var (
	cutCmd       = linkCmd("cut", "cut an emulated host off the network (cluster up --hosts): its connections stall as a dead host's", false)
	reconnectCmd = linkCmd("reconnect", "connect an emulated host cut off again", true)
)

// stateDir resolves --dir, falling back to the cluster `up` started last.
func stateDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if d := os.Getenv("SLUICE_DIR"); d != "" {
		return d, nil
	}
	if d, err := cluster.Current(); err == nil {
		return d, nil
	}
	return "", fmt.Errorf("--dir is required (no cluster started with 'sluice cluster up' found)")
}

// pipeMaxPath is the kernel's bound on a pipe an unprivileged process
// (or one without CAP_SYS_RESOURCE) may size with F_SETPIPE_SZ.
const pipeMaxPath = "/proc/sys/fs/pipe-max-size"

// raisePipeMax raises fs.pipe-max-size to want if it is lower and this
// process may write it (root); it returns the value before and whether it
// raised it. Lower or unwritable, it leaves it: the daemons and the mount
// then chain smaller pipes or copy.
func raisePipeMax(want int64) (was int64, raised bool) {
	if want <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(pipeMaxPath)
	if err != nil {
		return 0, false
	}
	was, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || was >= want {
		return was, false
	}
	if err := os.WriteFile(pipeMaxPath, []byte(strconv.FormatInt(want, 10)), 0o644); err != nil {
		return was, false
	}
	return was, true
}
