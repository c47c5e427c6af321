package vfs

import (
	"context"
	"slices"

	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
)

// Routing: which forwarding node a request goes to.
//
// Requests of a job registered with the forwarding-map manager (DFRA) go
// to the forwarding nodes the manager gives the job on the caller's compute
// node, spread over them by inode (one file's requests stay on one node);
// all others go to the mount's home node, the fixed mapping. A job's
// placement on a node is asked of the manager at its first request from
// that node and again every RouteTTL in the background; when it changes,
// new requests go to the new nodes while requests in flight finish where
// they are (writes to overlapping ranges already wait for each other, so
// order is kept across the switch).

// RouteTTL is how long a job's placement is used before it is asked again.
const RouteTTL = 2 * time.Second

// RouterConfig configures a Router.
type RouterConfig struct {
	Home     Caller                   // the mount's home forwarding node
	HomeAddr string                   // its address (its client is pooled too)
	Manager  rpc.Invoker              // the forwarding-map manager (nil: always home)
	Dial     func(addr string) Caller // a client of a forwarding node (pooled by the router)
	Now      Clock
	Log      *slog.Logger
}

type route struct {
	targets  []Caller
	ids      string // forwarding node ids, for logs
	version  uint64
	fetched  time.Time
	fetching bool
	first    chan struct{} // closed when the first fetch has ended
}

// Router routes requests to forwarding nodes.
type Router struct {
	cfg RouterConfig

	mu     sync.Mutex // guards routes, conns
	routes map[string]*route
	conns  map[string]Caller // by address
}

// NewRouter returns a router.
func NewRouter(cfg RouterConfig) *Router {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Router{cfg: cfg, routes: map[string]*route{}, conns: map[string]Caller{}}
	if cfg.HomeAddr != "" {
		r.conns[cfg.HomeAddr] = cfg.Home
	}
	return r
}

// Conn returns the pooled client of the forwarding node at addr.
func (r *Router) Conn(addr string) Caller {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[addr]
	if c == nil {
		c = r.cfg.Dial(addr)
		r.conns[addr] = c
	}
	return c
}

// Close closes the pooled clients.
func (r *Router) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		if cl, ok := c.(interface{ Close() }); ok {
			cl.Close()
		}
	}
}

// Pick returns the forwarding node for a request of caller id on inode ino.
func (r *Router) Pick(id ident.ID, ino uint64) Caller {
	if id.Job == "" || r.cfg.Manager == nil {
		return r.cfg.Home
	}
	node := id.Node
	key := id.Job + "\x00" + node
	r.mu.Lock()
	rt := r.routes[key]
	if rt == nil {
		rt = &route{fetching: true, first: make(chan struct{})}
		r.routes[key] = rt
		r.mu.Unlock()
		r.refresh(id.Job, node, rt) // the first request waits for the placement
		close(rt.first)
		r.mu.Lock()
	} else if rt.fetched.IsZero() {
		// so do requests that come while the first fetch is under way
		// (write-behind sends several at once)
		r.mu.Unlock()
		<-rt.first
		r.mu.Lock()
	} else if r.cfg.Now().Sub(rt.fetched) > RouteTTL && !rt.fetching {
		rt.fetching = true
		go r.refresh(id.Job, node, rt)
	}
	targets := rt.targets
	if len(r.routes) > 1024 {
		// forget jobs not seen for long
		for j, x := range r.routes {
			if !x.fetching && r.cfg.Now().Sub(x.fetched) > time.Minute {
				delete(r.routes, j)
			}
		}
	}
	r.mu.Unlock()
	if len(targets) == 0 {
		return r.cfg.Home
	}
	return targets[ino%uint64(len(targets))]
}

// withStandIns is the address list of a job's forwarding node: its own,
// then its stand-ins' (the placement's Fallbacks), which its client turns
// to, in turn, when it cannot be reached or stalls (rpc.Client), before
// the manager has remapped the job.
func withStandIns(addr string, standIns []fwdmap.Target) string {
	addrs := []string{addr}
	for _, f := range standIns {
		if f.Addr != "" && !slices.Contains(addrs, f.Addr) {
			addrs = append(addrs, f.Addr)
		}
	}
	return strings.Join(addrs, ",")
}

// refresh asks the manager for job's placement on node and installs it.
func (r *Router) refresh(job, node string, rt *route) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pl, err := rpc.Do(ctx, r.cfg.Manager, fwdmap.Map, &fwdmap.MapReq{Job: job, Node: node})
	var targets []Caller
	var ids []string
	if err == nil {
		for _, t := range pl.Fwds {
			if t.Addr != "" {
				targets = append(targets, r.Conn(withStandIns(t.Addr, pl.Fallbacks)))
				ids = append(ids, t.ID)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt.fetching = false
	rt.fetched = r.cfg.Now()
	if err != nil || len(targets) == 0 {
		// keep what we had (or the home node) and ask again later
		return
	}
	if pl.Version != rt.version || len(rt.targets) == 0 {
		idl := strings.Join(ids, ",")
		if idl != rt.ids {
			r.cfg.Log.Info("job's forwarding nodes", "job", job, "node", node, "fwds", idl, "policy", pl.Policy, "version", pl.Version)
		}
		rt.targets, rt.ids, rt.version = targets, idl, pl.Version
	}
}
