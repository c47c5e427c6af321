package qosgate

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// Follower keeps a daemon's gates on the metadata service's rules. Watch
// holds a call open that the metadata service answers as soon as the
// rules change (api.QoSWatch); every heartbeat reply names the version in
// force too (api.RegisterRep), and a version the gates do not run is
// fetched (api.QoSList): the fallback while a watch is being redone.
type Follower struct {
	Meta  *rpc.Client
	Gates []*Gate
	Log   *slog.Logger

	busy atomic.Bool
	// mu orders applying fetched rules; announced is the version the last
	// heartbeat named (guarded by mu).
	mu        sync.Mutex
	announced uint64
}

func (f *Follower) version() uint64 {
	if len(f.Gates) == 0 {
		return 0
	}
	return f.Gates[0].Version()
}

// Seen takes the version a heartbeat reply named; a new one is fetched in
// the background (one fetch at a time).
func (f *Follower) Seen(version uint64) {
	f.mu.Lock()
	f.announced = version
	f.mu.Unlock()
	if f.version() == version || !f.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer f.busy.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.Fetch(ctx); err != nil {
			f.Log.Warn("cannot fetch the QoS rules", "version", version, "err", err)
		}
	}()
}

// Fetch gets the rules in force and puts them in the gates.
func (f *Follower) Fetch(ctx context.Context) error {
	rs, err := rpc.Do(ctx, f.Meta, api.QoSList, &wire.Empty{})
	if err != nil {
		return err
	}
	f.apply(*rs)
	return nil
}

// Watch keeps a watch open until ctx ends, putting each new version in
// the gates as the metadata service answers it; after a failure it waits
// a second and watches again.
func (f *Follower) Watch(ctx context.Context, hold time.Duration) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, hold+10*time.Second)
		rs, err := rpc.Do(rpc.LongPoll(cctx), f.Meta, api.QoSWatch, &api.QoSWatchReq{Have: f.version()})
		if err == nil {
			f.apply(*rs)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			f.Log.Debug("QoS watch failed; watching again in a second", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// apply puts rs in the gates unless it is older than what they run (a
// slow reply overtaken by a newer one), or the version a heartbeat
// named: a metadata service that lost its rules starts again from 0.
func (f *Follower) apply(rs qos.RuleSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.version()
	if rs.Version == cur || (rs.Version < cur && rs.Version != f.announced) {
		return
	}
	for _, g := range f.Gates {
		g.SetRules(rs.Version, rs.Rules)
	}
	f.Log.Info("QoS rules in force", "version", rs.Version, "rules", len(rs.Rules))
}
