package fwd

import (
	"context"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
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
func (s *Server) localEntry(ctx context.Context, op wire.Op, q ns.Request) (wire.Message, bool, error) {
	name, ok := entryName(q)
	if !ok {
		return nil, false, nil
	}
	_, parent, _ := q.Inodes()
	d, ok := s.localDirs.get(parent, s.cfg.Now())
	if !ok {
		return nil, false, nil
	}
	rep, err := s.toLocal(ctx, op, q, d.servers[wire.LocalPick(name, len(d.servers))].ID)
	if d.own && err != nil && rpc.Errno(err) == syscall.ENOENT && (op == ns.OpLookup || op == ns.OpUnlink || op == ns.OpRmdir) {
		return nil, false, nil
	}
	return rep, true, err
}

// entryName is the name an entry operation of a directory (one a
// local-mode directory's data servers serve) names.
func entryName(q ns.Request) (string, bool) {
	switch q := q.(type) {
	case *ns.NameReq: // lookup, unlink, rmdir
		return q.Name, true
	case *ns.MknodReq:
		return q.Name, true
	case *ns.MkdirReq:
		return q.Name, true
	case *ns.SymlinkReq:
		return q.Name, true
	}
	return "", false
}

// toLocal sends entry operation q of a local-mode directory to data
// server id.
func (s *Server) toLocal(ctx context.Context, op wire.Op, q ns.Request, id uint64) (wire.Message, error) {
	h := q.Header()
	h.Local = true
	defer func() { h.Local = false }()
	rep, _, err := s.callLocal(ctx, id, op, q, nil)
	return rep, err
}

// localTarget is the data server that serves request q (of operation
// op), if it names a local inode; an error if it mixes the local and
// global namespaces.
func localTarget(op wire.Op, q ns.Request) (uint64, bool, error) {
	var id uint64
	var local, global bool
	ino, parent, newParent := q.Inodes()
	for _, ino := range []uint64{ino, parent, newParent} {
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
	if local && global && (op == ns.OpRename || op == ns.OpLink) {
		return 0, true, rpc.Errorf(syscall.EXDEV, "between a local namespace and the global one")
	}
	return id, local, nil
}

// callLocal sends q (with payload) to data server id and returns its
// reply.
func (s *Server) callLocal(ctx context.Context, id uint64, op wire.Op, q ns.Request, payload []byte) (rep wire.Message, p []byte, err error) {
	spec := wire.SpecOf(op)
	err = s.callDataWith(ctx, id, wire.Classify(q), func(c *rpc.Client) error {
		rep = spec.NewReply()
		var err error
		p, err = c.Invoke(ctx, op, q, rep, payload, nil)
		return err
	})
	return rep, p, err
}

// relayLocal sends q to data server id and answers r with its reply.
func (s *Server) relayLocal(ctx context.Context, r *rpc.Request, id uint64, q ns.Request) {
	rep, p, err := s.callLocal(ctx, id, r.Op, q, r.Payload)
	if r.Op == ns.OpRead && err == nil {
		s.jobs.record(r.Op, q, uint64(len(p)))
	}
	r.Answer(rep, err, p)
}

// redirected follows the metadata service's redirect (to) of entry
// operation q on a local-mode directory.
func (s *Server) redirected(ctx context.Context, op wire.Op, q ns.Request, to *ns.Redirect) (wire.Message, error) {
	_, parent, _ := q.Inodes()
	if len(to.Servers) == 0 {
		return nil, rpc.Errorf(syscall.EIO, "local-mode directory %d: no data server to hold its entries", parent)
	}
	ls, ok := q.(*ns.ReaddirReq)
	if !ok {
		name, _ := entryName(q)
		s.localDirs.put(parent, localDir{servers: to.Servers, own: to.Own, until: s.cfg.Now().Add(LocalDirTTL)})
		return s.toLocal(ctx, op, q, to.Servers[wire.LocalPick(name, len(to.Servers))].ID)
	}
	// a listing: the service's own entries and each server's part, merged
	// in name order
	es := append([]wire.DirEntry(nil), to.Entries...)
	for _, si := range to.Servers {
		rep, err := s.toLocal(ctx, op, q, si.ID)
		if err != nil {
			return nil, err
		}
		es = append(es, rep.(*ns.ReaddirRep).Entries...)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	max := ls.Max
	if max <= 0 || max > 4096 {
		max = 4096
	}
	if len(es) > max {
		es = es[:max]
	}
	return &ns.ReaddirRep{Entries: es}, nil
}
