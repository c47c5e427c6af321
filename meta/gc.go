package meta

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/meta/engine"
)

func (s *Service) kickGC() {
	select {
	case s.gcKick <- struct{}{}:
	default:
	}
}

// RunGC removes the chunks of deleted files until ctx ends. A pass that a
// removal kicks starts after the files the previous kicked pass looked at:
// a removed file leaves a deletion marker in the engine until compaction,
// and a scan from the start would step over every marker of a removal
// storm again at each removal (it was two thirds of the metadata daemon's
// time during mdtest's unlinks). Every tick makes a full pass, which also
// retries files whose data servers could not be reached; the first tick
// after the grace period for reclaims removes the files unlinked while
// open that no mount reclaimed (opens.go).
func (s *Service) RunGC(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var cursor uint64
	var swept time.Time
	orphansSwept := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !orphansSwept {
				orphansSwept = s.sweepOrphans()
			}
			s.CollectGarbage(ctx)
			cursor = 0
			if now := s.now(); now.Sub(swept) > replyKeep/10 {
				if err := s.sweepReplies(); err != nil {
					s.log.Warn("sweeping old requests' records", "err", err)
				}
				swept = now
			}
		case <-s.gcKick:
			if _, next := s.collect(ctx, cursor); next > cursor {
				cursor = next
			}
		}
	}
}

// CollectGarbage makes one pass over deleted files and returns how many
// were fully removed.
func (s *Service) CollectGarbage(ctx context.Context) int {
	n, _ := s.collect(ctx, 0)
	return n
}

// collect makes one pass over deleted files with inode numbers from from
// on (up to 1,024 of them); it returns how many were fully removed and the
// inode number after the last one looked at (from, if none was).
func (s *Service) collect(ctx context.Context, from uint64) (int, uint64) {
	var inos []uint64
	var start []byte
	if from > 0 {
		start = garbageKey(from)
	}
	s.e.Scan([]byte{pGarbage}, start, func(k, _ []byte) bool {
		inos = append(inos, binary.BigEndian.Uint64(k[1:]))
		return len(inos) < 1024
	})
	next := from
	if len(inos) > 0 {
		next = inos[len(inos)-1] + 1
	}
	done := 0
	for _, ino := range inos {
		locs, err := s.Layout(ino)
		if err != nil {
			continue
		}
		servers := map[uint64]bool{}
		for _, l := range locs {
			for _, id := range append(l.All(), l.Home...) {
				servers[id] = true
			}
		}
		ok := true
		for id := range servers {
			if _, err := callData(ctx, &s.reg, id, chunk.Delete, &chunk.DeleteReq{Ino: ino}); err != nil {
				s.log.Warn("gc: delete failed, will retry", "ino", ino, "server", id, "err", err)
				ok = false
			}
		}
		if !ok {
			continue
		}
		var b engine.Batch
		s.e.Scan(layoutPrefix(ino), nil, func(k, _ []byte) bool {
			b.Del(append([]byte(nil), k...)) // the cut chunks' marks too
			return true
		})
		s.dropTrimsLocked(&b, ino, servers)
		s.dropXattrs(&b, ino)
		b.Del(garbageKey(ino))
		// in parts where the engine limits a batch (a large file's
		// layout on etcd): the file is unreachable, and its garbage
		// mark, the last write, goes only once the rest has
		ok = true
		for _, part := range engine.Parts(s.e, &b) {
			if err := s.e.Apply(part, false); err != nil {
				ok = false
				break
			}
		}
		if ok {
			done++
		}
	}
	return done, next
}
