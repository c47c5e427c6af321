// Package bbgrants keeps the burst buffer's grants (`sluice bb
// setup`/`teardown`, docs/bbos.md): one per job, a claim on the mem or
// ssd tier (its pool), admitted by the configured policy/bbos policy
// against the capacity of the pool's live data servers. The grants live
// under their own keys in the metadata daemon's engine; it answers the
// administration service's burst-buffer operations (api.BBGrantOp,
// BBRelease, BBPoolsOp). It must not touch the namespace or move data
// (the burst-buffer manager does).
package bbgrants

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/bbos"
)

// Prefix is the first byte of the grants' engine keys ('B' job); the
// metadata daemon's key schema (meta/schema.go) reserves it.
const Prefix = 'B'

// Config is how grants are kept and admitted.
type Config struct {
	Engine engine.Engine
	// Policy admits grants (bbos.Dedicated if empty) with Rates.
	Policy bbos.Policy
	Rates  bbos.Rates
	// Servers lists the registered daemons: a pool's capacity is its
	// live data servers'.
	Servers func() []wire.ServerInfo
	Now     func() time.Time
}

// Grants is the jobs' burst-buffer grants.
type Grants struct {
	cfg Config
	// mu orders admissions (judge, then commit) and guards onGrant
	mu      sync.Mutex
	onGrant func(context.Context)
}

// New returns the grants kept in cfg.Engine.
func New(cfg Config) *Grants {
	if cfg.Policy == "" {
		cfg.Policy = bbos.Dedicated
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Grants{cfg: cfg}
}

func key(job string) []byte { return append([]byte{Prefix}, job...) }

// capacity sums the capacity of pool's live data servers.
func (gs *Grants) capacity(pool string) uint64 {
	var c uint64
	for _, si := range gs.cfg.Servers() {
		if si.Role == "data" && si.Tier == pool && si.Alive {
			c += si.Capacity
		}
	}
	return c
}

// Grant admits g (a job's burst-buffer request) under the configured
// policy, or says why not (the Admission's Reason; nothing is kept). A
// job that holds a grant already keeps it.
func (gs *Grants) Grant(g api.Grant) (bbos.Admission, error) {
	if g.Job == "" || g.Size == 0 || g.Pool != "mem" && g.Pool != "ssd" {
		return bbos.Admission{}, rpc.Errorf(syscall.EINVAL, "a grant wants a job, a size and a pool (mem or ssd): %+v", g)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	all, err := gs.List()
	if err != nil {
		return bbos.Admission{}, err
	}
	var others []bbos.Grant
	for _, o := range all {
		if o.Job == g.Job {
			return bbos.Admission{OK: true, Reason: "granted before"}, nil
		}
		if o.Pool == g.Pool {
			others = append(others, bbos.Grant{Job: o.Job, Size: float64(o.Size), Period: o.Period})
		}
	}
	a, err := bbos.Admit(gs.cfg.Policy, float64(gs.capacity(g.Pool)), gs.cfg.Rates, others,
		bbos.Grant{Job: g.Job, Size: float64(g.Size), Period: g.Period})
	if err != nil || !a.OK {
		return a, err
	}
	g.Since = gs.cfg.Now().UnixNano()
	v, _ := json.Marshal(g)
	var b engine.Batch
	b.Set(key(g.Job), v)
	return a, gs.cfg.Engine.Apply(&b, true)
}

// Release forgets job's grant (teardown); no grant is no error.
func (gs *Grants) Release(job string) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var b engine.Batch
	b.Del(key(job))
	return gs.cfg.Engine.Apply(&b, true)
}

// List returns the grants held.
func (gs *Grants) List() ([]api.Grant, error) {
	var out []api.Grant
	var derr error
	gs.cfg.Engine.Scan([]byte{Prefix}, nil, func(k, v []byte) bool {
		var g api.Grant
		if err := json.Unmarshal(v, &g); err != nil {
			derr = fmt.Errorf("burst-buffer grant of job %q: %w", k[1:], err)
			return false
		}
		out = append(out, g)
		return true
	})
	return out, derr
}

// Pools describes the mem and ssd pools: capacity, what the policy
// admits, what is granted.
func (gs *Grants) Pools() ([]api.BBPool, error) {
	grants, err := gs.List()
	if err != nil {
		return nil, err
	}
	var out []api.BBPool
	for _, pool := range []string{"mem", "ssd"} {
		c := gs.capacity(pool)
		if c == 0 {
			continue
		}
		bp := api.BBPool{Pool: pool, Capacity: c, Policy: string(gs.cfg.Policy)}
		var period float64
		for _, g := range grants {
			if g.Pool == pool {
				bp.Granted += g.Size
				period = max(period, g.Period)
			}
		}
		limit, err := bbos.Limit(gs.cfg.Policy, float64(c), period, gs.cfg.Rates)
		if err != nil {
			limit = float64(c)
		}
		bp.Limit = uint64(math.Min(limit, 64*float64(c)))
		out = append(out, bp)
	}
	return out, nil
}

// OnGrant sets what runs after every grant and release, before its
// answer (the burst-buffer manager's tick, so that a job starts with its
// buffer's rates and scheduler in place).
func (gs *Grants) OnGrant(f func(context.Context)) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.onGrant = f
}

func (gs *Grants) hook(ctx context.Context) {
	gs.mu.Lock()
	f := gs.onGrant
	gs.mu.Unlock()
	if f != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f(cctx)
		cancel()
	}
}

// Serve adds the grants' operations to t (`sluice bb`): a grant or
// release is answered once the OnGrant hook has run.
func (gs *Grants) Serve(t *rpc.Table) {
	rpc.On(t, api.BBGrantOp, func(ctx context.Context, g *api.Grant) (*api.Admission, error) {
		a, err := gs.Grant(*g)
		if err != nil {
			return nil, err
		}
		gs.hook(ctx)
		return &api.Admission{OK: a.OK, Load: a.Load, Limit: a.Limit, Period: a.Period, Reason: a.Reason}, nil
	})
	rpc.On(t, api.BBRelease, func(ctx context.Context, j *api.JobRef) (*wire.Empty, error) {
		if err := gs.Release(j.Job); err != nil {
			return nil, err
		}
		gs.hook(ctx)
		return &wire.Empty{}, nil
	})
	rpc.On(t, api.BBPoolsOp, func(context.Context, *wire.Empty) (*api.BBPools, error) {
		var r api.BBPools
		var err error
		if r.Pools, err = gs.Pools(); err != nil {
			return nil, err
		}
		if r.Grants, err = gs.List(); err != nil {
			return nil, err
		}
		return &r, nil
	})
}
