package meta

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/place"
)

// Resource pools (Sunway §5): a named set of data servers, each with the
// bandwidth the pool may count on from it (max_perf), that a directory or
// a job is bound to. A bound file's new chunks go to the pool's servers
// first, ranked by the placement policy (place.Chunk.Pool). Pools and
// directory bindings are kept under the 'Q' keys, job bindings in memory
// beside them (a job's binding lasts the job: it is dropped when the job
// ends or with `sluice pool unbind --job`).

// Pool is a resource pool; PoolList the pools and their bindings.
type (
	Pool     = api.Pool
	PoolList = api.PoolList
)

const (
	qPool = 'p' // second byte of 'Q' keys: pool name → Pool (JSON)
	qDir  = 'd' // directory ino → pool name
)

func poolKey(name string) []byte { return append([]byte{pPool, qPool}, name...) }
func poolDirKey(ino uint64) []byte {
	return append([]byte{pPool, qDir}, key1(0, ino)[1:]...)
}

// CreatePool creates pool p, or replaces the pool of that name.
func (s *Service) CreatePool(p Pool) error {
	if p.Name == "" || strings.ContainsAny(p.Name, "/ \t\n") {
		return errno(syscall.EINVAL, "pool name %q: want a word", p.Name)
	}
	if len(p.Servers) == 0 {
		return errno(syscall.EINVAL, "pool %s: no servers", p.Name)
	}
	known := map[uint64]bool{}
	for _, si := range s.Servers() {
		if si.Role == "data" {
			known[si.ID] = true
		}
	}
	for _, id := range p.Servers {
		if !known[id] {
			return errno(syscall.EINVAL, "pool %s: %d is not a data server", p.Name, id)
		}
	}
	for id, mb := range p.Perf {
		if !slices.Contains(p.Servers, id) || mb <= 0 {
			return errno(syscall.EINVAL, "pool %s: max_perf %g MB/s of server %d: want a positive figure of a member", p.Name, mb, id)
		}
	}
	b, _ := json.Marshal(p)
	var batch engine.Batch
	batch.Set(poolKey(p.Name), b)
	if err := s.e.Apply(&batch, true); err != nil {
		return err
	}
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pools[p.Name] = p
	return nil
}

// RemovePool removes a pool that nothing is bound to.
func (s *Service) RemovePool(name string) error {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pools[name]; !ok {
		return errno(syscall.ENOENT, "no pool %q", name)
	}
	for d, p := range r.dirPools {
		if p == name {
			return errno(syscall.EBUSY, "pool %s is bound to directory %d", name, d)
		}
	}
	for j, p := range r.jobPools {
		if p == name {
			return errno(syscall.EBUSY, "pool %s is bound to job %s", name, j)
		}
	}
	var b engine.Batch
	b.Del(poolKey(name))
	if err := s.e.Apply(&b, true); err != nil {
		return err
	}
	delete(r.pools, name)
	return nil
}

// BindPool binds directory dir (ino ≠ 0) or job to pool name; "" unbinds.
func (s *Service) BindPool(dir uint64, job, name string) error {
	if (dir == 0) == (job == "") {
		return errno(syscall.EINVAL, "bind a directory or a job")
	}
	if dir != 0 {
		s.mu.Lock()
		_, err := s.getDir(dir)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pools[name]; name != "" && !ok {
		return errno(syscall.ENOENT, "no pool %q", name)
	}
	if job != "" {
		if name == "" {
			delete(r.jobPools, job)
		} else {
			r.jobPools[job] = name
		}
		return nil
	}
	var b engine.Batch
	if name == "" {
		b.Del(poolDirKey(dir))
	} else {
		b.Set(poolDirKey(dir), []byte(name))
	}
	if err := s.e.Apply(&b, true); err != nil {
		return err
	}
	if name == "" {
		delete(r.dirPools, dir)
	} else {
		r.dirPools[dir] = name
	}
	return nil
}

// JobEnded drops the job's pool binding.
func (s *Service) JobEnded(job string) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobPools, job)
}

// Pools lists the pools and their bindings.
func (s *Service) Pools() PoolList {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	out := PoolList{Placement: string(s.cfg.Placement), DirPools: map[uint64]string{}, Jobs: map[string]string{}}
	for _, p := range r.pools {
		out.Pools = append(out.Pools, p)
	}
	sort.Slice(out.Pools, func(i, j int) bool { return out.Pools[i].Name < out.Pools[j].Name })
	for d, p := range r.dirPools {
		out.DirPools[d] = p
	}
	for j, p := range r.jobPools {
		out.Jobs[j] = p
	}
	return out
}

// servePools adds the resource pools' operations to t; each answers
// with the pools and bindings after it.
func (s *Service) servePools(t *rpc.Table) {
	list := func(err error) (*api.PoolList, error) {
		if err != nil {
			return nil, err
		}
		l := s.Pools()
		return &l, nil
	}
	serveOp(s, t, api.PoolCreate, func(_ context.Context, p *api.Pool) (*api.PoolList, error) { return list(s.CreatePool(*p)) })
	serveOp(s, t, api.PoolRemove, func(_ context.Context, p *api.PoolRef) (*api.PoolList, error) { return list(s.RemovePool(p.Name)) })
	serveOp(s, t, api.PoolBind, func(_ context.Context, b *api.PoolBinding) (*api.PoolList, error) {
		if b.Pool == "" {
			return nil, errno(syscall.EINVAL, "bind: no pool named")
		}
		return list(s.BindPool(b.Ino, b.Job, b.Pool))
	})
	serveOp(s, t, api.PoolUnbind, func(_ context.Context, b *api.PoolBinding) (*api.PoolList, error) {
		return list(s.BindPool(b.Ino, b.Job, ""))
	})
	serveOp(s, t, api.PoolLs, func(context.Context, *wire.Empty) (*api.PoolList, error) { return list(nil) })
}

// loadPools reads the pools and directory bindings (at start).
func (r *registry) loadPools() error {
	var derr error
	r.s.e.Scan([]byte{pPool}, nil, func(k, v []byte) bool {
		switch {
		case len(k) > 2 && k[1] == qPool:
			var p Pool
			if err := json.Unmarshal(v, &p); err != nil {
				derr = fmt.Errorf("pool %q: %v", k[2:], err)
				return false
			}
			r.pools[p.Name] = p
		case len(k) == 10 && k[1] == qDir:
			r.dirPools[binary.BigEndian.Uint64(k[2:])] = string(v)
		}
		return true
	})
	return derr
}

// poolOfLocked is the pool file n's new chunks go to: the job's binding
// (the writer's), else the nearest directory above n bound to one; nil:
// none. Caller holds s.mu and r.mu.
func (r *registry) poolOfLocked(n *inode, job string) *Pool {
	name := ""
	if job != "" {
		name = r.jobPools[job]
	}
	for ino, depth := n.Parent, 0; name == "" && len(r.dirPools) > 0 && ino != 0 && depth < 4096; depth++ {
		name = r.dirPools[ino]
		if ino == RootIno {
			break
		}
		p, err := r.s.getInode(ino)
		if err != nil {
			break
		}
		ino = p.Parent
	}
	if p, ok := r.pools[name]; ok {
		return &p
	}
	return nil
}

// chunkPool fills c's pool from p.
func chunkPool(c *place.Chunk, p *Pool) {
	if p == nil {
		return
	}
	c.Pool = p.Servers
	if len(p.Perf) > 0 {
		c.PoolPerf = map[uint64]uint64{}
		for id, mb := range p.Perf {
			c.PoolPerf[id] = uint64(mb * 1e6)
		}
	}
}
