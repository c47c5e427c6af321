package fwd

import (
	"context"
	"sync"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/layout"
)

// file is the daemon's soft state for one inode.
type file struct {
	// report is held while the file's growth is being reported to the
	// metadata service (flushSizes); taken before mu.
	report     sync.Mutex
	mu         sync.Mutex // guards the fields below
	chunkSize  int64
	stripeUnit int64
	// gen is the file's truncation generation this state is about;
	// size the largest size known in it (metadata or local writes).
	// A newer generation (a truncate) replaces both (adoptLocked).
	gen     uint64
	size    uint64
	pending bool // size/mtime not yet reported
	mtime   int64
	chunks  map[uint64]wire.ChunkLoc
	loaded  bool // chunks holds the full layout as of loading
	// fresh holds the chunks this daemon placed that no write has landed
	// in yet: they may still move (their server refuses them or is down).
	// placing holds the fresh chunks a write is under way to (the channel
	// closes when it ends): one write at a time goes to a fresh chunk, so
	// it never moves away from bytes another write left in it.
	fresh   map[uint64]bool
	placing map[uint64]chan struct{}
	// refused holds, for a fresh chunk, the server that refused its last
	// write (full or down) when the chunk could not be moved at once (a
	// truncate came in between): the next write moves it first.
	refused map[uint64]uint64
	// adopted: the state was built without an open through this daemon
	// (e.g. after it restarted), so dirty may miss writes of an earlier
	// incarnation: fsync then syncs every server holding the file.
	adopted bool
	// wrote: a write of the file went through this daemon (its
	// reports cover the file's changes since)
	wrote bool
	// unclosed: written since the last report a close made (the close
	// report settles the room of the file's new chunks, meta/settle.go):
	// a close reports even if the periodic report took its growth
	unclosed bool
	dirty    map[uint64]bool // data servers written since the last fsync
	opens    int
	// atime is the last read or write through this daemon (unix ns),
	// reported to the metadata service for file coolness (reportAccess)
	// once it is later than atimeSent
	atime, atimeSent int64
}

func (s *Server) lookupFile(ino uint64) *file {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.files[ino]
}

func (s *Server) opened(a *wire.Attr) {
	s.fmu.Lock()
	f := s.files[a.Ino]
	if f == nil {
		f = newFile(a)
		s.files[a.Ino] = f
	}
	s.fmu.Unlock()
	f.mu.Lock()
	f.opens++
	f.adoptLocked(a)
	f.mu.Unlock()
}

func newFile(a *wire.Attr) *file {
	f := &file{chunkSize: int64(a.ChunkSize), stripeUnit: int64(a.StripeUnit), size: a.Size, gen: a.Trunc,
		chunks: map[uint64]wire.ChunkLoc{}, dirty: map[uint64]bool{}, placing: map[uint64]chan struct{}{},
		fresh: map[uint64]bool{}, refused: map[uint64]uint64{}}
	if f.chunkSize <= 0 {
		f.chunkSize = layout.DefaultChunkSize
	}
	if f.stripeUnit <= 0 || f.stripeUnit > f.chunkSize {
		f.stripeUnit = f.chunkSize
	}
	// an empty file (a new one, mostly) has no layout worth a round trip:
	// a write to a chunk not known here asks for its place (OpAlloc
	// answers with the place another daemon gave it, if any), and a read
	// looks up a chunk it does not know anyway
	f.loaded = a.Size == 0
	return f
}

func (s *Server) release(ino uint64) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[ino]
	if f == nil {
		return
	}
	f.mu.Lock()
	f.opens--
	// chunks that may still move (and writes to them) keep the state
	// (an access not reported yet goes with it: the last access matters
	// for open files, the close for closed ones)
	drop := f.opens <= 0 && !f.pending && len(f.dirty) == 0 && len(f.fresh) == 0 && len(f.placing) == 0
	f.mu.Unlock()
	if drop {
		delete(s.files, ino)
	}
}

// adoptLocked brings the state up to date with attributes the metadata
// service returned. A newer truncation generation means a truncate came
// after every write this daemon knows of: their growth not yet reported
// was cut by it, and so were the locations of the chunks it cut. Caller
// holds f.mu.
func (f *file) adoptLocked(a *wire.Attr) {
	switch {
	case a.Trunc > f.gen:
		f.gen, f.size, f.pending = a.Trunc, a.Size, false
		// a chunk a truncate cut away whole lost its place (it is placed
		// again, maybe elsewhere, when written): forget every location,
		// the next access loads them again
		clear(f.chunks)
		f.loaded = false
	case a.Trunc == f.gen && a.Size > f.size:
		f.size = a.Size
	}
}

// mergeAttr adopts attributes the metadata service returned and raises
// the reported size to what local writes of the same generation reached.
func (s *Server) mergeAttr(a *wire.Attr) {
	f := s.lookupFile(a.Ino)
	if f == nil {
		return
	}
	f.mu.Lock()
	f.adoptLocked(a)
	if a.Trunc == f.gen {
		a.Size = f.size
		if f.pending && f.mtime > a.Mtime {
			a.Mtime = f.mtime
		}
	}
	f.mu.Unlock()
}

// refresh learns the file's attributes from the metadata service after a
// data server or the service refused a request of generation stale: a
// truncate came in between. It fails if the generation did not move.
func (s *Server) refresh(ctx context.Context, ino uint64, f *file, stale uint64, cause error) error {
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: ino}, nil, nil)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.adoptLocked(resp.Attr)
	moved := f.gen > stale
	f.mu.Unlock()
	if !moved {
		return rpc.Errorf(syscall.EIO, "inode %d: refused as truncated, but the metadata service knows no newer truncation: %v", ino, cause)
	}
	return nil
}

// fileFor returns the file state, loading attributes when the daemon has
// none (a client that opened the file through another daemon).
func (s *Server) fileFor(ctx context.Context, ino uint64) (*file, error) {
	if f := s.lookupFile(ino); f != nil {
		return f, nil
	}
	resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpGetattr, Ino: ino}, nil, nil)
	if err != nil {
		return nil, err
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[ino]
	if f == nil {
		f = newFile(resp.Attr)
		f.adopted = true
		s.files[ino] = f
	}
	return f, nil
}

// chunk returns chunk idx's location for a read; ok is false for a hole.
// An unknown chunk is looked up again: another daemon may have placed it
// since the layout was loaded.
func (s *Server) chunk(ctx context.Context, ino uint64, f *file, idx uint64) (wire.ChunkLoc, bool, error) {
	if loc, ok := f.lookup(idx); ok {
		return loc, true, nil
	}
	if err := s.loadLayout(ctx, ino, f); err != nil {
		return wire.ChunkLoc{}, false, err
	}
	loc, ok := f.lookup(idx)
	return loc, ok, nil
}

// placed ends a write to fresh chunk idx; landed says the write's bytes
// are in it, which fixes its place.
func (s *Server) placed(f *file, idx uint64, landed bool) {
	f.mu.Lock()
	if landed {
		delete(f.fresh, idx)
	}
	if ch := f.placing[idx]; ch != nil {
		close(ch)
		delete(f.placing, idx)
	}
	f.mu.Unlock()
}

func (f *file) lookup(idx uint64) (wire.ChunkLoc, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	loc, ok := f.chunks[idx]
	return loc, ok
}

func (s *Server) loadLayout(ctx context.Context, ino uint64, f *file) error {
	for {
		f.mu.Lock()
		gen := f.gen
		f.mu.Unlock()
		resp, _, err := s.meta.Call(ctx, &wire.Msg{Op: wire.OpLayout, Ino: ino}, nil, nil)
		if err != nil {
			return err
		}
		f.mu.Lock()
		if f.gen != gen {
			// a truncate adopted meanwhile: the answer may predate it and
			// name places of chunks it cut; one asked for now cannot
			f.mu.Unlock()
			continue
		}
		for _, c := range resp.Chunks {
			f.chunks[c.Idx] = c
		}
		f.loaded = true
		f.mu.Unlock()
		return nil
	}
}
