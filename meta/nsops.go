package meta

import (
	"context"
	"slices"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// The namespace operations a mount's requests become (internal/wire/ns):
// lookups, creates, removals, renames, listings, attributes, opens.
//
// Each reply carries the change feed's position before the request was
// served: every change at or below it was applied before the reply was
// read, so a client may cache the reply until it sees a later change.
// The request's changes go into the feed (not echoed to its mount).
//
// A request that names a directory (touch) runs whole — its check of the
// delegations, its change and its place in the feed — between two grants
// (deleg.go), so a grant's feed position covers every change made to the
// directory before it; a directory another client holds is recalled first.

// touch lists what a request reaches: the directories it reads or changes
// by name or as a whole, and a file whose owning delegation another
// client's request recalls (0: none).
type touch[PQ any] func(s *Service, q PQ) (dirs []uint64, file uint64)

// nsOp serves a namespace operation that names a directory: admitted by
// the delegations it touches, throttled by MaxOps; f returns its reply and
// changes.
func nsOp[Q, R any, PQ interface {
	wire.Ptr[Q]
	ns.Request
}, PR interface {
	wire.Ptr[R]
	feedReply
}](s *Service, t *rpc.Table, d wire.Def[Q, R], reach touch[PQ], f func(ctx context.Context, q PQ) (PR, []ns.Change, error)) {
	rpc.On[Q, R, PQ, PR](t, d, func(ctx context.Context, q PQ) (PR, error) {
		if s.ops != nil {
			s.ops.Wait(ctx, 1)
		}
		client := q.Header().Client
		s.admit(ctx, client, func() ([]uint64, uint64) { return reach(s, q) })
		defer s.deleg.grantMu.RUnlock()
		return answer(s, client, func() (PR, []ns.Change, error) { return f(ctx, q) })
	})
}

// answer runs f, puts its changes into the feed (also after a failure
// half-way, a create that could not open: a needless invalidation costs a
// lookup, a missed one a stale cache) and sets its reply's feed position.
func answer[PR feedReply](s *Service, client uint64, f func() (PR, []ns.Change, error)) (PR, error) {
	pos := s.feed.position()
	rep, changes, err := f()
	if len(changes) > 0 {
		s.feed.add(client, changes...)
	}
	if err != nil {
		var zero PR
		return zero, err
	}
	rep.SetFeed(pos)
	return rep, nil
}

// admit waits until no other client holds a delegation of what reach
// lists, and returns holding deleg.grantMu for reading (the caller
// releases it).
func (s *Service) admit(ctx context.Context, client uint64, reach func() ([]uint64, uint64)) {
	for {
		s.deleg.grantMu.RLock()
		held := s.heldByOthers(client, reach)
		if len(held) == 0 || ctx.Err() != nil {
			return
		}
		s.deleg.grantMu.RUnlock()
		s.recallWait(ctx, client, held) // then check again: granted meanwhile?
	}
}

// heldByOthers returns the directories reach lists that are delegated to
// a client other than client, and the one whose delegation owns the file
// it lists.
func (s *Service) heldByOthers(client uint64, reach func() ([]uint64, uint64)) []uint64 {
	if s.deleg.n.Load() == 0 {
		return nil
	}
	dirs, file := reach()
	d := &s.deleg
	// a delegation found in the engine at the start has lost its owned
	// files: a file made in its directory may be one
	var fileParent uint64
	if file != 0 && d.restored.Load() > 0 {
		if n, err := s.getInode(file); err == nil && !isDir(n.Mode) {
			fileParent = n.Parent
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	held := dirs[:0]
	for _, dir := range dirs {
		if h := d.dir[dir]; h != nil && h.client != client {
			held = append(held, dir)
		}
	}
	if dir, ok := d.file[file]; ok && file != 0 {
		if h := d.dir[dir]; h != nil && h.client != client {
			held = append(held, dir)
		}
	} else if h := d.dir[fileParent]; h != nil && h.restored && h.client != client {
		held = append(held, fileParent)
	}
	return held
}

// The directories requests reach.
func inParent[PQ ns.Request](_ *Service, q PQ) ([]uint64, uint64) {
	_, parent, _ := q.Inodes()
	return []uint64{parent}, 0
}

func theDir[PQ ns.Request](_ *Service, q PQ) ([]uint64, uint64) {
	ino, _, _ := q.Inodes()
	return []uint64{ino}, 0
}

// serveNamespace adds the namespace operations to t.
func (s *Service) serveNamespace(t *rpc.Table) {
	s.serveEntries(t)
	s.serveDirs(t)
	s.serveFiles(t)
	s.serveXattrs(t)
	s.serveLocks(t)
}

// unmasked is the permission bits a create asked for before the caller's
// umask (a mount of protocol 2.3 sends only mode).
func unmasked(mode, before uint32) uint32 {
	if before == 0 {
		return mode
	}
	return before
}

// serveEntries adds the operations on a name in a directory: lookups,
// creates and removals.
func (s *Service) serveEntries(t *rpc.Table) {
	nsOp(s, t, ns.Lookup, inParent,
		func(_ context.Context, q *ns.NameReq) (*ns.EntryRep, []ns.Change, error) {
			if r, err := s.localEntry(q.Parent, q.Name); r != nil || err != nil {
				return &ns.EntryRep{Redirect: r}, nil, err
			}
			a, err := s.Lookup(q.Parent, q.Name)
			return &ns.EntryRep{Attr: a}, nil, err
		})
	nsOp(s, t, ns.Mknod, inParent,
		func(_ context.Context, q *ns.MknodReq) (*ns.EntryRep, []ns.Change, error) {
			return s.makeEntry(q.Parent, q.Name, q.Header(), true, func(reply *engine.Batch) (*wire.Attr, error) {
				typ := q.Mode & syscall.S_IFMT
				if typ == 0 {
					typ = syscall.S_IFREG
				}
				a, err := s.CreateUnmasked(q.Parent, q.Name, typ|q.Mode&0o7777, unmasked(q.Mode, q.Unmasked), q.Uid, q.Gid, "", q.Excl || typ != syscall.S_IFREG, q.Rdev, reply)
				if err == nil && q.Open {
					a, err = s.Open(q.Client, a.Ino)
				}
				return a, err
			})
		})
	nsOp(s, t, ns.Mkdir, inParent,
		func(_ context.Context, q *ns.MkdirReq) (*ns.EntryRep, []ns.Change, error) {
			return s.makeEntry(q.Parent, q.Name, q.Header(), true, func(reply *engine.Batch) (*wire.Attr, error) {
				return s.CreateUnmasked(q.Parent, q.Name, syscall.S_IFDIR|q.Mode&0o7777, unmasked(q.Mode, q.Unmasked), q.Uid, q.Gid, "", true, 0, reply)
			})
		})
	nsOp(s, t, ns.Symlink, inParent,
		func(_ context.Context, q *ns.SymlinkReq) (*ns.EntryRep, []ns.Change, error) {
			return s.makeEntry(q.Parent, q.Name, q.Header(), true, func(reply *engine.Batch) (*wire.Attr, error) {
				return s.Create(q.Parent, q.Name, syscall.S_IFLNK, q.Uid, q.Gid, q.Target, true, 0, reply)
			})
		})
	nsOp(s, t, ns.Unlink, inParent,
		func(_ context.Context, q *ns.NameReq) (*ns.EntryRep, []ns.Change, error) {
			return s.makeEntry(q.Parent, q.Name, q.Header(), false, func(reply *engine.Batch) (*wire.Attr, error) {
				return nil, s.Remove(q.Parent, q.Name, false, reply)
			})
		})
	nsOp(s, t, ns.Rmdir, func(s *Service, q *ns.NameReq) ([]uint64, uint64) {
		out := []uint64{q.Parent}
		if ino, _, err := s.lookupEntry(q.Parent, q.Name); err == nil {
			out = append(out, ino) // the directory removed
		}
		return out, 0
	},
		func(_ context.Context, q *ns.NameReq) (*ns.EntryRep, []ns.Change, error) {
			return s.makeEntry(q.Parent, q.Name, q.Header(), false, func(reply *engine.Batch) (*wire.Attr, error) {
				return nil, s.Remove(q.Parent, q.Name, true, reply)
			})
		})
}

// serveDirs adds the operations on directories: renames, links,
// listings, layouts and a delegation holder's batches.
func (s *Service) serveDirs(t *rpc.Table) {
	nsOp(s, t, ns.Rename, func(s *Service, q *ns.RenameReq) ([]uint64, uint64) {
		out := []uint64{q.Parent, q.NewParent}
		for _, e := range []struct {
			dir  uint64
			name string
		}{{q.Parent, q.Name}, {q.NewParent, q.NewName}} {
			if ino, _, err := s.lookupEntry(e.dir, e.name); err == nil {
				out = append(out, ino)
			}
		}
		return out, 0
	}, func(_ context.Context, q *ns.RenameReq) (*ns.FeedRep, []ns.Change, error) {
		if s.local.Tier(q.NewParent) != "" {
			return nil, nil, errno(syscall.EXDEV, "into a local-mode directory")
		}
		if s.local.Tier(q.Parent) != "" {
			if _, err := s.Lookup(q.Parent, q.Name); err != nil {
				return nil, nil, errno(syscall.EXDEV, "out of a local-mode directory")
			}
		}
		var err error
		if !s.replied(q.Header()) { // (else made by an earlier send whose answer was lost)
			err = s.Rename(q.Parent, q.Name, q.NewParent, q.NewName, q.Flags, s.replyBatch(q.Header()))
		}
		return &ns.FeedRep{}, []ns.Change{entryChange(q.Parent, q.Name), entryChange(q.NewParent, q.NewName),
			attrChange(q.Parent), attrChange(q.NewParent)}, err
	})
	nsOp(s, t, ns.Link, func(_ *Service, q *ns.LinkReq) ([]uint64, uint64) { return []uint64{q.NewParent}, 0 },
		func(_ context.Context, q *ns.LinkReq) (*ns.EntryRep, []ns.Change, error) {
			if s.local.Tier(q.NewParent) != "" {
				return nil, nil, errno(syscall.EXDEV, "into a local-mode directory")
			}
			var a *wire.Attr
			var err error
			if s.replied(q.Header()) { // made by an earlier send whose answer was lost
				a, err = s.Getattr(q.Ino)
			} else {
				a, err = s.Link(q.Ino, q.NewParent, q.NewName, s.replyBatch(q.Header()))
			}
			ch := []ns.Change{entryChange(q.NewParent, q.NewName), attrChange(q.Ino), attrChange(q.NewParent)}
			if err != nil {
				return nil, ch, err
			}
			r := &ns.EntryRep{Attr: a}
			r.Parent, _ = s.Getattr(q.NewParent)
			return r, ch, nil
		})
	nsOp(s, t, ns.Readdir, theDir,
		func(_ context.Context, q *ns.ReaddirReq) (*ns.ReaddirRep, []ns.Change, error) {
			es, err := s.Readdir(q.Ino, q.After, q.Max)
			if err != nil {
				return nil, nil, err
			}
			if tier := s.local.Tier(q.Ino); tier != "" {
				// this service's own entries, and every server of the
				// tier to ask for the rest
				servers, err := s.localServers(q.Ino, tier)
				if err != nil {
					return nil, nil, err
				}
				return &ns.ReaddirRep{Redirect: &ns.Redirect{Servers: servers, Own: len(es) > 0, Entries: es}}, nil, nil
			}
			return &ns.ReaddirRep{Entries: es}, nil, nil
		})
	nsOp(s, t, ns.SetLayout, theDir,
		func(_ context.Context, q *ns.SetLayoutReq) (*ns.SetLayoutRep, []ns.Change, error) {
			var a *wire.Attr
			var err error
			if q.Local || q.Global {
				if err = s.local.Set(q.Ino, q.Tier, q.Local); err == nil {
					a, err = s.Getattr(q.Ino)
				}
			} else {
				a, err = s.SetLayout(q.Ino, q.ChunkSize, q.StripeCnt, q.StripeUnit)
			}
			return &ns.SetLayoutRep{Attr: a, Tier: s.local.Tier(q.Ino)}, []ns.Change{attrChange(q.Ino)}, err
		})
	nsOp(s, t, ns.CreateBatch, inParent, s.createBatch)

}

// serveFiles adds the operations on an inode and the service itself:
// attributes, opens and closes, symbolic links' targets, syncs,
// capacity, ping.
func (s *Service) serveFiles(t *rpc.Table) {
	rpc.On(t, ns.Ping, func(context.Context, *ns.PingReq) (*ns.PingRep, error) { return &ns.PingRep{}, nil })
	// (a getattr without a client is a forwarding daemon's own, for a
	// request that already passed here: a read after its open, or the
	// holder's write)
	nsOp(s, t, ns.Getattr, func(_ *Service, q *ns.InoReq) ([]uint64, uint64) {
		if q.Client == 0 {
			return []uint64{q.Ino}, 0
		}
		return []uint64{q.Ino}, q.Ino
	}, func(_ context.Context, q *ns.InoReq) (*ns.AttrRep, []ns.Change, error) {
		a, err := s.Getattr(q.Ino)
		return &ns.AttrRep{Attr: a}, nil, err
	})
	nsOp(s, t, ns.Setattr, func(_ *Service, q *ns.SetattrReq) ([]uint64, uint64) {
		if q.Mask&ns.SetSize == 0 {
			return []uint64{q.Ino}, 0
		}
		return []uint64{q.Ino}, q.Ino
	}, func(ctx context.Context, q *ns.SetattrReq) (*ns.AttrRep, []ns.Change, error) {
		a, err := s.Setattr(ctx, q)
		return &ns.AttrRep{Attr: a}, []ns.Change{attrChange(q.Ino)}, err
	})
	// an open reaches a file without naming a directory, to see or change
	// its bytes: it recalls the delegation owning the file, if another
	// client holds it (its holder may be changing the file, or have
	// closed it with its writes and size on their way), so that the open
	// sees them (close-to-open)
	rpc.On(t, ns.Open, func(ctx context.Context, q *ns.OpenReq) (*ns.AttrRep, error) {
		open := func() (*ns.AttrRep, []ns.Change, error) {
			a, err := s.Open(q.Client, q.Ino)
			return &ns.AttrRep{Attr: a}, nil, err
		}
		if s.deleg.n.Load() == 0 {
			return answer(s, q.Client, open)
		}
		s.admit(ctx, q.Client, func() ([]uint64, uint64) { return []uint64{q.Ino}, q.Ino })
		defer s.deleg.grantMu.RUnlock()
		return answer(s, q.Client, open)
	})
	rpc.On(t, ns.Release, func(_ context.Context, q *ns.InoReq) (*ns.FeedRep, error) {
		return answer(s, q.Client, func() (*ns.FeedRep, []ns.Change, error) { return &ns.FeedRep{}, nil, s.Release(q.Client, q.Ino) })
	})
	rpc.On(t, ns.Touch, func(_ context.Context, q *ns.TouchReq) (*wire.Empty, error) {
		changed, err := s.Touch(q.Inos, q.Atimes)
		changes := make([]ns.Change, len(changed))
		for i, ino := range changed {
			changes[i] = ns.Change{Kind: ns.ChangeAtime, Ino: ino}
		}
		if len(changes) > 0 {
			s.feed.add(q.Client, changes...)
		}
		return &wire.Empty{}, err
	})
	rpc.On(t, ns.Reclaim, func(_ context.Context, q *ns.ReclaimReq) (*wire.Empty, error) {
		if q.Client == 0 {
			return nil, errno(syscall.EINVAL, "reclaim without a client id")
		}
		held := make(map[uint64]int, len(q.Opens))
		for _, o := range q.Opens {
			held[o.Ino] += int(o.N)
		}
		return &wire.Empty{}, s.Reclaim(q.Client, held)
	})
	rpc.On(t, ns.Readlink, func(_ context.Context, q *ns.InoReq) (*ns.ReadlinkRep, error) {
		return answer(s, q.Client, func() (*ns.ReadlinkRep, []ns.Change, error) {
			target, err := s.Readlink(q.Ino)
			return &ns.ReadlinkRep{Target: target}, nil, err
		})
	})
	rpc.On(t, ns.Fsync, func(_ context.Context, q *ns.SizeReq) (*ns.FeedRep, error) {
		return answer(s, q.Client, func() (*ns.FeedRep, []ns.Change, error) { return &ns.FeedRep{}, nil, s.Sync() })
	})
	rpc.On(t, ns.Sync, func(context.Context, *wire.Empty) (*wire.Empty, error) { return &wire.Empty{}, s.Sync() })
	rpc.On(t, ns.Statfs, func(context.Context, *ns.PingReq) (*ns.StatfsRep, error) {
		c, u := s.Statfs()
		return &ns.StatfsRep{Capacity: c, Used: u}, nil
	})
}

// makeEntry makes or removes the entry name of directory parent with f,
// or redirects to where it lives (a local-mode directory's); the reply
// carries the directory's attributes after the change.
func (s *Service) makeEntry(parent uint64, name string, h *ns.Head, create bool, f func(reply *engine.Batch) (*wire.Attr, error)) (*ns.EntryRep, []ns.Change, error) {
	if r, err := s.localEntry(parent, name); r != nil || err != nil {
		return &ns.EntryRep{Redirect: r}, nil, err
	}
	var a *wire.Attr
	var err error
	switch {
	case s.replied(h) && create: // made by an earlier send whose answer was lost
		a, err = s.Lookup(parent, name)
	case !s.replied(h):
		a, err = f(s.replyBatch(h))
	}
	ch := []ns.Change{entryChange(parent, name), attrChange(parent)}
	if err != nil {
		return nil, ch, err
	}
	r := &ns.EntryRep{Attr: a}
	r.Parent, _ = s.Getattr(parent)
	return r, ch, nil
}

// createBatch applies a delegation holder's batch in order: runs of
// creates through CreateBatch, removals (of a directory with S_IFDIR) one
// by one. The reply lists the entries refused, with their errno.
func (s *Service) createBatch(_ context.Context, q *ns.BatchReq) (*ns.BatchRep, []ns.Change, error) {
	ch := []ns.Change{attrChange(q.Parent)}
	for _, e := range q.Entries {
		ch = append(ch, entryChange(q.Parent, e.Name))
	}
	var failed []ns.BatchEntry
	es := q.Entries
	for len(es) > 0 {
		if es[0].Remove {
			if ino, _, err := s.lookupEntry(q.Parent, es[0].Name); es[0].Ino != 0 && (err != nil || ino != es[0].Ino) {
				// the name no longer holds the file the holder removed:
				// an earlier send of this batch, whose answer was lost,
				// removed it (and the name may have been made again)
				es = es[1:]
				continue
			}
			if err := s.Remove(q.Parent, es[0].Name, isDir(es[0].Mode)); err != nil {
				e := es[0]
				e.Errno = uint32(rpc.Errno(err))
				failed = append(failed, e)
			}
			es = es[1:]
			continue
		}
		n := 1
		for n < len(es) && !es[n].Remove {
			n++
		}
		f, err := s.CreateBatch(q.Client, q.Parent, es[:n], q.Uid, q.Gid, q.Mtime)
		if err != nil {
			return nil, ch, err
		}
		failed = append(failed, f...)
		es = es[n:]
	}
	r := &ns.BatchRep{Failed: failed}
	r.Parent, _ = s.Getattr(q.Parent)
	if slices.ContainsFunc(q.Entries, func(e ns.BatchEntry) bool { return e.Open }) {
		// the directory's layout, which its new files took: a forwarding
		// daemon starts the state of those still open from it
		// (fwd/files.go, openedInBatch)
		r.Dir = r.Parent
	}
	return r, ch, nil
}
