package fwd

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// sizeHint applies the client's account of how far its writes of
// truncation generation gen reached (sent with a flush or fsync of a
// handle that wrote since its last flush): it covers writes acknowledged
// by an earlier incarnation of this daemon whose growth, or change, was
// never reported. An account of an older generation is void (a truncate
// came after those writes).
func (s *Server) sizeHint(ctx context.Context, ino, end, gen uint64) error {
	if end == 0 {
		return nil
	}
	f, err := s.holdFile(ctx, ino)
	if err != nil {
		return err
	}
	defer s.letGo(ino, f)
	f.mu.Lock()
	behind := gen > f.gen
	f.mu.Unlock()
	if behind {
		// the client saw a truncate this daemon has not: learn it
		a, err := s.getattr(ctx, ino)
		if err != nil {
			return err
		}
		s.mergeAttr(a)
	}
	f.mu.Lock()
	switch {
	case gen != f.gen:
	case end > f.size:
		f.size = end
		f.pending = true
		f.mtime = s.cfg.Now().UnixNano()
	case f.adopted && !f.wrote && !f.pending:
		// writes inside the file that an earlier incarnation (or
		// another daemon) acknowledged, none through this one: their
		// change was never reported, so neither the file's mtime nor
		// the change feed that tells other mounts to drop what they
		// cached of it (the block cache, readahead) has them
		f.pending = true
		f.mtime = s.cfg.Now().UnixNano()
	}
	f.mu.Unlock()
	return nil
}

// fsync makes the file's data and size durable: its data servers sync the
// chunks written since the last fsync, then the size goes to the metadata
// service with a synchronous commit. The syncs carry who, the caller: a
// burst-buffer server ends the job's I/O phase there (data/bb.go).
func (s *Server) fsync(ctx context.Context, ino uint64, who wire.Who) error {
	f, unsynced := s.holdForSync(ino)
	if unsynced {
		// its state went with writes no fsync synced: a new one starts
		// from the servers they went to
		var err error
		if f, err = s.holdFile(ctx, ino); err != nil {
			return err
		}
	}
	if f != nil {
		defer s.letGo(ino, f)
		f.mu.Lock()
		ids := make([]uint64, 0, len(f.dirty))
		for id := range f.dirty {
			ids = append(ids, id)
		}
		adopted := f.adopted
		f.mu.Unlock()
		if adopted {
			var err error
			if ids, err = s.withLayoutServers(ctx, ino, ids); err != nil {
				return err
			}
		}
		f.mu.Lock()
		loaded := f.loaded
		f.mu.Unlock()
		if !loaded && len(ids) > 0 {
			// a truncate adopted since the writes made the daemon forget
			// the chunks' locations: which servers still hold them
			if err := s.loadLayout(ctx, ino, f); err != nil {
				return err
			}
		}
		held := s.holding(f, ids)
		err := s.parallel(len(ids), func(i int) error {
			id := ids[i]
			h := held[id]
			if !h.any {
				return nil // its copies were given up or moved (and synced there)
			}
			// a server that cannot be reached is tried for Failover
			// only; if it holds the only copy of a chunk it may be
			// restarting, and is tried for the whole timeout. This
			// daemon's layout may be old (a lost copy made again since,
			// by the tiering manager): it is read again before waiting.
			err := s.syncData(rpc.WithRetryLimit(ctx, s.cfg.Failover), id, ino, who)
			if err != nil && unreachable(err) && !h.allCopied {
				if s.loadLayout(ctx, ino, f) == nil {
					h = s.holding(f, []uint64{id})[id]
				}
				if !h.any {
					return nil
				}
				if !h.allCopied {
					err = s.syncData(ctx, id, ino, who)
				}
			}
			if err != nil && unreachable(err) && s.syncLost(ctx, ino, f, id, err) {
				return nil // its copies were given up; the others are synced
			}
			return err
		})
		if len(ids) > 0 && err != nil {
			return err
		}
		f.mu.Lock()
		for _, id := range ids {
			delete(f.dirty, id)
		}
		f.mu.Unlock()
	}
	return s.flushSizes(ctx, ino, true)
}

// reportAccess tells the metadata service which files were read or
// written since the last report, and when (ns.Access): the ONFS policy
// orders open files by their last access (forced out).
func (s *Server) reportAccess(ctx context.Context) error {
	now := s.cfg.Now().UnixNano()
	type sent struct {
		f  *file
		at int64
	}
	var entries []ns.FileAccess
	var done []sent
	s.fmu.Lock()
	for ino, f := range s.files {
		f.mu.Lock()
		if f.atime > f.atimeSent {
			entries = append(entries, ns.FileAccess{Ino: ino, Ago: time.Duration(max(now-f.atime, 0))})
			done = append(done, sent{f, f.atime})
		}
		f.mu.Unlock()
	}
	// and the states let go since with their access unreported
	gone := map[uint64]int64{}
	for ino, r := range s.recent {
		if r.access != 0 {
			entries = append(entries, ns.FileAccess{Ino: ino, Ago: time.Duration(max(now-r.access, 0))})
			gone[ino] = r.access
		}
	}
	s.fmu.Unlock()
	if len(entries) == 0 {
		return nil
	}
	if _, err := rpc.Do(ctx, s.meta, ns.Access, &ns.AccessReq{At: now, Files: entries}); err != nil {
		return err
	}
	for _, d := range done {
		d.f.mu.Lock()
		d.f.atimeSent = max(d.f.atimeSent, d.at)
		d.f.mu.Unlock()
	}
	s.fmu.Lock()
	for ino, at := range gone {
		if r, ok := s.recent[ino]; ok && r.access == at {
			r.access = 0
			s.recent[ino] = r
		}
	}
	s.fmu.Unlock()
	return nil
}

// flushSizes reports unreported growth of ino (or of every file when ino is
// 0). With sync the metadata service commits durably.
func (s *Server) flushSizes(ctx context.Context, ino uint64, sync bool) error {
	_, _, err := s.reportSizes(ctx, ino, sync, 0)
	return err
}

// reportSizes is flushSizes for a client's close (OpFlush) too: the
// report's change is that client's (client, 0: nobody's), so the
// metadata service leaves it out of the client's change feed, and the
// file's attributes after it are returned with the feed position they were
// served at (nil if there was nothing to report), for the client to answer
// stats with (vfs.DirCache.NoteFileAttr). The client's kernel dropped the
// file's attributes at its writes (they are what it reports).
func (s *Server) reportSizes(ctx context.Context, ino uint64, sync bool, client uint64) (*wire.Attr, uint64, error) {
	var attr *wire.Attr
	var attrGen uint64
	s.fmu.Lock()
	var inos []uint64
	var fs []*file
	if ino != 0 {
		if f := s.files[ino]; f != nil {
			inos, fs = append(inos, ino), append(fs, f)
		}
	} else {
		for i, f := range s.files {
			inos, fs = append(inos, i), append(fs, f)
		}
	}
	for _, f := range fs {
		f.pins++ // a report that fails puts the growth back in the state
	}
	s.fmu.Unlock()
	defer s.letGoAll(inos, fs)
	var errs []error
	reported := false
	for i, f := range fs {
		// one report of a file at a time: a close or fsync that finds
		// nothing pending must not return while the growth is still on
		// its way in another report (the periodic one, retrying against
		// a restarting metadata service)
		f.report.Lock()
		f.mu.Lock()
		// a flush or release: the writer is done; so it is for a file
		// closed during a write the periodic report finds ended
		closing := ino != 0 && !sync || ino == 0 && f.closed
		pending, size, mtime, gen := f.pending, f.size, f.mtime, f.gen
		owed := closing && f.unclosed
		f.pending = false
		if closing {
			f.unclosed = false
		}
		f.mu.Unlock()
		if !pending && !owed {
			f.report.Unlock()
			continue
		}
		reported = true
		resp, err := rpc.Do(ctx, s.meta, ns.Extend, &ns.ExtendReq{Ino: inos[i], Size: size, Mtime: mtime, Trunc: gen, Sync: sync,
			Close: closing, Client: client})
		f.mu.Lock()
		if rpc.Errno(err) == syscall.ENOENT {
			// the file is gone (deleted, its last handle closed): its
			// growth goes with it, or this report was retried for ever
			err = nil
		} else if err != nil {
			if f.gen == gen {
				f.pending = pending || f.pending
				f.unclosed = owed || f.unclosed
			}
			errs = append(errs, err)
		} else {
			f.adoptLocked(resp.Attr)
			if a := *resp.Attr; ino != 0 && a.Trunc == f.gen && !f.pending {
				a.Size = max(a.Size, f.size)
				attr, attrGen = &a, resp.Feed
			}
		}
		f.mu.Unlock()
		f.report.Unlock()
	}
	if sync && !reported && len(errs) == 0 {
		_, err := rpc.Do(ctx, s.meta, ns.Sync, &wire.Empty{})
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	return attr, attrGen, nil
}

func (s *Server) flushLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.SizeFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.flushSizes(ctx, 0, false); err != nil && ctx.Err() == nil {
				s.log.Warn("size report failed", "err", err)
			}
			if err := s.reportAccess(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("access report failed", "err", err)
			}
			s.forgetRecent()
		}
	}
}
