package meta

import (
	"encoding/binary"
	"sort"
	"sync"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Local-mode directories (docs/nodelocal.md). The entries of such a
// directory are not kept here: each name hashes to one data server of the
// directory's tier (wire.LocalPick over the tier's registered servers, by
// id), whose own file system keeps the entry and everything under it
// (data/localns). An entry operation on the directory gets a redirect
// (ns.Redirect: the tier's servers, of which wire.LocalPick names the
// one), which forwarding daemons keep for a while (fwd/local.go) and
// use without asking again; a listing gets this
// service's own entries of the directory (those made before it went
// local) and every server of the tier to ask for the rest. Nothing under
// the directory's local entries is ever asked of this service.

const qLocal = 'l' // second byte of 'Q' keys: directory ino → the tier of its local entries

// localDirs is the set of local-mode directories.
type localDirs struct {
	mu   sync.RWMutex
	tier map[uint64]string // directory ino → tier; guarded by mu
}

func localKey(ino uint64) []byte {
	k := []byte{pPool, qLocal, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint64(k[2:], ino)
	return k
}

func (s *Service) loadLocalDirs() {
	s.local.tier = map[uint64]string{}
	s.e.Scan([]byte{pPool, qLocal}, nil, func(k, v []byte) bool {
		if len(k) == 10 {
			s.local.tier[binary.BigEndian.Uint64(k[2:])] = string(v)
		}
		return true
	})
}

// SetLocal puts directory ino in local mode, its entries on the data
// servers of tier (on), or takes it out (the entries made meanwhile stay
// on their servers, out of the listing).
func (s *Service) SetLocal(ino uint64, tier string, on bool) (*wire.Attr, error) {
	a, err := s.Getattr(ino)
	if err != nil {
		return nil, err
	}
	if a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, errno(syscall.ENOTDIR, "inode %d is not a directory", ino)
	}
	if on {
		if tier == "" {
			tier = s.fastestTier()
		}
		if tier == "pfs" || len(s.tierServers(tier)) == 0 {
			return nil, errno(syscall.EINVAL, "no mem, ssd or hdd data server of tier %q to keep local entries", tier)
		}
	}
	var b engine.Batch
	if on {
		b.Set(localKey(ino), []byte(tier))
	} else {
		b.Del(localKey(ino))
	}
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	if err := s.e.Apply(&b, true); err != nil {
		return nil, err
	}
	if on {
		s.local.tier[ino] = tier
	} else {
		delete(s.local.tier, ino)
	}
	return a, nil
}

// LocalTier is the tier of directory ino's local entries ("": not local).
func (s *Service) LocalTier(ino uint64) string {
	s.local.mu.RLock()
	defer s.local.mu.RUnlock()
	return s.local.tier[ino]
}

// fastestTier is the fastest tier with a data server that can keep local
// entries.
func (s *Service) fastestTier() string {
	for _, t := range []string{"mem", "ssd", "hdd"} {
		if len(s.tierServers(t)) > 0 {
			return t
		}
	}
	return ""
}

// tierServers are the registered data servers of tier, alive or not, by
// id (a dead one's entries are unreachable, not moved elsewhere).
func (s *Service) tierServers(tier string) []wire.ServerInfo {
	var out []wire.ServerInfo
	for _, si := range s.Servers() {
		if si.Role == "data" && si.Tier == tier {
			out = append(out, si)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// localEntry answers an entry operation on name in directory dir, if dir
// is in local mode, with the servers to ask instead (nil: not local, or
// the name has an entry here still, made before the directory went
// local: the caller serves it).
func (s *Service) localEntry(dir uint64, name string) (*ns.Redirect, error) {
	tier := s.LocalTier(dir)
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
	servers := s.tierServers(tier)
	if len(servers) == 0 {
		return nil, errno(syscall.EIO, "local-mode directory %d: no data server of tier %s", dir, tier)
	}
	return servers, nil
}
