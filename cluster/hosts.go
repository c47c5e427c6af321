package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Emulated hosts (`sluice cluster up --hosts`): every role of a local
// cluster on a host of its own, as a deployment runs them. A host is a
// network namespace with one address on the cluster's subnet
// (10.213.N.0/24), its link joined to a bridge that lives in a namespace
// of its own (the switch); the namespace the cluster was started from
// joins the bridge too, as the operator's host (.254), so `sluice`
// commands, `up`'s waits and tests reach the daemons as from another
// machine. Daemons run in their host's namespace (nsenter --net) and
// listen on its address with the port their role always uses there;
// nothing goes over unix sockets, and filesystems stay shared (the mounts
// appear where the tests see them). Cutting a host off (`sluice cluster
// cut`) takes its link on the bridge down; `reconnect` brings it back.
//
// The hosts: meta-0… (the metadata daemons; with the etcd engine an etcd
// member on each of the first three, which always exist), storage (every
// data server), fwd-0… (one per forwarding daemon) and compute-0… (the
// mount on compute-0; the others left for more mounts).

// Host is one emulated host.
type Host struct {
	Name  string
	Netns string // its network namespace (ip netns)
	Addr  string // its address on the cluster's subnet
	Link  string // its link's end on the switch's bridge
}

// hostSubnetBase is the first two octets of the hosts' subnets.
const hostSubnetBase = "10.213"

// Fixed ports of the roles on their hosts.
const (
	metaPort     = 7100
	dataPortBase = 7200 // the i-th data server of a host: +i
	fwdPort      = 7300
	monitorPort  = 7400
	managerPort  = 7500
	// etcd members listen on etcd's own ports, 2379 and 2380
	// (etcdserver.Config.Hosts)
)

// hostNet is a cluster's emulated network: the switch namespace and the
// operator's link to it.
type hostNet struct {
	Subnet int    // N of 10.213.N.0/24
	Switch string // the switch namespace
	Root   string // the operator's link (in the namespace up ran in)
}

func (n hostNet) addr(i int) string { return fmt.Sprintf("%s.%d.%d", hostSubnetBase, n.Subnet, i) }

// pickSubnet returns a subnet no other cluster's emulated network uses
// (want first, if it is free: a cluster started again keeps its addresses).
func pickSubnet(want int) (int, error) {
	free := func(n int) bool {
		_, err1 := os.Stat(filepath.Join("/run/netns", switchName(n)))
		_, err2 := os.Stat(filepath.Join("/sys/class/net", switchName(n)))
		return os.IsNotExist(err1) && os.IsNotExist(err2)
	}
	if want > 0 && free(want) {
		return want, nil
	}
	for n := 1; n < 255; n++ {
		if free(n) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("no free subnet for emulated hosts (%s.1-254.0/24 all taken)", hostSubnetBase)
}

func switchName(n int) string { return "sluice" + strconv.Itoa(n) }

// ip runs an ip(8) command.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// planHosts names the hosts of a cluster on subnet n.
func planHosts(n, metas, fwds, computes int) (hostNet, []Host) {
	net := hostNet{Subnet: n, Switch: switchName(n), Root: switchName(n)}
	var names []string
	for i := 0; i < metas; i++ {
		names = append(names, fmt.Sprintf("meta-%d", i))
	}
	names = append(names, "storage")
	for i := 0; i < fwds; i++ {
		names = append(names, fmt.Sprintf("fwd-%d", i))
	}
	for i := 0; i < computes; i++ {
		names = append(names, fmt.Sprintf("compute-%d", i))
	}
	hosts := make([]Host, len(names))
	for i, name := range names {
		hosts[i] = Host{Name: name, Netns: net.Switch + "-" + name, Addr: net.addr(i + 1), Link: "h" + strconv.Itoa(i)}
	}
	return net, hosts
}

// layoutHosts names c's emulated hosts for options o, on the subnet of
// the cluster that ran in the same directory before (old, if any) where
// it is free; moved says the addresses differ from old's.
func (c *Cluster) layoutHosts(o Options, old *Cluster) (moved bool, err error) {
	if os.Geteuid() != 0 {
		return false, fmt.Errorf("--hosts makes network namespaces: run as root")
	}
	want := 0
	if old != nil {
		old.removeHosts() // left by a cluster killed without a down (up checked none of it runs)
		want = old.Net.Subnet
	}
	n, err := pickSubnet(want)
	if err != nil {
		return false, err
	}
	metas := max(o.MetaStandbys+1, 1)
	if o.Engine == "etcd" {
		metas = max(metas, 3) // an etcd member on each of three
	}
	metas = max(metas, o.Monitors, o.Managers) // a monitor and a manager on each of them
	c.Net, c.Hosts = planHosts(n, metas, o.Fwds, max(o.ComputeHosts, 1))
	return want != 0 && n != want, nil
}

// hostOf is the emulated host daemon name runs on.
func hostOf(name string) string {
	switch {
	case name == "meta":
		return "meta-0"
	case strings.HasPrefix(name, "meta-"), strings.HasPrefix(name, "fwd-"):
		return name
	case strings.HasPrefix(name, "etcd"):
		return "meta-" + strings.TrimPrefix(name, "etcd")
	case strings.HasPrefix(name, "monitor-"): // beside the metadata daemons
		return "meta-" + strings.TrimPrefix(name, "monitor-")
	case strings.HasPrefix(name, "manager-"):
		return "meta-" + strings.TrimPrefix(name, "manager-")
	case strings.HasPrefix(name, "data-"):
		return "storage"
	}
	return "compute-0" // the mount
}

// makeHosts creates the switch, the hosts and the operator's link (anew:
// what a cluster killed without a down left is removed first).
func (c *Cluster) makeHosts() error {
	c.removeHosts()
	n := c.Net
	if err := ip("netns", "add", n.Switch); err != nil {
		return fmt.Errorf("emulated hosts need root and ip netns: %v", err)
	}
	steps := [][]string{
		{"-n", n.Switch, "link", "add", "br0", "type", "bridge"},
		{"-n", n.Switch, "link", "set", "br0", "up"},
		{"link", "add", n.Root, "type", "veth", "peer", "name", "op", "netns", n.Switch},
		{"-n", n.Switch, "link", "set", "op", "master", "br0", "up"},
		{"addr", "add", n.addr(254) + "/24", "dev", n.Root},
		{"link", "set", n.Root, "up"},
	}
	for _, h := range c.Hosts {
		steps = append(steps, []string{"netns", "add", h.Netns},
			[]string{"link", "add", "eth0", "netns", h.Netns, "type", "veth", "peer", "name", h.Link, "netns", n.Switch},
			[]string{"-n", n.Switch, "link", "set", h.Link, "master", "br0", "up"},
			[]string{"-n", h.Netns, "addr", "add", h.Addr + "/24", "dev", "eth0"},
			[]string{"-n", h.Netns, "link", "set", "eth0", "up"},
			[]string{"-n", h.Netns, "link", "set", "lo", "up"})
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			c.removeHosts()
			return err
		}
	}
	return nil
}

// removeHosts deletes the hosts, the switch and the operator's link
// (whatever of them exists).
func (c *Cluster) removeHosts() {
	if c.Net.Switch == "" {
		return
	}
	for _, h := range c.Hosts {
		if _, err := os.Stat(filepath.Join("/run/netns", h.Netns)); err == nil {
			ip("netns", "del", h.Netns)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.Net.Root)); err == nil {
		ip("link", "del", c.Net.Root)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", c.Net.Switch)); err == nil {
		ip("netns", "del", c.Net.Switch)
	}
}

// host returns the emulated host named name.
func (c *Cluster) host(name string) (Host, error) {
	var names []string
	for _, h := range c.Hosts {
		if h.Name == name {
			return h, nil
		}
		names = append(names, h.Name)
	}
	if len(c.Hosts) == 0 {
		return Host{}, fmt.Errorf("the cluster in %s has no emulated hosts (sluice cluster up --hosts)", c.Dir)
	}
	return Host{}, fmt.Errorf("no host %q (have %s)", name, strings.Join(names, ", "))
}

// HostOf returns the emulated host a daemon runs on, if any.
func (c *Cluster) HostOf(daemon string) (Host, bool) {
	for _, d := range c.Daemons {
		if d.Name == daemon && d.Host != "" {
			h, err := c.host(d.Host)
			return h, err == nil
		}
	}
	return Host{}, false
}

// HostByName returns the emulated host named name of the cluster in dir.
func HostByName(dir, name string) (Host, error) {
	c, err := Load(dir)
	if err != nil {
		return Host{}, err
	}
	return c.host(name)
}

// SetLink cuts host name of the cluster in dir off its network (up
// false: its link on the bridge goes down, and every connection to it
// stalls as a dead host's would) or connects it again.
func SetLink(dir, name string, up bool) error {
	c, err := Load(dir)
	if err != nil {
		return err
	}
	h, err := c.host(name)
	if err != nil {
		return err
	}
	state := map[bool]string{true: "up", false: "down"}[up]
	return ip("-n", c.Net.Switch, "link", "set", h.Link, state)
}

// inHost returns the command line that runs exe with args on host h.
func inHost(h Host, exe string, args []string) (string, []string) {
	return "nsenter", append([]string{"--net=" + filepath.Join("/run/netns", h.Netns), "--", exe}, args...)
}

// port is daemon name's listening address: its last one, else a free
// port.
func (pl *planner) port(name string) (string, error) {
	if p, ok := pl.ports[name]; ok {
		return p, nil
	}
	if len(pl.c.Hosts) > 0 {
		h, err := pl.c.host(hostOf(name))
		if err != nil {
			return "", err
		}
		port := map[string]int{"meta": metaPort, "fwd": fwdPort}[strings.SplitN(h.Name, "-", 2)[0]]
		switch {
		case strings.HasPrefix(name, "monitor-"):
			port = monitorPort
		case strings.HasPrefix(name, "manager-"):
			port = managerPort
		}
		if h.Name == "storage" {
			port = dataPortBase + pl.dataIndex
		}
		return fmt.Sprintf("%s:%d", h.Addr, port), nil
	}
	return pl.picker.pick()
}
