package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Create delegations (write-back creates). A mount may hold the delegation
// of a directory: while it does, it creates regular files and directories
// there by itself — answering the application at once, with inode numbers
// the service handed it — and sends them in batches (ns.CreateBatch), some
// milliseconds later. A directory made that way is delegated to its maker
// from birth (nobody else can know it before the batch that makes it), so
// a tree is made and removed without a round trip per directory.
// No other client may see or change the directory meanwhile: any request
// from another client that names the directory (a lookup, create, removal
// or rename in it, a listing, a getattr or setattr of it, its removal)
// first recalls the delegation through the change feed (ns.ChangeRecall)
// and waits until the holder has sent its creates and given the delegation
// back (ns.Undelegate), or RecallWait has passed (the holder is dead: its
// unsent creates are lost, as a crashed client's unsynced work is). A
// directory recalled is not delegated again for DelegCooldown, so two
// clients that share a directory fall back to ordinary creates.
//
// Owned files. A regular file created in a batch as Owned (ns.BatchEntry)
// belongs to the delegation it was made under: the holder keeps its bytes
// and answers read-only opens and reads of it by itself
// (client/vfs/owned.go). Nobody else can know the file before the batch,
// and afterwards only by naming it in the directory (which recalls), or
// from a change feed that told another mount the new name: so an open, a
// getattr and a size change of an owned file by another client recall the
// delegation too (the holder may have closed it with its writes and size
// still on their way: write-back closes), and the holder sends those and
// gives the file up before it gives the delegation back. The files go
// with the delegation.
//
// A delegation is kept in the engine too ('E' dir → holder), written in
// the batch that grants it (with its inode numbers, or the batch that
// makes the directory) and removed when it ends. A server that starts on
// the engine (a restart, a standby taking over) takes every delegation it
// finds as recalled: another client's request that names the directory,
// or a file in it, waits until the holder — told by the feed that it
// lost changes — has sent what it holds and given the delegation back,
// or RecallWait has passed. The owned files of such a delegation are
// found by their parent directory.

// The protocol's numbers (wire): RecallWait bounds how long a request
// waits for a recalled delegation, DelegCooldown how long a recalled
// directory is not delegated again, DelegInos how many inode numbers a
// delegation hands out.
const (
	RecallWait    = wire.RecallWait
	DelegCooldown = wire.DelegCooldown
	DelegInos     = wire.DelegInos
)

type delegation struct {
	client   uint64
	gone     chan struct{} // closed when the delegation ends
	recalled bool
	restored bool     // found in the engine at the start (recalled)
	owned    []uint64 // files created owned under it (delegs.file)
}

type delegs struct {
	n        atomic.Int64 // delegations held: requests skip the check when 0
	restored atomic.Int64 // of them, found in the engine at the start
	// grantMu orders grants against requests that name directories: such
	// a request holds it shared from its check of the delegations until
	// its changes are in the feed; a grant holds it exclusively.
	grantMu sync.RWMutex
	mu      sync.Mutex // guards dir, cool, file and every delegation's fields but gone
	dir     map[uint64]*delegation
	cool    map[uint64]time.Time // directory → when it may be delegated again
	// file maps an owned file to the directory whose delegation owns it
	file map[uint64]uint64
}

// Delegate grants client the delegation of directory dir (kept if it holds
// it already) and hands it DelegInos inode numbers from the returned one.
// The returned position is that of the last change another client made
// to a name in the directory before the grant (0: none the feed keeps):
// once the holder has followed the feed that far, what it knows of the
// directory is complete until it gives the delegation back. A directory delegated to another
// client, or recalled recently, is refused with EBUSY.
func (s *Service) Delegate(client, dir uint64) (first, pos uint64, err error) {
	if client == 0 {
		return 0, 0, errno(syscall.EINVAL, "delegation without a client id")
	}
	if _, err := s.getDir(dir); err != nil {
		return 0, 0, err
	}
	d := &s.deleg
	d.grantMu.Lock()
	defer d.grantMu.Unlock()
	pos = s.feed.lastOther(client, dir)
	d.mu.Lock()
	if h := d.dir[dir]; h != nil && h.client != client {
		d.mu.Unlock()
		return 0, 0, errno(syscall.EBUSY, "directory %d is delegated to another client", dir)
	}
	if until, ok := d.cool[dir]; ok {
		if s.now().Before(until) {
			d.mu.Unlock()
			return 0, 0, errno(syscall.EBUSY, "directory %d was recalled just now", dir)
		}
		delete(d.cool, dir)
	}
	fresh := d.dir[dir] == nil
	if fresh {
		d.dir[dir] = &delegation{client: client, gone: make(chan struct{})}
		d.n.Add(1)
	}
	d.mu.Unlock()
	var b engine.Batch
	if fresh {
		b.Set(delegKey(dir), binary.BigEndian.AppendUint64(nil, client))
	}
	first, err = s.allocInos(DelegInos, &b)
	return first, pos, err
}

// allocInos reserves n inode numbers and returns the first, committing
// them with b.
func (s *Service) allocInos(n uint64, b *engine.Batch) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.e.Get(counterKey("ino"))
	if err != nil {
		return 0, err
	}
	first := binary.BigEndian.Uint64(v) + 1
	b.Set(counterKey("ino"), binary.BigEndian.AppendUint64(nil, first+n-1))
	return first, s.e.Apply(b, false)
}

// keepDelegs records in b that client holds the delegations of dirs
// (made delegated to their maker, a client, or 0: none).
func keepDelegs(b *engine.Batch, client uint64, dirs []uint64) {
	if client == 0 {
		return
	}
	for _, ino := range dirs {
		b.Set(delegKey(ino), binary.BigEndian.AppendUint64(nil, client))
	}
}

// restoreDelegs takes the delegations the engine holds as recalled (New).
func (s *Service) restoreDelegs() error {
	d := &s.deleg
	var gone engine.Batch
	var err error
	s.e.Scan([]byte{pDeleg}, nil, func(k, v []byte) bool {
		dir := binary.BigEndian.Uint64(k[1:])
		if len(v) != 8 {
			gone.Del(k)
			return true
		}
		if _, err = s.getDir(dir); err != nil {
			if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
				return false
			}
			err = nil
			gone.Del(append([]byte(nil), k...))
			return true
		}
		d.dir[dir] = &delegation{client: binary.BigEndian.Uint64(v), gone: make(chan struct{}), recalled: true, restored: true}
		d.n.Add(1)
		d.restored.Add(1)
		return true
	})
	if err != nil {
		return err
	}
	if n := d.restored.Load(); n > 0 {
		s.log.Info("directory delegations held before the start: recalled, each waits for its holder to give it back", "delegations", n)
	}
	return s.e.Apply(&gone, false)
}

// dropDeleg ends the delegation of directory dir, removed (by its holder:
// any other client's removal recalled it first).
func (s *Service) dropDeleg(dir uint64) {
	d := &s.deleg
	if d.n.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if h := d.dir[dir]; h != nil {
		d.forgetLocked(h)
		delete(d.dir, dir)
		d.n.Add(-1)
		if h.restored {
			d.restored.Add(-1)
		}
		close(h.gone)
	}
}

// forgetLocked drops the owned files of h. Caller holds d.mu.
func (d *delegs) forgetLocked(h *delegation) {
	for _, ino := range h.owned {
		delete(d.file, ino)
	}
	h.owned = nil
}

// Undelegate ends client's delegation of dir, if it holds it.
func (s *Service) Undelegate(client, dir uint64) {
	d := &s.deleg
	d.mu.Lock()
	defer d.mu.Unlock()
	if h := d.dir[dir]; h != nil && h.client == client {
		s.endDelegLocked(dir, h)
	}
}

func (s *Service) endDelegLocked(dir uint64, h *delegation) {
	s.deleg.forgetLocked(h)
	delete(s.deleg.dir, dir)
	s.deleg.n.Add(-1)
	if h.restored {
		s.deleg.restored.Add(-1)
	}
	var b engine.Batch
	b.Del(delegKey(dir))
	if err := s.e.Apply(&b, false); err != nil {
		// the next server takes it as recalled, and its holder gone
		s.log.Warn("forgetting a delegation in the engine", "dir", dir, "err", err)
	}
	close(h.gone)
	if h.recalled {
		s.deleg.cool[dir] = s.now().Add(DelegCooldown)
	}
}

// recallWait recalls the delegations of dirs that a client other than
// client holds, and waits until they are given back or lapse.
func (s *Service) recallWait(ctx context.Context, client uint64, dirs []uint64) {
	for _, dir := range dirs {
		d := &s.deleg
		d.mu.Lock()
		h := d.dir[dir]
		if h == nil || h.client == client {
			d.mu.Unlock()
			continue
		}
		if !h.recalled {
			h.recalled = true
			s.feed.add(0, ns.Change{Kind: ns.ChangeRecall, Ino: dir, Holder: h.client})
		}
		d.mu.Unlock()
		t := time.NewTimer(RecallWait)
		select {
		case <-h.gone:
		case <-ctx.Done():
		case <-t.C:
			d.mu.Lock()
			if d.dir[dir] == h {
				s.log.Warn("delegation recalled without answer: revoked (the holder's unsent creates are lost)",
					"dir", dir, "client", h.client, "wait", RecallWait)
				s.endDelegLocked(dir, h)
			}
			d.mu.Unlock()
		}
		t.Stop()
	}
}

// CreateBatch makes the regular files and directories a delegation holder
// (client) created in directory parent: each entry's Name, Ino (one of the
// numbers handed to it) and Mode (permission bits, with S_IFDIR for a
// directory; Open: a file still open, Owned: its bytes kept by the
// holder), owned by uid and gid, created at t. A directory is delegated to
// client as it is made. It returns the entries that could not be made
// (their Errno set), having made the others in one commit.
func (s *Service) CreateBatch(client, parent uint64, es []ns.BatchEntry, uid, gid uint32, t int64) ([]ns.BatchEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.getDir(parent)
	if err != nil {
		return nil, err
	}
	var failed []ns.BatchEntry
	fail := func(e ns.BatchEntry, err error) {
		e.Errno = uint32(rpc.Errno(err))
		failed = append(failed, e)
	}
	var b engine.Batch
	seen := map[string]bool{}
	var opened, dirs, owned []uint64
	for _, e := range es {
		if err := validName(e.Name); err != nil {
			fail(e, err)
			continue
		}
		if ino, _, err := s.lookupEntry(parent, e.Name); err == nil || seen[e.Name] {
			if !seen[e.Name] && ino == e.Ino { // made by an earlier send whose answer was lost (the number is the holder's alone)
				seen[e.Name] = true
				continue
			}
			fail(e, errno(syscall.EEXIST, "%q exists", e.Name))
			continue
		}
		if _, err := s.e.Get(inodeKey(e.Ino)); err == nil || e.Ino == 0 {
			fail(e, errno(syscall.EINVAL, "inode %d is taken", e.Ino))
			continue
		}
		seen[e.Name] = true
		n := &inode{Attr: wire.Attr{Ino: e.Ino, Mode: syscall.S_IFREG | e.Mode&0o7777, Nlink: 1, Uid: uid, Gid: gid,
			Atime: t, Mtime: t, Ctime: t, ChunkSize: dir.ChunkSize, StripeCnt: dir.StripeCnt,
			StripeUnit: dir.StripeUnit}, Parent: parent, Name: e.Name}
		if isDir(e.Mode) { // as Create makes a directory
			n.Mode, n.Nlink = syscall.S_IFDIR|e.Mode&0o7777, 2
			dir.Nlink++
			dirs = append(dirs, e.Ino)
		}
		if dir.Mode&syscall.S_ISGID != 0 {
			n.Gid = dir.Gid
			if isDir(n.Mode) {
				n.Mode |= syscall.S_ISGID
			}
		}
		b.Set(inodeKey(e.Ino), n.encode())
		b.Set(dentryKey(parent, e.Name), encodeDentry(e.Ino, n.Mode))
		if e.Open && !isDir(e.Mode) {
			opened = append(opened, e.Ino)
		}
		if e.Owned && !isDir(e.Mode) {
			owned = append(owned, e.Ino)
		}
	}
	if len(seen) == 0 {
		return failed, nil
	}
	if t > dir.Mtime {
		dir.Mtime, dir.Ctime = t, t
	}
	b.Set(inodeKey(parent), dir.encode())
	keepDelegs(&b, client, dirs)
	if err := s.e.Apply(&b, false); err != nil {
		return nil, err
	}
	for _, ino := range opened {
		if s.opens.open(client, ino) {
			s.openedLocked(ino, time.Unix(0, t))
		}
	}
	if client != 0 && len(dirs)+len(owned) > 0 {
		// delegated from birth: no other client can name a directory
		// before this commit (its number was the maker's alone), so none
		// changed it before the grant
		d := &s.deleg
		d.mu.Lock()
		for _, ino := range dirs {
			if d.dir[ino] == nil {
				d.dir[ino] = &delegation{client: client, gone: make(chan struct{})}
				d.n.Add(1)
			}
		}
		// owned files belong to the delegation of their directory, if
		// their maker still holds it (else the maker gave them up with it)
		if h := d.dir[parent]; h != nil && h.client == client && !h.recalled {
			if d.file == nil {
				d.file = map[uint64]uint64{}
			}
			for _, ino := range owned {
				d.file[ino] = parent
				h.owned = append(h.owned, ino)
			}
		}
		d.mu.Unlock()
	}
	return failed, nil
}
