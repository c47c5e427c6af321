package meta

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/layout"
	"github.com/sluice-hpc/sluice/meta/engine"
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
}

type member struct {
	info     wire.ServerInfo
	lastSeen time.Time
	reserved uint64 // bytes promised by Alloc since the last report
}

func (r *registry) init(s *Service) {
	r.s = s
	r.servers = map[uint64]*member{}
	r.clients = map[uint64]*rpc.Client{}
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
	} else if m.info.Addr != si.Addr || m.info.Tier != si.Tier || m.info.Role != si.Role || m.info.Node != si.Node {
		persist = true
		if c := r.clients[si.ID]; c != nil && m.info.Addr != si.Addr {
			c.Close()
			delete(r.clients, si.ID)
		}
	}
	m.info = si
	m.info.Alive = true
	m.lastSeen = s.now()
	m.reserved = 0
	if persist {
		var b engine.Batch
		stored := si
		stored.Used = 0
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

// alive reports whether daemon id has sent a heartbeat recently.
func (r *registry) alive(id uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.servers[id]
	return m != nil && r.s.now().Sub(m.lastSeen) < r.s.cfg.HeartbeatTTL
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

func (r *registry) callData(ctx context.Context, id uint64, m *wire.Msg) error {
	c, err := r.client(id)
	if err != nil {
		return err
	}
	_, _, err = c.Call(ctx, m, nil, nil)
	return err
}

// Alloc returns the location of chunk idx of ino, choosing one if the chunk
// has none: the fastest tier with a live server group that has room, the
// group rotated over the tier's servers to spread files. exclude lists
// servers that just refused the chunk for lack of space. gen is the
// truncation generation the writer works in: an older one than the file's
// is refused with ESTALE (the writer raced with a truncate whose trims
// could not have reached a chunk placed now).
//
// placed is true when this call chose the location. A chunk that has one
// keeps it, unless exclude names one of its servers (its first writer
// was refused there): then it moves, once — a second writer refused by
// the same server gets the location the first one moved it to.
func (s *Service) Alloc(ctx context.Context, ino, idx, gen uint64, exclude []uint64) (loc wire.ChunkLoc, placed bool, err error) {
	s.mu.Lock()
	n, err := s.getInode(ino)
	if err != nil {
		s.mu.Unlock()
		return wire.ChunkLoc{}, false, err
	}
	if gen < n.Trunc {
		s.mu.Unlock()
		return wire.ChunkLoc{}, false, errno(syscall.ESTALE, "inode %d was truncated (generation %d, writer's %d)", ino, n.Trunc, gen)
	}
	if v, err := s.e.Get(layoutKey(ino, idx)); err == nil {
		cur, err := decodeChunk(v)
		if err != nil || !anyIn(cur.Servers, exclude) {
			s.mu.Unlock()
			return cur, false, err
		}
	}
	loc, err = s.reg.choose(n, idx, exclude)
	if err != nil {
		s.mu.Unlock()
		return loc, false, err
	}
	var b engine.Batch
	b.Set(layoutKey(ino, idx), encodeChunk(loc))
	err = s.e.Apply(&b, false)
	var path string
	if loc.Tier == "pfs" {
		path = s.pfsPathLocked(ino, 0, "")
	}
	s.mu.Unlock()
	if err != nil {
		return loc, false, err
	}
	if path != "" {
		for _, id := range loc.Servers {
			if err := s.reg.callData(ctx, id, &wire.Msg{Op: wire.OpPfsLink, Ino: ino, Path: path}); err != nil {
				s.log.Warn("pfs link failed", "ino", ino, "path", path, "err", err)
			}
		}
	}
	return loc, true, nil
}

func anyIn(ids, set []uint64) bool {
	for _, id := range ids {
		for _, x := range set {
			if id == x {
				return true
			}
		}
	}
	return false
}

func (r *registry) choose(n *inode, idx uint64, exclude []uint64) (wire.ChunkLoc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// a server that refused a chunk (full, or unreachable) gets no new
	// chunks until its next report says otherwise
	for _, x := range exclude {
		if m := r.servers[x]; m != nil && m.info.Capacity > 0 {
			m.reserved = m.info.Capacity
		}
	}
	now := r.s.now()
	byTier := map[string][]*member{}
	var tiers []string
	for _, m := range r.servers {
		if m.info.Role != "data" || now.Sub(m.lastSeen) >= r.s.cfg.HeartbeatTTL {
			continue
		}
		skip := false
		for _, x := range exclude {
			if x == m.info.ID {
				skip = true
			}
		}
		if skip {
			continue
		}
		if byTier[m.info.Tier] == nil {
			tiers = append(tiers, m.info.Tier)
		}
		byTier[m.info.Tier] = append(byTier[m.info.Tier], m)
	}
	sort.Slice(tiers, func(i, j int) bool {
		ri, _ := tier.Rank(tiers[i])
		rj, _ := tier.Rank(tiers[j])
		return ri < rj
	})
	for _, tier := range tiers {
		ms := byTier[tier]
		sort.Slice(ms, func(i, j int) bool { return ms[i].info.ID < ms[j].info.ID })
		g := int(n.StripeCnt)
		if g < 1 || tier == "pfs" {
			g = 1 // the pfs tier keeps whole plain files
		}
		if g > len(ms) {
			g = len(ms)
		}
		unit := int64(n.StripeUnit)
		if unit == 0 {
			unit = int64(n.ChunkSize)
		}
		r.rotation++
		start := int((n.Ino + idx + r.rotation) % uint64(len(ms)))
		var group []*member
		for i := 0; i < len(ms) && len(group) < g; i++ {
			m := ms[(start+i)%len(ms)]
			need := uint64(layout.LocalSize(len(group), g, unit, int64(n.ChunkSize)))
			if m.info.Capacity == 0 || m.info.Used+m.reserved+need <= m.info.Capacity {
				group = append(group, m)
			}
		}
		if len(group) < g {
			continue
		}
		loc := wire.ChunkLoc{Idx: idx, Tier: tier}
		for i, m := range group {
			m.reserved += uint64(layout.LocalSize(i, g, unit, int64(n.ChunkSize)))
			loc.Servers = append(loc.Servers, m.info.ID)
		}
		return loc, nil
	}
	return wire.ChunkLoc{}, errno(syscall.ENOSPC, "no tier has room for a new chunk")
}

// Layout returns the known chunk locations of a file.
func (s *Service) Layout(ino uint64) ([]wire.ChunkLoc, error) {
	var out []wire.ChunkLoc
	var derr error
	s.e.Scan(layoutPrefix(ino), nil, func(_, v []byte) bool {
		c, err := decodeChunk(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, c)
		return true
	})
	return out, derr
}
