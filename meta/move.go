package meta

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/layout"
	"github.com/sluice-hpc/sluice/meta/drops"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Chunk migration, the coordinator's side (docs/tiering.md; data/move.go
// has the data servers' side). One chunk moves at a time per chunk:
//
//  1. Intent: 'M' ino idx records the move (session, source and
//     destination groups, state Copying) in a commit of its own, synced.
//  2. The destination group's first member copies the chunk
//     (chunk.MoveCopy): it opens a session at the sources, copies, stops the
//     sources, copies what was written meanwhile and fsyncs.
//  3. Commit: in one batch, the chunk's location becomes the destination
//     with the layout generation plus one, and the intent's state
//     Committed. It is refused (and the move aborted) when anything
//     changed the chunk since the intent: its location or generation,
//     a truncation (pending trims on the sources, or a new truncation
//     generation), or the file's deletion.
//  4. Ends: the sources are told (they fence and drop their copy, or
//     serve the chunk again); on abort the destinations drop the copy.
//     When every server has acknowledged, the intent is deleted; until
//     then FinishMoves resends the ends (a server that was down), and a
//     source that restarts with a stopped chunk asks (MoveState).
//
// After a restart of the metadata daemon an intent still Copying has no
// coordinator left: FinishMoves aborts it.

// MoveState is where a chunk migration is.
type MoveState byte

const (
	MoveCopying   MoveState = 'c'
	MoveCommitted MoveState = 'C'
	MoveAborted   MoveState = 'A'
)

// MoveIntent is a chunk migration the service has recorded.
type MoveIntent struct {
	Ino, Idx              uint64
	Session               uint64
	State                 MoveState
	From, To              wire.ChunkLoc
	Trunc                 uint64 // the file's truncation generation at the intent
	ChunkSize, StripeUnit uint32
	// Keep: a copy, not a move. The source keeps the chunk and To becomes
	// its replica group (re-replication, replica.go) or, on the pfs tier,
	// its home (a drain with --keep-cache).
	Keep bool
	// Clean: the chunk goes to its home, which has its bytes already (a
	// clean cache evicted): nothing is copied but what is written during
	// the move.
	Clean bool
}

// committedLoc is the chunk's location once mi is committed.
func (mi MoveIntent) committedLoc() wire.ChunkLoc {
	switch {
	case mi.Keep && mi.To.Tier == mi.From.Tier: // a replica made again
		return wire.ChunkLoc{Idx: mi.Idx, Tier: mi.From.Tier, Servers: mi.From.Servers, Replicas: mi.To.Servers, Gen: mi.To.Gen}
	case mi.Keep: // drained with --keep-cache: the copy on the PFS is its home
		return wire.ChunkLoc{Idx: mi.Idx, Tier: mi.From.Tier, Servers: mi.From.Servers, Replicas: mi.From.Replicas,
			Home: mi.To.Servers, Gen: mi.To.Gen}
	}
	return mi.To
}

func moveKey(ino, idx uint64) []byte {
	return binary.BigEndian.AppendUint64(key1(pMove, ino), idx)
}

func (mi MoveIntent) encode() []byte { return encodeRecord(&mi) }

func decodeMove(b []byte) (MoveIntent, error) {
	var mi MoveIntent
	err := decodeRecord(b, &mi, func(m *legacyMsg) error {
		if len(m.Chunks) != 2 {
			return errCorrupt
		}
		mi = MoveIntent{Ino: m.Ino, Idx: m.Idx, Session: m.Handle, State: MoveState(m.Flags), Trunc: m.Trunc,
			ChunkSize: m.ChunkSize, StripeUnit: m.StripeUnit, From: m.Chunks[0], To: m.Chunks[1], Keep: m.Name == "keep", Clean: m.Name == "clean"}
		return nil
	})
	return mi, err
}

func (s *Service) getMove(ino, idx uint64) (MoveIntent, bool, error) {
	v, err := s.e.Get(moveKey(ino, idx))
	if errors.Is(err, engine.ErrNotFound) {
		return MoveIntent{}, false, nil
	}
	if err != nil {
		return MoveIntent{}, false, err
	}
	mi, err := decodeMove(v)
	return mi, err == nil, err
}

// Moves lists the recorded chunk migrations.
func (s *Service) Moves() ([]MoveIntent, error) {
	return s.movesUnder([]byte{pMove})
}

// MovesOf lists the recorded chunk migrations of file ino (not finished:
// copying, or decided and not yet acknowledged by every server).
func (s *Service) MovesOf(ino uint64) ([]MoveIntent, error) {
	return s.movesUnder(key1(pMove, ino))
}

// moveStates names the states of a migration in api.ChunkMove.
var moveStates = map[MoveState]string{MoveCopying: "copying", MoveCommitted: "committed", MoveAborted: "aborted"}

// ChunkMoves is MovesOf as the tiering manager's contract has it.
func (s *Service) ChunkMoves(ino uint64) ([]api.ChunkMove, error) {
	mis, err := s.MovesOf(ino)
	out := make([]api.ChunkMove, 0, len(mis))
	for _, mi := range mis {
		out = append(out, api.ChunkMove{Idx: mi.Idx, State: moveStates[mi.State], From: mi.From.Tier, To: mi.To.Tier, Servers: mi.To.Servers})
	}
	return out, err
}

func (s *Service) movesUnder(prefix []byte) ([]MoveIntent, error) {
	var out []MoveIntent
	var derr error
	s.e.Scan(prefix, nil, func(_, v []byte) bool {
		mi, err := decodeMove(v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, mi)
		return true
	})
	return out, derr
}

func newSession() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// beginMove records the intent to move chunk idx of ino to the group
// servers of tier (keep: to copy it there as its replica group).
func (s *Service) beginMove(ino, idx uint64, tier string, servers []uint64, keep, clean bool) (MoveIntent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.getInode(ino)
	if err != nil {
		return MoveIntent{}, err
	}
	if _, busy, err := s.getMove(ino, idx); err != nil || busy {
		if err == nil {
			err = errno(syscall.EBUSY, "chunk %d of inode %d is migrating already", idx, ino)
		}
		return MoveIntent{}, err
	}
	from, err := s.chunkLoc(ino, idx)
	if err != nil {
		return MoveIntent{}, err
	}
	if anyIn(append(from.All(), from.Home...), servers) && !clean {
		return MoveIntent{}, errno(syscall.EINVAL, "chunk %d of inode %d: destination %v overlaps its servers %v (home %v)", idx, ino,
			servers, from.All(), from.Home)
	}
	switch {
	case clean && !sameServers(servers, from.Home):
		return MoveIntent{}, errno(syscall.EINVAL, "chunk %d of inode %d: only a chunk's home %v takes it without a copy, not %v", idx, ino, from.Home, servers)
	case keep && tier == from.Tier && (len(from.Replicas) > 0 || len(servers) != len(from.Servers)):
		return MoveIntent{}, errno(syscall.EINVAL, "chunk %d of inode %d: a replica of %v on %s %v", idx, ino, from, tier, servers)
	case keep && tier != from.Tier && (tier != "pfs" || len(from.Home) > 0):
		return MoveIntent{}, errno(syscall.EINVAL, "chunk %d of inode %d: a home copy of %v on %s %v", idx, ino, from, tier, servers)
	}
	for _, id := range s.drops.Servers(ino, idx) {
		if anyIn([]uint64{id}, servers) {
			// the drop it is owed would delete what the move puts there
			return MoveIntent{}, errno(syscall.EAGAIN, "chunk %d of inode %d: data server %d still owes a drop of its old copy", idx, ino, id)
		}
	}
	mi := MoveIntent{Ino: ino, Idx: idx, Session: newSession(), State: MoveCopying, From: from,
		To:    wire.ChunkLoc{Idx: idx, Tier: tier, Servers: servers, Gen: from.Gen + 1},
		Trunc: n.Trunc, ChunkSize: n.ChunkSize, StripeUnit: n.StripeUnit, Keep: keep, Clean: clean}
	if mi.StripeUnit == 0 || mi.StripeUnit > mi.ChunkSize {
		mi.StripeUnit = mi.ChunkSize
	}
	var b engine.Batch
	b.Set(moveKey(ino, idx), mi.encode())
	if err := s.e.Apply(&b, true); err != nil {
		return MoveIntent{}, err
	}
	s.moving[chunkRef{ino, idx}] = true
	return mi, nil
}

type chunkRef struct{ ino, idx uint64 }

// commitMove switches the chunk to its destination, unless something
// changed it since the intent (then the move is aborted and the reason
// returned).
func (s *Service) commitMove(mi MoveIntent) (path string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reason := s.moveConflictLocked(mi)
	var b engine.Batch
	if reason != "" {
		mi.State = MoveAborted
		b.Set(moveKey(mi.Ino, mi.Idx), mi.encode())
		if err := s.e.Apply(&b, true); err != nil {
			return "", err
		}
		return "", errno(syscall.EAGAIN, "migration of chunk %d of inode %d aborted: %s", mi.Idx, mi.Ino, reason)
	}
	mi.State = MoveCommitted
	b.Set(layoutKey(mi.Ino, mi.Idx), encodeChunk(mi.committedLoc()))
	if !mi.Keep && !mi.Clean {
		// a home left behind is stale now: it drops its copy
		for _, id := range mi.From.Home {
			s.drops.Add(&b, mi.Ino, mi.Idx, id, mi.To.Gen)
		}
	}
	b.Set(moveKey(mi.Ino, mi.Idx), mi.encode())
	if err := s.e.Apply(&b, true); err != nil {
		return "", err
	}
	if mi.To.Tier == "pfs" {
		path = s.pfsPathLocked(mi.Ino, 0, "")
	}
	return path, nil
}

// moveConflictLocked says why mi may not be committed ("" if it may).
// Caller holds mu.
func (s *Service) moveConflictLocked(mi MoveIntent) string {
	cur, ok, err := s.getMove(mi.Ino, mi.Idx)
	if err != nil || !ok || cur.Session != mi.Session || cur.State != MoveCopying {
		return "the intent is gone or was aborted"
	}
	n, err := s.getInode(mi.Ino)
	if err != nil {
		return "the file is gone"
	}
	if _, err := s.e.Get(garbageKey(mi.Ino)); err == nil {
		return "the file was deleted"
	}
	if n.Trunc != mi.Trunc {
		return "the file was truncated"
	}
	loc, err := s.chunkLoc(mi.Ino, mi.Idx)
	if err != nil {
		return "the chunk has no location"
	}
	if loc.Gen != mi.From.Gen || !sameServers(loc.All(), mi.From.All()) || !sameServers(loc.Home, mi.From.Home) {
		return "the chunk moved meanwhile"
	}
	for _, id := range mi.From.All() {
		found := false
		s.e.Scan(trimPrefix(id, mi.Ino), nil, func(_, _ []byte) bool {
			found = true
			return false
		})
		if found {
			return "a truncation of the file is pending on a source"
		}
	}
	return ""
}

func sameServers(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// setMoveState records that mi ended in state st (a coordinator that
// failed before the commit).
func (s *Service) setMoveState(mi MoveIntent, st MoveState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok, err := s.getMove(mi.Ino, mi.Idx)
	if err != nil || !ok || cur.Session != mi.Session || cur.State != MoveCopying {
		return err
	}
	cur.State = st
	var b engine.Batch
	b.Set(moveKey(mi.Ino, mi.Idx), cur.encode())
	return s.e.Apply(&b, true)
}

// MoveChunk migrates chunk idx of ino to the group servers of tier, with
// the whole protocol above. It returns when the chunk is at the
// destination (nil) or stays where it was (an error saying why). A move
// whose ends could not all be delivered is finished by FinishMoves. A
// chunk with a replica group moves whole: the destination gets one copy
// (re-replication adds the second if the tier keeps two), and the
// replicas are dropped with the source.
func (s *Service) MoveChunk(ctx context.Context, ino, idx uint64, tier string, servers []uint64) (bytes uint64, err error) {
	return s.moveChunk(ctx, ino, idx, tier, servers, false)
}

// CopyChunk copies chunk idx of ino to the pfs-tier group servers, which
// becomes its home while the chunk stays where it is as a clean cache (a
// drain with --keep-cache). It returns the bytes copied.
func (s *Service) CopyChunk(ctx context.Context, ino, idx uint64, servers []uint64) (uint64, error) {
	return s.moveChunk(ctx, ino, idx, "pfs", servers, true)
}

// EvictChunk drops the cached copy of chunk idx of ino, which has a home
// on the pfs tier: the chunk's location becomes its home, and only what is
// written meanwhile is copied (the migration protocol with nothing else
// to copy). It returns the bytes copied.
func (s *Service) EvictChunk(ctx context.Context, ino, idx uint64) (uint64, error) {
	loc, err := s.chunkLoc(ino, idx)
	if err != nil {
		return 0, err
	}
	if len(loc.Home) == 0 {
		return 0, errno(syscall.EAGAIN, "chunk %d of inode %d has no clean copy on the PFS (written since its drain)", idx, ino)
	}
	return s.moveChunkAs(ctx, ino, idx, "pfs", loc.Home, false, true)
}

func (s *Service) moveChunk(ctx context.Context, ino, idx uint64, tier string, servers []uint64, keep bool) (bytes uint64, err error) {
	return s.moveChunkAs(ctx, ino, idx, tier, servers, keep, false)
}

func (s *Service) moveChunkAs(ctx context.Context, ino, idx uint64, tier string, servers []uint64, keep, clean bool) (bytes uint64, err error) {
	mi, err := s.beginMove(ino, idx, tier, servers, keep, clean)
	if err != nil {
		return 0, err
	}
	defer func() {
		s.mu.Lock()
		delete(s.moving, chunkRef{ino, idx})
		s.mu.Unlock()
	}()
	var who []wire.ServerInfo
	for _, si := range s.Servers() {
		if anyIn([]uint64{si.ID}, mi.From.Servers) || anyIn([]uint64{si.ID}, mi.To.Servers) {
			who = append(who, wire.ServerInfo{ID: si.ID, Addr: si.Addr})
		}
	}
	resp, err := callData(ctx, &s.reg, servers[0], chunk.MoveCopy, &chunk.MoveCopyReq{ID: chunk.ID{Ino: ino, Idx: idx, ChunkSize: mi.ChunkSize},
		StripeUnit: mi.StripeUnit, Session: mi.Session, Trunc: mi.Trunc, From: mi.From, To: mi.To, Servers: who, Clean: clean})
	var path string
	if err == nil {
		if path, err = s.commitMove(mi); err == nil {
			s.faults.Pass(ctx, s.log, "move-committed")
		}
	} else {
		if rpc.Errno(err) == syscall.ESTALE {
			err = errno(syscall.EAGAIN, "the file was truncated during the copy: %v", err)
		}
		err = fmt.Errorf("migration of chunk %d of inode %d to %s %v: %w", idx, ino, tier, servers, err)
		if serr := s.setMoveState(mi, MoveAborted); serr != nil {
			return 0, serr
		}
	}
	if err == nil {
		mi.State = MoveCommitted
	} else {
		mi.State = MoveAborted
	}
	if path != "" {
		// the drained file's plain file gets its owner, mode and times
		var attr *wire.Attr
		var size uint64
		if n, aerr := s.getInode(ino); aerr == nil {
			attr, size = &n.Attr, n.Size
		}
		for _, id := range mi.To.Servers {
			if _, lerr := callData(ctx, &s.reg, id, chunk.PfsLink, &chunk.PfsLinkReq{Ino: ino, Path: path, Attr: attr, Size: size}); lerr != nil {
				s.log.Warn("pfs link failed", "ino", ino, "path", path, "err", lerr)
			}
		}
	}
	s.finishMove(ctx, mi)
	if err != nil {
		return 0, err
	}
	if len(mi.From.Home) > 0 && !mi.Keep && !mi.Clean {
		s.deliverDrops(ctx, func() []drops.Drop { return s.drops.Of(ino, idx) }) // the stale home (or later: DeliverDrops)
	}
	if !mi.Keep {
		s.reg.moved(mi.From.Servers, mi.To.Servers, int64(mi.ChunkSize), int64(mi.StripeUnit))
		s.reg.moved(mi.From.Replicas, nil, int64(mi.ChunkSize), int64(mi.StripeUnit))
	} else {
		s.reg.moved(nil, mi.To.Servers, int64(mi.ChunkSize), int64(mi.StripeUnit))
	}
	return resp.Len, nil
}

// finishMove delivers mi's ends and forgets it once every server has
// acknowledged; otherwise it stays for FinishMoves.
func (s *Service) finishMove(ctx context.Context, mi MoveIntent) bool {
	committed := mi.State == MoveCommitted
	end := chunk.MoveEndReq{ID: chunk.ID{Ino: mi.Ino, Idx: mi.Idx, ChunkSize: mi.ChunkSize}, Session: mi.Session,
		Committed: committed, Keep: committed && mi.Keep, Layout: mi.To.Gen}
	ok := true
	owed := s.drops.Servers(mi.Ino, mi.Idx)
	send := func(id uint64, role string) {
		if anyIn([]uint64{id}, owed) {
			return // its copy was given up: the drop it is owed ends everything there
		}
		m := end
		m.Source = role == "src"
		if _, err := callData(ctx, &s.reg, id, chunk.MoveEnd, &m); err != nil {
			s.log.Warn("migration end not delivered; will retry", "ino", mi.Ino, "chunk", mi.Idx, "server", id, "role", role, "err", err)
			ok = false
		}
	}
	for _, id := range mi.From.Servers {
		send(id, "src")
	}
	if committed {
		// the replicas of a moved chunk are fenced and dropped with it
		// (with no session there: nothing else to end)
		for _, id := range mi.From.Replicas {
			send(id, "src")
		}
	} else if !mi.Clean {
		for _, id := range mi.To.Servers {
			send(id, "dst")
		}
	}
	// (the destination of an eviction that failed is the chunk's home: its
	// clean copy stays, untouched by the move, since a write to the chunk
	// gives the home up first and the truncates trim it too. Dropping it
	// there left the chunk a home of zeros for its next eviction.)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var b engine.Batch
	if cur, found, _ := s.getMove(mi.Ino, mi.Idx); found && cur.Session == mi.Session {
		b.Del(moveKey(mi.Ino, mi.Idx))
	}
	return s.e.Apply(&b, false) == nil
}

// FinishMoves ends the migrations no coordinator is running: it aborts
// those still copying (their coordinator died with an earlier run of the
// service) and delivers the ends of every decided one. The tiering
// manager calls it at start and periodically.
func (s *Service) FinishMoves(ctx context.Context) (pending int) {
	all, err := s.Moves()
	if err != nil {
		s.log.Warn("reading migration intents failed", "err", err)
		return 0
	}
	for _, mi := range all {
		s.mu.Lock()
		running := s.moving[chunkRef{mi.Ino, mi.Idx}]
		s.mu.Unlock()
		if running {
			continue
		}
		if mi.State == MoveCopying {
			if err := s.setMoveState(mi, MoveAborted); err != nil {
				continue
			}
			mi.State = MoveAborted
		}
		if !s.finishMove(ctx, mi) {
			pending++
		}
	}
	return pending
}

// MoveStateOf answers a data server (server) asking how migration session
// of chunk idx of ino, which it stopped, ended (ns.MoveState).
func (s *Service) MoveStateOf(server, ino, idx, session uint64) *ns.MoveStateRep {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &ns.MoveStateRep{}
	if n, err := s.getInode(ino); err == nil {
		r.ChunkSize = n.ChunkSize
	}
	if mi, ok, err := s.getMove(ino, idx); err == nil && ok && mi.Session == session {
		switch {
		case mi.State == MoveCommitted:
			r.State, r.Layout, r.Keep = ns.MoveCommitted, mi.To.Gen, mi.Keep
			return r
		case mi.State == MoveAborted:
			r.State = ns.MoveAborted
			return r
		case s.moving[chunkRef{ino, idx}]:
			r.State = ns.MovePending
			return r
		}
		// copying with no coordinator: FinishMoves will abort it
		r.State = ns.MovePending
		return r
	}
	// no such migration in flight: the chunk's location says
	v, err := s.e.Get(layoutKey(ino, idx))
	if err != nil {
		r.State, r.Layout = ns.MoveCommitted, 1<<62 // the chunk is gone
		return r
	}
	loc, err := decodeChunk(v)
	if err != nil {
		r.State = ns.MovePending
		return r
	}
	if anyIn([]uint64{server}, loc.Servers) {
		// still the chunk's (after a copy too: then its fence, set by
		// the end it got, already keeps older requests out)
		r.State = ns.MoveAborted
	} else {
		r.State, r.Layout = ns.MoveCommitted, loc.Gen
	}
	return r
}

// FileUse is how much of one file one data server holds.
type FileUse = api.FileUse

// ServerFiles returns, per data server, the files it holds chunks of and
// an estimate of the bytes (from each file's size and striping: a server
// holds its members' share of each chunk). One scan of every location;
// the tiering manager calls it only for servers short of space.
func (s *Service) ServerFiles() (map[uint64][]FileUse, error) {
	per := map[uint64]map[uint64]uint64{}
	inodes := map[uint64]*inode{}
	var derr error
	s.e.Scan([]byte{pLayout}, nil, func(k, v []byte) bool {
		if len(k) != 17 {
			return true
		}
		ino := binary.BigEndian.Uint64(k[1:])
		loc, err := decodeChunk(v)
		if err != nil {
			derr = err
			return false
		}
		n, seen := inodes[ino]
		if !seen {
			n, _ = s.getInode(ino)
			inodes[ino] = n
		}
		if n == nil {
			return true
		}
		cs := uint64(n.ChunkSize)
		start := loc.Idx * cs
		if start >= n.Size {
			return true
		}
		unit := int64(n.StripeUnit)
		if unit <= 0 || unit > int64(cs) {
			unit = int64(cs)
		}
		for i, id := range loc.All() {
			if per[id] == nil {
				per[id] = map[uint64]uint64{}
			}
			// what the server charges the chunk against its budget: its
			// whole local share, however little of it is written
			// (replica member i mirrors member i)
			g := len(loc.Servers)
			per[id][ino] += uint64(layout.LocalSize(i%g, g, unit, int64(cs)))
		}
		return true
	})
	out := map[uint64][]FileUse{}
	for id, files := range per {
		for ino, b := range files {
			out[id] = append(out[id], FileUse{Ino: ino, Bytes: b})
		}
	}
	return out, derr
}
