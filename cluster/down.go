package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/data/localns"
)

// Down stops the cluster recorded in dir. With purge it also deletes the
// mem tier's tmpfs directories, which would otherwise hold memory after the
// cluster is gone (the state directory is left to the caller).
func Down(dir string, purge bool) error {
	c, err := Load(dir)
	if err != nil {
		return err
	}
	c.stop()
	c.removeHosts()
	var mounted error
	if Mounted(c.Mount) {
		mounted = fmt.Errorf("%s is still mounted", c.Mount)
	}
	// the daemons are gone whether or not the mount went: the mem tier's
	// memory is freed either way
	if purge {
		for _, d := range c.Daemons {
			// (not by position: --pprof comes first with --pprof-base)
			tier, _ := flagValue(d.Args, "--tier")
			mem, ok := flagValue(d.Args, "--dir")
			if len(d.Args) == 0 || d.Args[0] != "data" || tier != "mem" || !ok {
				continue
			}
			os.RemoveAll(mem)
			os.RemoveAll(localns.Beside(mem)) // its node-local namespace
			parent := filepath.Dir(mem)
			os.Remove(filepath.Join(parent, ownerFile))
			if underShm(parent) && isMountPoint(parent) {
				// the tier's own tmpfs: the next server's directory
				// goes with it
				removeMemDir(parent)
				continue
			}
			os.Remove(parent) // the per-cluster parent, once empty
		}
	}
	return mounted
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
		if addr, ok := flagValue(d.Args, "--listen"); ok {
			switch {
			case strings.HasPrefix(d.Name, "meta") && strings.Contains(c.MetaAddr, ","):
				addr = c.MetaAddr // it may stand by: one of them serves
			case strings.HasPrefix(d.Name, "manager-"):
				addr = c.managerAddrs() // likewise
			}
			return waitListening(addr, 10*time.Second)
		}
		return nil
	}
	var names []string
	for _, d := range c.Daemons {
		names = append(names, d.Name)
	}
	return fmt.Errorf("no daemon %q (have %s)", name, strings.Join(names, ", "))
}

// managerAddrs is the manager daemons' addresses, comma-separated.
func (c *Cluster) managerAddrs() string {
	var addrs []string
	for _, d := range c.Daemons {
		if a, ok := flagValue(d.Args, "--listen"); ok && strings.HasPrefix(d.Name, "manager-") {
			addrs = append(addrs, a)
		}
	}
	return strings.Join(addrs, ",")
}
