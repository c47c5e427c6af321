package meta

import (
	"encoding/json"
	"math"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/bbos"
)

// Burst-buffer grants (`sluice bb setup`/`teardown`, docs/bbos.md): one
// per job, kept under 'B' keys, admitted by policy/bbos (Config.BBPolicy)
// against the capacity of the tier the job asked for (its pool).

// BBGrant is one job's claim on a burst-buffer pool.
type BBGrant struct {
	Job    string
	Pool   string  // the tier: mem or ssd
	Size   uint64  // bytes per I/O phase (the directive's capacity)
	Period float64 `json:",omitempty"` // seconds between its I/O phases (0: unknown)
	UID    uint32
	Since  int64 // unix ns
	// App names the job's application (`app=`; "": the job alone).
	App string `json:",omitempty"`
	// Checkpoint is the glob of the job's checkpoint files, a path in the
	// namespace whose last element may hold wildcards (`checkpoint=`; the
	// job's buffer directory's files by default): its versions, in the
	// order they were created, for cold-data selection (manager/bbos).
	Checkpoint string `json:",omitempty"`
	// MTBF is the application's mean time between failures in seconds
	// (`mtbf=`; 0: the manager's default): a low MTBF means a restart,
	// which reads the newest version, is likely soon.
	MTBF float64 `json:",omitempty"`
}

// BBPool is a pool as grants see it.
type BBPool struct {
	Pool     string
	Capacity uint64 // the live data servers' capacity
	// Limit is the most the policy admits per period (bbos.Limit over the
	// grants' longest period: Capacity for dedicated; capped at 64×).
	Limit   uint64
	Granted uint64 // the grants' sizes, summed
	Policy  bbos.Policy
}

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
		bp := BBPool{Pool: pool, Capacity: c, Policy: p}
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

// BBCall answers an OpBB call (`sluice bb`): grants, releases, pools.
func (s *Service) BBCall(m *wire.Msg, p []byte) (*wire.Msg, []byte) {
	out, err := s.bbCall(m, p)
	return rpc.ToMsg(&wire.Msg{}, err), out
}

// BBReply is the answer to OpBB "pools".
type BBReply struct {
	Pools  []BBPool
	Grants []BBGrant
}

func (s *Service) bbCall(m *wire.Msg, p []byte) ([]byte, error) {
	switch m.Name {
	case "grant":
		var g BBGrant
		if err := json.Unmarshal(p, &g); err != nil {
			return nil, errno(syscall.EINVAL, "grant: %v", err)
		}
		a, err := s.Grant(g)
		if err != nil {
			return nil, err
		}
		return json.Marshal(a)
	case "release":
		return nil, s.ReleaseGrant(m.Who.Job)
	case "pools":
		var r BBReply
		var err error
		if r.Pools, err = s.BBPools(); err != nil {
			return nil, err
		}
		if r.Grants, err = s.Grants(); err != nil {
			return nil, err
		}
		return json.Marshal(r)
	}
	return nil, errno(syscall.EINVAL, "unknown burst-buffer call %q", m.Name)
}
