package meta

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/layout"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/place"
	"github.com/sluice-hpc/sluice/tier"
)

// registry tracks registered daemons, their liveness and the space the
// service has promised on each data server since its last report.
type registry struct {
	s  *Service
	mu sync.Mutex // guards the fields below

	servers  map[uint64]*member
	nextID   uint64
	clients  map[uint64]*rpc.Client
	rotation uint64
	// stallReserve gives each data server's write-stall reserve (Cs-w;
	// SetStallReserve); nil: none.
	stallReserve func(wire.ServerInfo) uint64
	// placeHint names a tier to try first for a new chunk of a file
	// (SetPlacementHint); nil: none.
	placeHint func(ino, parent uint64, name string) string
	// spaceWake is closed (and cleared) when a data server's free space
	// may have grown; writers waiting for a stalled tier wait on it.
	spaceWake chan struct{}
	// backlog is each data server's bytes placed and not yet written,
	// as placement estimates them (alloc.go).
	backlog map[uint64]*place.Backlog
	// pools says which resource pool a new chunk goes to
	// (SetPools, meta/pools); nil: none.
	pools Pools
	// promises are the new chunks' room promised since their servers'
	// reports, settleQ the chunks to settle on each server, settleKick
	// wakes RunSettle (settle.go); promiseSweep is the size of promises
	// past which a report sweeps the stale ones.
	promises     map[chunkKey][]promise
	settleQ      map[uint64][]chunk.ID
	settleKick   chan struct{}
	promiseSweep int
	// stallQ are the new chunks waiting for room on a stalled tier, in
	// the order they first stalled (stallorder.go); stallSeq numbers them.
	stallQ   map[chunkKey]*stallTicket
	stallSeq uint64
}

type member struct {
	info     wire.ServerInfo
	lastSeen time.Time
	reserved uint64 // bytes promised by Alloc since the last report
	epoch    uint64 // reports received (settle.go)
}

func (r *registry) init(s *Service) {
	r.s = s
	r.servers = map[uint64]*member{}
	r.clients = map[uint64]*rpc.Client{}
	r.backlog = map[uint64]*place.Backlog{}
	r.promises, r.settleQ, r.settleKick = map[chunkKey][]promise{}, map[uint64][]chunk.ID{}, make(chan struct{}, 1)
}

func (r *registry) load() error {
	now := r.s.now()
	var derr error
	r.s.e.Scan([]byte{pServer}, nil, func(_, v []byte) bool {
		si, err := decodeServer(v)
		if err != nil {
			derr = err
			return false
		}
		// grace: assume alive until a heartbeat period has passed
		r.servers[si.ID] = &member{info: si, lastSeen: now}
		if si.ID >= r.nextID {
			r.nextID = si.ID
		}
		return true
	})
	return derr
}

// Register adds or refreshes a daemon and returns its id.
func (s *Service) Register(si wire.ServerInfo) (uint64, error) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if si.Role == "data" {
		rank, ok := tier.Rank(si.Tier)
		if !ok {
			return 0, errno(syscall.EINVAL, "unknown tier %q", si.Tier)
		}
		si.Rank = rank
	}
	m := r.servers[si.ID]
	persist := false
	if si.ID == 0 || m == nil {
		if si.ID == 0 {
			r.nextID++
			si.ID = r.nextID
		} else if si.ID > r.nextID {
			r.nextID = si.ID
		}
		m = &member{}
		r.servers[si.ID] = m
		persist = true
	} else if m.info.Addr != si.Addr || m.info.Tier != si.Tier || m.info.Role != si.Role || m.info.Node != si.Node || m.info.Domain != si.Domain {
		persist = true
		if c := r.clients[si.ID]; c != nil && m.info.Addr != si.Addr {
			c.Close()
			delete(r.clients, si.ID)
		}
	}
	m.info = si
	m.info.Alive = true
	m.lastSeen = s.now()
	if si.Role == "data" {
		r.backlogLocked(si.ID).Report(m.lastSeen, si.Written)
	}
	r.reportedLocked(m)
	r.spaceChangedLocked()
	if persist {
		var b engine.Batch
		stored := si
		stored.Used, stored.WriteBW, stored.ReadBW, stored.Written = 0, 0, 0, 0
		b.Set(serverKey(si.ID), encodeServer(stored))
		if err := s.e.Apply(&b, false); err != nil {
			return 0, err
		}
		s.log.Info("registered", "role", si.Role, "id", si.ID, "tier", si.Tier, "addr", si.Addr)
	}
	return si.ID, nil
}

// Servers lists every registered daemon with its liveness.
func (s *Service) Servers() []wire.ServerInfo {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	now := s.now()
	out := make([]wire.ServerInfo, 0, len(r.servers))
	for _, m := range r.servers {
		si := m.info
		si.Alive = now.Sub(m.lastSeen) < s.cfg.HeartbeatTTL
		si.Used += m.reserved
		if si.Role == "data" {
			si.Pending = r.backlogLocked(si.ID).Pending(now, si.MaxPerf)
		}
		out = append(out, si)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Statfs sums the capacity and usage of every live data server.
func (s *Service) Statfs() (capacity, used uint64) {
	for _, si := range s.Servers() {
		if si.Role == "data" && si.Alive {
			capacity += si.Capacity
			used += si.Used
		}
	}
	return
}

// moved counts a chunk of chunkSize bytes (striped in units of unit) as
// gone from the servers in from and held by those in to until their next
// reports, so that the tiering manager's next look and placement see the
// space the move freed at once (and stalled writers wake) instead of a
// heartbeat later. Each member is charged its local share of the whole
// chunk, as data servers charge it against their budget.
func (r *registry) moved(from, to []uint64, chunkSize, unit int64) {
	if unit <= 0 || unit > chunkSize {
		unit = chunkSize
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.spaceChangedLocked()
	for i, id := range from {
		if m := r.servers[id]; m != nil {
			m.info.Used -= min(m.info.Used, uint64(layout.LocalSize(i, len(from), unit, chunkSize)))
		}
	}
	for i, id := range to {
		if m := r.servers[id]; m != nil {
			m.reserved += uint64(layout.LocalSize(i, len(to), unit, chunkSize))
		}
	}
}

// spaceChangedLocked wakes the writers waiting for a stalled tier.
func (r *registry) spaceChangedLocked() {
	if r.spaceWake != nil {
		close(r.spaceWake)
		r.spaceWake = nil
	}
}

// alive reports whether daemon id has sent a heartbeat recently.
func (r *registry) alive(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.servers[id]
	return m != nil && r.s.now().Sub(m.lastSeen) < r.s.cfg.HeartbeatTTL
}

// reachable reports whether data server id answers: it is alive by its
// heartbeats and answers a ping within a second (a refused connection is
// tried again for 200 ms only). One that does not is suspected (counted
// down until its next heartbeat).
func (r *registry) reachable(ctx context.Context, id uint64) bool {
	if !r.alive(id) {
		return false
	}
	ctx, cancel := context.WithTimeout(rpc.WithRetryLimit(ctx, 200*time.Millisecond), time.Second)
	defer cancel()
	c, err := r.client(id)
	if err == nil {
		_, err = rpc.Do(ctx, c, ns.Ping, &ns.PingReq{})
	}
	if err != nil {
		r.suspect(id)
		return false
	}
	return true
}

// suspect counts daemon id as down until its next heartbeat (it could
// not be reached).
func (r *registry) suspect(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.servers[id]; m != nil {
		m.lastSeen = time.Time{}
	}
}

func (r *registry) client(id uint64) (*rpc.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[id]; c != nil {
		return c, nil
	}
	m := r.servers[id]
	if m == nil {
		return nil, fmt.Errorf("data server %d is not registered", id)
	}
	c := rpc.NewClient(m.info.Addr, r.s.cfg.Secret, rpc.ClientOptions{
		Timeout: r.s.cfg.Timeout, Name: fmt.Sprintf("data server %d (%s, %s)", id, m.info.Tier, m.info.Addr)})
	r.clients[id] = c
	return c, nil
}

// BBServer sets burst-buffer data server id's controls (nil: leaves them
// as they are) and returns its state (the burst-buffer manager's).
func (s *Service) BBServer(ctx context.Context, id uint64, set *api.BBControl) (*api.BBServerState, error) {
	return callData(ctx, &s.reg, id, api.BBServer, &api.BBServerReq{Set: set})
}

// callData calls operation d of data server id.
func callData[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](ctx context.Context, r *registry, id uint64, d wire.Def[Q, R], req PQ) (PR, error) {
	if h := r.s.cfg.Holds; h != nil && !h() {
		return nil, errno(syscall.EIO, "this metadata server's term is over (its lease may have run out): nothing sent to data server %d", id)
	}
	c, err := r.client(id)
	if err != nil {
		return nil, err
	}
	return rpc.Do[Q, R, PQ, PR](ctx, c, d, req)
}
