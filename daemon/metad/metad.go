// Package metad assembles the metadata daemon: the namespace service
// (meta), the services beside it on the same engine (meta/pools,
// meta/bbgrants, meta/tierpolicy), Beacon's record store and the managers
// (manager/monitor, manager/forwarding, manager/tiering, manager/bbos),
// behind one listener. It owns their wiring, their tickers and their
// lifetimes. It must not keep state or decide anything itself (each part
// does), parse flags or exit (cmd/sluice does).
package metad

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/beacon/store"
	"github.com/sluice-hpc/sluice/daemon/term"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	bbmgr "github.com/sluice-hpc/sluice/manager/bbos"
	"github.com/sluice-hpc/sluice/manager/forwarding"
	"github.com/sluice-hpc/sluice/manager/monitor"
	"github.com/sluice-hpc/sluice/manager/tiering"
	"github.com/sluice-hpc/sluice/meta"
	"github.com/sluice-hpc/sluice/meta/bbgrants"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/fwdjobs"
	"github.com/sluice-hpc/sluice/meta/pools"
	"github.com/sluice-hpc/sluice/meta/tierpolicy"
	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/policy/dfra"
	"github.com/sluice-hpc/sluice/policy/place"
	tierpol "github.com/sluice-hpc/sluice/policy/tiering"
)

// Config is the metadata daemon's configuration (`sluice meta`'s flags).
type Config struct {
	Listen      string // HOST:PORT or unix:PATH
	LocalSocket bool   // also a unix socket for peers on this host
	Secret      []byte // the cluster secret
	// Ready, if set, is called with the bound address once the daemon
	// listens (the address file of `sluice cluster up`).
	Ready func(addr string) error

	// Engine is the metadata engine (meta/engine): pebble, bolt, mem, or
	// an etcd URI, which several metadata servers may share: one is
	// active, the others stand by, not listening, until its term ends
	// (engine.Elector)
	Engine string
	Dir    string // the engine's directory and Beacon's ("" for mem: none)

	Log     *slog.Logger
	Metrics *prometheus.Registry

	ChunkSize uint32        // the root directory's chunk size
	Timeout   time.Duration // bound on calls to data servers
	MaxOps    float64       // namespace operations per second at most (0: none)
	// ReclaimWait is how long after its start the service waits for
	// mounts to send what they held (open handles, bytes and closes held
	// back) before it removes files unlinked while open that nobody
	// reclaimed and, after a takeover, before its policies move data
	// (0: DefaultReclaimWait).
	ReclaimWait time.Duration
	MemReplicas int          // copies of each mem-tier chunk: 1 or 2
	Placement   place.Policy // ranking of servers within a tier

	BeaconRetention time.Duration // records kept this long
	BeaconMaxBytes  int64         // and at most this many bytes, compressed
	MonitorWindow   time.Duration // Beacon's aggregation window
	// Monitors, if set, are the monitor daemons that keep Beacon's
	// records (comma-separated addresses): the daemon keeps none itself
	// and answers Beacon's operations by asking them (monitor.Front).
	Monitors string

	// Apart names the managers that run in processes of their own
	// (daemon/managerd: "forwarding"), on a shared engine: this daemon
	// sends their operations on to the active one.
	Apart []string

	FwdMode     string      // forwarding allocation: dfra or ffm
	FwdCapacity float64     // a forwarding node's bandwidth, bytes/s
	DFRA        dfra.Config // DFRA's thresholds

	Tiering      tierpol.Config // the tiering policy's thresholds
	TierAuto     bool           // false: data moves only when asked
	TierEvery    time.Duration
	DrainDefault string // cool, on-close, now or never
	DrainAge     time.Duration

	BBPolicy   bbos.Policy
	BBRates    bbos.Rates
	BBBypass   bool // cold checkpoints straight to the PFS
	BBVersions bool // cold order by checkpoint version first
	BBMTBF     time.Duration
	BBPeriod   time.Duration
	BBEvery    time.Duration
	BBGap      time.Duration
	BBMaxWait  time.Duration
}

// check says what in c is out of range, naming the flag.
func (c *Config) check() error {
	switch {
	case c.Engine != "mem" && c.Dir == "":
		return fmt.Errorf("--dir is required for engine %q", c.Engine)
	case c.MemReplicas < 1 || c.MemReplicas > 2:
		return fmt.Errorf("--mem-replicas %d: want 1 or 2", c.MemReplicas)
	case !slices.Contains(place.Policies, c.Placement):
		return fmt.Errorf("--placement %q: want perf, rr or wrandom", c.Placement)
	case c.FwdMode != "dfra" && c.FwdMode != "ffm":
		return fmt.Errorf("--fwd-policy %q: want dfra or ffm", c.FwdMode)
	case !slices.Contains([]string{"cool", "on-close", "now", "never"}, c.DrainDefault):
		return fmt.Errorf("--drain-default %q: want cool, on-close, now or never", c.DrainDefault)
	case c.TierEvery <= 0 || c.BBEvery <= 0:
		return fmt.Errorf("--tiering-every and --bb-every must be > 0")
	}
	return nil
}

// beaconService answers Beacon's operations and knows the fail-slow
// servers: monitor.Service on a store here, or monitor.Front.
type beaconService interface {
	Serve(t *rpc.Table)
	Health() []beacon.SlowServer
	Run(ctx context.Context, tick <-chan time.Time)
}

var (
	_ beaconService = (*monitor.Service)(nil)
	_ beaconService = (*monitor.Front)(nil)
	// the managers reach the namespace through their own contracts
	_ tiering.Namespace = (*meta.Service)(nil)
	_ bbmgr.Namespace   = (*meta.Service)(nil)
	_ bbmgr.Stalls      = (*meta.Service)(nil)
)

// decisionLog is where the managers' decisions go
// (forwarding.DecisionLog, which the others' are part of).
type decisionLog = forwarding.DecisionLog

// daemon is the metadata daemon's parts while it runs.
type daemon struct {
	cfg   Config
	svc   *meta.Service
	pools *pools.Pools
	// records is Beacon's store in this process (nil with Monitors)
	records *store.Store
	// beacon answers Beacon's operations: the service on records, or
	// the front of the monitor daemons
	beacon beaconService
	// decisions keeps the managers' decisions: records, or the monitors
	decisions decisionLog
	// profile looks up an application's profile
	profile func(key string) (beacon.Profile, bool)
	tiering *tiering.Manager
	bb      *bbmgr.Manager
	grants  *bbgrants.Grants
	// fwds is the forwarding manager here, or nil when it runs apart
	// (fwdsApart reaches it then)
	fwds      *forwarding.Manager
	fwdsApart *relay
	// quietUntil is when the managers may start moving data
	// (Config.ReclaimWait after a takeover; zero: at once)
	quietUntil time.Time
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return err
		}
	}
	e, err := engine.Open(cfg.Engine, cfg.Dir)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := checkApart(cfg.Apart, e); err != nil {
		return err
	}
	ctx, err = campaign(ctx, cfg, e)
	if err != nil || ctx.Err() != nil {
		return err
	}
	d := &daemon{cfg: cfg}
	var holds func() bool
	if el, ok := e.(engine.Elector); ok {
		holds = el.Holds
		// mounts learn of the new server within a change-feed watch
		// and send what they held before data moves
		quiet := cmp.Or(cfg.ReclaimWait, DefaultReclaimWait)
		d.quietUntil = time.Now().Add(quiet)
		cfg.Log.Info("data moves (tiering, burst buffer) start after the term's quiet time", "quiet", quiet)
	}
	if d.svc, err = meta.New(meta.Config{Engine: e, Log: cfg.Log, Secret: cfg.Secret, ChunkSize: cfg.ChunkSize, Timeout: cfg.Timeout,
		MaxOps: cfg.MaxOps, ReclaimWait: cfg.ReclaimWait, Metrics: cfg.Metrics, Copies: map[string]int{"mem": cfg.MemReplicas}, Placement: cfg.Placement, Holds: holds}); err != nil {
		return err
	}
	if d.pools, err = pools.Open(pools.Config{Engine: e, NS: d.svc, Servers: d.svc.Servers, Placement: string(cfg.Placement)}); err != nil {
		return err
	}
	d.svc.SetPools(d.pools)
	ln, err := rpc.Listen(cfg.Listen, rpc.ListenOptions{Local: cfg.LocalSocket, Ready: cfg.Ready})
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := d.openBeacon(); err != nil {
		return err
	}
	defer d.closeBeacon()
	d.managers(e)
	if m, ok := e.(engine.Maintainer); ok {
		every(ctx, maintainEvery, maintain(m, cfg.Log))
	}
	if err := d.serve(ctx, ln); err != nil {
		return err
	}
	if err := context.Cause(ctx); errors.Is(err, term.ErrEnded) {
		return err
	}
	return nil
}

// maintainEvery is how often the active server looks after an engine
// that needs it (engine.Maintainer: etcd's defragmentation).
const maintainEvery = time.Hour

// maintain calls m.Maintain on every tick until ctx ends.
func maintain(m engine.Maintainer, log *slog.Logger) func(context.Context, <-chan time.Time) {
	return func(ctx context.Context, tick <-chan time.Time) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
			done, err := m.Maintain(ctx)
			switch {
			case err != nil:
				log.Warn("engine maintenance failed", "err", err)
			case len(done.Defragmented) > 0:
				log.Info("engine maintenance: members defragmented", "members", done.Defragmented, "freed", done.Freed)
			}
		}
	}
}

// DefaultReclaimWait is Config.ReclaimWait's default: a change-feed
// watch, which tells every mount the server changed, and 10 s.
const DefaultReclaimWait = meta.ReclaimWait

// campaign waits, on an engine several metadata servers share, until
// this one is the active one (engine.Elector), and returns a context that
// ends with its term. On another engine it returns ctx.
func campaign(ctx context.Context, cfg Config, e engine.Engine) (context.Context, error) {
	el, ok := e.(engine.Elector)
	if !ok {
		return ctx, nil
	}
	host, _ := os.Hostname()
	return term.Campaign(ctx, el, fmt.Sprintf("%s pid %d listen %s", host, os.Getpid(), cfg.Listen), "metadata server", cfg.Log)
}

// openBeacon opens Beacon's store here, or reaches the monitor daemons.
func (d *daemon) openBeacon() error {
	cfg := d.cfg
	if cfg.Monitors != "" {
		mons, err := beaconrpc.NewMonitors(cfg.Monitors, cfg.Secret, cfg.Timeout, cfg.Log.With("part", "monitors"))
		if err != nil {
			return fmt.Errorf("--monitors: %v", err)
		}
		d.beacon = &monitor.Front{M: mons, Log: cfg.Log}
		d.decisions = beaconrpc.DecisionLog{M: mons, Timeout: 5 * time.Second}
		d.profile = func(key string) (beacon.Profile, bool) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			p, err := beaconrpc.Client{C: mons}.Profile(ctx, key)
			return p, err == nil
		}
		cfg.Log.Info("Beacon's records are kept by the monitors", "monitors", mons.Addrs())
		return nil
	}
	bdir := ""
	if cfg.Dir != "" {
		bdir = filepath.Join(cfg.Dir, "beacon")
	}
	var err error
	if d.records, err = store.Open(bdir, store.Options{Retention: cfg.BeaconRetention, MaxBytes: cfg.BeaconMaxBytes}); err != nil {
		return err
	}
	d.beacon = monitor.New(monitor.Config{Store: d.records, Log: cfg.Log, Window: cfg.MonitorWindow})
	d.decisions = d.records
	d.profile = func(key string) (beacon.Profile, bool) {
		p, ok, err := d.records.Profile(key)
		return p, ok && err == nil
	}
	return nil
}

func (d *daemon) closeBeacon() {
	if d.records != nil {
		d.records.Close()
	}
	if f, ok := d.beacon.(*monitor.Front); ok {
		f.M.Close()
	}
}

// managers makes the managers and the services they keep on e.
func (d *daemon) managers(e engine.Engine) {
	cfg, log := d.cfg, d.cfg.Log
	// the burst-buffer manager demotes through the tiering manager, which
	// leaves the checkpoints it manages alone
	d.tiering = tiering.New(tiering.Config{NS: d.svc, Dirs: tierpolicy.New(e, d.svc), Policy: cfg.Tiering, Auto: cfg.TierAuto, QuietUntil: d.quietUntil,
		Log: log.With("part", "tiering"), Metrics: cfg.Metrics, DefaultDrain: cfg.DrainDefault, DrainAge: cfg.DrainAge, Decisions: d.decisions,
		Managed: func(ino uint64) bool { return d.bb.Managed(ino) }})
	d.grants = bbgrants.New(bbgrants.Config{Engine: e, Policy: cfg.BBPolicy, Rates: cfg.BBRates, Servers: d.svc.Servers})
	d.bb = bbmgr.New(bbmgr.Config{NS: d.svc, Grants: d.grants, Mover: d.tiering, Policy: cfg.BBPolicy, Rates: cfg.BBRates, QuietUntil: d.quietUntil,
		NoVersions: !cfg.BBVersions, Bypass: cfg.BBBypass, DefaultMTBF: cfg.BBMTBF, DefaultPeriod: cfg.BBPeriod,
		Reserve: uint64(cfg.ChunkSize), Gap: cfg.BBGap, MaxWait: cfg.BBMaxWait,
		Log: log.With("part", "burst-buffer"), Metrics: cfg.Metrics, Decisions: d.decisions})
	d.svc.SetStallReserve(func(si wire.ServerInfo) uint64 { return max(d.tiering.StallReserve(si), d.bb.StallReserve(si)) })
	d.svc.SetPlacementHint(d.bb.Hint)
	// a writer that stalls has the burst buffer's deleters and the tiering
	// manager look at once
	d.svc.SetOnStall(func(string) { d.bb.Kick(); d.tiering.Kick() })
	if slices.Contains(cfg.Apart, "forwarding") {
		d.fwdsApart = &relay{role: "forwarding", sh: e.(engine.Shared), secret: cfg.Secret}
		log.Info("the forwarding manager runs in processes of its own: its operations are sent on to the active one")
		return
	}
	d.fwds = forwarding.New(forwarding.Config{Jobs: fwdjobs.Open(e), Policy: cfg.DFRA, Mode: cfg.FwdMode, FwdCapacity: cfg.FwdCapacity, Decisions: d.decisions,
		Servers: d.svc.Servers, Health: d.beacon.Health, Log: log.With("part", "fwdmap"), Profile: d.profile,
		OnStart: d.jobStarted, OnEnd: d.jobEnded})
}

// appProfile is the profile of spec's application, nil if none.
func (d *daemon) appProfile(spec fwdmap.JobSpec) *beacon.Profile {
	if spec.App == "" {
		return nil
	}
	if p, ok := d.profile(beacon.AppKey(spec.App, spec.User)); ok {
		return &p
	}
	return nil
}

// jobStarted follows a job's start, given its application's profile
// (nil: none): history-driven pre-migration, so that a job of an
// application whose runs read the same files gets them promoted before
// it reads. It must not block.
func (d *daemon) jobStarted(spec fwdmap.JobSpec, p *beacon.Profile) {
	if p != nil && len(p.Inputs) > 0 {
		d.cfg.Log.Info("prefetching the inputs of the application's last run", "job", spec.ID, "app", p.Key,
			"files", len(p.Inputs), "runs reading them", p.InputRuns)
		d.tiering.Prefetch(spec.ID, p.Inputs)
	}
}

// jobEnded follows a job's end: its prefetch and its pool binding (which
// lasts the job) go. It must not block.
func (d *daemon) jobEnded(job string) {
	d.tiering.EndPrefetch(job)
	if err := d.pools.JobEnded(job); err != nil {
		d.cfg.Log.Warn("dropping the ended job's pool binding", "job", job, "err", err)
	}
}

// serve runs the parts' loops and answers on ln until ctx ends.
func (d *daemon) serve(ctx context.Context, ln net.Listener) error {
	cfg := d.cfg
	go d.svc.RunGC(ctx, 2*time.Second)
	go d.svc.RunSettle(ctx)
	every(ctx, 5*time.Second, d.beacon.Run)
	every(ctx, cfg.TierEvery, d.tiering.Run)
	every(ctx, cfg.BBEvery, d.bb.Run)
	// the managers' and sibling services' operations, counted with the
	// namespace's; the namespace's own (svc.Operations) after them. A
	// grant or release is answered once the burst-buffer manager's
	// controls follow it.
	managers := &rpc.Table{Name: "metadata daemon", Observe: d.svc.Operations().Observe}
	d.beacon.Serve(managers)
	if d.fwds != nil {
		every(ctx, 2*time.Second, d.fwds.Run)
		d.fwds.Serve(managers)
	} else {
		d.serveForwardingApart(managers, d.fwdsApart)
		defer d.fwdsApart.close()
	}
	d.serveManagers(managers, ln.Addr().String())
	d.tiering.Serve(managers)
	d.bb.Serve(managers)
	d.grants.Serve(managers)
	d.pools.Serve(managers)
	d.grants.OnGrant(d.bb.Tick)
	srv := rpc.NewServer(cfg.Secret, &rpc.Mux{Name: "metadata daemon", Tables: []*rpc.Table{managers, d.svc.Operations()}}, cfg.Log)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	cfg.Log.Info("metadata service listening", "addr", ln.Addr().String(), "engine", cfg.Engine)
	return srv.Serve(ln)
}

// every runs loop with a ticker of period p, stopped when ctx ends.
func every(ctx context.Context, p time.Duration, loop func(context.Context, <-chan time.Time)) {
	t := time.NewTicker(p)
	go func() {
		defer t.Stop()
		loop(ctx, t.C)
	}()
}

// Engines names the metadata engines a Config may name.
func Engines() []string { return engine.Names() }
