package cluster

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// monitorDaemons plans the monitor daemons (Options.Monitors) and the
// flag that sends the records to them (planner.monitors).
func (pl *planner) monitorDaemons() error {
	o := pl.o
	if o.Monitors <= 0 || o.NoMonitor {
		return nil
	}
	var addrs []string
	for i := range o.Monitors {
		name := fmt.Sprintf("monitor-%d", i)
		a, err := pl.port(name)
		if err != nil {
			return err
		}
		addrs = append(addrs, a)
		pl.c.Daemons = append(pl.c.Daemons, Daemon{Name: name, Args: slices.Concat([]string{"monitor", "serve", "--listen", a,
			"--dir", filepath.Join(pl.dir, name)}, pl.listening, pl.common)})
	}
	// the daemons that record ship to the monitors; the metadata daemon
	// asks them
	pl.monitors = []string{"--monitors", strings.Join(addrs, ",")}
	return nil
}

// managerDaemons plans the manager daemons (Options.Managers, none by
// default): the
// forwarding manager in processes of its own on the etcd engine eng, one
// active at a time, with the forwarding flags fwdArgs.
func (pl *planner) managerDaemons(eng string, fwdArgs []string) error {
	for i := range pl.o.Managers {
		name := fmt.Sprintf("manager-%d", i)
		a, err := pl.port(name)
		if err != nil {
			return err
		}
		pl.c.Daemons = append(pl.c.Daemons, Daemon{Name: name, Args: slices.Concat([]string{"manager", "serve", "forwarding", "--listen", a,
			"--engine", eng, "--meta", pl.c.MetaAddr}, fwdArgs, pl.listening, pl.common)})
	}
	return nil
}

// withFlag adds a flag and its value to a daemon's arguments, after the
// command's words ("monitor serve").
func withFlag(args []string, flag, value string) []string {
	at := 1
	for at < len(args) && !strings.HasPrefix(args[at], "-") {
		at++
	}
	return slices.Concat(args[:at], []string{flag, value}, args[at:])
}

// metaName is the name of the i-th metadata daemon: meta, then its
// standbys meta-1, meta-2…
func metaName(i int) string {
	if i == 0 {
		return "meta"
	}
	return fmt.Sprintf("meta-%d", i)
}
