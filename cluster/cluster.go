// Package cluster owns the local all-in-one deployment behind `sluice cluster up`:
// it starts every role as a separate process of the same binary (metadata
// service with the embedded engine, data servers for mem, ssd and pfs, two
// forwarding daemons, and the FUSE client), records them in the state
// directory so `sluice cluster down`, `status` and `restart` find them, and stops
// them again. It does not implement any role itself.
package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/meta/engine/etcdserver"
)

// Options of a local cluster.
type Options struct {
	Exe      string // the sluice binary
	Dir      string // state directory
	Mount    string
	MemBytes int64
	SSDBytes int64 // 0 disables the ssd tier
	HDDBytes int64 // 0 (the default) leaves the hdd tier out
	PFS      string
	Fwds     int
	// MemServers is the number of mem-tier data servers (default 1); each
	// gets MemBytes.
	MemServers int
	// MemReplicas is the copies each mem-tier chunk keeps (the metadata
	// daemon's --mem-replicas; 0 or 1: one). With 2 each mem server is a
	// failure domain of its own (--domain cabN).
	MemReplicas int
	Engine      string
	// MetaStandbys is how many metadata daemons stand by beside the
	// active one (engine etcd only): named meta-1, meta-2…, each with an
	// address of its own; every client is given the list (MetaAddr).
	MetaStandbys int
	// Monitors is how many monitor daemons (`sluice monitor`) keep
	// Beacon's records, dividing the jobs between them (monitor-0…); 0:
	// the metadata daemon keeps them.
	Monitors int
	// Managers is how many manager daemons (`sluice manager serve
	// forwarding`, manager-0…) run the forwarding manager apart from the
	// metadata daemons, one active by a lease on etcd; 0: it runs in the
	// active metadata daemon. Needs the etcd engine.
	Managers int
	// FwdMBps and FwdIOPS cap each forwarding daemon (emulated link);
	// FwdMBps is also the manager's B_f. DataMBps and DataIOPS cap each
	// mem-tier data server (emulated device).
	FwdMBps, FwdIOPS   float64
	DataMBps, DataIOPS float64
	// DataMBpsEach, if set, caps the mem-tier data servers one by one
	// (MB/s, in order; one per server), instead of DataMBps.
	DataMBpsEach []float64
	// SSDMBps, HDDMBps and PFSMBps cap the ssd, hdd and pfs data servers
	// (emulated devices, to give the tiers the speed ratios of a real
	// machine).
	SSDMBps, HDDMBps, PFSMBps float64
	// DeviceBurst is how much of its cap an idle data server serves at
	// once (0: the servers' default, 50 ms).
	DeviceBurst time.Duration
	// MemKeepFreed is the mem data servers' --keep-freed (0: theirs, 10m;
	// < 0: none): how long deleted chunks' pages stay for new chunks.
	MemKeepFreed time.Duration
	// MetaFlags are extra flags of the metadata daemon (DFRA thresholds).
	MetaFlags []string
	// MountFlags are extra flags of the mount (--writeback-creates).
	MountFlags []string
	// FwdFlags are extra flags of every forwarding daemon (--workers).
	FwdFlags []string
	// DataFlags are extra flags of every data server (--zero-copy=false).
	DataFlags []string
	JobVar    string // environment variable holding the job id (mount)
	// NoMonitor turns Beacon's per-operation records off in every daemon
	// (to measure what monitoring costs).
	NoMonitor bool
	// FwdPolicy is the metadata daemon's --fwd-policy (dfra or ffm).
	FwdPolicy string
	Timeout   time.Duration
	// ZeroCopy turns --zero-copy on in the data servers ("data": reads
	// answered with sendfile), the forwarding daemons ("fwd": answers
	// spliced on), both ("all") or neither ("" or "none").
	ZeroCopy string
	// TCPOnly keeps the daemons off their local unix sockets
	// (--local-socket=false): every hop over TCP on loopback, as
	// between hosts.
	TCPOnly bool
	// PprofBase, if set, gives the i-th daemon (in cluster.json's order)
	// Go profiles on 127.0.0.1:PprofBase+i (bench/profile.sh).
	PprofBase int
	// PlainMem keeps the mem tier in /dev/shm's own tmpfs, with small
	// pages, instead of mounting one with large folios for it (mountMemFS;
	// only root can, and others always get /dev/shm's).
	PlainMem bool
	// Procs, if set, is every daemon's GOMAXPROCS (not the mount's): on
	// one host they share its cores, and a Go process running more
	// threads than its share of them hands its goroutines between threads
	// (a futex wake, a steal) at every request (docs/benchmarks.md, "What
	// a remote 4 KiB read costs"). The mount keeps the default: its FUSE
	// readers want the parallelism (four streams read 13-21 % slower
	// with it at one). 0: the Go runtime's default, a thread per core in
	// each process.
	Procs int
	// ExitWith, if set, ties the cluster to process ExitWith: a watcher
	// takes it down (as `sluice cluster down --purge`) when that process ends
	// (watch.go).
	ExitWith int
	// ExitRemove has that watcher delete the state directory too, once
	// the cluster is down.
	ExitRemove bool
	// Hosts puts every role on an emulated host of its own, a network
	// namespace on a bridge (hosts.go; root only); ComputeHosts is how
	// many compute hosts there are (default 1; the mount is on the
	// first).
	Hosts        bool
	ComputeHosts int
}

// Daemon is one process of the cluster.
type Daemon struct {
	Name string
	// Exe is its executable ("": the sluice binary; an etcd member's is
	// etcd).
	Exe  string `json:",omitempty"`
	Args []string
	// Env is added to the environment it starts with (GOMAXPROCS).
	Env []string `json:",omitempty"`
	// Host is the emulated host it runs on ("": this one).
	Host string `json:",omitempty"`
	Pid  int
}

// servers counts the data servers and forwarding nodes, which register
// with the metadata service.
func (c *Cluster) servers() int {
	n := 0
	for _, d := range c.Daemons {
		if d.Exe == "" && len(d.Args) > 0 && (d.Args[0] == "data" || d.Args[0] == "fwd") {
			n++
		}
	}
	return n
}

// flagValue is the value given to flag name (as "--name value") in a
// daemon's arguments; ok is false if the flag is not there.
func flagValue(args []string, name string) (v string, ok bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// Cluster is the recorded state of a local cluster.
type Cluster struct {
	Dir      string
	Mount    string
	MetaAddr string
	Exe      string
	// MemFS is the mount options of the mem tier's own tmpfs
	// (mountMemFS), empty where the tier is in /dev/shm's.
	MemFS string `json:",omitempty"`
	// MemFSErr says why the mem tier is not on its own tmpfs when
	// mounting one failed (not saved).
	MemFSErr string `json:"-"`
	Daemons  []Daemon
	// Watcher is the pid of the process that takes the cluster down
	// when the one it was tied to ends (Options.ExitWith; 0: none).
	Watcher int `json:",omitempty"`
	// Net and Hosts are the emulated network and hosts (Options.Hosts).
	Net   hostNet `json:",omitempty"`
	Hosts []Host  `json:",omitempty"`
}

// SecretFile is where the cluster secret lives.
func (c *Cluster) SecretFile() string { return filepath.Join(c.Dir, "secret") }

func (c *Cluster) save() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(c.Dir, "cluster.json"), b, 0o600)
}

// Load reads a cluster's state.
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return nil, fmt.Errorf("no cluster in %s: %v", dir, err)
	}
	var c Cluster
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s/cluster.json: %v", dir, err)
	}
	return &c, nil
}

func currentFile() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".sluice", "current")
}

// Current returns the state directory of the cluster started last.
func Current() (string, error) {
	b, err := os.ReadFile(currentFile())
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// memDir returns a tmpfs directory for the mem tier of the cluster with
// state dir d and the given secret: a new cluster (new secret) never finds
// chunks of an earlier one in the same place.
func memDir(d string, secret []byte) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		h := fnv.New64a()
		h.Write([]byte(d))
		h.Write(secret)
		return fmt.Sprintf("/dev/shm/sluice-%016x/mem", h.Sum64())
	}
	return filepath.Join(d, "mem")
}

// underShm reports whether a mem tier directory's parent is the
// per-cluster directory memDir makes under /dev/shm (else it is the state
// directory, which goes with the cluster).
func underShm(parent string) bool { return filepath.Dir(parent) == "/dev/shm" }

// ownerFile names, in a mem tier's per-cluster tmpfs directory, the file
// holding the cluster's state directory: a cluster whose state directory
// is gone (a test's or a benchmark's, removed without `sluice cluster down
// --purge`, or after a kill) left its chunks in memory, and the next `up`
// frees them.
const ownerFile = "owner"

// claimMemDir records state dir d as the owner of mem tier directory
// mdir's parent.
func claimMemDir(mdir, d string) error {
	parent := filepath.Dir(mdir)
	if !underShm(parent) {
		return nil // under the state directory: goes with it
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(parent, ownerFile), []byte(d), 0o600)
}

// sweepOrphanMem removes the mem tier directories under /dev/shm whose
// owner's state directory no longer exists, and returns them.
func sweepOrphanMem() []string {
	owners, _ := filepath.Glob("/dev/shm/sluice-*/" + ownerFile)
	var gone []string
	for _, f := range owners {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		if _, err := os.Stat(string(b)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		parent := filepath.Dir(f)
		if removeMemDir(parent) == nil {
			gone = append(gone, parent)
		}
	}
	return gone
}

// Up starts a cluster and returns once the mount is usable.
func Up(o Options) (*Cluster, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	mnt, err := filepath.Abs(o.Mount)
	if err != nil {
		return nil, err
	}
	old, oldErr := Load(dir)
	if oldErr == nil {
		if old.alive() {
			return nil, fmt.Errorf("a cluster is already running in %s (sluice cluster down --dir %s)", dir, dir)
		}
		// the watcher of the cluster that ran here (its daemons gone
		// without a down) would take this one down with its process
		if old.Watcher != 0 && isWatcher(old.Watcher, old.Dir) {
			stopPid(old.Watcher)
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, "logs"), mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	secretFile := filepath.Join(dir, "secret")
	if _, err := os.Stat(secretFile); err != nil {
		b := make([]byte, 32)
		rand.Read(b)
		if err := atomicfile.Write(secretFile, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if o.Fwds <= 0 {
		o.Fwds = 2
	}
	if o.Engine == "" {
		o.Engine = "pebble"
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.PFS == "" {
		o.PFS = filepath.Join(dir, "pfs")
	}
	c := &Cluster{Dir: dir, Mount: mnt, Exe: o.Exe}
	pl := &planner{o: o, c: c, dir: dir, secretFile: secretFile, ports: map[string]string{}, picker: newPortPicker()}
	defer pl.picker.release()
	if o.Hosts {
		moved, err := c.layoutHosts(o, old)
		if err != nil {
			return nil, err
		}
		if moved {
			oldErr = errors.New("new addresses") // plan the daemons anew
		}
		pl.o.TCPOnly = true // unix sockets would reach across hosts
	}
	// ports are fixed at first start so restarted daemons come back at the
	// same address (and etcd members with the same peers)
	if oldErr == nil {
		for _, d := range old.Daemons {
			if addr, ok := flagValue(d.Args, "--listen"); ok {
				pl.ports[d.Name] = addr
			}
			if d.Exe != "" {
				pl.old = append(pl.old, d)
			}
		}
	}
	if err := pl.plan(); err != nil {
		return nil, err
	}
	pl.picker.release()
	if o.Hosts {
		for i := range c.Daemons {
			c.Daemons[i].Host = hostOf(c.Daemons[i].Name)
		}
		if err := c.makeHosts(); err != nil {
			return nil, err
		}
	}
	if err := c.startAll(o); err != nil {
		c.removeHosts()
		return nil, err
	}
	if err := waitMounted(mnt, 20*time.Second, func() bool { return processAlive(c.pid("mount")) }); err != nil {
		c.stop()
		return nil, fmt.Errorf("mount did not come up: %v%s", err, c.logTail("mount"))
	}
	os.MkdirAll(filepath.Dir(currentFile()), 0o700)
	atomicfile.Write(currentFile(), []byte(dir+"\n"), 0o600)
	return c, nil
}

// planner lays out a cluster's daemons and their flags (Up).
type planner struct {
	o          Options
	c          *Cluster
	dir        string
	secretFile string
	ports      map[string]string // the daemons' listening addresses from the last start
	old        []Daemon          // the etcd members of the last start
	picker     *portPicker
	common     []string // every daemon's flags
	listening  []string // the flags of the daemons that listen
	to         string   // the timeout flag
	monitors   []string // the flag naming the monitor daemons (none: the metadata daemon keeps the records)
	dataIndex  int      // the data server being planned (its port on an emulated host)
}

// plan fills c's daemons: the metadata service, the data servers of
// every tier configured, the forwarding nodes and the mount.
func (pl *planner) plan() error {
	o, c := pl.o, pl.c
	if o.MetaStandbys > 0 && o.Engine != "etcd" {
		return fmt.Errorf("metadata standbys need the etcd engine (--engine etcd): the others live in one process's directory")
	}
	var metaAddrs []string
	for i := 0; i <= o.MetaStandbys; i++ {
		a, err := pl.port(metaName(i))
		if err != nil {
			return err
		}
		metaAddrs = append(metaAddrs, a)
	}
	c.MetaAddr = strings.Join(metaAddrs, ",")
	metaAddr := c.MetaAddr
	pl.common = []string{"--secret-file", pl.secretFile}
	if o.NoMonitor {
		pl.common = append(pl.common, "--monitor=false")
	}
	pl.to = "--timeout=" + o.Timeout.String()
	pl.listening = []string{"--local-socket=" + strconv.FormatBool(!o.TCPOnly)}
	eng := o.Engine
	if eng == "etcd" {
		var err error
		if eng, err = pl.etcd(); err != nil {
			return err
		}
	}
	var margsMeta []string
	if err := pl.monitorDaemons(); err != nil {
		return err
	}
	margsMeta = append(margsMeta, pl.monitors...)
	var fwdArgs []string // the forwarding manager's
	if o.FwdPolicy != "" {
		fwdArgs = append(fwdArgs, "--fwd-policy", o.FwdPolicy)
	}
	if o.FwdMBps > 0 {
		fwdArgs = append(fwdArgs, "--fwd-capacity-mbps", ftoa(o.FwdMBps))
	}
	if o.Managers > 0 {
		if o.Engine != "etcd" {
			return fmt.Errorf("manager daemons need the etcd engine (--engine etcd): they hold their lease and keep their state there")
		}
		margsMeta = append(margsMeta, "--managers-apart", "forwarding")
	} else {
		margsMeta = append(margsMeta, fwdArgs...)
	}
	if o.MemReplicas > 1 {
		margsMeta = append(margsMeta, "--mem-replicas", strconv.Itoa(o.MemReplicas))
	}
	margsMeta = append(margsMeta, o.MetaFlags...)
	for i, a := range metaAddrs {
		args := slices.Concat([]string{"meta", "--listen", a, "--dir", filepath.Join(pl.dir, metaName(i)), "--engine", eng, pl.to},
			margsMeta, pl.listening, pl.common)
		c.Daemons = append(c.Daemons, Daemon{Name: metaName(i), Args: args})
	}
	// after the metadata daemons, which wait for etcd
	if err := pl.managerDaemons(eng, fwdArgs); err != nil {
		return err
	}
	if err := pl.dataServers(); err != nil {
		return err
	}
	for i := 0; i < o.Fwds; i++ {
		if err := pl.fwd(fmt.Sprintf("fwd-%d", i)); err != nil {
			return err
		}
	}
	margs := []string{"mount", "--meta", metaAddr, pl.to}
	if len(c.Hosts) > 0 {
		margs = append(margs, "--node", hostOf("mount"))
	}
	if o.JobVar != "" {
		margs = append(margs, "--jobid-var", o.JobVar)
	}
	margs = append(margs, o.MountFlags...)
	c.Daemons = append(c.Daemons, Daemon{Name: "mount", Args: append(append(margs, pl.common...), c.Mount)})
	return nil
}

// etcd adds the three members of an etcd cluster for the metadata (those
// of the last start, if any) and returns the engine's URI.
func (pl *planner) etcd() (string, error) {
	exe, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("--engine etcd needs etcd on PATH (apt-get install etcd-server)")
	}
	cfg := etcdserver.Config{Dir: filepath.Join(pl.dir, "etcd"), Members: 3}
	for i := 0; i < cfg.Members && len(pl.c.Hosts) > 0; i++ {
		h, err := pl.c.host(hostOf("etcd" + strconv.Itoa(i)))
		if err != nil {
			return "", err
		}
		cfg.Hosts = append(cfg.Hosts, h.Addr)
	}
	members := pl.old
	if len(members) == 0 {
		plan, err := etcdserver.Plan(cfg)
		if err != nil {
			return "", err
		}
		for _, m := range plan {
			members = append(members, Daemon{Name: m.Name, Exe: exe, Args: m.Args})
		}
	}
	pl.c.Daemons = append(pl.c.Daemons, members...)
	return etcdserver.URI(pl.c.etcdEndpoints(), "sluice", cfg), nil
}

// etcdEndpoints are the client URLs of the cluster's etcd members.
func (c *Cluster) etcdEndpoints() []string {
	var eps []string
	for _, d := range c.Daemons {
		if u, ok := flagValue(d.Args, "--listen-client-urls"); ok && d.Exe != "" {
			eps = append(eps, u)
		}
	}
	return eps
}

// tierd is a data server to start: its name, tier, directory, capacity
// and failure domain.
type tierd struct {
	name, kind, dir string
	cap             int64
	domain          string
}

// dataServers adds the data servers of every tier configured (the mem
// tier's directory on a tmpfs of its own where it can).
func (pl *planner) dataServers() error {
	o, c, dir := pl.o, pl.c, pl.dir
	secret, err := os.ReadFile(pl.secretFile)
	if err != nil {
		return err
	}
	mdir := memDir(dir, secret)
	sweepOrphanMem()
	if o.MemBytes > 0 {
		if parent := filepath.Dir(mdir); !o.PlainMem && underShm(parent) {
			// not root, or a kernel without huge= for tmpfs: the tier
			// stays in /dev/shm's own tmpfs (MemFS says which)
			if c.MemFS, err = mountMemFS(parent); err != nil {
				c.MemFSErr = err.Error()
			}
		}
		if err := claimMemDir(mdir, dir); err != nil {
			return err
		}
	}
	if n := len(o.DataMBpsEach); n > 0 && n != max(o.MemServers, 1) {
		return fmt.Errorf("%d mem-tier caps for %d mem-tier data servers", n, max(o.MemServers, 1))
	}
	tiers := []tierd{{"data-mem", "mem", mdir, o.MemBytes, "cab0"}}
	for i := 1; i < o.MemServers; i++ {
		tiers = append(tiers, tierd{fmt.Sprintf("data-mem-%d", i), "mem", fmt.Sprintf("%s-%d", mdir, i), o.MemBytes, fmt.Sprintf("cab%d", i)})
	}
	tiers = append(tiers, tierd{"data-ssd", "ssd", filepath.Join(dir, "ssd"), o.SSDBytes, ""},
		tierd{"data-hdd", "hdd", filepath.Join(dir, "hdd"), o.HDDBytes, ""},
		tierd{"data-pfs", "pfs", o.PFS, 0, ""})
	for i, t := range tiers {
		if (t.kind != "pfs" && t.cap <= 0) || (t.kind == "pfs" && o.PFS == "none") {
			continue
		}
		if err := pl.data(i, t); err != nil {
			return err
		}
	}
	return nil
}

// data adds data server t, the i-th of the tiers' list.
func (pl *planner) data(i int, t tierd) error {
	o := pl.o
	pl.dataIndex = i
	a, err := pl.port(t.name)
	if err != nil {
		return err
	}
	args := append([]string{"data", "--tier", t.kind,
		"--listen", a, "--dir", t.dir, "--capacity", strconv.FormatInt(t.cap, 10), "--meta", pl.c.MetaAddr}, slices.Concat(pl.listening, pl.common, pl.monitors)...)
	args = append(args, "--zero-copy="+strconv.FormatBool(o.ZeroCopy == "data" || o.ZeroCopy == "all"))
	if len(pl.c.Hosts) > 0 {
		args = append(args, "--node", hostOf(t.name))
	}
	if o.MemReplicas > 1 && t.domain != "" {
		args = append(args, "--domain", t.domain)
	}
	if t.kind == "mem" && i < len(o.DataMBpsEach) && o.DataMBpsEach[i] > 0 {
		args = append(args, "--max-mbps", ftoa(o.DataMBpsEach[i]))
	} else if t.kind == "mem" && o.DataMBps > 0 {
		args = append(args, "--max-mbps", ftoa(o.DataMBps))
	}
	if mbps := map[string]float64{"ssd": o.SSDMBps, "hdd": o.HDDMBps, "pfs": o.PFSMBps}[t.kind]; mbps > 0 {
		args = append(args, "--max-mbps", ftoa(mbps))
	}
	if o.DeviceBurst > 0 {
		args = append(args, "--burst", o.DeviceBurst.String())
	}
	if t.kind == "mem" && o.MemKeepFreed != 0 {
		args = append(args, "--keep-freed", o.MemKeepFreed.String())
	}
	if t.kind == "mem" && o.DataIOPS > 0 {
		args = append(args, "--max-iops", ftoa(o.DataIOPS))
	}
	args = append(args, o.DataFlags...)
	pl.c.Daemons = append(pl.c.Daemons, Daemon{Name: t.name, Args: args})
	return nil
}

// fwd adds forwarding node name.
func (pl *planner) fwd(name string) error {
	o := pl.o
	a, err := pl.port(name)
	if err != nil {
		return err
	}
	args := append([]string{"fwd", "--listen", a, "--meta", pl.c.MetaAddr, "--node", name,
		"--id-file", filepath.Join(pl.dir, name+".id"), pl.to}, slices.Concat(pl.listening, pl.common, pl.monitors)...)
	args = append(args, "--zero-copy="+strconv.FormatBool(o.ZeroCopy == "fwd" || o.ZeroCopy == "all"))
	if o.FwdMBps > 0 {
		args = append(args, "--max-mbps", ftoa(o.FwdMBps))
	}
	if o.FwdIOPS > 0 {
		args = append(args, "--max-iops", ftoa(o.FwdIOPS))
	}
	args = append(args, o.FwdFlags...)
	pl.c.Daemons = append(pl.c.Daemons, Daemon{Name: name, Args: args})
	return nil
}

// startAll starts the planned daemons in order (the watcher that takes
// them down with process o.ExitWith first), the mount once the data
// servers and forwarding nodes registered.
func (c *Cluster) startAll(o Options) error {
	if o.ExitWith > 0 {
		// first, so that the daemons started are taken down even if
		// the process dies while up starts the rest (each is recorded
		// as it starts)
		if err := c.startWatcher(o.ExitWith, o.ExitRemove); err != nil {
			return err
		}
	}
	for i := range c.Daemons {
		d := &c.Daemons[i]
		if o.PprofBase > 0 && d.Exe == "" {
			d.Args = withFlag(d.Args, "--pprof", fmt.Sprintf("127.0.0.1:%d", o.PprofBase+i))
		}
		if o.Procs > 0 && d.Name != "mount" {
			d.Env = append(d.Env, "GOMAXPROCS="+strconv.Itoa(o.Procs))
		}
		if d.Name == "mount" {
			// wait until the data servers and forwarding nodes have
			// registered, so the mount can pick a forwarding node
			if err := c.waitRegistered(c.servers(), 20*time.Second); err != nil {
				c.stop()
				return err
			}
		}
		if d.Name == "meta" && len(c.etcdEndpoints()) > 0 {
			if err := etcdserver.Wait(c.etcdEndpoints(), 30*time.Second, nil); err != nil {
				c.stop()
				return fmt.Errorf("%v%s", err, c.logTail("etcd0"))
			}
		}
		if err := c.start(d); err != nil {
			c.stop()
			return err
		}
		if c.Watcher != 0 {
			if err := c.save(); err != nil {
				c.stop()
				return err
			}
		}
		if d.Name == "meta" { // the first is active; the standbys listen only once one of them is
			if err := waitListening(strings.Split(c.MetaAddr, ",")[0], 10*time.Second); err != nil {
				c.stop()
				return fmt.Errorf("metadata service did not start: %v%s", err, c.logTail("meta"))
			}
		}
	}
	return c.save()
}
