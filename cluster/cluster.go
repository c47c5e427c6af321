// Package cluster owns the local all-in-one deployment behind `sluice up`:
// it starts every role as a separate process of the same binary (metadata
// service with the embedded engine, data servers for mem, ssd and pfs, two
// forwarding daemons, and the FUSE client), records them in the state
// directory so `sluice down`, `status` and `restart` find them, and stops
// them again. It does not implement any role itself.
package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	mrand "math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Options of a local cluster.
type Options struct {
	Exe      string // the sluice binary
	Dir      string // state directory
	Mount    string
	MemBytes int64
	SSDBytes int64 // 0 disables the ssd tier
	PFS      string
	Fwds     int
	// MemServers is the number of mem-tier data servers (default 1); each
	// gets MemBytes.
	MemServers int
	Engine     string
	// FwdMBps and FwdIOPS cap each forwarding daemon (emulated link);
	// FwdMBps is also the manager's B_f. DataMBps and DataIOPS cap each
	// mem-tier data server (emulated device).
	FwdMBps, FwdIOPS   float64
	DataMBps, DataIOPS float64
	// MetaFlags are extra flags of the metadata daemon (DFRA thresholds).
	MetaFlags []string
	// MountFlags are extra flags of the mount (--writeback-creates).
	MountFlags []string
	JobVar     string // environment variable holding the job id (mount)
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
	// PprofBase, if set, gives the i-th daemon (in cluster.json's order)
	// Go profiles on 127.0.0.1:PprofBase+i (bench/profile.sh).
	PprofBase int
}

// Daemon is one process of the cluster.
type Daemon struct {
	Name string
	Args []string
	Pid  int
}

// Cluster is the recorded state of a local cluster.
type Cluster struct {
	Dir      string
	Mount    string
	MetaAddr string
	Exe      string
	Daemons  []Daemon
}

// SecretFile is where the cluster secret lives.
func (c *Cluster) SecretFile() string { return filepath.Join(c.Dir, "secret") }

func (c *Cluster) save() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(c.Dir, "cluster.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, "cluster.json"))
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

// portPicker hands out distinct loopback ports for a cluster's daemons. A
// port taken from the kernel's ephemeral range can be handed to some other
// process's outgoing connection between our check and the daemon's bind (CI
// saw exactly that), so ports come from below that range; every port picked
// stays bound until release, so one cluster never gets the same port twice.
type portPicker struct {
	held []net.Listener
	rng  *mrand.Rand
}

func newPortPicker() *portPicker {
	return &portPicker{rng: mrand.New(mrand.NewSource(time.Now().UnixNano() ^ int64(os.Getpid())))}
}

// ephemeralLow is the lowest port the kernel uses for outgoing connections.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

func (p *portPicker) pick() (string, error) {
	const lo = 10000
	if hi := ephemeralLow(); hi-lo >= 1000 {
		for i := 0; i < 200; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+p.rng.Intn(hi-lo)))
			if err == nil {
				p.held = append(p.held, ln)
				return ln.Addr().String(), nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.held = append(p.held, ln)
	return ln.Addr().String(), nil
}

// release unbinds the picked ports so the daemons can take them.
func (p *portPicker) release() {
	for _, ln := range p.held {
		ln.Close()
	}
	p.held = nil
}

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
	if old, err := Load(dir); err == nil && old.alive() {
		return nil, fmt.Errorf("a cluster is already running in %s (sluice down --dir %s)", dir, dir)
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
		if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
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
	// ports are fixed at first start so restarted daemons come back at the
	// same address
	ports := map[string]string{}
	if old, err := Load(dir); err == nil {
		for _, d := range old.Daemons {
			for i, a := range d.Args {
				if a == "--listen" && i+1 < len(d.Args) {
					ports[d.Name] = d.Args[i+1]
				}
			}
		}
	}
	picker := newPortPicker()
	defer picker.release()
	port := func(name string) (string, error) {
		if p, ok := ports[name]; ok {
			return p, nil
		}
		return picker.pick()
	}
	metaAddr, err := port("meta")
	if err != nil {
		return nil, err
	}
	c.MetaAddr = metaAddr
	common := []string{"--secret-file", secretFile}
	if o.NoMonitor {
		common = append(common, "--monitor=false")
	}
	to := "--timeout=" + o.Timeout.String()
	margsMeta := []string{"meta", "--listen", metaAddr, "--dir", filepath.Join(dir, "meta"), "--engine", o.Engine, to}
	if o.FwdPolicy != "" {
		margsMeta = append(margsMeta, "--fwd-policy", o.FwdPolicy)
	}
	if o.FwdMBps > 0 {
		margsMeta = append(margsMeta, "--fwd-capacity-mbps", ftoa(o.FwdMBps))
	}
	margsMeta = append(margsMeta, o.MetaFlags...)
	c.Daemons = append(c.Daemons, Daemon{Name: "meta", Args: append(margsMeta, common...)})
	type tierd struct {
		name, kind, dir string
		cap             int64
	}
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		return nil, err
	}
	mdir := memDir(dir, secret)
	tiers := []tierd{{"data-mem", "mem", mdir, o.MemBytes}}
	for i := 1; i < o.MemServers; i++ {
		tiers = append(tiers, tierd{fmt.Sprintf("data-mem-%d", i), "mem", fmt.Sprintf("%s-%d", mdir, i), o.MemBytes})
	}
	tiers = append(tiers, tierd{"data-ssd", "ssd", filepath.Join(dir, "ssd"), o.SSDBytes},
		tierd{"data-pfs", "pfs", o.PFS, 0})
	for _, t := range tiers {
		if (t.kind != "pfs" && t.cap <= 0) || (t.kind == "pfs" && o.PFS == "none") {
			continue
		}
		a, err := port(t.name)
		if err != nil {
			return nil, err
		}
		args := append([]string{"data", "--tier", t.kind,
			"--listen", a, "--dir", t.dir, "--capacity", strconv.FormatInt(t.cap, 10), "--meta", metaAddr}, common...)
		if o.ZeroCopy == "data" || o.ZeroCopy == "all" {
			args = append(args, "--zero-copy")
		}
		if t.kind == "mem" && o.DataMBps > 0 {
			args = append(args, "--max-mbps", ftoa(o.DataMBps))
		}
		if t.kind == "mem" && o.DataIOPS > 0 {
			args = append(args, "--max-iops", ftoa(o.DataIOPS))
		}
		c.Daemons = append(c.Daemons, Daemon{Name: t.name, Args: args})
	}
	for i := 0; i < o.Fwds; i++ {
		name := fmt.Sprintf("fwd-%d", i)
		a, err := port(name)
		if err != nil {
			return nil, err
		}
		args := append([]string{"fwd", "--listen", a, "--meta", metaAddr, "--node", name,
			"--id-file", filepath.Join(dir, name+".id"), to}, common...)
		if o.ZeroCopy == "fwd" || o.ZeroCopy == "all" {
			args = append(args, "--zero-copy")
		}
		if o.FwdMBps > 0 {
			args = append(args, "--max-mbps", ftoa(o.FwdMBps))
		}
		if o.FwdIOPS > 0 {
			args = append(args, "--max-iops", ftoa(o.FwdIOPS))
		}
		c.Daemons = append(c.Daemons, Daemon{Name: name, Args: args})
	}
	margs := []string{"mount", "--meta", metaAddr, to}
	if o.JobVar != "" {
		margs = append(margs, "--jobid-var", o.JobVar)
	}
	margs = append(margs, o.MountFlags...)
	c.Daemons = append(c.Daemons, Daemon{Name: "mount", Args: append(append(margs, common...), mnt)})

	picker.release()
	for i := range c.Daemons {
		d := &c.Daemons[i]
		if o.PprofBase > 0 {
			d.Args = append([]string{d.Args[0], "--pprof", fmt.Sprintf("127.0.0.1:%d", o.PprofBase+i)}, d.Args[1:]...)
		}
		if d.Name == "mount" {
			// wait until the data servers and forwarding nodes have
			// registered, so the mount can pick a forwarding node
			if err := c.waitRegistered(len(c.Daemons)-2, 20*time.Second); err != nil {
				c.stop()
				return nil, err
			}
		}
		if err := c.start(d); err != nil {
			c.stop()
			return nil, err
		}
		if d.Name == "meta" {
			if err := waitListening(metaAddr, 10*time.Second); err != nil {
				c.stop()
				return nil, fmt.Errorf("metadata service did not start: %v%s", err, c.logTail("meta"))
			}
		}
	}
	if err := c.save(); err != nil {
		return nil, err
	}
	if err := waitMounted(mnt, 20*time.Second, func() bool { return processAlive(c.pid("mount")) }); err != nil {
		c.stop()
		return nil, fmt.Errorf("mount did not come up: %v%s", err, c.logTail("mount"))
	}
	os.MkdirAll(filepath.Dir(currentFile()), 0o700)
	os.WriteFile(currentFile(), []byte(dir+"\n"), 0o600)
	return c, nil
}

func (c *Cluster) pid(name string) int {
	for _, d := range c.Daemons {
		if d.Name == name {
			return d.Pid
		}
	}
	return 0
}

func (c *Cluster) logTail(name string) string {
	b, err := os.ReadFile(filepath.Join(c.Dir, "logs", name+".log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n  " + name + " log:\n    " + strings.Join(lines, "\n    ")
}

func (c *Cluster) start(d *Daemon) error {
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", d.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.Exe, d.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %v", d.Name, err)
	}
	d.Pid = cmd.Process.Pid
	go cmd.Wait() // reap if it exits while we are still running
	return nil
}

// waitRegistered waits until n daemons are listening (their ports accept).
func (c *Cluster) waitRegistered(n int, d time.Duration) error {
	for _, dm := range c.Daemons {
		if dm.Name == "meta" || dm.Name == "mount" {
			continue
		}
		for i, a := range dm.Args {
			if a == "--listen" {
				if err := waitListening(dm.Args[i+1], d); err != nil {
					return fmt.Errorf("%s did not start: %v%s", dm.Name, err, c.logTail(dm.Name))
				}
			}
		}
	}
	// then until every one of them has registered with the metadata
	// service, so the mount finds all forwarding nodes and files are
	// placed over all data servers from the first write
	secret, err := os.ReadFile(c.SecretFile())
	if err != nil {
		return err
	}
	mc := rpc.NewClient(c.MetaAddr, []byte(strings.TrimSpace(string(secret))), rpc.ClientOptions{Timeout: d, Name: "metadata service"})
	defer mc.Close()
	deadline := time.Now().Add(d)
	for {
		resp, _, err := mc.Call(context.Background(), &wire.Msg{Op: wire.OpServers}, nil, nil)
		if err != nil {
			return err
		}
		alive := 0
		for _, s := range resp.Servers {
			if s.Alive && (s.Role == "data" || s.Role == "fwd") {
				alive++
			}
		}
		if alive >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d daemons registered after %v", alive, n, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitListening(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mountInfo returns the /proc/self/mountinfo fields of the mount at mnt,
// or nil.
func mountInfo(mnt string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 5 && fields[4] == mnt {
			return fields
		}
	}
	return nil
}

// Mounted reports whether mnt is a sluice FUSE mount.
func Mounted(mnt string) bool {
	fields := mountInfo(mnt)
	for i, x := range fields {
		if x == "-" && i+1 < len(fields) && fields[i+1] == "fuse.sluice" {
			return true
		}
	}
	return false
}

func waitMounted(mnt string, d time.Duration, alive func() bool) error {
	deadline := time.Now().Add(d)
	for !Mounted(mnt) {
		if !alive() {
			return errors.New("the mount process exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not mounted after %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var st syscall.Statfs_t
	return syscall.Statfs(mnt, &st)
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// a zombie is not alive
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func (c *Cluster) alive() bool {
	for _, d := range c.Daemons {
		if processAlive(d.Pid) {
			return true
		}
	}
	return false
}

// AbortFuse cuts the kernel's FUSE connection of a mount, failing every
// request still waiting on it, and detaches the mount: the last resort when
// the daemon behind it is gone or stuck.
func AbortFuse(mnt string) {
	if fields := mountInfo(mnt); fields != nil {
		if _, minor, ok := strings.Cut(fields[2], ":"); ok {
			ctl := "/sys/fs/fuse/connections"
			if _, err := os.Stat(ctl + "/" + minor); err != nil {
				syscall.Mount("fusectl", ctl, "fusectl", 0, "")
			}
			os.WriteFile(ctl+"/"+minor+"/abort", []byte("1"), 0o200)
		}
	}
	syscall.Unmount(mnt, syscall.MNT_DETACH)
}

// stop unmounts and terminates every daemon, the client first.
func (c *Cluster) stop() {
	if Mounted(c.Mount) {
		if err := syscall.Unmount(c.Mount, 0); err != nil {
			AbortFuse(c.Mount)
		}
	}
	for i := len(c.Daemons) - 1; i >= 0; i-- {
		stopPid(c.Daemons[i].Pid)
	}
}

func stopPid(pid int) {
	if !processAlive(pid) {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100 && processAlive(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if processAlive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Down stops the cluster recorded in dir. With purge it also deletes the
// mem tier's tmpfs directories, which would otherwise hold memory after the
// cluster is gone (the state directory is left to the caller).
func Down(dir string, purge bool) error {
	c, err := Load(dir)
	if err != nil {
		return err
	}
	c.stop()
	if Mounted(c.Mount) {
		return fmt.Errorf("%s is still mounted", c.Mount)
	}
	if purge {
		for _, d := range c.Daemons {
			if len(d.Args) > 2 && d.Args[0] == "data" && d.Args[2] == "mem" {
				for i, a := range d.Args {
					if a == "--dir" && i+1 < len(d.Args) {
						os.RemoveAll(d.Args[i+1])
						os.Remove(filepath.Dir(d.Args[i+1])) // the per-cluster parent, once empty
					}
				}
			}
		}
	}
	return nil
}

// Restart starts (again) the named daemon with its recorded arguments,
// killing it first if it runs. Tests use it after kill -9.
func Restart(dir, name string) error {
	c, err := Load(dir)
	if err != nil {
		return err
	}
	for i := range c.Daemons {
		d := &c.Daemons[i]
		if d.Name != name {
			continue
		}
		stopPid(d.Pid)
		if err := c.start(d); err != nil {
			return err
		}
		if err := c.save(); err != nil {
			return err
		}
		for j, a := range d.Args {
			if a == "--listen" {
				return waitListening(d.Args[j+1], 10*time.Second)
			}
		}
		return nil
	}
	var names []string
	for _, d := range c.Daemons {
		names = append(names, d.Name)
	}
	return fmt.Errorf("no daemon %q (have %s)", name, strings.Join(names, ", "))
}

// ParseSize parses sizes like 4096, 64K, 4M, 2G, 1T (powers of 1024).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return int64(v * float64(mult)), nil
}

// FormatSize prints bytes with a binary unit.
func FormatSize(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
