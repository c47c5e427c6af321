package fwd

import (
	"context"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Node-local namespaces (docs/nodelocal.md): a request that names a local
// inode goes to the data server the inode number names, never to the
// metadata service; an entry operation on a local-mode directory is
// answered by the metadata service with a redirect to the data server the
// name hashes to (or, for a listing, to every server of the directory's
// tier).

// LocalDirTTL is how long a forwarding daemon sends the entry operations
// of a local-mode directory straight to the servers the metadata service
// last named for it, without asking it again: a directory taken out of
// local mode, or a tier's servers changed, reach it within this long.
var LocalDirTTL = 10 * time.Second

// localDirCache holds, per local-mode directory, the tier's servers the
// metadata service named in its last redirect.
type localDirCache struct {
	mu   sync.Mutex
	dirs map[uint64]localDir // guarded by mu
}

type localDir struct {
	servers []wire.ServerInfo // by id, as wire.LocalPick counts them
	own     bool              // the directory has entries in the metadata service
	until   time.Time
}

func (c *localDirCache) get(dir uint64, now time.Time) (localDir, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.dirs[dir]
	return d, ok && now.Before(d.until)
}

func (c *localDirCache) put(dir uint64, d localDir) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil {
		c.dirs = map[uint64]localDir{}
	}
	c.dirs[dir] = d
}

// localEntry serves an entry operation on a local-mode directory this
// daemon knows the servers of, without the metadata service: ok false if
// it does not (the caller asks the service). A lookup or removal the
// server finds nothing for goes to the service after all: the name may be
// an entry the directory had before it went local.
func (s *Server) localEntry(ctx context.Context, m *wire.Msg) (*wire.Msg, bool, error) {
	switch m.Op {
	case wire.OpLookup, wire.OpMknod, wire.OpMkdir, wire.OpSymlink, wire.OpUnlink, wire.OpRmdir:
	default:
		return nil, false, nil
	}
	d, ok := s.localDirs.get(m.Parent, s.cfg.Now())
	if !ok {
		return nil, false, nil
	}
	resp, err := s.toLocal(ctx, m, d.servers[wire.LocalPick(m.Name, len(d.servers))].ID)
	if d.own && err != nil && rpc.Errno(err) == syscall.ENOENT && (m.Op == wire.OpLookup || m.Op == wire.OpUnlink || m.Op == wire.OpRmdir) {
		return nil, false, nil
	}
	return resp, true, err
}

// toLocal sends entry operation m of a local-mode directory to data
// server id.
func (s *Server) toLocal(ctx context.Context, m *wire.Msg, id uint64) (*wire.Msg, error) {
	m2 := *m
	m2.Flags |= wire.LocalRedirect
	resp, _, err := s.callLocal(ctx, id, &m2, nil)
	return resp, err
}

// localTarget is the data server that serves request m, if it names a
// local inode; an error if it mixes the local and global namespaces.
func localTarget(m *wire.Msg) (uint64, bool, error) {
	var id uint64
	var local, global bool
	for _, ino := range []uint64{m.Ino, m.Parent, m.NewParent} {
		switch {
		case ino == 0:
		case wire.IsLocal(ino):
			if local && wire.LocalServer(ino) != id {
				return 0, true, rpc.Errorf(syscall.EXDEV, "between two data servers' local namespaces")
			}
			id, local = wire.LocalServer(ino), true
		default:
			global = true
		}
	}
	if local && global && (m.Op == wire.OpRename || m.Op == wire.OpLink) {
		return 0, true, rpc.Errorf(syscall.EXDEV, "between a local namespace and the global one")
	}
	return id, local, nil
}

// callLocal sends m (with payload) to data server id and returns its
// reply.
func (s *Server) callLocal(ctx context.Context, id uint64, m *wire.Msg, payload []byte) (resp *wire.Msg, p []byte, err error) {
	err = s.callDataWith(ctx, id, m, func(c *rpc.Client) error {
		var err error
		resp, p, err = c.Call(ctx, m, payload, nil)
		return err
	})
	return resp, p, err
}

// relayLocal sends m to data server id and answers r with its reply.
func (s *Server) relayLocal(ctx context.Context, r *rpc.Request, id uint64, m *wire.Msg) {
	resp, p, err := s.callLocal(ctx, id, m, r.Payload)
	if resp == nil {
		resp = &wire.Msg{}
	}
	if m.Op == wire.OpRead && err == nil {
		s.jobs.record(m, uint64(len(p)))
	}
	r.Reply(rpc.ToMsg(resp, err), p)
}

// redirected follows the metadata service's redirect of entry operation
// m on a local-mode directory.
func (s *Server) redirected(ctx context.Context, m *wire.Msg, meta *wire.Msg) (*wire.Msg, error) {
	if len(meta.Servers) == 0 {
		return nil, rpc.Errorf(syscall.EIO, "local-mode directory %d: no data server to hold its entries", m.Parent)
	}
	if m.Op != wire.OpReaddir {
		s.localDirs.put(m.Parent, localDir{servers: meta.Servers, own: meta.Size > 0, until: s.cfg.Now().Add(LocalDirTTL)})
		return s.toLocal(ctx, m, meta.Servers[wire.LocalPick(m.Name, len(meta.Servers))].ID)
	}
	// a listing: the service's own entries and each server's part, merged
	// in name order
	es := append([]wire.DirEntry(nil), meta.Entries...)
	for _, si := range meta.Servers {
		resp, err := s.toLocal(ctx, m, si.ID)
		if err != nil {
			return nil, err
		}
		es = append(es, resp.Entries...)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	max := int(m.Size)
	if max <= 0 || max > 4096 {
		max = 4096
	}
	if len(es) > max {
		es = es[:max]
	}
	return &wire.Msg{Entries: es}, nil
}
