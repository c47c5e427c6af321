// Package monitor is the manager's Beacon service in the metadata daemon:
// it answers Beacon's operations (beacon/beaconrpc is their contract) from
// the record store (beacon/store) and owns the store's periodic work
// (retention, fail-slow detection with policy/failslow, building the
// application profiles of finished jobs). It owns nothing of the namespace
// or the data path.
package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/beacon/store"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/failslow"
)

// Config configures the service.
type Config struct {
	Store *store.Store
	Log   *slog.Logger
	Now   func() time.Time
	// Window is the daemons' aggregation window (default 1 s).
	Window time.Duration
	// DetectSpan is how much recent history fail-slow detection looks at
	// (default 30 s).
	DetectSpan time.Duration
	FailSlow   failslow.Options
	Thresholds beacon.Thresholds
	// JobIdle: a job without records for this long has ended; its
	// profile is built then (default 30 s).
	JobIdle time.Duration
}

// Service is the store's RPC face.
type Service struct {
	cfg Config

	mu   sync.Mutex // guards slow
	slow []beacon.SlowServer
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Window <= 0 {
		cfg.Window = beacon.DefaultWindow
	}
	if cfg.DetectSpan <= 0 {
		cfg.DetectSpan = 30 * time.Second
	}
	if cfg.JobIdle <= 0 {
		cfg.JobIdle = 30 * time.Second
	}
	return &Service{cfg: cfg}
}

// Serve adds Beacon's operations (beacon/beaconrpc) to t.
func (s *Service) Serve(t *rpc.Table) {
	rpc.OnRequest(t, beaconrpc.Put, func(_ context.Context, r *rpc.Request, _ *wire.Empty) {
		if err := s.cfg.Store.Put(r.Payload); err != nil {
			r.ReplyErr(rpc.Errorf(syscall.EINVAL, "beacon: %v", err))
			return
		}
		r.Reply(&wire.Empty{}, nil)
	})
	rpc.OnRequest(t, beaconrpc.QueryOp, func(_ context.Context, r *rpc.Request, q *beaconrpc.Query) {
		recs, err := s.cfg.Store.Query(q.Filter())
		if err != nil {
			r.ReplyErr(err)
			return
		}
		r.Reply(&wire.Empty{}, beacon.Encode(recs))
	})
	rpc.On(t, beaconrpc.JobsOp, func(context.Context, *wire.Empty) (*beaconrpc.JobsRep, error) {
		return &beaconrpc.JobsRep{Jobs: s.cfg.Store.Jobs()}, nil
	})
	rpc.On(t, beaconrpc.HealthOp, func(context.Context, *wire.Empty) (*beaconrpc.HealthRep, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return &beaconrpc.HealthRep{Slow: append([]beacon.SlowServer(nil), s.slow...)}, nil
	})
	rpc.On(t, beaconrpc.Interference, func(_ context.Context, q *beaconrpc.Query) (*beaconrpc.InterferenceRep, error) {
		f := q.Filter()
		f.Job = "" // pairs need every job's records
		recs, err := s.cfg.Store.Query(f)
		if err != nil {
			return nil, err
		}
		found := beacon.DetectInterference(recs, beacon.InterferenceOptions{})
		if q.Job != "" {
			var mine []beacon.Interference
			for _, x := range found {
				if x.Victim == q.Job || x.Aggressor == q.Job {
					mine = append(mine, x)
				}
			}
			found = mine
		}
		return &beaconrpc.InterferenceRep{Pairs: found}, nil
	})
	rpc.On(t, beaconrpc.ProfilePut, func(_ context.Context, np *beacon.Profile) (*wire.Empty, error) {
		if np.Key == "" {
			return nil, rpc.Errorf(syscall.EINVAL, "beacon profile: no key")
		}
		return &wire.Empty{}, s.mergeProfile(*np)
	})
	rpc.On(t, beaconrpc.ProfileGet, func(_ context.Context, q *beaconrpc.ProfileKey) (*beacon.Profile, error) {
		pr, ok, err := s.cfg.Store.Profile(q.Key)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, rpc.Errorf(syscall.ENOENT, "no profile for %q", q.Key)
		}
		return &pr, nil
	})
	rpc.On(t, beaconrpc.ProfilesOp, func(context.Context, *wire.Empty) (*beaconrpc.ProfilesRep, error) {
		ps, err := s.cfg.Store.Profiles()
		if err != nil {
			return nil, err
		}
		return &beaconrpc.ProfilesRep{Profiles: ps}, nil
	})
	rpc.On(t, beaconrpc.DecisionPut, func(_ context.Context, q *beaconrpc.DecisionReq) (*wire.Empty, error) {
		return &wire.Empty{}, s.cfg.Store.PutDecision(q.Job, time.Unix(0, q.At), q.V)
	})
	rpc.On(t, beaconrpc.DecisionsOp, func(_ context.Context, q *beaconrpc.JobReq) (*beaconrpc.DecisionsRep, error) {
		ats, vs, err := s.cfg.Store.DecisionsAt(q.Job)
		if err != nil {
			return nil, err
		}
		rep := &beaconrpc.DecisionsRep{Decisions: make([]beaconrpc.DecisionReq, len(vs))}
		for i := range vs {
			rep.Decisions[i] = beaconrpc.DecisionReq{Job: q.Job, At: ats[i], V: vs[i]}
		}
		return rep, nil
	})
	rpc.On(t, beaconrpc.ProfileJob, func(_ context.Context, q *beaconrpc.JobReq) (*beacon.Profile, error) {
		pr, err := s.ProfileJob(q.Job)
		if err != nil {
			return nil, err
		}
		return &pr, nil
	})
}

func (s *Service) mergeProfile(np beacon.Profile) error {
	old, ok, err := s.cfg.Store.Profile(np.Key)
	if err != nil {
		return err
	}
	if ok {
		np = old.Merge(np)
	}
	return s.cfg.Store.PutProfile(np)
}

// ProfileJob analyses a job's records and merges its profile into its
// application's.
func (s *Service) ProfileJob(job string) (beacon.Profile, error) {
	recs, err := s.cfg.Store.Query(beacon.Filter{Job: job})
	if err != nil {
		return beacon.Profile{}, err
	}
	if len(recs) == 0 {
		return beacon.Profile{}, rpc.Errorf(syscall.ENOENT, "no records of job %q", job)
	}
	rep := beacon.Analyze(job, recs, s.cfg.Window, s.cfg.Thresholds)
	pr := beacon.ProfileOf(rep)
	if err := s.mergeProfile(pr); err != nil {
		return beacon.Profile{}, err
	}
	var last int64
	for _, r := range recs {
		last = max(last, r.Window)
	}
	return pr, s.cfg.Store.MarkProfiled(job, last)
}

// Health returns the servers currently flagged fail-slow.
func (s *Service) Health() []beacon.SlowServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]beacon.SlowServer(nil), s.slow...)
}

// Check runs the periodic work once: fail-slow detection over the recent
// span, profiles of jobs that went idle, retention.
func (s *Service) Check(now time.Time) {
	recs, err := s.cfg.Store.Query(beacon.Filter{From: now.Add(-s.cfg.DetectSpan)})
	if err != nil {
		s.cfg.Log.Warn("beacon: query for detection failed", "err", err)
		return
	}
	slow := failslow.Detect(recs, s.cfg.FailSlow)
	s.mu.Lock()
	was := map[string]bool{}
	for _, x := range s.slow {
		was[x.Server] = true
	}
	s.slow = slow
	s.mu.Unlock()
	for _, x := range slow {
		if !was[x.Server] {
			s.cfg.Log.Warn("fail-slow server detected", "server", x.Server, "ratio", fmt.Sprintf("%.1f", x.Ratio), "windows", x.Windows)
		}
	}
	for _, j := range s.cfg.Store.Jobs() {
		if j.Job == "" || now.Sub(time.Unix(0, j.Last)) < s.cfg.JobIdle {
			continue
		}
		if j.Profiled >= j.Last || j.App == "" {
			continue
		}
		if _, err := s.ProfileJob(j.Job); err != nil {
			s.cfg.Log.Warn("beacon: profile of finished job failed", "job", j.Job, "err", err)
		}
	}
	if _, err := s.cfg.Store.Trim(now); err != nil {
		s.cfg.Log.Warn("beacon: trim failed", "err", err)
	}
}

// Run calls Check on every tick until ctx ends.
func (s *Service) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			s.Check(s.cfg.Now())
		}
	}
}
