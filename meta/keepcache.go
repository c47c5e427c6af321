package meta

import (
	"context"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/drops"
)

// Drained chunks kept as a cache (`sluice tier set DIR --keep-cache`,
// docs/tiering.md). A drain with keep-cache copies the chunk to the pfs
// tier (CopyChunk) instead of moving it: the chunk's location keeps its
// group and gains a home (ChunkLoc.Home) holding a clean copy. Reads go
// to the group. Space is freed by evicting the cache (EvictChunk): the
// location becomes the home with nothing to copy. A write to the chunk
// first gives the home up (Dirty): the home owes a drop ('R' keys, as a
// lost replica does), and the next drain copies the chunk again.

// Dirty gives up the home of chunk idx of ino before a writer working
// with layout generation gen writes it: the copy on the PFS would be
// stale. It returns the chunk's location now (unchanged if it has no home,
// or changed since gen).
func (s *Service) Dirty(ctx context.Context, ino, idx, gen uint64) (wire.ChunkLoc, error) {
	s.mu.Lock()
	loc, err := s.chunkLoc(ino, idx)
	if err != nil || loc.Gen != gen || len(loc.Home) == 0 {
		s.mu.Unlock()
		return loc, err
	}
	home := loc.Home
	loc.Home = nil
	err = s.giveUpLocked(ino, &loc, home)
	s.mu.Unlock()
	if err != nil {
		return wire.ChunkLoc{}, err
	}
	go func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.deliverDrops(dctx, func() []drops.Drop { return s.drops.Of(ino, idx) })
	}()
	return loc, nil
}
