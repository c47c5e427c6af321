package api

import "github.com/sluice-hpc/sluice/internal/wire"

// Pool is a resource pool (Sunway §5, docs/placement.md): a named set of
// data servers, each with the bandwidth the pool may count on from it.
type Pool struct {
	Name    string
	Servers []uint64
	// Perf is the pool's max_perf of some of its servers, MB/s (missing:
	// what the server measured).
	Perf map[uint64]float64 `json:",omitempty"`
}

// Fields implements wire.Message.
func (p *Pool) Fields(c *wire.Codec) {
	c.String(1, &p.Name)
	c.Uint64s(2, &p.Servers)
	wire.Map(c, 3, &p.Perf, (*wire.Codec).Uint64, (*wire.Codec).Float64)
}

// PoolRef names a pool.
type PoolRef struct{ Name string }

// Fields implements wire.Message.
func (r *PoolRef) Fields(c *wire.Codec) { c.String(1, &r.Name) }

// PoolBinding binds pool Pool to directory Ino or to job Job (unbinding:
// Pool is not needed).
type PoolBinding struct {
	Pool string
	Ino  uint64
	Job  string
}

// Fields implements wire.Message.
func (r *PoolBinding) Fields(c *wire.Codec) {
	c.String(1, &r.Pool)
	c.Uint64(2, &r.Ino)
	c.String(3, &r.Job)
}

// PoolList is the pools, the directories and jobs bound to them, and the
// placement policy: the answer to every pool operation.
type PoolList struct {
	Placement string
	Pools     []Pool
	DirPools  map[uint64]string `json:",omitempty"` // directory ino → pool
	Jobs      map[string]string `json:",omitempty"` // job → pool
}

// Fields implements wire.Message.
func (l *PoolList) Fields(c *wire.Codec) {
	c.String(1, &l.Placement)
	wire.List(c, 2, &l.Pools)
	wire.Map(c, 3, &l.DirPools, (*wire.Codec).Uint64, (*wire.Codec).String)
	wire.Map(c, 4, &l.Jobs, (*wire.Codec).String, (*wire.Codec).String)
}
