package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/client/vfs"
	tierpol "github.com/sluice-hpc/sluice/policy/tiering"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/client"
	"github.com/sluice-hpc/sluice/daemon/managerd"
	"github.com/sluice-hpc/sluice/daemon/metad"
	"github.com/sluice-hpc/sluice/daemon/monitord"
	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/member"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/tier"
)

// daemonFlags are the flags every network daemon has.
type daemonFlags struct {
	listen, secretFile, addrFile, pprof, metrics *string
	localSocket                                  *bool
	// reg collects the daemon's Prometheus series; served on --metrics.
	reg *prometheus.Registry
	mon monitorFlags
}

// monitorFlags turn Beacon's per-operation records on or off, and say
// where they go.
type monitorFlags struct {
	on       *bool
	window   *time.Duration
	monitors *string
}

func addMonitorFlags(fs *pflag.FlagSet) monitorFlags {
	return monitorFlags{
		on:     fs.Bool("monitor", true, "record every operation for Beacon (sluice job show, monitor top, profiles)"),
		window: fs.Duration("monitor-window", beacon.DefaultWindow, "Beacon aggregation window"),
		monitors: fs.String("monitors", "", "Beacon's monitor daemons (sluice monitor), HOST:PORT,…: the records go to them, "+
			"each job's to one, instead of to the metadata daemon"),
	}
}

// targets returns the monitor daemons to ship records to (nil: none,
// the records go to the metadata daemon).
func (m monitorFlags) targets(secret []byte, log *slog.Logger) (rpc.Invoker, error) {
	if *m.monitors == "" {
		return nil, nil
	}
	mons, err := beaconrpc.NewMonitors(*m.monitors, secret, 10*time.Second, log)
	if err != nil {
		return nil, fmt.Errorf("--monitors: %v", err)
	}
	return mons, nil
}

// collector returns the daemon's Beacon collector, or nil when off.
func (m monitorFlags) collector(layer beacon.Layer, server string) *beacon.Collector {
	if !*m.on {
		return nil
	}
	return beacon.NewCollector(layer, server, *m.window)
}

// beaconStoreFlags bound Beacon's record store (in the metadata daemon
// or a monitor daemon).
type beaconStoreFlags struct {
	retention *time.Duration
	max       *string
}

func addBeaconStoreFlags(fs *pflag.FlagSet) beaconStoreFlags {
	return beaconStoreFlags{
		retention: fs.Duration("beacon-retention", 7*24*time.Hour, "keep monitoring records this long"),
		max:       fs.String("beacon-max", "1G", "bound on the monitoring records kept (compressed)"),
	}
}

// maxBytes is --beacon-max in bytes.
func (b beaconStoreFlags) maxBytes() (int64, error) {
	n, err := size.Parse(*b.max)
	if err != nil {
		return 0, fmt.Errorf("--beacon-max: %v", err)
	}
	return n, nil
}

func addDaemonFlags(fs *pflag.FlagSet, listen string) *daemonFlags {
	return &daemonFlags{
		mon:    addMonitorFlags(fs),
		listen: fs.String("listen", listen, "address to listen on: HOST:PORT (TCP) or unix:PATH"),
		localSocket: fs.Bool("local-socket", true,
			"also listen on a unix socket that peers on this host reach instead of the TCP address (less CPU per byte)"),
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
	startPprof(*d.pprof, d.reg)
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

var metaCmd = spec{use: "meta", short: "run the metadata service (and the managers beside it; Beacon's store too, without --monitors)",
	example: "sluice meta --listen 10.0.0.1:7100 --dir /var/lib/sluice/meta --secret-file /etc/sluice/secret", setup: setupMeta}

func setupMeta(fs *pflag.FlagSet) func([]string) error {
	df := addDaemonFlags(fs, "127.0.0.1:7100")
	dir := fs.String("dir", "", "directory of the embedded store")
	bf := addBeaconStoreFlags(fs)
	tierMode := fs.String("tiering", "auto", "tier migration: auto (the ONFS policy moves data down as space runs short) or manual (only sluice file migrate)")
	tierEvery := fs.Duration("tiering-every", time.Second, "how often the tiering policy looks at each server")
	drainDefault := fs.String("drain-default", "cool", "when files of directories without a policy drain to the PFS: cool, on-close, now or never")
	drainAge := fs.Duration("drain-age", 10*time.Minute, "how long a file stays closed before it drains under --drain cool")
	memReplicas := fs.Int("mem-replicas", 1, "copies of each mem-tier chunk, on data servers of different --domain (1 or 2)")
	tierFree := fs.String("tier-free", "", "free-space thresholds Cs-w,Cf-m,Cn-m of every mem/ssd/hdd server, e.g. 4M,64M,256M (default: derived per server, docs/tiering.md)")
	bbPolicy := fs.String("bb-policy", "dedicated", "burst-buffer grant admission (policy/bbos): dedicated, maxbw, maxeff, lru, fifo or bbos")
	bbRates := fs.String("bb-rates", "", "the buffer's rates for the over-subscribing policies, MB/s: WRITE_MAX,WRITE_MIN,DEMOTE_MIN,DEMOTE_MAX (docs/bbos.md)")
	bbBypass := fs.Bool("bb-bypass", true, "bbos: write checkpoints classified cold on arrival straight to the PFS")
	bbVersions := fs.Bool("bb-versions", true, "cold data by checkpoint version first (false: by MTBF alone, the paper's baseline)")
	bbMTBF := fs.Duration("bb-mtbf", 24*time.Hour, "a burst-buffer grant's MTBF when its job names none (mtbf=)")
	bbPeriod := fs.Duration("bb-period", time.Hour, "the burst buffer's planning period when no grant names one (period=)")
	bbEvery := fs.Duration("bb-every", 250*time.Millisecond, "how often the burst-buffer manager looks at its pools")
	bbGap := fs.Duration("bb-gap", 0, "burst-buffer I/O scheduler: a job's phase ends after this long without a request (0: the servers' 10ms)")
	bbMaxWait := fs.Duration("bb-max-wait", 0, "burst-buffer I/O scheduler: no job waits longer for its turn (0: the servers' 10s)")
	placement := fs.String("placement", "perf", "how a new chunk's servers are ranked within a tier (policy/place): perf (max_perf / (open files + 1), Sunway §5), rr (round-robin) or wrandom (random weighted by max_perf)")
	ff := addForwardingFlags(fs)
	apart := fs.StringSlice("managers-apart", nil, "managers that run in processes of their own (`sluice manager serve`) instead of here: forwarding (needs --engine etcd)")
	eng := fs.String("engine", "pebble", "metadata engine: "+strings.Join(metad.Engines(), ", ")+"; a remote one by URI, etcd://HOST:PORT,HOST:PORT/PREFIX (docs/metadata.md)")
	etcdEPs := fs.String("etcd", "", "with --engine etcd: the etcd cluster's client addresses, HOST:PORT,HOST:PORT (keys under sluice/)")
	chunk := fs.String("chunk-size", "4M", "default chunk size of the root directory")
	maxOps := fs.Float64("max-ops", 0, "namespace operations served per second, at most (an emulated metadata server's capacity; 0: none)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on calls to data servers")
	reclaimWait := fs.Duration("reclaim-wait", metad.DefaultReclaimWait, "after a start or takeover: how long mounts have to reclaim their open handles (files unlinked while open stay meanwhile) before data moves by policy")
	return func(args []string) error {
		secret, err := df.setup()
		if err != nil {
			return err
		}
		chunkBytes, err := size.Parse(*chunk)
		if err != nil || chunkBytes <= 0 || chunkBytes > 1<<30 {
			return fmt.Errorf("--chunk-size %q: want a size up to 1G", *chunk)
		}
		bbp, bbr, err := parseBB(*bbPolicy, *bbRates)
		if err != nil {
			return err
		}
		maxB, err := bf.maxBytes()
		if err != nil {
			return err
		}
		pol, err := ff.policy()
		if err != nil {
			return err
		}
		if *tierMode != "auto" && *tierMode != "manual" {
			return fmt.Errorf("--tiering %q: want auto or manual", *tierMode)
		}
		tpol := tierpol.Config{}
		if *tierFree != "" {
			if tpol.Thresholds, err = parseThresholds(*tierFree); err != nil {
				return fmt.Errorf("--tier-free: %v", err)
			}
		}
		ctx, stop := signalContext()
		defer stop()
		return metad.Run(ctx, metad.Config{Listen: *df.listen, LocalSocket: *df.localSocket, Secret: secret,
			Ready:  func(addr string) error { return writeAddr(*df.addrFile, addr) },
			Engine: engineSpec(*eng, *etcdEPs), Dir: *dir, Log: logger("meta"), Metrics: df.reg,
			ChunkSize: uint32(chunkBytes), Timeout: *timeout, MaxOps: *maxOps, ReclaimWait: *reclaimWait, MemReplicas: *memReplicas, Placement: place.Policy(*placement),
			BeaconRetention: *bf.retention, BeaconMaxBytes: maxB, MonitorWindow: *df.mon.window, Monitors: *df.mon.monitors,
			Apart: *apart, FwdMode: *ff.mode, FwdCapacity: *ff.capMBps * 1e6, DFRA: pol,
			Tiering: tpol, TierAuto: *tierMode == "auto", TierEvery: *tierEvery, DrainDefault: *drainDefault, DrainAge: *drainAge,
			BBPolicy: bbp, BBRates: bbr, BBBypass: *bbBypass, BBVersions: *bbVersions, BBMTBF: *bbMTBF, BBPeriod: *bbPeriod,
			BBEvery: *bbEvery, BBGap: *bbGap, BBMaxWait: *bbMaxWait})
	}
}

// forwardingFlags are the forwarding manager's flags (DFRA), on the
// metadata daemon and on a manager daemon running it apart.
type forwardingFlags struct {
	mode    *string
	ratio   *int
	capMBps *float64
	vmin    *string
	pol     dfra.Config
}

func addForwardingFlags(fs *pflag.FlagSet) *forwardingFlags {
	f := &forwardingFlags{
		mode:    fs.String("fwd-policy", "dfra", "forwarding-node allocation of registered jobs: dfra or ffm (fixed mapping)"),
		ratio:   fs.Int("fwd-ratio", 4, "compute nodes per forwarding node under the fixed mapping"),
		capMBps: fs.Float64("fwd-capacity-mbps", 1000, "a forwarding node's bandwidth B_f for DFRA, MB/s"),
		vmin:    fs.String("dfra-vmin", "1G", "DFRA V_min: jobs moving less per run are not scaled up"),
	}
	pol := &f.pol
	fs.IntVar(&pol.NMin, "dfra-nmin", 1, "DFRA N_min: jobs with this many I/O nodes or fewer are not scaled up")
	fs.Float64Var(&pol.WMeta, "dfra-wmeta", 1000, "DFRA W_meta: jobs with this many metadata operations/s or more are not scaled up")
	fs.Float64Var(&pol.HighBW, "dfra-highbw", 0.5, "DFRA: a job using this fraction of a forwarding node's bandwidth is isolated")
	fs.IntVar(&pol.MaxFwds, "dfra-max-fwds", 0, "DFRA: at most this many forwarding nodes per job (0: no cap)")
	fs.Float64Var(&pol.Saturated, "dfra-saturated", 0.8, "DFRA: a run moving this fraction of its forwarding nodes' capacity was bound by them")
	fs.BoolVar(&pol.NoSpread, "dfra-no-spread", false, "DFRA: keep well-behaved jobs on shared fixed-mapping nodes even when others are idle (the paper's behaviour)")
	return f
}

// policy is DFRA's configuration from the flags.
func (f *forwardingFlags) policy() (dfra.Config, error) {
	pol := f.pol
	v, err := size.Parse(*f.vmin)
	if err != nil || v <= 0 {
		return pol, fmt.Errorf("--dfra-vmin %q: want a size > 0", *f.vmin)
	}
	pol.VMin, pol.Ratio = uint64(v), *f.ratio
	if pol.NMin == 0 {
		pol.NMin = -1 // any job with an I/O node
	}
	return pol, nil
}

var managerServeCmd = spec{use: "serve ROLE", short: "run a manager in a process of its own, one active at a time by a lease on the shared engine (a daemon role; ROLE: forwarding)",
	example: "sluice manager serve forwarding --listen 10.0.0.2:7500 --engine etcd://10.0.0.1:2379/sluice --meta 10.0.0.1:7100,10.0.0.2:7100 --secret-file /etc/sluice/secret",
	setup:   setupManager}

func setupManager(fs *pflag.FlagSet) func([]string) error {
	df := addDaemonFlags(fs, "127.0.0.1:7500")
	fs.MarkHidden("monitor") // a manager records nothing of its own
	fs.MarkHidden("monitors")
	eng := fs.String("engine", "", "the metadata daemons' shared engine, etcd://HOST:PORT,HOST:PORT/PREFIX: the manager keeps its state and holds its lease there")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address, or the comma-separated addresses of its servers, active and standing by")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on calls to the metadata service")
	ff := addForwardingFlags(fs)
	return func(args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("name the manager to run: %s", strings.Join(managerd.Roles, ", "))
		}
		if strings.HasSuffix(*df.listen, ":0") {
			return fmt.Errorf("--listen %s: a manager needs a fixed address (the metadata daemons dial the one its lease names)", *df.listen)
		}
		secret, err := df.setup()
		if err != nil {
			return err
		}
		pol, err := ff.policy()
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		return managerd.Run(ctx, managerd.Config{Role: args[0], Listen: *df.listen, LocalSocket: *df.localSocket, Secret: secret,
			Ready:  func(addr string) error { return writeAddr(*df.addrFile, addr) },
			Engine: *eng, Meta: *metaAddr, Timeout: *timeout, DFRA: pol, FwdMode: *ff.mode, FwdCapacity: *ff.capMBps * 1e6,
			Log: logger("manager-" + args[0])})
	}
}

var monitorServeCmd = spec{use: "serve", short: "run a monitor daemon: Beacon's record store, in a process of its own (a daemon role)",
	example: "sluice monitor serve --listen 10.0.0.2:7400 --dir /var/lib/sluice/monitor --secret-file /etc/sluice/secret", setup: setupMonitor}

func setupMonitor(fs *pflag.FlagSet) func([]string) error {
	df := addDaemonFlags(fs, "127.0.0.1:7400")
	dir := fs.String("dir", "", "directory of the record store (Pebble)")
	bf := addBeaconStoreFlags(fs)
	fs.MarkHidden("monitor") // a monitor records nothing of its own
	fs.MarkHidden("monitors")
	return func(args []string) error {
		if *dir == "" {
			return fmt.Errorf("--dir is required")
		}
		secret, err := df.setup()
		if err != nil {
			return err
		}
		maxB, err := bf.maxBytes()
		if err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		return monitord.Run(ctx, monitord.Config{Listen: *df.listen, LocalSocket: *df.localSocket, Secret: secret,
			Ready: func(addr string) error { return writeAddr(*df.addrFile, addr) },
			Dir:   *dir, Retention: *bf.retention, MaxBytes: maxB, Window: *df.mon.window, Log: logger("monitor")})
	}
}

var dataCmd = spec{use: "data --tier T --dir DIR", short: "run a data server for one tier",
	example: "sluice data --tier ssd --dir /nvme/sluice --capacity 800G --meta 10.0.0.1:7100 --secret-file /etc/sluice/secret", setup: setupData}

func setupData(fs *pflag.FlagSet) func([]string) error {
	df := addDaemonFlags(fs, "127.0.0.1:0")
	kind := fs.String("tier", "", "tier kind: mem, ssd, hdd or pfs")
	dir := fs.String("dir", "", "directory holding the chunks (tmpfs for mem; the PFS mount for pfs)")
	capacity := fs.String("capacity", "0", "byte budget (e.g. 2G); 0: the file system's size")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address, or the comma-separated addresses of its servers, active and standing by")
	mbps := fs.Float64("max-mbps", 0, "bandwidth cap in MB/s (emulates a slower device); 0: none")
	iops := fs.Float64("max-iops", 0, "IOPS cap; 0: none")
	qosSlots := fs.Int("qos-slots", 4, "chunk requests in service at once behind the QoS gate (docs/qos.md)")
	burst := fs.Duration("burst", 50*time.Millisecond, "how much of --max-mbps an idle device serves at once")
	node := fs.String("node", hostname(), "node name")
	domain := fs.String("domain", "", "failure domain (a cabinet): replicated chunks keep their copies in different domains; \"\": the server alone")
	zeroCopy := fs.Bool("zero-copy", true, "answer reads with sendfile from the chunk file instead of through a buffer")
	maxPerf := fs.Float64("max-perf", 0, "the bandwidth placement counts on from this server, MB/s (max_perf; 0: measured by a write probe before registering)")
	probeEvery := fs.Duration("probe-every", 10*time.Minute, "probe the device again this often, when it is idle (0: never)")
	keepFreed := fs.Duration("keep-freed", 0, "how long a deleted chunk's pages stay with the tier for new chunks, within its capacity (0: 10m for mem, none for the others; <0: none)")
	return func(args []string) error {
		if _, ok := tier.Rank(*kind); !ok {
			return fmt.Errorf("--tier %q: want mem, ssd, hdd or pfs", *kind)
		}
		if *dir == "" {
			return fmt.Errorf("--dir is required")
		}
		c, err := size.Parse(*capacity)
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
		mons, err := df.mon.targets(secret, log)
		if err != nil {
			return err
		}
		srv, err := data.New(data.Config{Monitors: mons, Kind: *kind, Dir: *dir, Capacity: c, Listen: *df.listen, LocalSocket: *df.localSocket, Meta: *metaAddr,
			Secret: secret, Node: *node, Domain: *domain, MaxMBps: *mbps, MaxIOPS: *iops, Burst: *burst, Log: log, Metrics: df.reg, ZeroCopy: *zeroCopy, QoSSlots: *qosSlots,
			MaxPerfMBps: *maxPerf, Probe: true, ProbeEvery: *probeEvery, KeepFreed: *keepFreed,
			Monitor: df.mon.collector(beacon.LayerData, "data-"+*kind), StateDir: state})
		if err != nil {
			return err
		}
		return runDaemon(srv, *df.addrFile, idFile)
	}
}

var fwdCmd = spec{use: "fwd", short: "run a forwarding daemon",
	example: "sluice fwd --listen 10.0.1.5:7200 --meta 10.0.0.1:7100 --secret-file /etc/sluice/secret", setup: setupFwd}

func setupFwd(fs *pflag.FlagSet) func([]string) error {
	df := addDaemonFlags(fs, "127.0.0.1:0")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address, or the comma-separated addresses of its servers, active and standing by")
	mbps := fs.Float64("max-mbps", 0, "link bandwidth cap in MB/s; 0: none")
	iops := fs.Float64("max-iops", 0, "request rate cap (every operation); 0: none")
	node := fs.String("node", hostname(), "node name")
	idFile := fs.String("id-file", "", "keep the assigned id here across restarts")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on each backend call")
	zeroCopy := fs.Bool("zero-copy", true, "splice data servers' answers to reads into the replies instead of copying them")
	workers := fs.String("workers", "16,16,8", "workers of the metadata, small and bulk pipeline classes (a bulk worker waits for its data server)")
	return func(args []string) error {
		secret, err := df.setup()
		if err != nil {
			return err
		}
		var w [wire.NumClasses]int
		for i, f := range strings.Split(*workers, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || i >= len(w) {
				return fmt.Errorf("--workers %q: want %d counts, e.g. 16,16,8", *workers, len(w))
			}
			w[i] = n
		}
		log := logger("fwd")
		mons, err := df.mon.targets(secret, log)
		if err != nil {
			return err
		}
		srv := fwd.New(fwd.Config{Monitors: mons, Listen: *df.listen, LocalSocket: *df.localSocket, Meta: *metaAddr, Secret: secret, Node: *node, Log: log, Workers: w,
			MaxMBps: *mbps, MaxIOPS: *iops, Timeout: *timeout, Metrics: df.reg, ZeroCopy: *zeroCopy,
			Monitor: df.mon.collector(beacon.LayerFwd, "fwd-"+*node)})
		return runDaemon(srv, *df.addrFile, *idFile)
	}
}

// noCacheIfZero maps a 0 cache timeout flag to the client's "no caching".
func noCacheIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// negativeIfZero maps a count flag's 0 (off) to the configuration's
// negative off.
func negativeIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

var mountCmd = spec{use: "mount MOUNTPOINT", short: "mount sluice with FUSE on this node",
	example: "sluice mount --meta 10.0.0.1:7100 --secret-file /etc/sluice/secret /sluice", setup: setupMount}

func setupMount(fs *pflag.FlagSet) func([]string) error {
	pprofAddr := fs.String("pprof", "", "serve Go profiles (net/http/pprof) on this loopback address")
	metaAddr := fs.String("meta", "127.0.0.1:7100", "metadata service address, or the comma-separated addresses of its servers, active and standing by (to find a forwarding node)")
	fwdAddr := fs.String("fwd", "", "forwarding node address (default: chosen by the fixed mapping)")
	secretFile := fs.String("secret-file", "", "file holding the cluster secret")
	node := fs.String("node", hostname(), "node name sent with every request")
	jobVar := fs.String("jobid-var", "SLURM_JOB_ID", "environment variable holding the job id")
	timeout := fs.Duration("timeout", 30*time.Second, "a request not answered within this fails with EIO")
	cache := fs.Bool("cache-data", false, "let the kernel cache file data (default: direct I/O)")
	writeBehind := fs.String("write-behind", "32M", "bytes of writes sent in the background before a write waits (0: every write waits for the forwarding node)")
	readahead := fs.String("readahead", "8M", "how far ahead of a sequential reader to fetch, per open file (0: off)")
	spliceReads := fs.Bool("splice-reads", true, "splice readahead replies from the forwarding node's socket into the FUSE device without copying them through the mount (where pipes can hold 1 MiB: root)")
	readCache := fs.String("read-cache", "512M", "bytes of blocks of files kept for small reads, close-to-open consistent through the change feed (docs/metadata.md, \"The block cache\"; 0: off)")
	wbCreates := fs.Bool("writeback-creates", true, "answer creates in directories this mount holds the delegation of at once and send them in batches (false: every create waits for the metadata service)")
	wbUnlinks := fs.Bool("writeback-unlinks", true, "with --writeback-creates, also answer removals of files in those directories at once and send them with the creates")
	createFlush := fs.Duration("create-flush", 10*time.Millisecond, "how long a write-back create may wait before it is sent")
	ownedCache := fs.String("owned-cache", "64M", "with --writeback-creates, bytes kept of small files this mount created, which answer read-only opens and reads here until another node needs them; when full, the files owned longest that nobody holds open go first (0: off)")
	wbCloses := fs.Int("writeback-closes", 256, "with --owned-cache, closes of files this mount owns that may return before their writes and size reach the service, which they do in the background; the file stays out of other nodes' reach until then (0: every close waits)")
	atime := fs.String("atime", "relatime", "when reads update access times: relatime (when not after the file's last change, or a day old), strictatime (every read) or noatime; mount(8)'s options of those names set it (docs/metadata.md, \"Access times\")")
	noDiratime := fs.Bool("nodiratime", false, "listing a directory leaves its access time as it is")
	debug := fs.Bool("debug", false, "log every FUSE request")
	attrTO := fs.Duration("attr-timeout", time.Second, "how long the kernel may cache attributes (0: every stat reaches the metadata service)")
	entryTO := fs.Duration("entry-timeout", time.Second, "how long the kernel may cache name lookups (0: no caching)")
	metaCache := fs.Duration("meta-cache", 60*time.Second, "how long the kernel may cache lookups and attributes while the mount follows the metadata change feed (0: do not follow it; --attr-timeout and --entry-timeout apply)")
	feedDelay := fs.Duration("fault-feed-delay", 0, "fault injection: apply each batch of the metadata change feed this much later (a slow metadata service; tests)")
	wbDelay := fs.Duration("fault-writeback-delay", 0, "fault injection: with --writeback-closes, writes in the background go this much later, and so do the reports of the closes that returned before them (tests)")
	mon := addMonitorFlags(fs)
	source := fs.String("source", "", "the mount's source in the mount table (default: the --meta addresses)")
	options := fs.StringP("options", "o", "", "mount options, comma-separated (as mount(8) and fstab give them, docs/deploy.md): ro, dev, suid, exec and their negations for the kernel (default rw, nodev, nosuid), and any flag of this command as NAME or NAME=VALUE")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics")
	return func(args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("want one mount point, got %d arguments", len(args))
		}
		kernelOpts, err := applyMountOptions(fs, *options)
		if err != nil {
			return err
		}
		wb, err := sizeFlag("write-behind", *writeBehind)
		if err != nil {
			return err
		}
		ra, err := sizeFlag("readahead", *readahead)
		if err != nil {
			return err
		}
		owned, err := sizeFlag("owned-cache", *ownedCache)
		if err != nil {
			return err
		}
		rc, err := sizeFlag("read-cache", *readCache)
		if err != nil {
			return err
		}
		reg := prometheus.NewRegistry()
		startPprof(*pprofAddr, reg)
		if err := serveMetrics(*metricsAddr, reg); err != nil {
			return err
		}
		mnt := args[0]
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
		fsys, err := client.New(cctx, client.Config{Mountpoint: mnt, Debug: *debug, Source: cmp.Or(*source, *metaAddr), Options: kernelOpts,
			Monitor: mon.collector(beacon.LayerClient, "client@"+*node), Metrics: reg,
			Config: vfs.Config{Fwd: *fwdAddr, Meta: *metaAddr, Secret: secret, Node: *node, JobVar: *jobVar, Log: log,
				Timeout: *timeout, CacheData: *cache, WriteBehind: wb, Readahead: ra, SpliceReads: *spliceReads,
				WritebackCreates: *wbCreates, WritebackUnlinks: *wbUnlinks, CreateFlush: *createFlush, OwnedCache: owned,
				WritebackCloses: negativeIfZero(*wbCloses), ReadCache: rc, AttrTimeout: noCacheIfZero(*attrTO),
				EntryTimeout: noCacheIfZero(*entryTO), MetaCache: noCacheIfZero(*metaCache), FeedDelay: *feedDelay,
				WritebackDelay: *wbDelay, Atime: vfs.AtimeRule(*atime), NoDiratime: *noDiratime}})
		cancel()
		if err != nil {
			return err
		}
		if err := fsys.Serve(ctx, announceMount(*metaAddr, secret, mnt, *node, log)); err != nil {
			return fmt.Errorf("mount %s: %v", mnt, err)
		}
		return nil
	}
}

// parseThresholds reads "Cs-w,Cf-m,Cn-m" sizes.
func parseThresholds(v string) (tierpol.Thresholds, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return tierpol.Thresholds{}, fmt.Errorf("want three sizes Cs-w,Cf-m,Cn-m, got %q", v)
	}
	var n [3]uint64
	for i, p := range parts {
		x, err := size.Parse(strings.TrimSpace(p))
		if err != nil || x < 0 {
			return tierpol.Thresholds{}, fmt.Errorf("%q: not a size", p)
		}
		n[i] = uint64(x)
	}
	t := tierpol.Thresholds{StallWrite: n[0], ForcedOut: n[1], NormalOut: n[2]}
	return t, t.Valid()
}

// announceMount registers a mount in the metadata service's registry
// (so that cluster status lists it) and keeps it there until ctx ends.
func announceMount(metaAddr string, secret []byte, mnt, node string, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		mc := rpc.NewClient(metaAddr, secret, rpc.ClientOptions{Timeout: 5 * time.Second, Name: "metadata service"})
		defer mc.Close()
		mem := &member.Member{Meta: mc, Log: log, Info: func() wire.ServerInfo {
			return wire.ServerInfo{Role: "client", Addr: mnt, Node: node}
		}}
		if err := mem.Register(ctx); err == nil {
			mem.Run(ctx)
		}
	}
}

// engineSpec is --engine with --etcd's addresses: etcd plus addresses is
// the etcd engine's URI.
func engineSpec(eng, etcd string) string {
	if eng == "etcd" && etcd != "" {
		return "etcd://" + etcd + "/sluice"
	}
	return eng
}
