package meta

import (
	"context"
	"encoding/json"
	"github.com/sluice-hpc/sluice/api"
	"math"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/bbos"
)

// Burst-buffer grants (`sluice bb setup`/`teardown`, docs/bbos.md): one
// per job, kept under 'B' keys, admitted by policy/bbos (Config.BBPolicy)
// against the capacity of the tier the job asked for (its pool).

// BBGrant is one job's claim on a burst-buffer pool; BBPool a pool as
// grants see it; BBReply the pools and grants.
type (
	BBGrant = api.Grant
	BBPool  = api.BBPool
	BBReply = api.BBPools
)

func grantKey(job string) []byte { return append([]byte{pGrant}, job...) }

// bbPolicy is the configured policy (dedicated by default).
func (s *Service) bbPolicy() bbos.Policy {
	if s.cfg.BBPolicy == "" {
		return bbos.Dedicated
	}
	return s.cfg.BBPolicy
}

// poolCapacity sums the capacity of pool's live data servers.
func (s *Service) poolCapacity(pool string) uint64 {
	var c uint64
	for _, si := range s.Servers() {
		if si.Role == "data" && si.Tier == pool && si.Alive {
			c += si.Capacity
		}
	}
	return c
}

// Grant admits g (a job's burst-buffer request) under the configured
// policy, or says why not (the Admission's Reason; nothing is kept). A
// job that holds a grant already keeps it.
func (s *Service) Grant(g BBGrant) (bbos.Admission, error) {
	if g.Job == "" || g.Size == 0 || g.Pool != "mem" && g.Pool != "ssd" {
		return bbos.Admission{}, errno(syscall.EINVAL, "a grant wants a job, a size and a pool (mem or ssd): %+v", g)
	}
	s.grantMu.Lock()
	defer s.grantMu.Unlock()
	all, err := s.Grants()
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
	a, err := bbos.Admit(s.bbPolicy(), float64(s.poolCapacity(g.Pool)), s.cfg.BBRates, others,
		bbos.Grant{Job: g.Job, Size: float64(g.Size), Period: g.Period})
	if err != nil || !a.OK {
		return a, err
	}
	g.Since = s.now().UnixNano()
	v, _ := json.Marshal(g)
	var b engine.Batch
	b.Set(grantKey(g.Job), v)
	return a, s.e.Apply(&b, true)
}

// ReleaseGrant forgets job's grant (teardown); no grant is no error.
func (s *Service) ReleaseGrant(job string) error {
	s.grantMu.Lock()
	defer s.grantMu.Unlock()
	var b engine.Batch
	b.Del(grantKey(job))
	return s.e.Apply(&b, true)
}

// Grants lists the grants held.
func (s *Service) Grants() ([]BBGrant, error) {
	var out []BBGrant
	var derr error
	s.e.Scan([]byte{pGrant}, nil, func(_, v []byte) bool {
		var g BBGrant
		if derr = json.Unmarshal(v, &g); derr != nil {
			derr = errCorrupt
			return false
		}
		out = append(out, g)
		return true
	})
	return out, derr
}

// BBPools describes the mem and ssd pools: capacity, what the policy
// admits, what is granted.
func (s *Service) BBPools() ([]BBPool, error) {
	grants, err := s.Grants()
	if err != nil {
		return nil, err
	}
	p := s.bbPolicy()
	var out []BBPool
	for _, pool := range []string{"mem", "ssd"} {
		c := s.poolCapacity(pool)
		if c == 0 {
			continue
		}
		bp := BBPool{Pool: pool, Capacity: c, Policy: string(p)}
		var period float64
		for _, g := range grants {
			if g.Pool == pool {
				bp.Granted += g.Size
				period = max(period, g.Period)
			}
		}
		limit, err := bbos.Limit(p, float64(c), period, s.cfg.BBRates)
		if err != nil {
			limit = float64(c)
		}
		bp.Limit = uint64(math.Min(limit, 64*float64(c)))
		out = append(out, bp)
	}
	return out, nil
}

// serveGrants adds the burst-buffer grants' operations to t (`sluice
// bb`): a grant or release is answered once the grant hook (the
// burst-buffer manager's tick) has run, so a job starts with its buffer's
// rates and scheduler in place.
func (s *Service) serveGrants(t *rpc.Table) {
	serveOp(s, t, api.BBGrantOp, func(ctx context.Context, g *api.Grant) (*api.Admission, error) {
		a, err := s.Grant(*g)
		if err != nil {
			return nil, err
		}
		s.grantHook(ctx)
		return &api.Admission{OK: a.OK, Load: a.Load, Limit: a.Limit, Period: a.Period, Reason: a.Reason}, nil
	})
	serveOp(s, t, api.BBRelease, func(ctx context.Context, j *api.JobRef) (*wire.Empty, error) {
		if err := s.ReleaseGrant(j.Job); err != nil {
			return nil, err
		}
		s.grantHook(ctx)
		return &wire.Empty{}, nil
	})
	serveOp(s, t, api.BBPoolsOp, func(context.Context, *wire.Empty) (*api.BBPools, error) {
		var r api.BBPools
		var err error
		if r.Pools, err = s.BBPools(); err != nil {
			return nil, err
		}
		if r.Grants, err = s.Grants(); err != nil {
			return nil, err
		}
		return &r, nil
	})
}

// OnGrant sets what runs after every grant and release, before its
// answer (the burst-buffer manager's tick).
func (s *Service) OnGrant(f func(context.Context)) {
	s.grantMu.Lock()
	defer s.grantMu.Unlock()
	s.onGrant = f
}

func (s *Service) grantHook(ctx context.Context) {
	s.grantMu.Lock()
	f := s.onGrant
	s.grantMu.Unlock()
	if f != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f(cctx)
		cancel()
	}
}
