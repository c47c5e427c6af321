package meta

import (
	"context"
	"errors"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
)

// The pfs tier keeps each file's data in an object named by inode and makes
// the file's namespace path a hard link to it, so users can read drained
// data straight from the PFS. Data correctness depends only on the inode;
// the path view is kept in step here, best effort, after each namespace
// change.

func (s *Service) pfsServers() []uint64 {
	var ids []uint64
	for _, si := range s.Servers() {
		if si.Role == "data" && si.Tier == "pfs" {
			ids = append(ids, si.ID)
		}
	}
	return ids
}

func (s *Service) hasPfsData(ino uint64) bool {
	found := false
	s.e.Scan(layoutPrefix(ino), nil, func(_, v []byte) bool {
		if c, err := decodeChunk(v); err == nil && c.Tier == "pfs" {
			found = true
			return false
		}
		return true
	})
	return found
}

// pfsPathLocked returns the namespace path (relative, no leading slash) the
// pfs view should use for ino, or "" when the pfs view does not need it. If
// name is set the path is parent's path plus name. Caller holds mu.
func (s *Service) pfsPathLocked(ino, parent uint64, name string) string {
	if len(s.pfsServers()) == 0 {
		return ""
	}
	if name != "" {
		if n, err := s.getInode(ino); err == nil && !isDir(n.Mode) && !s.hasPfsData(ino) {
			return ""
		}
		p := s.pathOfLocked(parent)
		if p == "" && parent != RootIno {
			return ""
		}
		if p == "" {
			return name
		}
		return p + "/" + name
	}
	return s.pathOfLocked(ino)
}

// pathOfLocked walks primary parents up to the root.
func (s *Service) pathOfLocked(ino uint64) string {
	var parts []string
	for i := 0; ino != RootIno; i++ {
		n, err := s.getInode(ino)
		if err != nil || n.Parent == 0 || i > 4096 {
			return ""
		}
		parts = append(parts, n.Name)
		ino = n.Parent
	}
	p := ""
	for i := len(parts) - 1; i >= 0; i-- {
		if p != "" {
			p += "/"
		}
		p += parts[i]
	}
	return p
}

// pfsEach sends a namespace-view update to every pfs server, skipping
// servers that are down (the view is best effort; the data is by inode).
// pfsEach sends operation d with req to every pfs-tier server (what for,
// in its logs: a path or file).
func pfsEach[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](s *Service, d wire.Def[Q, R], req PQ, what string) {
	for _, id := range s.pfsServers() {
		if !s.reg.alive(id) {
			s.log.Warn("pfs namespace update skipped: server down", "op", d.Op, "of", what, "server", id)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
		_, err := callData[Q, R, PQ, PR](ctx, &s.reg, id, d, req)
		cancel()
		var te *rpc.TransportError
		if errors.As(err, &te) {
			s.reg.suspect(id)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			s.log.Warn("pfs namespace update failed", "op", d.Op, "of", what, "server", id, "err", err)
		}
	}
}

func (s *Service) pfsUnlink(path string) {
	if path != "" {
		pfsEach(s, chunk.PfsUnlink, &chunk.PfsUnlinkReq{Path: path}, path)
	}
}

func (s *Service) pfsRename(oldPath, newPath string) {
	if oldPath != "" && newPath != "" {
		pfsEach(s, chunk.PfsRename, &chunk.PfsRenameReq{From: oldPath, To: newPath}, oldPath)
	}
}
