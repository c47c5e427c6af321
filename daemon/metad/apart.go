package metad

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/manager/monitor"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// apartRoles are the managers that can run in processes of their own
// (daemon/managerd) instead of in this daemon (Config.Apart).
var apartRoles = []string{"forwarding"}

// checkApart says what in roles cannot run apart on engine e.
func checkApart(roles []string, e engine.Engine) error {
	for _, r := range roles {
		if !slices.Contains(apartRoles, r) {
			return fmt.Errorf("--managers-apart %q: only %s can run in processes of their own", r, strings.Join(apartRoles, ", "))
		}
	}
	if _, ok := e.(engine.Shared); len(roles) > 0 && !ok {
		return fmt.Errorf("--managers-apart needs a shared engine (etcd): the managers find their state and their election there")
	}
	return nil
}

// relayWait is how long a request for a manager that runs apart waits
// for one to answer: a lease (5 s) and a campaign, with room.
const relayWait = 15 * time.Second

// relay reaches the active instance of a manager that runs in processes
// of its own: the address its election names on the shared engine.
type relay struct {
	role   string
	sh     engine.Shared
	secret []byte

	mu   sync.Mutex // guards addr, c
	addr string
	c    *rpc.Client
}

var _ rpc.Invoker = (*relay)(nil)

// client is a client of the active instance: the last one's while it
// answers, else the one the election names now.
func (r *relay) client(ctx context.Context) (*rpc.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		return r.c, nil
	}
	addr, err := r.sh.ActiveOf(ctx, r.role)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		return nil, fmt.Errorf("no %s manager is active", r.role)
	}
	r.addr = addr
	r.c = rpc.NewClient(addr, r.secret, rpc.ClientOptions{Name: r.role + " manager " + addr, Timeout: 3 * time.Second})
	return r.c, nil
}

// forget drops c after it failed to answer: the next call asks the
// election again.
func (r *relay) forget(c *rpc.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == c {
		r.c.Close()
		r.c, r.addr = nil, ""
	}
}

// Invoke sends a request to the active instance, again to the next one
// while none answers (a takeover), for up to relayWait; then EIO naming
// the manager.
func (r *relay) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	deadline := time.Now().Add(relayWait)
	for {
		c, err := r.client(ctx)
		if err == nil {
			var p []byte
			if p, err = c.Invoke(ctx, op, req, rep, payload, into); err == nil || !rpc.Unreached(err) {
				return p, err
			}
			r.forget(c)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, rpc.Errorf(syscall.EIO, "the %s manager does not answer: %v", r.role, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *relay) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		r.c.Close()
	}
}

// serveForwardingApart adds the forwarding map's operations to t, each
// sent on to the forwarding manager that runs apart; a job's start and
// end still reach the parts here that follow them (prefetch, pools).
func (d *daemon) serveForwardingApart(t *rpc.Table, r *relay) {
	to := func(context.Context) (rpc.Invoker, error) { return r, nil }
	rpc.On(t, fwdmap.Start, func(ctx context.Context, spec *fwdmap.JobSpec) (*fwdmap.Placement, error) {
		pl, err := rpc.Do(ctx, r, fwdmap.Start, spec)
		if err == nil {
			d.jobStarted(*spec, d.appProfile(*spec))
		}
		return pl, err
	})
	rpc.On(t, fwdmap.End, func(ctx context.Context, q *fwdmap.JobRef) (*wire.Empty, error) {
		rep, err := rpc.Do(ctx, r, fwdmap.End, q)
		if err == nil {
			d.jobEnded(q.Job)
		}
		return rep, err
	})
	rpc.Relay(t, fwdmap.Map, to)
	rpc.Relay(t, fwdmap.List, to)
	rpc.Relay(t, fwdmap.History, to)
}

// serveManagers answers where each manager runs (api.Managers): here, at
// self, or apart, at the address the role's election names now.
func (d *daemon) serveManagers(t *rpc.Table, self string) {
	rpc.On(t, api.Managers, func(ctx context.Context, _ *wire.Empty) (*api.ManagersRep, error) {
		rep := &api.ManagersRep{}
		fwd := api.ManagerInfo{Role: "forwarding", Active: self}
		if r := d.fwdsApart; r != nil {
			fwd.Apart, fwd.Active = true, ""
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			addr, err := r.sh.ActiveOf(ctx, r.role)
			cancel()
			if err != nil {
				fwd.Error = err.Error()
			}
			fwd.Active = addr
		}
		mon := api.ManagerInfo{Role: "monitor", Active: self}
		if f, ok := d.beacon.(*monitor.Front); ok {
			mon.Apart, mon.Active = true, strings.Join(f.M.Addrs(), ",")
		}
		rep.Managers = append(rep.Managers, fwd, api.ManagerInfo{Role: "tiering", Active: self},
			api.ManagerInfo{Role: "burst buffer", Active: self}, mon)
		return rep, nil
	})
}
