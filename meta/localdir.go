package meta

import (
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Local-mode directories (docs/nodelocal.md; which ones: meta/localdirs).
// The entries of such a directory are not kept here: each name hashes to
// one data server of the directory's tier (wire.LocalPick over the tier's
// registered servers, by id), whose own file system keeps the entry and
// everything under it (data/localns). An entry operation on the directory
// gets a redirect (ns.Redirect: the tier's servers, of which
// wire.LocalPick names the one), which forwarding daemons keep for a
// while (fwd/local.go) and use without asking again; a listing gets this
// service's own entries of the directory (those made before it went
// local) and every server of the tier to ask for the rest. Nothing under
// the directory's local entries is ever asked of this service.

// localEntry answers an entry operation on name in directory dir, if dir
// is in local mode, with the servers to ask instead (nil: not local, or
// the name has an entry here still, made before the directory went
// local: the caller serves it).
func (s *Service) localEntry(dir uint64, name string) (*ns.Redirect, error) {
	tier := s.local.Tier(dir)
	if tier == "" {
		return nil, nil
	}
	servers, err := s.localServers(dir, tier)
	if err != nil {
		return nil, err
	}
	if _, err := s.Lookup(dir, name); err == nil {
		return nil, nil // an entry of this service's
	}
	// every server of the tier: the forwarding daemon picks by the name
	// (wire.LocalPick) and keeps the list to pick without asking again
	r := &ns.Redirect{Servers: servers}
	if es, _ := s.Readdir(dir, "", 1); len(es) > 0 {
		r.Own = true
	}
	return r, nil
}

// localServers are the data servers of tier, which keep local-mode
// directory dir's entries.
func (s *Service) localServers(dir uint64, tier string) ([]wire.ServerInfo, error) {
	servers := s.local.Servers(tier)
	if len(servers) == 0 {
		return nil, errno(syscall.EIO, "local-mode directory %d: no data server of tier %s", dir, tier)
	}
	return servers, nil
}
