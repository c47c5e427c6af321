package meta

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// ChunkDeleteAll is the Flags value of OpChunkDelete that removes every
// chunk of the inode on that server.
const ChunkDeleteAll = 1

func (s *Service) kickGC() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}

// RunGC removes the chunks of deleted files until ctx ends. A file whose
// data servers cannot be reached is retried later.
func (s *Service) RunGC(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.gcKick:
		}
		s.CollectGarbage(ctx)
	}
}

// CollectGarbage makes one pass over deleted files and returns how many
// were fully removed.
func (s *Service) CollectGarbage(ctx context.Context) int {
	var inos []uint64
	s.e.Scan([]byte{pGarbage}, nil, func(k, _ []byte) bool {
		inos = append(inos, binary.BigEndian.Uint64(k[1:]))
		return len(inos) < 1024
	})
	done := 0
	for _, ino := range inos {
		locs, err := s.Layout(ino)
		if err != nil {
			continue
		}
		servers := map[uint64]bool{}
		for _, l := range locs {
			for _, id := range l.Servers {
				servers[id] = true
			}
		}
		ok := true
		for id := range servers {
			if err := s.reg.callData(ctx, id, &wire.Msg{Op: wire.OpChunkDelete, Ino: ino, Flags: ChunkDeleteAll}); err != nil {
				s.log.Warn("gc: delete failed, will retry", "ino", ino, "server", id, "err", err)
				ok = false
			}
		}
		if !ok {
			continue
		}
		var b engine.Batch
		for _, l := range locs {
			b.Del(layoutKey(ino, l.Idx))
		}
		b.Del(garbageKey(ino))
		if err := s.e.Apply(&b, false); err == nil {
			done++
		}
	}
	return done
}
