package client

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
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

type route struct {
	targets  []*rpc.Client
	ids      string // forwarding node ids, for logs
	version  uint64
	fetched  time.Time
	fetching bool
	first    chan struct{} // closed when the first fetch has ended
}

type router struct {
	mu     sync.Mutex // guards routes, conns
	routes map[string]*route
	conns  map[string]*rpc.Client // by address
}

// conn returns the pooled client of a forwarding node.
func (fs *FS) conn(addr string) *rpc.Client {
	fs.rt.mu.Lock()
	defer fs.rt.mu.Unlock()
	c := fs.rt.conns[addr]
	if c == nil {
		c = rpc.NewClient(addr, fs.cfg.Secret, rpc.ClientOptions{Timeout: fs.cfg.Timeout, Name: "forwarding node " + addr})
		fs.rt.conns[addr] = c
	}
	return c
}

// pick returns the forwarding node for a request of caller id on inode
// ino.
func (fs *FS) pick(id ident.ID, ino uint64) *rpc.Client {
	if id.Job == "" || fs.mc == nil {
		return fs.fwd
	}
	node := fs.node(id)
	key := id.Job + "\x00" + node
	fs.rt.mu.Lock()
	r := fs.rt.routes[key]
	if r == nil {
		r = &route{fetching: true, first: make(chan struct{})}
		fs.rt.routes[key] = r
		fs.rt.mu.Unlock()
		fs.refresh(id.Job, node, r) // the first request waits for the placement
		close(r.first)
		fs.rt.mu.Lock()
	} else if r.fetched.IsZero() {
		// so do requests that come while the first fetch is under way
		// (write-behind sends several at once)
		fs.rt.mu.Unlock()
		<-r.first
		fs.rt.mu.Lock()
	} else if time.Since(r.fetched) > RouteTTL && !r.fetching {
		r.fetching = true
		go fs.refresh(id.Job, node, r)
	}
	targets := r.targets
	if len(fs.rt.routes) > 1024 {
		// forget jobs not seen for long
		for j, x := range fs.rt.routes {
			if !x.fetching && time.Since(x.fetched) > time.Minute {
				delete(fs.rt.routes, j)
			}
		}
	}
	fs.rt.mu.Unlock()
	if len(targets) == 0 {
		return fs.fwd
	}
	return targets[ino%uint64(len(targets))]
}

// refresh asks the manager for job's placement on node and installs it.
func (fs *FS) refresh(job, node string, r *route) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, p, err := fs.mc.Call(ctx, &wire.Msg{Op: wire.OpJob, Name: fwdmap.CallMap, Job: job, Node: node}, nil, nil)
	var pl fwdmap.Placement
	if err == nil {
		err = json.Unmarshal(p, &pl)
	}
	var targets []*rpc.Client
	var ids []string
	if err == nil {
		for _, t := range pl.Fwds {
			if t.Addr != "" {
				targets = append(targets, fs.conn(t.Addr))
				ids = append(ids, t.ID)
			}
		}
	}
	fs.rt.mu.Lock()
	defer fs.rt.mu.Unlock()
	r.fetching = false
	r.fetched = time.Now()
	if err != nil || len(targets) == 0 {
		// keep what we had (or the home node) and ask again later
		return
	}
	if pl.Version != r.version || len(r.targets) == 0 {
		idl := strings.Join(ids, ",")
		if idl != r.ids {
			fs.log.Info("job's forwarding nodes", "job", job, "node", node, "fwds", idl, "policy", pl.Policy, "version", pl.Version)
		}
		r.targets, r.ids, r.version = targets, idl, pl.Version
	}
}
