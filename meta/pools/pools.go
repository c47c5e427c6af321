// Package pools keeps the resource pools (Sunway §5, docs/placement.md):
// named sets of data servers, each with the bandwidth the pool may count
// on from it (max_perf), that a directory or a job is bound to. The
// metadata service asks it, when it places a file's new chunk, which pool
// the file's directory or writer is bound to (Of); the placement policy
// then ranks the pool's servers first. Pools and directories' and jobs'
// bindings live under their own keys in the metadata daemon's engine (a
// job's binding lasts the job: JobEnded drops it), so a restarted server,
// or a standby taking over, has them all. It
// answers the administration service's pool operations (api.PoolCreate,
// PoolRemove, PoolBind, PoolUnbind, PoolLs). It must not place chunks or
// change the namespace.
package pools

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/dirtree"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// The pools' engine keys: 'Q' 'p' name → the pool (JSON), 'Q' 'd' ino →
// the pool the directory is bound to, 'Q' 'j' job → the pool the job is
// bound to. The metadata daemon's key schema (meta/schema.go) reserves
// them.
const (
	Prefix = 'Q'
	qPool  = 'p'
	qDir   = 'd'
	qJob   = 'j'
)

func jobKey(job string) []byte { return append([]byte{Prefix, qJob}, job...) }

func poolKey(name string) []byte { return append([]byte{Prefix, qPool}, name...) }

func dirKey(ino uint64) []byte { return binary.BigEndian.AppendUint64([]byte{Prefix, qDir}, ino) }

// Namespace is what the package needs of the namespace.
type Namespace = dirtree.Namespace

// Config is where the pools live and what they check against.
type Config struct {
	Engine engine.Engine
	NS     Namespace
	// Servers lists the registered daemons: a pool's members must be
	// data servers.
	Servers func() []wire.ServerInfo
	// Placement names the placement policy, for listings.
	Placement string
}

// Pools is the resource pools and their bindings.
type Pools struct {
	cfg Config
	// mu guards pools, dirs and jobs
	mu    sync.Mutex
	pools map[string]api.Pool // by name
	dirs  map[uint64]string   // directory ino → pool
	jobs  map[string]string   // job → pool
}

// Open returns the pools kept in cfg.Engine.
func Open(cfg Config) (*Pools, error) {
	ps := &Pools{cfg: cfg, pools: map[string]api.Pool{}, dirs: map[uint64]string{}, jobs: map[string]string{}}
	var derr error
	cfg.Engine.Scan([]byte{Prefix}, nil, func(k, v []byte) bool {
		switch {
		case len(k) > 2 && k[1] == qPool:
			var p api.Pool
			if err := json.Unmarshal(v, &p); err != nil {
				derr = fmt.Errorf("pool %q: %v", k[2:], err)
				return false
			}
			ps.pools[p.Name] = p
		case len(k) == 10 && k[1] == qDir:
			ps.dirs[binary.BigEndian.Uint64(k[2:])] = string(v)
		case len(k) > 2 && k[1] == qJob:
			ps.jobs[string(k[2:])] = string(v)
		}
		return true
	})
	return ps, derr
}

// Create creates pool p, or replaces the pool of that name.
func (ps *Pools) Create(p api.Pool) error {
	if p.Name == "" || strings.ContainsAny(p.Name, "/ \t\n") {
		return rpc.Errorf(syscall.EINVAL, "pool name %q: want a word", p.Name)
	}
	if len(p.Servers) == 0 {
		return rpc.Errorf(syscall.EINVAL, "pool %s: no servers", p.Name)
	}
	known := map[uint64]bool{}
	for _, si := range ps.cfg.Servers() {
		if si.Role == "data" {
			known[si.ID] = true
		}
	}
	for _, id := range p.Servers {
		if !known[id] {
			return rpc.Errorf(syscall.EINVAL, "pool %s: %d is not a data server", p.Name, id)
		}
	}
	for id, mb := range p.Perf {
		if !slices.Contains(p.Servers, id) || mb <= 0 {
			return rpc.Errorf(syscall.EINVAL, "pool %s: max_perf %g MB/s of server %d: want a positive figure of a member", p.Name, mb, id)
		}
	}
	b, _ := json.Marshal(p)
	var batch engine.Batch
	batch.Set(poolKey(p.Name), b)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := ps.cfg.Engine.Apply(&batch, true); err != nil {
		return err
	}
	ps.pools[p.Name] = p
	return nil
}

// Remove removes a pool that nothing is bound to.
func (ps *Pools) Remove(name string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.pools[name]; !ok {
		return rpc.Errorf(syscall.ENOENT, "no pool %q", name)
	}
	for d, p := range ps.dirs {
		if p == name {
			return rpc.Errorf(syscall.EBUSY, "pool %s is bound to directory %d", name, d)
		}
	}
	for j, p := range ps.jobs {
		if p == name {
			return rpc.Errorf(syscall.EBUSY, "pool %s is bound to job %s", name, j)
		}
	}
	var b engine.Batch
	b.Del(poolKey(name))
	if err := ps.cfg.Engine.Apply(&b, true); err != nil {
		return err
	}
	delete(ps.pools, name)
	return nil
}

// Bind binds directory dir (≠ 0) or job to pool name; "" unbinds.
func (ps *Pools) Bind(dir uint64, job, name string) error {
	if (dir == 0) == (job == "") {
		return rpc.Errorf(syscall.EINVAL, "bind a directory or a job")
	}
	if dir != 0 {
		if err := ps.cfg.NS.Dir(dir); err != nil {
			return err
		}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.pools[name]; name != "" && !ok {
		return rpc.Errorf(syscall.ENOENT, "no pool %q", name)
	}
	var b engine.Batch
	if job != "" {
		if name == "" {
			b.Del(jobKey(job))
		} else {
			b.Set(jobKey(job), []byte(name))
		}
		if err := ps.cfg.Engine.Apply(&b, true); err != nil {
			return err
		}
		if name == "" {
			delete(ps.jobs, job)
		} else {
			ps.jobs[job] = name
		}
		return nil
	}
	if name == "" {
		b.Del(dirKey(dir))
	} else {
		b.Set(dirKey(dir), []byte(name))
	}
	if err := ps.cfg.Engine.Apply(&b, true); err != nil {
		return err
	}
	if name == "" {
		delete(ps.dirs, dir)
	} else {
		ps.dirs[dir] = name
	}
	return nil
}

// JobEnded drops the job's binding.
func (ps *Pools) JobEnded(job string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.jobs[job]; !ok {
		return nil
	}
	var b engine.Batch
	b.Del(jobKey(job))
	if err := ps.cfg.Engine.Apply(&b, true); err != nil {
		return err
	}
	delete(ps.jobs, job)
	return nil
}

// List lists the pools and their bindings.
func (ps *Pools) List() api.PoolList {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := api.PoolList{Placement: ps.cfg.Placement, DirPools: map[uint64]string{}, Jobs: map[string]string{}}
	for _, p := range ps.pools {
		out.Pools = append(out.Pools, p)
	}
	sort.Slice(out.Pools, func(i, j int) bool { return out.Pools[i].Name < out.Pools[j].Name })
	for d, p := range ps.dirs {
		out.DirPools[d] = p
	}
	for j, p := range ps.jobs {
		out.Jobs[j] = p
	}
	return out
}

// Of is the pool the new chunks of a file in directory dir written by
// job go to: the job's binding, else the nearest directory's at or above
// dir (by primary parent); nil: none.
func (ps *Pools) Of(dir uint64, job string) *api.Pool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	name := ""
	if job != "" {
		name = ps.jobs[job]
	}
	for ino, depth := dir, 0; name == "" && len(ps.dirs) > 0 && ino != 0 && depth < 4096; depth++ {
		name = ps.dirs[ino]
		p, err := ps.cfg.NS.Parent(ino)
		if err != nil {
			break
		}
		ino = p
	}
	if p, ok := ps.pools[name]; ok {
		return &p
	}
	return nil
}

// Serve adds the pools' operations to t; each answers with the pools and
// bindings after it.
func (ps *Pools) Serve(t *rpc.Table) {
	list := func(err error) (*api.PoolList, error) {
		if err != nil {
			return nil, err
		}
		l := ps.List()
		return &l, nil
	}
	rpc.On(t, api.PoolCreate, func(_ context.Context, p *api.Pool) (*api.PoolList, error) { return list(ps.Create(*p)) })
	rpc.On(t, api.PoolRemove, func(_ context.Context, p *api.PoolRef) (*api.PoolList, error) { return list(ps.Remove(p.Name)) })
	rpc.On(t, api.PoolBind, func(_ context.Context, b *api.PoolBinding) (*api.PoolList, error) {
		if b.Pool == "" {
			return nil, rpc.Errorf(syscall.EINVAL, "bind: no pool named")
		}
		return list(ps.Bind(b.Ino, b.Job, b.Pool))
	})
	rpc.On(t, api.PoolUnbind, func(_ context.Context, b *api.PoolBinding) (*api.PoolList, error) {
		return list(ps.Bind(b.Ino, b.Job, ""))
	})
	rpc.On(t, api.PoolLs, func(context.Context, *wire.Empty) (*api.PoolList, error) { return list(nil) })
}
