// Package localdirs keeps which directories are in node-local mode
// (docs/nodelocal.md) and the tier whose data servers keep their
// entries: each name of such a directory hashes to one of the tier's
// servers (wire.LocalPick over them, by id), whose own file system keeps
// the entry and everything under it (data/localns). The metadata service
// redirects the directory's entry operations there (meta/nsops.go). The
// modes live under their own keys in the metadata daemon's engine. It
// must not touch the namespace or answer entry operations.
package localdirs

import (
	"encoding/binary"
	"sort"
	"sync"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Key is the prefix of the modes' engine keys ('Q' 'l' ino → tier); the
// metadata daemon's key schema (meta/schema.go) reserves it.
var Key = []byte{'Q', 'l'}

func key(ino uint64) []byte { return binary.BigEndian.AppendUint64(append([]byte(nil), Key...), ino) }

// Config is where the modes live and what they check against.
type Config struct {
	Engine engine.Engine
	// Dir fails unless ino is a directory (ENOENT, ENOTDIR).
	Dir func(ino uint64) error
	// Servers lists the registered daemons: a tier's data servers keep
	// the entries.
	Servers func() []wire.ServerInfo
}

// Dirs is the local-mode directories.
type Dirs struct {
	cfg  Config
	mu   sync.RWMutex
	tier map[uint64]string // directory ino → tier; guarded by mu
}

// Open returns the modes kept in cfg.Engine.
func Open(cfg Config) *Dirs {
	d := &Dirs{cfg: cfg, tier: map[uint64]string{}}
	cfg.Engine.Scan(Key, nil, func(k, v []byte) bool {
		if len(k) == len(Key)+8 {
			d.tier[binary.BigEndian.Uint64(k[len(Key):])] = string(v)
		}
		return true
	})
	return d
}

// Set puts directory ino in local mode, its entries on the data servers
// of tier ("": the fastest with servers) (on), or takes it out (the
// entries made meanwhile stay on their servers, out of the listing).
func (d *Dirs) Set(ino uint64, tier string, on bool) error {
	if err := d.cfg.Dir(ino); err != nil {
		return err
	}
	if on {
		if tier == "" {
			tier = d.fastest()
		}
		if tier == "pfs" || len(d.Servers(tier)) == 0 {
			return rpc.Errorf(syscall.EINVAL, "no mem, ssd or hdd data server of tier %q to keep local entries", tier)
		}
	}
	var b engine.Batch
	if on {
		b.Set(key(ino), []byte(tier))
	} else {
		b.Del(key(ino))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.cfg.Engine.Apply(&b, true); err != nil {
		return err
	}
	if on {
		d.tier[ino] = tier
	} else {
		delete(d.tier, ino)
	}
	return nil
}

// Tier is the tier of directory ino's local entries ("": not local).
func (d *Dirs) Tier(ino uint64) string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.tier[ino]
}

// fastest is the fastest tier with a data server that can keep local
// entries.
func (d *Dirs) fastest() string {
	for _, t := range []string{"mem", "ssd", "hdd"} {
		if len(d.Servers(t)) > 0 {
			return t
		}
	}
	return ""
}

// Servers are the registered data servers of tier, alive or not, by id
// (a dead one's entries are unreachable, not moved elsewhere).
func (d *Dirs) Servers(tier string) []wire.ServerInfo {
	var out []wire.ServerInfo
	for _, si := range d.cfg.Servers() {
		if si.Role == "data" && si.Tier == tier {
			out = append(out, si)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
