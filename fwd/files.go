package fwd

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
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
	// closed says the last open through this daemon was closed: the
	// state goes once nothing else keeps it (retireLocked)
	closed bool
	// pins counts the requests under way that hold this state (holdFile
	// to letGo): it is not let go under them, which would record a
	// write's growth or servers in a state nobody reports or syncs any
	// more. Guarded by the Server's fmu, not mu.
	pins int
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

// holdExisting returns ino's state, held (letGo lets it go), or nil if
// the daemon has none.
func (s *Server) holdExisting(ino uint64) *file {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[ino]
	if f != nil {
		f.pins++
	}
	return f
}

// letGo ends a hold of ino's state f (holdFile, holdExisting): the last
// hold of a closed file's state retires it if nothing else keeps it.
func (s *Server) letGo(ino uint64, f *file) {
	s.fmu.Lock()
	gone := s.letGoLocked(ino, f)
	s.fmu.Unlock()
	s.syncLater(gone)
}

// letGoAll is letGo for the states fs of files inos, under one lock.
func (s *Server) letGoAll(inos []uint64, fs []*file) {
	var gone []*unsyncedFile
	s.fmu.Lock()
	for i, f := range fs {
		if u := s.letGoLocked(inos[i], f); u != nil {
			gone = append(gone, u)
		}
	}
	s.fmu.Unlock()
	for _, u := range gone {
		s.syncLater(u)
	}
}

// letGoLocked ends a hold of ino's state f and returns what retiring it
// left to sync (retireLocked). Caller holds fmu.
func (s *Server) letGoLocked(ino uint64, f *file) *unsyncedFile {
	f.pins--
	if f.pins > 0 || s.files[ino] != f {
		return nil
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if !closed {
		return nil
	}
	return s.retireLocked(ino, f)
}

func (s *Server) opened(a *wire.Attr) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[a.Ino]
	if f == nil {
		f = s.newFileLocked(a)
	}
	f.mu.Lock()
	f.opens++
	f.closed = false
	f.adoptLocked(a)
	f.mu.Unlock()
}

// openedInBatch counts the opens of the files a write-back batch created
// open (es, but for those the service refused), as opened counts an
// open through this daemon. Their state starts empty from the attributes
// of their directory (dir, whose layout they took), so their first write
// asks the service nothing but the place of its chunk. Without dir (the
// service could not read it back) they are left uncounted.
func (s *Server) openedInBatch(es, refused []ns.BatchEntry, dir *wire.Attr) {
	if dir == nil {
		return
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	for _, e := range es {
		if !e.Open || e.Remove || e.Mode&syscall.S_IFDIR != 0 ||
			slices.ContainsFunc(refused, func(r ns.BatchEntry) bool { return r.Ino == e.Ino }) {
			continue
		}
		f := s.files[e.Ino]
		if f == nil {
			f = s.newFileLocked(&wire.Attr{Ino: e.Ino, ChunkSize: dir.ChunkSize, StripeCnt: dir.StripeCnt, StripeUnit: dir.StripeUnit})
		}
		f.mu.Lock()
		f.opens++
		f.closed = false
		f.mu.Unlock()
	}
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
	// a write to a chunk not known here asks for its place (ns.Alloc
	// answers with the place another daemon gave it, if any), and a read
	// looks up a chunk it does not know anyway
	f.loaded = a.Size == 0
	return f
}

// newFileLocked makes the state of file a.Ino from its attributes and
// what unsynced kept of an earlier state. Caller holds fmu.
func (s *Server) newFileLocked(a *wire.Attr) *file {
	f := newFile(a)
	for _, id := range s.unsynced[a.Ino] {
		if id == 0 {
			f.adopted = true
		} else {
			f.dirty[id] = true
		}
	}
	delete(s.unsynced, a.Ino)
	if r, ok := s.recent[a.Ino]; ok {
		if r.gen == a.Trunc && r.size > f.size {
			f.size = r.size // a reply older than its last report
		}
		f.atime = r.access // still to report, if not 0
		delete(s.recent, a.Ino)
	}
	s.files[a.Ino] = f
	return f
}

// retired is what a state let go knew of its file (Server.recent): its
// size, truncation generation, and its last read or write if not
// reported yet (reportAccess).
type retired struct {
	size, gen uint64
	access    int64
	at        time.Time
}

type retiredAt struct {
	ino uint64
	at  time.Time
}

// rememberLocked records the size of the state of ino let go, and its
// access not reported yet (recent). Caller holds fmu and f.mu.
func (s *Server) rememberLocked(ino uint64, f *file) {
	now := s.cfg.Now()
	r := retired{size: f.size, gen: f.gen, at: now}
	if f.atime > f.atimeSent {
		r.access = f.atime
	}
	s.recent[ino] = r
	s.recentAge = append(s.recentAge, retiredAt{ino, now})
}

// forgetRecent drops from recent the states let go more than two
// Timeouts ago: every call to the metadata service that began before
// has ended.
func (s *Server) forgetRecent() {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	old := s.cfg.Now().Add(-2 * s.cfg.Timeout)
	n := 0
	for n < len(s.recentAge) && s.recentAge[n].at.Before(old) {
		if r := s.recentAge[n]; s.recent[r.ino].at.Equal(r.at) {
			delete(s.recent, r.ino)
		}
		n++
	}
	if n > 0 {
		s.recentAge = append(s.recentAge[:0:0], s.recentAge[n:]...)
	}
}

func (s *Server) release(ino uint64) {
	s.fmu.Lock()
	f := s.files[ino]
	if f == nil {
		s.fmu.Unlock()
		return
	}
	f.mu.Lock()
	f.opens--
	f.closed = f.opens <= 0
	f.mu.Unlock()
	gone := s.retireLocked(ino, f)
	s.fmu.Unlock()
	s.syncLater(gone)
}

// unsyncedFile is a file let go of unsynced: its data servers are synced
// in the background.
type unsyncedFile struct {
	ino uint64
	ids []uint64
}

// retireLocked drops the state of closed file ino (f) if nothing keeps it:
// an open, a request holding it (holdFile), growth not reported, a close
// report owed (the room of its new chunks), chunks that may still move.
// An access not reported yet is kept with its size (recent) until
// reported; the data servers written since
// the last fsync go to unsynced. It returns the file let go of unsynced
// to make room, if any, for syncLater. The open count is not exact (a
// job's forwarding nodes may change between an open and its close), so a
// state may go while a handle is still open: holds, not
// opens, keep a request's growth from landing in a state let go. Caller
// holds fmu.
func (s *Server) retireLocked(ino uint64, f *file) *unsyncedFile {
	f.mu.Lock()
	if f.opens > 0 || f.pins > 0 || f.pending || f.unclosed || len(f.fresh) > 0 || len(f.placing) > 0 {
		f.mu.Unlock()
		return nil
	}
	var ids []uint64
	for id := range f.dirty {
		ids = append(ids, id)
	}
	if f.adopted && len(ids) > 0 {
		ids = append(ids, 0)
	}
	s.rememberLocked(ino, f)
	f.mu.Unlock()
	delete(s.files, ino)
	if len(ids) == 0 {
		return nil
	}
	s.unsynced[ino] = ids
	if len(s.unsynced) <= s.cfg.MaxUnsynced {
		return nil
	}
	for i, ids := range s.unsynced { // any other
		if i != ino {
			delete(s.unsynced, i)
			return &unsyncedFile{i, ids}
		}
	}
	return nil
}

// holdForSync returns ino's state, held (letGo lets it go), or nil if
// the daemon has none; unsynced says whether then its state went with
// writes no fsync synced.
func (s *Server) holdForSync(ino uint64) (f *file, unsynced bool) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if f = s.files[ino]; f != nil {
		f.pins++
		return f, false
	}
	_, unsynced = s.unsynced[ino]
	return nil, unsynced
}

// syncLater has the data servers of u synced in the background; if the
// background is a full queue behind, by the caller (files let go
// unsynced faster than they are synced slow their writers down rather
// than wait in memory).
func (s *Server) syncLater(u *unsyncedFile) {
	if u == nil {
		return
	}
	select {
	case s.syncs <- *u:
	default:
		s.syncUnsynced(s.ctx, *u)
	}
}

// syncLoop syncs the files let go of unsynced in the background.
func (s *Server) syncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-s.syncs:
			s.syncUnsynced(ctx, u)
		}
	}
}

// syncUnsynced syncs the data servers of a file let go of unsynced (its
// writes were never promised to be durable, but an fsync through a later
// open could not find its servers any more); every server holding it for
// a state that was adopted (0 among the servers).
func (s *Server) syncUnsynced(ctx context.Context, u unsyncedFile) {
	ids := u.ids
	if i := slices.Index(ids, 0); i >= 0 {
		ids = slices.Delete(slices.Clone(ids), i, i+1)
		var err error
		if ids, err = s.withLayoutServers(ctx, u.ino, ids); err != nil {
			s.log.Debug("background sync: no layout", "ino", u.ino, "err", err)
			return
		}
	}
	for _, id := range ids {
		if err := s.syncData(ctx, id, u.ino, wire.Who{}); err != nil {
			s.log.Debug("background sync failed", "ino", u.ino, "server", id, "err", err)
		}
	}
}

// withLayoutServers adds to ids every data server that holds a copy of a
// chunk of ino in its layout at the metadata service.
func (s *Server) withLayoutServers(ctx context.Context, ino uint64, ids []uint64) ([]uint64, error) {
	resp, err := rpc.Do(ctx, s.meta, ns.Layout, &ns.FileReq{Ino: ino})
	if err != nil {
		return ids, err
	}
	seen := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	for _, c := range resp.Chunks {
		for _, id := range c.All() {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
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
	s.fmu.Lock()
	f := s.files[a.Ino]
	if f == nil {
		// the state went after this reply was served: what it knew
		// reached the service maybe after that
		// (not the mtime: a setattr may have set it back since, and
		// what the state knew of it went with its last report)
		if r, ok := s.recent[a.Ino]; ok && r.gen == a.Trunc {
			a.Size = max(a.Size, r.size)
		}
		s.fmu.Unlock()
		return
	}
	s.fmu.Unlock()
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

// getattr asks the metadata service for inode ino's attributes.
func (s *Server) getattr(ctx context.Context, ino uint64) (*wire.Attr, error) {
	rep, err := rpc.Do(ctx, s.meta, ns.Getattr, &ns.InoReq{Ino: ino})
	if err != nil {
		return nil, err
	}
	if rep.Attr == nil {
		return nil, rpc.Errorf(syscall.EIO, "metadata service: no attributes of inode %d", ino)
	}
	return rep.Attr, nil
}

// refresh learns the file's attributes from the metadata service after a
// data server or the service refused a request of generation stale: a
// truncate came in between. It fails if the generation did not move.
func (s *Server) refresh(ctx context.Context, ino uint64, f *file, stale uint64, cause error) error {
	a, err := s.getattr(ctx, ino)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.adoptLocked(a)
	moved := f.gen > stale
	f.mu.Unlock()
	if !moved {
		return rpc.Errorf(syscall.EIO, "inode %d: refused as truncated, but the metadata service knows no newer truncation: %v", ino, cause)
	}
	return nil
}

// holdFile returns ino's state, held until letGo, loading its
// attributes when the daemon has none (a client that opened the file
// through another daemon, or a state let go since).
func (s *Server) holdFile(ctx context.Context, ino uint64) (*file, error) {
	if f := s.holdExisting(ino); f != nil {
		return f, nil
	}
	a, err := s.getattr(ctx, ino)
	if err != nil {
		return nil, err
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	f := s.files[ino]
	if f == nil {
		f = s.newFileLocked(a)
		f.adopted = true
	}
	f.pins++
	return f, nil
}

// fileFor is holdFile for a request that records nothing in the state
// that must not be lost if it goes meanwhile (a read: its access time).
func (s *Server) fileFor(ctx context.Context, ino uint64) (*file, error) {
	f, err := s.holdFile(ctx, ino)
	if err != nil {
		return nil, err
	}
	s.letGo(ino, f)
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
		resp, err := rpc.Do(ctx, s.meta, ns.Layout, &ns.FileReq{Ino: ino})
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
