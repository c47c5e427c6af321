// Command sluice is the single binary of sluice: every role (metadata
// service, data server, forwarding daemon, FUSE client) and the tools to run
// a local cluster and inspect it. Only this package exits the process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/beacon/store"
	"github.com/sluice-hpc/sluice/client"
	"github.com/sluice-hpc/sluice/cluster"
	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/member"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/manager/forwarding"
	"github.com/sluice-hpc/sluice/manager/monitor"
	"github.com/sluice-hpc/sluice/meta"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/tier"
)

type command struct {
	name, usage string
	run         func(args []string) error
}

var commands = []command{
	{"up", "start a local cluster and mount it: up --dir STATE --mount MNT", cmdUp},
	{"down", "unmount and stop a local cluster: down --dir STATE [--purge]", cmdDown},
	{"status", "show servers, tiers, forwarding nodes and clients", cmdStatus},
	{"stat", "show a file's layout: stat PATH", cmdStat},
	{"jobs", "show what each job did, as the forwarding nodes saw it", cmdJobs},
	{"job", "Beacon's analysis of one job: job [--json] ID; register jobs: job start [--app A --nodes N,..] ID | job end ID | job list", cmdJob},
	{"records", "Beacon's records by job, node, server, layer, file and time: records [--job J] [--node N] [--ino I] [--since 10m]", cmdRecords},
	{"top", "live view of the busiest jobs and servers: top [--once]", cmdTop},
	{"profile", "application I/O profiles: profile show [KEY] | build JOB | import LOG.darshan", cmdProfile},
	{"workload", "run an application I/O behaviour as a job: workload --kind K --ranks N DIR", cmdWorkload},
	{"setstripe", "set a directory's chunk size and striping: setstripe [--chunk-size N] [--count G] [--unit N] DIR", cmdSetstripe},
	{"fault", "inject a fault: fault --server ID (--slow F | --fill BYTES | --stall MS)", cmdFault},
	{"restart", "restart one daemon of a local cluster: restart --dir STATE NAME", cmdRestart},
	{"meta", "run the metadata service", cmdMeta},
	{"data", "run a data server for one tier", cmdData},
	{"fwd", "run a forwarding daemon", cmdFwd},
	{"mount", "mount sluice with FUSE: mount [flags] MOUNTPOINT", cmdMount},
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stdout)
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(os.Args[2:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return
				}
				fmt.Fprintf(os.Stderr, "sluice %s: %v\n", c.name, err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "sluice: unknown command %q (run 'sluice help')\n", os.Args[1])
	os.Exit(2)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice: application-aware I/O forwarding and tiered burst buffer\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.usage)
	}
}

// flagSet returns a flag set that reports errors as one line, with a
// --config FILE option whose "name = value" lines set the same flags.
func flagSet(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := fs.String("config", "", "file of `name = value` lines setting these flags")
	return fs, cfg
}

// parseInterspersed parses flags wherever users type them: before, between
// or after the arguments (`sluice job 7001 --json`). "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // after "--": all arguments
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

func parse(fs *flag.FlagSet, cfg *string, args []string) error {
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return err
		}
		return err
	}
	if *cfg == "" {
		return nil
	}
	b, err := os.ReadFile(*cfg)
	if err != nil {
		return fmt.Errorf("config: %v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("config %s:%d: want name = value", *cfg, i+1)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if fs.Lookup(k) == nil {
			return fmt.Errorf("config %s:%d: unknown setting %q", *cfg, i+1, k)
		}
		if set[k] {
			continue // the command line wins
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("config %s:%d: %s: %v", *cfg, i+1, k, err)
		}
	}
	return nil
}

func logger(role string) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("role", role)
}

func readSecret(file string) ([]byte, error) {
	if s := os.Getenv("SLUICE_SECRET"); s != "" && file == "" {
		return []byte(s), nil
	}
	if file == "" {
		return nil, fmt.Errorf("--secret-file is required (or set SLUICE_SECRET)")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("secret: %v", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 16 {
		return nil, fmt.Errorf("secret in %s is shorter than 16 characters", file)
	}
	return []byte(s), nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// startPprof serves Go's profiles for performance work (docs/benchmarks.md).
func startPprof(addr string) {
	if addr == "" {
		return
	}
	go http.ListenAndServe(addr, nil)
}

func writeAddr(file, addr string) error {
	if file == "" {
		return nil
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

func checkListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("--listen %q: give an explicit address (0.0.0.0 to listen beyond loopback)", addr)
	}
	return nil
}

// daemonFlags are the flags every network daemon has.
type daemonFlags struct {
	listen, secretFile, addrFile, pprof, metrics *string
	// reg collects the daemon's Prometheus series; served on --metrics.
	reg *prometheus.Registry
	mon monitorFlags
}

// monitorFlags turn Beacon's per-operation records on or off.
type monitorFlags struct {
	on     *bool
	window *time.Duration
}

func addMonitorFlags(fs *flag.FlagSet) monitorFlags {
	return monitorFlags{
		on:     fs.Bool("monitor", true, "record every operation for Beacon (sluice job, top, profiles)"),
		window: fs.Duration("monitor-window", beacon.DefaultWindow, "Beacon aggregation window"),
	}
}

// collector returns the daemon's Beacon collector, or nil when off.
func (m monitorFlags) collector(layer beacon.Layer, server string) *beacon.Collector {
	if !*m.on {
		return nil
	}
	return beacon.NewCollector(layer, server, *m.window)
}

func addDaemonFlags(fs *flag.FlagSet, listen string) *daemonFlags {
	return &daemonFlags{
		mon:        addMonitorFlags(fs),
		listen:     fs.String("listen", listen, "address to listen on"),
		secretFile: fs.String("secret-file", "", "file holding the cluster secret"),
		addrFile:   fs.String("addr-file", "", "write the bound address here"),
		pprof:      fs.String("pprof", "", "serve Go profiles (net/http/pprof) on this loopback address"),
		metrics:    fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics"),
		reg:        prometheus.NewRegistry(),
	}
}

// setup checks the listen address, starts profiling if asked and reads the
// cluster secret.
func (d *daemonFlags) setup() ([]byte, error) {
	if err := checkListen(*d.listen); err != nil {
		return nil, err
	}
	startPprof(*d.pprof)
	if err := serveMetrics(*d.metrics, d.reg); err != nil {
		return nil, err
	}
	return readSecret(*d.secretFile)
}

// serveMetrics serves reg (with the Go runtime's and the process's series)
// at http://addr/metrics; an empty addr serves nothing.
func serveMetrics(addr string, reg *prometheus.Registry) error {
	if addr == "" {
		return nil
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics: %v", err)
	}
	go http.Serve(ln, mux)
	return nil
}

// registeredDaemon is a daemon that registers with the metadata service:
// a data server or a forwarding daemon.
type registeredDaemon interface {
	Listen() (net.Listener, error)
	Addr() string
	Run(ctx context.Context, ln net.Listener, idFile string) error
}

// runDaemon binds, publishes the address and serves until a signal.
func runDaemon(d registeredDaemon, addrFile, idFile string) error {
	ln, err := d.Listen()
	if err != nil {
		return err
	}
	if err := writeAddr(addrFile, d.Addr()); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return d.Run(ctx, ln, idFile)
}

func cmdMeta(args []string) error {
	fs, cfg := flagSet("meta")
	df := addDaemonFlags(fs, "127.0.0.1:7100")
	dir := fs.String("dir", "", "directory of the embedded store")
	retention := fs.Duration("beacon-retention", 7*24*time.Hour, "keep monitoring records this long")
	beaconMax := fs.String("beacon-max", "1G", "bound on the monitoring records kept (compressed)")
	fwdMode := fs.String("fwd-policy", "dfra", "forwarding-node allocation of registered jobs: dfra or ffm (fixed mapping)")
	fwdRatio := fs.Int("fwd-ratio", 4, "compute nodes per forwarding node under the fixed mapping")
	fwdCap := fs.Float64("fwd-capacity-mbps", 1000, "a forwarding node's bandwidth B_f for DFRA, MB/s")
	var pol dfra.Config
	vmin := fs.String("dfra-vmin", "1G", "DFRA V_min: jobs moving less per run are not scaled up")
	fs.IntVar(&pol.NMin, "dfra-nmin", 1, "DFRA N_min: jobs with this many I/O nodes or fewer are not scaled up")
	fs.Float64Var(&pol.WMeta, "dfra-wmeta", 1000, "DFRA W_meta: jobs with this many metadata operations/s or more are not scaled up")
	fs.Float64Var(&pol.HighBW, "dfra-highbw", 0.5, "DFRA: a job using this fraction of a forwarding node's bandwidth is isolated")
	fs.IntVar(&pol.MaxFwds, "dfra-max-fwds", 0, "DFRA: at most this many forwarding nodes per job (0: no cap)")
	fs.Float64Var(&pol.Saturated, "dfra-saturated", 0.8, "DFRA: a run moving this fraction of its forwarding nodes' capacity was bound by them")
	fs.BoolVar(&pol.NoSpread, "dfra-no-spread", false, "DFRA: keep well-behaved jobs on shared fixed-mapping nodes even when others are idle (the paper's behaviour)")
	eng := fs.String("engine", "pebble", "metadata engine: "+strings.Join(engine.Names(), ", "))
	chunk := fs.Int("chunk-size", 4<<20, "default chunk size of the root directory")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on calls to data servers")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	secret, err := df.setup()
	if err != nil {
		return err
	}
	if *eng != "mem" && *dir == "" {
		return fmt.Errorf("--dir is required for engine %q", *eng)
	}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o700); err != nil {
			return err
		}
	}
	e, err := engine.Open(*eng, *dir)
	if err != nil {
		return err
	}
	defer e.Close()
	log := logger("meta")
	svc, err := meta.New(meta.Config{Engine: e, Log: log, Secret: secret, ChunkSize: uint32(*chunk), Timeout: *timeout,
		Metrics: df.reg})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *df.listen)
	if err != nil {
		return err
	}
	if err := writeAddr(*df.addrFile, ln.Addr().String()); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	go svc.RunGC(ctx, 2*time.Second)
	maxB, err := cluster.ParseSize(*beaconMax)
	if err != nil {
		return fmt.Errorf("--beacon-max: %v", err)
	}
	bdir := ""
	if *dir != "" {
		bdir = filepath.Join(*dir, "beacon")
	}
	records, err := store.Open(bdir, store.Options{Retention: *retention, MaxBytes: maxB})
	if err != nil {
		return err
	}
	defer records.Close()
	bsvc := monitor.New(monitor.Config{Store: records, Log: log, Window: *df.mon.window})
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	go bsvc.Run(ctx, tick.C)
	if *fwdMode != "dfra" && *fwdMode != "ffm" {
		return fmt.Errorf("--fwd-policy %q: want dfra or ffm", *fwdMode)
	}
	v, err := cluster.ParseSize(*vmin)
	if err != nil || v <= 0 {
		return fmt.Errorf("--dfra-vmin %q: want a size > 0", *vmin)
	}
	pol.VMin, pol.Ratio = uint64(v), *fwdRatio
	if pol.NMin == 0 {
		pol.NMin = -1 // any job with an I/O node
	}
	mgr := forwarding.New(forwarding.Config{Policy: pol, Mode: *fwdMode, FwdCapacity: *fwdCap * 1e6, Decisions: records,
		Servers: svc.Servers, Health: bsvc.Health, Log: log.With("part", "fwdmap"),
		Profile: func(key string) (beacon.Profile, bool) {
			p, ok, err := records.Profile(key)
			return p, ok && err == nil
		}})
	mtick := time.NewTicker(2 * time.Second)
	defer mtick.Stop()
	go mgr.Run(ctx, mtick.C)
	srv := rpc.NewServer(secret, &rpc.Mux{Ops: map[wire.Op]rpc.Handler{wire.OpBeacon: bsvc.Handler(), wire.OpJob: mgr.Handler()},
		Default: svc.Handler()}, log)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("metadata service listening", "addr", ln.Addr().String(), "engine", *eng)
	return srv.Serve(ln)
}

func cmdData(args []string) error {
	fs, cfg := flagSet("data")
	df := addDaemonFlags(fs, "127.0.0.1:0")
	kind := fs.String("tier", "", "tier kind: mem, ssd, hdd or pfs")
	dir := fs.String("dir", "", "directory holding the chunks (tmpfs for mem; the PFS mount for pfs)")
	capacity := fs.String("capacity", "0", "byte budget (e.g. 2G); 0: the file system's size")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address")
	mbps := fs.Float64("max-mbps", 0, "bandwidth cap in MB/s (emulates a slower device); 0: none")
	iops := fs.Float64("max-iops", 0, "IOPS cap; 0: none")
	node := fs.String("node", hostname(), "node name")
	zeroCopy := fs.Bool("zero-copy", false, "answer reads with sendfile from the chunk file instead of through a buffer")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	if _, ok := tier.Rank(*kind); !ok {
		return fmt.Errorf("--tier %q: want mem, ssd, hdd or pfs", *kind)
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	c, err := cluster.ParseSize(*capacity)
	if err != nil {
		return fmt.Errorf("--capacity: %v", err)
	}
	secret, err := df.setup()
	if err != nil {
		return err
	}
	log := logger("data").With("tier", *kind)
	// the server's own state (id, truncation fences) beside its chunks;
	// in a PFS directory under .sluice, with the objects
	idFile, state := filepath.Join(*dir, ".sluice-id"), filepath.Join(*dir, ".sluice-state")
	if *kind == "pfs" {
		idFile, state = filepath.Join(*dir, ".sluice", "id"), filepath.Join(*dir, ".sluice")
	}
	srv, err := data.New(data.Config{Kind: *kind, Dir: *dir, Capacity: c, Listen: *df.listen, Meta: *metaAddr,
		Secret: secret, Node: *node, MaxMBps: *mbps, MaxIOPS: *iops, Log: log, Metrics: df.reg, ZeroCopy: *zeroCopy,
		Monitor: df.mon.collector(beacon.LayerData, "data-"+*kind), StateDir: state})
	if err != nil {
		return err
	}
	return runDaemon(srv, *df.addrFile, idFile)
}

func cmdFwd(args []string) error {
	fs, cfg := flagSet("fwd")
	df := addDaemonFlags(fs, "127.0.0.1:0")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address")
	mbps := fs.Float64("max-mbps", 0, "link bandwidth cap in MB/s; 0: none")
	iops := fs.Float64("max-iops", 0, "request rate cap (every operation); 0: none")
	node := fs.String("node", hostname(), "node name")
	idFile := fs.String("id-file", "", "keep the assigned id here across restarts")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on each backend call")
	zeroCopy := fs.Bool("zero-copy", false, "splice data servers' answers to reads into the replies instead of copying them")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	secret, err := df.setup()
	if err != nil {
		return err
	}
	log := logger("fwd")
	srv := fwd.New(fwd.Config{Listen: *df.listen, Meta: *metaAddr, Secret: secret, Node: *node, Log: log,
		MaxMBps: *mbps, MaxIOPS: *iops, Timeout: *timeout, Metrics: df.reg, ZeroCopy: *zeroCopy,
		Monitor: df.mon.collector(beacon.LayerFwd, "fwd-"+*node)})
	return runDaemon(srv, *df.addrFile, *idFile)
}

// noCacheIfZero maps a 0 cache timeout flag to the client's "no caching".
func noCacheIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// sizeFlag parses a size flag for the client: 0 turns the feature off
// (negative in client.Config).
func sizeFlag(name, v string) (int64, error) {
	n, err := cluster.ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("--%s: %v", name, err)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}

func cmdMount(args []string) error {
	fs, cfg := flagSet("mount")
	pprofAddr := fs.String("pprof", "", "serve Go profiles (net/http/pprof) on this loopback address")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address (to find a forwarding node)")
	fwdAddr := fs.String("fwd", "", "forwarding node address (default: chosen by the fixed mapping)")
	secretFile := fs.String("secret-file", "", "file holding the cluster secret")
	node := fs.String("node", hostname(), "node name sent with every request")
	jobVar := fs.String("jobid-var", "SLURM_JOB_ID", "environment variable holding the job id")
	timeout := fs.Duration("timeout", 30*time.Second, "a request not answered within this fails with EIO")
	cache := fs.Bool("cache-data", false, "let the kernel cache file data (default: direct I/O)")
	writeBehind := fs.String("write-behind", "32M", "bytes of writes sent in the background before a write waits (0: every write waits for the forwarding node)")
	readahead := fs.String("readahead", "8M", "how far ahead of a sequential reader to fetch, per open file (0: off)")
	wbCreates := fs.Bool("writeback-creates", true, "answer creates in directories this mount holds the delegation of at once and send them in batches (false: every create waits for the metadata service)")
	wbUnlinks := fs.Bool("writeback-unlinks", true, "with --writeback-creates, also answer removals of files in those directories at once and send them with the creates")
	createFlush := fs.Duration("create-flush", 10*time.Millisecond, "how long a write-back create may wait before it is sent")
	debug := fs.Bool("debug", false, "log every FUSE request")
	attrTO := fs.Duration("attr-timeout", time.Second, "how long the kernel may cache attributes (0: every stat reaches the metadata service)")
	entryTO := fs.Duration("entry-timeout", time.Second, "how long the kernel may cache name lookups (0: no caching)")
	metaCache := fs.Duration("meta-cache", 60*time.Second, "how long the kernel may cache lookups and attributes while the mount follows the metadata change feed (0: do not follow it; --attr-timeout and --entry-timeout apply)")
	mon := addMonitorFlags(fs)
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one mount point, got %d arguments", fs.NArg())
	}
	wb, err := sizeFlag("write-behind", *writeBehind)
	if err != nil {
		return err
	}
	ra, err := sizeFlag("readahead", *readahead)
	if err != nil {
		return err
	}
	startPprof(*pprofAddr)
	reg := prometheus.NewRegistry()
	if err := serveMetrics(*metricsAddr, reg); err != nil {
		return err
	}
	mnt := fs.Arg(0)
	if st, err := os.Stat(mnt); err != nil || !st.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", mnt)
	}
	secret, err := readSecret(*secretFile)
	if err != nil {
		return err
	}
	log := logger("client")
	ctx, stop := signalContext()
	defer stop()
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	fsys, err := client.New(cctx, client.Config{Mountpoint: mnt, Fwd: *fwdAddr, Meta: *metaAddr, Secret: secret,
		Node: *node, JobVar: *jobVar, Log: log, Timeout: *timeout, CacheData: *cache, Debug: *debug,
		WriteBehind: wb, Readahead: ra, WritebackCreates: *wbCreates, WritebackUnlinks: *wbUnlinks, CreateFlush: *createFlush, Monitor: mon.collector(beacon.LayerClient, "client@"+*node), Metrics: reg,
		AttrTimeout: noCacheIfZero(*attrTO), EntryTimeout: noCacheIfZero(*entryTO), MetaCache: noCacheIfZero(*metaCache)})
	cancel()
	if err != nil {
		return err
	}
	srv, err := fsys.Mount()
	if err != nil {
		return fmt.Errorf("mount %s: %v", mnt, err)
	}
	log.Info("mounted", "mountpoint", mnt)
	go fsys.Follow(ctx, srv)
	fsys.Ship(ctx)
	// report this client in the registry so status can list mounts
	mc := rpc.NewClient(*metaAddr, secret, rpc.ClientOptions{Timeout: 5 * time.Second, Name: "metadata service"})
	mem := &member.Member{Meta: mc, Log: log, Info: func() wire.ServerInfo {
		return wire.ServerInfo{Role: "client", Addr: mnt, Node: *node}
	}}
	go func() {
		if err := mem.Register(ctx); err == nil {
			mem.Run(ctx)
		}
	}()
	done := make(chan struct{})
	go func() {
		srv.Wait()
		close(done)
	}()
	select {
	case <-ctx.Done():
		if err := srv.Unmount(); err != nil {
			log.Warn("unmount failed, detaching", "err", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		<-done
	case <-done:
	}
	fsys.Close()
	return nil
}

func cmdUp(args []string) error {
	fs, cfg := flagSet("up")
	var o cluster.Options
	fs.StringVar(&o.Dir, "dir", "", "state directory")
	fs.StringVar(&o.Mount, "mount", "", "mount point")
	mem := fs.String("mem", "2G", "memory tier budget")
	ssd := fs.String("ssd", "8G", "ssd tier budget (0 disables the tier)")
	fs.StringVar(&o.PFS, "pfs", "", "PFS directory for the pfs tier (default STATE/pfs; none: no pfs tier)")
	fs.IntVar(&o.Fwds, "fwds", 2, "forwarding daemons")
	fs.IntVar(&o.MemServers, "mem-servers", 1, "mem-tier data servers, each with the --mem budget")
	fs.StringVar(&o.Engine, "engine", "pebble", "metadata engine")
	fs.Float64Var(&o.FwdMBps, "fwd-max-mbps", 0, "bandwidth cap of each forwarding daemon, MB/s (also DFRA's B_f)")
	fs.Float64Var(&o.FwdIOPS, "fwd-max-iops", 0, "request rate cap of each forwarding daemon")
	fs.Float64Var(&o.DataMBps, "data-max-mbps", 0, "bandwidth cap of each mem-tier data server, MB/s")
	fs.Float64Var(&o.DataIOPS, "data-max-iops", 0, "IOPS cap of each mem-tier data server")
	metaFlags := fs.String("meta-flags", "", "extra flags of the metadata daemon, e.g. \"--fwd-ratio 8 --dfra-vmin 64M\"")
	mountFlags := fs.String("mount-flags", "", "extra flags of the mount, e.g. \"--writeback-creates\"")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "request timeout of clients and daemons")
	fs.StringVar(&o.JobVar, "jobid-var", "SLURM_JOB_ID", "environment variable holding the job id")
	monitor := fs.Bool("monitor", true, "record every operation for Beacon in every daemon")
	fs.StringVar(&o.FwdPolicy, "fwd-policy", "dfra", "forwarding-node allocation of registered jobs: dfra or ffm")
	fs.StringVar(&o.ZeroCopy, "zero-copy", "none", "zero-copy reads in the data servers (sendfile), the forwarding daemons (splice), both or neither: data, fwd, all or none")
	fs.IntVar(&o.PprofBase, "pprof-base", 0, "serve each daemon's Go profiles on 127.0.0.1:PORT+i, i its index in cluster.json (0: off)")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	if o.Dir == "" || o.Mount == "" {
		return fmt.Errorf("--dir and --mount are required")
	}
	switch o.ZeroCopy {
	case "none", "data", "fwd", "all":
	default:
		return fmt.Errorf("--zero-copy %q: want data, fwd, all or none", o.ZeroCopy)
	}
	o.NoMonitor = !*monitor
	o.MetaFlags = strings.Fields(*metaFlags)
	o.MountFlags = strings.Fields(*mountFlags)
	var err error
	if o.MemBytes, err = cluster.ParseSize(*mem); err != nil {
		return fmt.Errorf("--mem: %v", err)
	}
	if o.SSDBytes, err = cluster.ParseSize(*ssd); err != nil {
		return fmt.Errorf("--ssd: %v", err)
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
	fmt.Printf("sluice is up: %s mounted (state in %s, metadata service %s)\n", c.Mount, c.Dir, c.MetaAddr)
	return nil
}

func cmdDown(args []string) error {
	fs, cfg := flagSet("down")
	dir := fs.String("dir", "", "state directory")
	purge := fs.Bool("purge", false, "also delete the mem tier's data (frees its memory)")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	d, err := stateDir(*dir)
	if err != nil {
		return err
	}
	return cluster.Down(d, *purge)
}

func cmdRestart(args []string) error {
	fs, cfg := flagSet("restart")
	dir := fs.String("dir", "", "state directory")
	if err := parse(fs, cfg, args); err != nil {
		return err
	}
	d, err := stateDir(*dir)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one daemon name (see %s/run)", d)
	}
	return cluster.Restart(d, fs.Arg(0))
}

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
	return "", fmt.Errorf("--dir is required (no cluster started with 'sluice up' found)")
}

// metaClient connects to the cluster named by --dir or --meta.
func metaClient(fs *flag.FlagSet, cfg *string, args []string) (*rpc.Client, error) {
	mc, _, err := metaClientSub(fs, cfg, args)
	return mc, err
}

// metaClientSub is metaClient for a command with subcommands: the first
// argument after the flags that names one of subs is taken out, and flags
// after it are parsed too ("job --dir D start --app A ID" and "job start
// --dir D --app A ID" mean the same).
func metaClientSub(fs *flag.FlagSet, cfg *string, args []string, subs ...string) (*rpc.Client, string, error) {
	dir := fs.String("dir", "", "state directory of a local cluster")
	metaAddr := fs.String("meta", "", "metadata service address")
	secretFile := fs.String("secret-file", "", "file holding the cluster secret")
	if err := parse(fs, cfg, args); err != nil {
		return nil, "", err
	}
	sub := ""
	for _, s := range subs {
		if fs.NArg() > 0 && fs.Arg(0) == s {
			sub = s
			if err := parse(fs, cfg, fs.Args()[1:]); err != nil {
				return nil, "", err
			}
		}
	}
	mc, err := dialMeta(*dir, *metaAddr, *secretFile)
	return mc, sub, err
}

// dialMeta returns a client of the metadata daemon: at metaAddr, or the
// local cluster's in dir (default: the current one).
func dialMeta(dir, metaAddr, secretFile string) (*rpc.Client, error) {
	if metaAddr == "" {
		d, err := stateDir(dir)
		if err != nil {
			return nil, err
		}
		c, err := cluster.Load(d)
		if err != nil {
			return nil, err
		}
		metaAddr = c.MetaAddr
		if secretFile == "" {
			secretFile = c.SecretFile()
		}
	}
	secret, err := readSecret(secretFile)
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(metaAddr, secret, rpc.ClientOptions{Timeout: 10 * time.Second, Name: "metadata service " + metaAddr}), nil
}

// beaconName is the name a server's monitoring records carry.
func beaconName(s wire.ServerInfo) string {
	if s.Role == "data" {
		return fmt.Sprintf("data-%s-%d", s.Tier, s.ID)
	}
	return fmt.Sprintf("%s-%d", s.Role, s.ID)
}

func cmdStatus(args []string) error {
	fs, cfg := flagSet("status")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	sort.SliceStable(servers, func(i, j int) bool { return servers[i].Role < servers[j].Role })
	// Beacon's fail-slow verdicts (empty when monitoring is off)
	slow := map[string]float64{}
	if hs, err := (beaconrpc.Client{C: mc}).Health(context.Background()); err == nil {
		for _, h := range hs {
			slow[h.Server] = h.Ratio
		}
	}
	fmt.Printf("%-4s %-7s %-5s %-22s %-10s %10s %10s %6s %s\n", "ID", "ROLE", "TIER", "ADDRESS", "NODE", "CAPACITY", "USED", "USED%", "STATE")
	tiers := map[string][2]uint64{}
	for _, s := range servers {
		state := "up"
		if !s.Alive {
			state = "DOWN"
		} else if r, ok := slow[beaconName(s)]; ok {
			state = fmt.Sprintf("FAIL-SLOW (%.1f× its peers' latency)", r)
		}
		capS, usedS, pct := "-", "-", "-"
		if s.Role == "data" {
			capS, usedS = cluster.FormatSize(s.Capacity), cluster.FormatSize(s.Used)
			if s.Capacity > 0 {
				pct = fmt.Sprintf("%.1f", 100*float64(s.Used)/float64(s.Capacity))
			}
			if s.Alive {
				t := tiers[s.Tier]
				tiers[s.Tier] = [2]uint64{t[0] + s.Capacity, t[1] + s.Used}
			}
		}
		tier := s.Tier
		if tier == "" {
			tier = "-"
		}
		fmt.Printf("%-4d %-7s %-5s %-22s %-10s %10s %10s %6s %s\n", s.ID, s.Role, tier, s.Addr, s.Node, capS, usedS, pct, state)
	}
	fmt.Println("\nTIER  CAPACITY       USED")
	for _, t := range []string{"mem", "ssd", "hdd", "pfs"} {
		if v, ok := tiers[t]; ok {
			fmt.Printf("%-5s %-14s %s\n", t, cluster.FormatSize(v[0]), cluster.FormatSize(v[1]))
		}
	}
	return nil
}

// listServers asks the metadata service for every registered daemon.
func listServers(mc *rpc.Client) ([]wire.ServerInfo, error) {
	resp, _, err := mc.Call(context.Background(), &wire.Msg{Op: wire.OpServers}, nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Servers, nil
}

func cmdJobs(args []string) error {
	fs, cfg := flagSet("jobs")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	ctx := context.Background()
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	type agg struct {
		fwd.JobCounters
		fwds  []string
		ranks map[int32]bool
		nodes map[string]bool
	}
	jobs := map[string]*agg{}
	secret := mustSecret(fs)
	for _, si := range servers {
		if si.Role != "fwd" || !si.Alive {
			continue
		}
		fc := rpc.NewClient(si.Addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second, Name: "forwarding node " + si.Addr})
		r, _, err := fc.Call(ctx, &wire.Msg{Op: wire.OpJobStats}, nil, nil)
		fc.Close()
		if err != nil {
			return err
		}
		for _, c := range fwd.DecodeJobs(r.Entries) {
			a := jobs[c.Job]
			if a == nil {
				a = &agg{JobCounters: fwd.JobCounters{Job: c.Job}, ranks: map[int32]bool{}, nodes: map[string]bool{}}
				jobs[c.Job] = a
			}
			a.Ops += c.Ops
			a.MetaOps += c.MetaOps
			a.ReadBytes += c.ReadBytes
			a.WriteBytes += c.WriteBytes
			a.fwds = append(a.fwds, strconv.FormatUint(si.ID, 10))
			for _, x := range c.Ranks {
				a.ranks[x] = true
			}
			for _, x := range c.Nodes {
				a.nodes[x] = true
			}
		}
	}
	var names []string
	for n := range jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%-10s %8s %8s %12s %12s %6s %-14s %s\n", "JOB", "OPS", "META", "READ", "WRITTEN", "RANKS", "NODES", "FWD")
	for _, n := range names {
		a := jobs[n]
		var nodes []string
		for x := range a.nodes {
			nodes = append(nodes, x)
		}
		sort.Strings(nodes)
		fmt.Printf("%-10s %8d %8d %12s %12s %6d %-14s %s\n", n, a.Ops, a.MetaOps, cluster.FormatSize(a.ReadBytes),
			cluster.FormatSize(a.WriteBytes), len(a.ranks), strings.Join(nodes, ","), strings.Join(a.fwds, ","))
	}
	return nil
}

func cmdStat(args []string) error {
	fs, cfg := flagSet("stat")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	if fs.NArg() != 1 {
		return fmt.Errorf("want one path")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fs.Arg(0), &st); err != nil {
		return fmt.Errorf("%s: %v", fs.Arg(0), err)
	}
	ctx := context.Background()
	a, _, err := mc.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: st.Ino}, nil, nil)
	if err != nil {
		return err
	}
	l, _, err := mc.Call(ctx, &wire.Msg{Op: wire.OpLayout, Ino: st.Ino}, nil, nil)
	if err != nil {
		return err
	}
	at := a.Attr
	fmt.Printf("path:        %s\ninode:       %d\nsize:        %d\ntruncations: %d\nchunk size:  %d\nstripe:      count %d, unit %d\nchunks:      %d allocated\n",
		fs.Arg(0), at.Ino, at.Size, at.Trunc, at.ChunkSize, at.StripeCnt, at.StripeUnit, len(l.Chunks))
	for _, c := range l.Chunks {
		fmt.Printf("  chunk %-6d tier %-4s servers %v\n", c.Idx, c.Tier, c.Servers)
	}
	return nil
}

func cmdSetstripe(args []string) error {
	fs, cfg := flagSet("setstripe")
	chunk := fs.String("chunk-size", "0", "chunk size (power of two, e.g. 4M)")
	count := fs.Uint("count", 0, "stripe count: data servers per chunk")
	unit := fs.String("unit", "0", "stripe unit")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	if fs.NArg() != 1 {
		return fmt.Errorf("want one directory")
	}
	cs, err := cluster.ParseSize(*chunk)
	if err != nil {
		return fmt.Errorf("--chunk-size: %v", err)
	}
	us, err := cluster.ParseSize(*unit)
	if err != nil {
		return fmt.Errorf("--unit: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fs.Arg(0), &st); err != nil {
		return err
	}
	resp, _, err := mc.Call(context.Background(), &wire.Msg{Op: wire.OpSetLayout, Ino: st.Ino,
		ChunkSize: uint32(cs), StripeCnt: uint32(*count), StripeUnit: uint32(us)}, nil, nil)
	if err != nil {
		return err
	}
	fmt.Printf("%s: chunk size %d, stripe count %d, unit %d\n", fs.Arg(0), resp.Attr.ChunkSize, resp.Attr.StripeCnt, resp.Attr.StripeUnit)
	return nil
}

func cmdFault(args []string) error {
	fs, cfg := flagSet("fault")
	id := fs.Uint64("server", 0, "id of the data server or forwarding node (see status)")
	slow := fs.Float64("slow", 0, "make every request take this many times as long")
	fill := fs.String("fill", "", "shrink the tier's budget to this size")
	stall := fs.Int("stall", -1, "delay every request by this many milliseconds (0 clears)")
	mc, err := metaClient(fs, cfg, args)
	if err != nil {
		return err
	}
	defer mc.Close()
	ctx := context.Background()
	servers, err := listServers(mc)
	if err != nil {
		return err
	}
	var target *wire.ServerInfo
	for i := range servers {
		if servers[i].ID == *id {
			target = &servers[i]
		}
	}
	if target == nil || target.Role == "client" {
		return fmt.Errorf("--server %d: no such data server or forwarding node", *id)
	}
	m := &wire.Msg{Op: wire.OpFault}
	switch {
	case *slow > 0:
		m.Name, m.Size = "slow", uint64(*slow*100)
	case *fill != "":
		n, err := cluster.ParseSize(*fill)
		if err != nil {
			return fmt.Errorf("--fill: %v", err)
		}
		m.Name, m.Size = "fill", uint64(n)
	case *stall >= 0:
		m.Name, m.Size = "stall", uint64(*stall)
	default:
		return fmt.Errorf("give one of --slow, --fill, --stall")
	}
	sc := rpc.NewClient(target.Addr, mustSecret(fs), rpc.ClientOptions{Timeout: 10 * time.Second, Name: fmt.Sprintf("server %d", *id)})
	defer sc.Close()
	_, _, err = sc.Call(ctx, m, nil, nil)
	return err
}

func mustSecret(fs *flag.FlagSet) []byte {
	file := fs.Lookup("secret-file").Value.String()
	if file == "" {
		if d, err := stateDir(fs.Lookup("dir").Value.String()); err == nil {
			if c, err := cluster.Load(d); err == nil {
				file = c.SecretFile()
			}
		}
	}
	s, _ := readSecret(file)
	return s
}
