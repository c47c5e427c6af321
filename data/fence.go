package data

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/tier"
)

// Truncation fences (meta/trunc.go has the whole protocol).
//
// A data server remembers, per file, the last truncation generation whose
// trims it applied: its fence. Invariant: every trim of the file on this
// server of a generation at or below the fence has been applied. Chunk
// I/O is admitted against it:
//   - a write of an older generation is refused with ESTALE (the writer
//     raced with a truncate and must learn the new size first);
//   - a read or write of a newer generation first catches up: the server
//     asks the metadata service for its pending trims of the file (a
//     truncate it missed while down or unreachable), applies them in
//     generation order, and raises the fence to the file's generation.
//
// Trims of a generation at or below the fence are not applied again (the
// metadata service may resend trims whose acknowledgement it missed), so
// fences are kept on disk, one small file per truncated file.
type fences struct {
	dir string // where fences are kept; "" keeps them in memory only

	mu  sync.Mutex // guards gen
	gen map[uint64]uint64

	// locks order chunk I/O (shared) against applying trims (exclusive),
	// striped by inode.
	locks [64]sync.RWMutex

	pulling atomic.Bool // a pull of every pending trim is running
}

func openFences(dir string) (*fences, error) {
	f := &fences{dir: dir, gen: map[uint64]uint64{}}
	if dir == "" {
		return f, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		ino, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil {
			continue // a temporary file left by a crash
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		g, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("fence of inode %d: %w", ino, err)
		}
		f.gen[ino] = g
	}
	return f, nil
}

func (f *fences) lock(ino uint64) *sync.RWMutex { return &f.locks[ino%uint64(len(f.locks))] }

func (f *fences) get(ino uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen[ino]
}

// setLocked raises ino's fence to g and keeps it on disk. Caller holds
// ino's lock exclusively.
func (f *fences) setLocked(ino, g uint64) error {
	if g <= f.get(ino) {
		return nil
	}
	if f.dir != "" {
		err := writeFile(filepath.Join(f.dir, strconv.FormatUint(ino, 10)), strconv.FormatUint(g, 10)+"\n")
		if err != nil {
			return fmt.Errorf("keeping the truncation fence of inode %d: %w", ino, err)
		}
	}
	f.mu.Lock()
	f.gen[ino] = g
	f.mu.Unlock()
	return nil
}

// drop forgets ino's fence (the file was deleted).
func (f *fences) drop(ino uint64) {
	l := f.lock(ino)
	l.Lock()
	defer l.Unlock()
	f.mu.Lock()
	delete(f.gen, ino)
	f.mu.Unlock()
	if f.dir != "" {
		// a fence left behind is harmless: inode numbers are not reused
		os.Remove(filepath.Join(f.dir, strconv.FormatUint(ino, 10)))
	}
}

// applyTrimsLocked applies the trims of one file above its fence, in the
// order given (generation order), and raises the fence to the newest
// generation seen (at least to). Caller holds the file's lock exclusively.
func (s *Server) applyTrimsLocked(ino uint64, ts []wire.Trim, to uint64) error {
	f := s.fence
	cur := f.get(ino)
	top := max(cur, to)
	for _, t := range ts {
		if t.Ino != ino {
			return rpc.Errorf(syscall.EINVAL, "trim of inode %d sent for inode %d", t.Ino, ino)
		}
		if t.Gen <= cur {
			continue // applied before (its acknowledgement was lost)
		}
		id := tier.ChunkID{Ino: ino, Idx: t.Idx, ChunkSize: t.ChunkSize}
		s.moves.cutFrom(ino, t.Idx) // a migration of a cut chunk starts over
		if err := s.store.Truncate(id, int64(t.Keep)); err != nil {
			return err
		}
		top = max(top, t.Gen)
	}
	return f.setLocked(ino, top)
}

// admit lets one chunk read or write of ino made under truncation
// generation gen go ahead, catching up with the file's truncations first
// if gen is newer than the fence. It returns the lock to release when the
// I/O is done (held shared).
func (s *Server) admit(ctx context.Context, ino, gen uint64, write bool) (*sync.RWMutex, error) {
	l := s.fence.lock(ino)
	for tries := 0; ; tries++ {
		l.RLock()
		cur := s.fence.get(ino)
		if gen <= cur || tries > 0 {
			if write && gen < cur {
				l.RUnlock()
				return nil, rpc.Errorf(syscall.ESTALE, "data server %d: inode %d was truncated (generation %d, write's %d)",
					s.mem.ID(), ino, cur, gen)
			}
			return l, nil
		}
		l.RUnlock()
		if err := s.catchUp(ctx, ino, gen); err != nil {
			return nil, err
		}
	}
}

// catchUp applies the metadata service's pending trims of ino for this
// server and raises its fence to the file's generation.
func (s *Server) catchUp(ctx context.Context, ino, gen uint64) error {
	l := s.fence.lock(ino)
	l.Lock()
	defer l.Unlock()
	if s.fence.get(ino) >= gen {
		return nil // another request caught up meanwhile
	}
	resp, err := rpc.Do(ctx, s.meta, ns.Trims, &ns.TrimsReq{Server: s.mem.ID(), Ino: ino})
	if err != nil {
		return fmt.Errorf("data server %d: cannot learn the truncations of inode %d: %w", s.mem.ID(), ino, err)
	}
	if err := s.applyTrimsLocked(ino, resp.Trims, resp.Trunc); err != nil {
		return err
	}
	return s.trimsDone(ctx, resp.Trims)
}

func (s *Server) trimsDone(ctx context.Context, ts []wire.Trim) error {
	if len(ts) == 0 {
		return nil
	}
	_, err := rpc.Do(ctx, s.meta, ns.TrimsDone, &ns.TrimsDoneReq{Server: s.mem.ID(), Trims: ts})
	return err
}

// pullTrims applies every trim the metadata service keeps for this
// server (it was down or unreachable during truncates). One at a time.
func (s *Server) pullTrims(ctx context.Context) {
	if !s.fence.pulling.CompareAndSwap(false, true) {
		return
	}
	defer s.fence.pulling.Store(false)
	resp, err := rpc.Do(ctx, s.meta, ns.Trims, &ns.TrimsReq{Server: s.mem.ID()})
	if err != nil {
		s.cfg.Log.Warn("fetching pending truncations failed", "err", err)
		return
	}
	for i := 0; i < len(resp.Trims); {
		j := i
		for j < len(resp.Trims) && resp.Trims[j].Ino == resp.Trims[i].Ino {
			j++
		}
		ino, ts := resp.Trims[i].Ino, resp.Trims[i:j]
		l := s.fence.lock(ino)
		l.Lock()
		err := s.applyTrimsLocked(ino, ts, 0)
		l.Unlock()
		if err == nil {
			err = s.trimsDone(ctx, ts)
		}
		if err != nil {
			s.cfg.Log.Warn("applying pending truncations failed", "ino", ino, "err", err)
		} else {
			s.cfg.Log.Info("applied truncations made while this server was unreachable", "ino", ino, "trims", len(ts))
		}
		i = j
	}
}
