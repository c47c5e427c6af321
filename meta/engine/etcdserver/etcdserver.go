// Package etcdserver starts etcd members as processes of their own (the
// etcd binary of Debian's etcd-server, or any on PATH): one member for
// the tests of the services on the etcd engine, three for a local
// cluster. It owns the members' command lines, data directories and
// lifetimes; the engine itself (meta/engine) only talks to them. It must
// not be linked by a daemon.
package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config describes the members to start.
type Config struct {
	// Dir holds a data directory per member.
	Dir string
	// Members is how many (1 by default; 3 survive the loss of one).
	Members int
	// Host is the address every member listens on (127.0.0.1 by default).
	Host string
	// Hosts, if set, gives each member an address of its own (one per
	// member; emulated hosts), on etcd's own ports 2379 and 2380.
	Hosts []string
	// Binary is the etcd executable ("etcd" on PATH by default).
	Binary string
	// MaxTxnOps and MaxRequestBytes are the members' limits on a
	// transaction (4096 operations and 8 MiB by default, above etcd's
	// own 128 and 1.5 MiB, for the metadata service's batches).
	MaxTxnOps, MaxRequestBytes int
	// Compaction is the members' periodic compaction retention ("5m" by
	// default): revisions older than that are compacted away.
	Compaction string
	// Quota is the members' backend quota in bytes (8 GiB by default).
	Quota int64
	// Log receives the members' output (discarded if nil).
	Log io.Writer
	// DieWithParent kills the members when the process that started
	// them dies (tests: nothing outlives the test binary).
	DieWithParent bool
	// RemoveWithParent also removes Dir then, by a watcher process of its
	// own (a test binary has no hook at its exit).
	RemoveWithParent bool
}

// Cluster is the members started.
type Cluster struct {
	cfg     Config
	members []*member
}

type member struct {
	name, client, peer, dir string
	args                    []string
	cmd                     *exec.Cmd
	done                    chan struct{}
}

// Available says whether an etcd binary can be run.
func Available(binary string) bool {
	if binary == "" {
		binary = "etcd"
	}
	_, err := exec.LookPath(binary)
	return err == nil
}

// Member is one member's plan: its name, its client URL and the
// arguments of the etcd command that runs it.
type Member struct {
	Name, ClientURL string
	Args            []string
}

// Plan lays out the members of cfg on ports free now: what a local
// cluster records and starts itself (package cluster), and Start runs.
func Plan(cfg Config) ([]Member, error) {
	cfg = cfg.withDefaults()
	var ms []*member
	var initial []string
	if len(cfg.Hosts) > 0 && len(cfg.Hosts) != cfg.Members {
		return nil, fmt.Errorf("%d hosts for %d etcd members", len(cfg.Hosts), cfg.Members)
	}
	for i := 0; i < cfg.Members; i++ {
		host, ports := cfg.Host, []int{2379, 2380}
		if len(cfg.Hosts) > 0 {
			host = cfg.Hosts[i]
		} else {
			var err error
			if ports, err = freePorts(cfg.Host, 2); err != nil {
				return nil, err
			}
		}
		m := &member{name: "etcd" + strconv.Itoa(i), dir: filepath.Join(cfg.Dir, "etcd"+strconv.Itoa(i)),
			client: "http://" + net.JoinHostPort(host, strconv.Itoa(ports[0])),
			peer:   "http://" + net.JoinHostPort(host, strconv.Itoa(ports[1]))}
		ms = append(ms, m)
		initial = append(initial, m.name+"="+m.peer)
	}
	var out []Member
	for _, m := range ms {
		out = append(out, Member{Name: m.name, ClientURL: m.client, Args: []string{"--name", m.name, "--data-dir", m.dir,
			"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
			"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--initial-cluster-token", "sluice",
			"--max-txn-ops", strconv.Itoa(cfg.MaxTxnOps), "--max-request-bytes", strconv.Itoa(cfg.MaxRequestBytes),
			"--auto-compaction-mode", "periodic", "--auto-compaction-retention", cfg.Compaction,
			"--quota-backend-bytes", strconv.FormatInt(cfg.Quota, 10), "--logger", "zap",
			// clients ping every second (URI: keepalive=1s) to find a
			// member lost within the metadata server's lease; the least
			// the members accept is half that: at 1 s, a ping that came
			// a hair early (gRPC's own timers, a busy core) counted as a
			// strike, and two closed the connection (GOAWAY
			// too_many_pings, seen in a CI run's member logs under load)
			"--grpc-keepalive-min-time", "500ms",
			// a member cut off and reconnected asks before it calls an
			// election, instead of unseating the leader with its higher
			// term (the lease renewals stall meanwhile)
			"--pre-vote"}})
	}
	return out, nil
}

func (cfg Config) withDefaults() Config {
	if cfg.Members == 0 {
		cfg.Members = 1
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Binary == "" {
		cfg.Binary = "etcd"
	}
	if cfg.MaxTxnOps == 0 {
		cfg.MaxTxnOps = 4096
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 8 << 20
	}
	if cfg.Compaction == "" {
		cfg.Compaction = "5m"
	}
	if cfg.Quota == 0 {
		cfg.Quota = 8 << 30
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	return cfg
}

// Start starts the members and returns once the cluster answers.
func Start(cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	plan, err := Plan(cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	for _, p := range plan {
		m := &member{name: p.Name, client: p.ClientURL, args: p.Args}
		c.members = append(c.members, m)
		if err := c.start(m); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := Wait(c.Endpoints(), 30*time.Second, c.exited); err != nil {
		c.Stop()
		return nil, err
	}
	if cfg.RemoveWithParent {
		c.reaper()
	}
	return c, nil
}

// reaper starts a process that, once this one has ended, kills the
// members and removes their directory.
func (c *Cluster) reaper() {
	var pids []string
	for _, m := range c.members {
		pids = append(pids, strconv.Itoa(m.cmd.Process.Pid))
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 0.5; done; kill -9 %s 2>/dev/null; sleep 0.2; rm -rf '%s'",
		os.Getpid(), strings.Join(pids, " "), c.cfg.Dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

func (c *Cluster) start(m *member) error {
	cfg := c.cfg
	m.cmd = exec.Command(cfg.Binary, m.args...)
	m.cmd.Stdout, m.cmd.Stderr = cfg.Log, cfg.Log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cfg.DieWithParent {
		m.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %v", cfg.Binary, err)
	}
	m.done = make(chan struct{})
	go func() {
		m.cmd.Wait()
		close(m.done)
	}()
	return nil
}

// exited names a member that has exited, if one has.
func (c *Cluster) exited() error {
	for _, m := range c.members {
		select {
		case <-m.done:
			return fmt.Errorf("etcd member %s exited at start (%v)", m.name, m.cmd.ProcessState)
		default:
		}
	}
	return nil
}

// Wait returns once the etcd cluster at endpoints answers a read, or
// fails after d, or as soon as failed (if given) says why it cannot.
func Wait(endpoints []string, d time.Duration, failed func() error) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(d)
	for {
		if failed != nil {
			if err := failed(); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Get(ctx, "sluice-ready")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd at %v: no answer within %v: %v", endpoints, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var e []string
	for _, m := range c.members {
		e = append(e, m.client)
	}
	return e
}

// URI is the etcd engine's URI for keys under prefix on this cluster,
// with its limits.
func (c *Cluster) URI(prefix string) string { return URI(c.Endpoints(), prefix, c.cfg) }

// URI is the etcd engine's URI for keys under prefix on the members at
// endpoints, started with cfg's limits.
func URI(endpoints []string, prefix string, cfg Config) string {
	cfg = cfg.withDefaults()
	var hosts []string
	for _, e := range endpoints {
		u, _ := url.Parse(e)
		hosts = append(hosts, u.Host)
	}
	return fmt.Sprintf("etcd://%s/%s?max-txn-ops=%d&max-request-bytes=%d&keepalive=1s", strings.Join(hosts, ","), prefix,
		cfg.MaxTxnOps, cfg.MaxRequestBytes)
}

// Kill kills member i at once (SIGKILL), as a crash.
func (c *Cluster) Kill(i int) error {
	m := c.members[i]
	if m.cmd == nil || m.cmd.Process == nil {
		return errors.New("not started")
	}
	m.cmd.Process.Kill()
	<-m.done
	return nil
}

// Stop stops every member (SIGTERM, then SIGKILL after 5 s).
func (c *Cluster) Stop() {
	for _, m := range c.members {
		if m.cmd == nil || m.cmd.Process == nil {
			continue
		}
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range c.members {
		if m.done == nil {
			continue
		}
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}

// freePorts returns n ports free on host now.
func freePorts(host string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
