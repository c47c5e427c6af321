// Package managerd is a manager daemon (`sluice manager serve`): a
// cluster-wide manager in a process of its own instead of inside the
// active metadata daemon. Several may run, one active at a time: each
// campaigns for the role's lease on the shared engine (etcd), the winner
// loads the role's state from its own keys there and serves, and the
// others stand by without listening; a stalled or cut-off winner commits
// nothing once its lease is gone (the engine's fence). The metadata
// daemons send the role's operations on to the active one
// (metad.Config.Apart) and answer what the manager asks of the cluster:
// the registered daemons and Beacon's health, profiles and decision log.
//
// Today the forwarding-map manager (manager/forwarding, DFRA) runs so;
// tiering and the burst-buffer manager still run in the active metadata
// daemon (they move chunks through the namespace's own transactions). It
// owns the role's process, its term and its keys; it must not touch the
// namespace's keys or talk to data servers.
package managerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/daemon/term"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/manager/forwarding"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/fwdjobs"
	"github.com/sluice-hpc/sluice/policy/dfra"
)

// Roles names the managers that can run in a process of their own.
var Roles = []string{Forwarding}

// Forwarding is the forwarding-map manager's role name.
const Forwarding = "forwarding"

// Config configures a manager daemon.
type Config struct {
	// Role is the manager run (Roles).
	Role string
	// Listen is the address served once active; it is also the id the
	// role's election shows, which the metadata daemons dial.
	Listen      string
	LocalSocket bool
	Secret      []byte
	// Ready, if set, is told the bound address before serving.
	Ready func(addr string) error
	// Engine is the shared engine's URI (the metadata daemons'):
	// etcd://HOST:PORT,…/PREFIX. The role keeps its keys apart there
	// (engine.OpenRole).
	Engine string
	// Meta is the metadata daemons' addresses.
	Meta    string
	Timeout time.Duration
	// The forwarding manager's policy (manager/forwarding.Config).
	DFRA        dfra.Config
	FwdMode     string
	FwdCapacity float64
	Log         *slog.Logger
}

// Run campaigns for cfg.Role and serves it while its term lasts, until
// ctx ends. It returns term.ErrEnded if another instance took over.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Role != Forwarding {
		return fmt.Errorf("manager %q: only the %s manager runs in a process of its own (tiering and the burst-buffer manager run in the active metadata daemon)", cfg.Role, Forwarding)
	}
	if cfg.Meta == "" {
		return errors.New("a manager daemon needs the metadata daemons' addresses (--meta)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	e, err := engine.OpenRole(cfg.Engine, cfg.Role)
	if err != nil {
		return err
	}
	defer e.Close()
	ctx, err = term.Campaign(ctx, e.(engine.Elector), cfg.Listen, cfg.Role+" manager", cfg.Log)
	if err != nil || ctx.Err() != nil {
		return err
	}
	mc := rpc.NewClient(cfg.Meta, cfg.Secret, rpc.ClientOptions{Name: "metadata service", Timeout: cfg.Timeout})
	defer mc.Close()
	cl := &cluster{c: mc, timeout: cfg.Timeout, log: cfg.Log}
	m := forwarding.New(forwarding.Config{Jobs: fwdjobs.Open(e), Policy: cfg.DFRA, Mode: cfg.FwdMode, FwdCapacity: cfg.FwdCapacity,
		Decisions: beaconrpc.DecisionLog{M: mc, Timeout: cfg.Timeout}, Servers: cl.servers, Health: cl.health, Profile: cl.profile, Log: cfg.Log})
	ln, err := rpc.Listen(cfg.Listen, rpc.ListenOptions{Local: cfg.LocalSocket, Ready: cfg.Ready})
	if err != nil {
		return err
	}
	defer ln.Close()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	go m.Run(ctx, t.C)
	table := &rpc.Table{Name: cfg.Role + " manager " + ln.Addr().String()}
	m.Serve(table)
	srv := rpc.NewServer(cfg.Secret, &rpc.Mux{Name: table.Name, Tables: []*rpc.Table{table}}, cfg.Log)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	cfg.Log.Info("manager listening", "role", cfg.Role, "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && ctx.Err() == nil {
		return err
	}
	if err := context.Cause(ctx); errors.Is(err, term.ErrEnded) {
		return err
	}
	return nil
}

// cacheFor is how long the manager reuses what it asked the metadata
// daemon: a mount's poll of its job's placement asks for both.
const cacheFor = time.Second

// cluster is what the manager asks the metadata daemon.
type cluster struct {
	c       *rpc.Client
	timeout time.Duration
	log     *slog.Logger
	srvs    cached[[]wire.ServerInfo]
	slow    cached[[]beacon.SlowServer]
}

// cached is an answer kept for cacheFor; a fetch that fails leaves the
// last one (and is logged once until one succeeds).
type cached[T any] struct {
	mu     sync.Mutex // guards the fields below
	v      T
	at     time.Time
	warned bool
}

func (k *cached[T]) get(c *cluster, what string, fetch func(context.Context) (T, error)) T {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.at) < cacheFor {
		return k.v
	}
	ctx, cancel := c.ctx()
	defer cancel()
	v, err := fetch(ctx)
	if err != nil {
		if !k.warned {
			c.log.Warn(what+": the last answer serves", "err", err)
			k.warned = true
		}
		return k.v
	}
	k.v, k.at, k.warned = v, time.Now(), false
	return v
}

func (c *cluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

// servers is the registered daemons.
func (c *cluster) servers() []wire.ServerInfo {
	return c.srvs.get(c, "listing the daemons", func(ctx context.Context) ([]wire.ServerInfo, error) {
		r, err := rpc.Do(ctx, c.c, api.Servers, &wire.Empty{})
		if err != nil {
			return nil, err
		}
		return r.Servers, nil
	})
}

// health is the daemons Beacon finds fail-slow.
func (c *cluster) health() []beacon.SlowServer {
	return c.slow.get(c, "asking Beacon for fail-slow daemons", beaconrpc.Client{C: c.c}.Health)
}

// profile is an application's profile from Beacon.
func (c *cluster) profile(key string) (beacon.Profile, bool) {
	ctx, cancel := c.ctx()
	defer cancel()
	p, err := beaconrpc.Client{C: c.c}.Profile(ctx, key)
	return p, err == nil
}
