package vfs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Write-back creates (client.Config.WritebackCreates; the service's side
// is meta/deleg.go). A create of a regular file or a directory in a
// directory whose complete listing the directory cache holds, and whose
// delegation this mount holds, is answered here at once, with an inode
// number the metadata service handed out, and sent with the directory's
// other new entries in one ns.CreateBatch at most CreateFlush later. A
// directory made here is delegated to this mount from birth (the service
// grants it as the batch makes it), so its own creates are answered here
// too; its batch goes after its parent's, which makes it. Before any request that names a
// file not yet sent or a delegated directory leaves this mount, the
// directory's creates are sent (Settle), so the service never sees an
// operation on something it does not know; closing a file not yet sent
// costs nothing. With Config.WritebackUnlinks, removals there of files the
// service knows are answered here too and go in the same batches, in
// order (Unlink), and so are removals of empty directories this mount
// holds the delegation of (Rmdir). Another node that touches the directory makes the
// service recall the delegation through the change feed: the creates and
// removals are sent and the delegation given back before that node's
// request is served.

// wbCooldown is how long a mount does not ask again for a directory that
// was refused or recalled (the service's cool-down).
const wbCooldown = wire.DelegCooldown

// wbBatchMax is how many creates and removals a directory holds before
// they are sent at once, in the background; twice as many (the service
// behind) are sent before the request that queued the last goes on.
const wbBatchMax = 512

type wbEntry struct {
	id       ident.ID // who created it (the batch's job and rank)
	name     string
	ino      uint64
	mode     uint32 // permission bits
	uid, gid uint32
	t        int64
	open     bool // still open: the service counts it open
	inflight bool // taken by a flush in progress
	remove   bool // a removal of name (inode ino), not a create
	dir      bool // of a directory
	owned    bool // a file born owned (Owned)
	// sub is the removed directory's own state: its last batch (the
	// removals that emptied it) must reach the service first
	sub *wbDir
}

type wbDir struct {
	entries   []*wbEntry // creates and removals not yet sent, in order
	recalled  bool       // no new creates here
	scheduled bool       // a flush is due within CreateFlush
	flushMu   sync.Mutex // serialises this directory's flushes
}

type wbPending struct {
	dir uint64
	e   *wbEntry
}

// CreatesConfig configures Creates.
type CreatesConfig struct {
	Creates bool // answer creates here (write-back creates)
	Unlinks bool // and removals
	// Flush is how long a create waits for others to share its batch.
	Flush   time.Duration
	Timeout time.Duration // of a delegation request
	Meta    rpc.Invoker   // the metadata service (nil: never delegated)
	Route   Route         // where a batch goes (a forwarding node)
	Dir     *DirCache     // what is known of the directories (and the feed)
	// Owned, if set, receives the files created here as owned files
	// (owned.go).
	Owned *Owned
	// Handles, if set, counts the files a batch creates open once the
	// service has acknowledged it (handles.go).
	Handles *Handles
	Now     Clock
	Log     *slog.Logger
}

// Creates holds the directory delegations of a mount and the creates and
// removals made under them not yet sent.
type Creates struct {
	cfg    CreatesConfig
	active atomic.Int64 // delegations held: callers skip the checks at 0

	mu      sync.Mutex // guards the fields below and every wbDir's and wbEntry's fields but flushMu
	held    map[uint64]*wbDir
	pending map[uint64]*wbPending // inode created or removed, not yet sent → its entry
	next    uint64                // granted inode numbers: [next, end)
	end     uint64
	refused map[uint64]time.Time // directory → no delegation request before
}

// NewCreates returns a mount's write-back create state.
func NewCreates(cfg CreatesConfig) *Creates {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Creates{cfg: cfg, held: map[uint64]*wbDir{}, pending: map[uint64]*wbPending{}, refused: map[uint64]time.Time{}}
}

// Held is the number of directory delegations held.
func (w *Creates) Held() int { return int(w.active.Load()) }

// Create answers the create of regular file name with permission bits
// perm by uid and gid in parent by itself if it can; ok is false when the
// create must go to the service. who names the caller (asked only when
// the create is answered here).
func (w *Creates) Create(who func() ident.ID, parent uint64, name string, perm, uid, gid uint32) (attr *wire.Attr, ok bool) {
	return w.create(who, parent, name, perm, uid, gid, false)
}

// Mkdir answers the making of directory name as Create answers a file's:
// the new directory is delegated to this mount and starts with a complete,
// empty listing.
func (w *Creates) Mkdir(who func() ident.ID, parent uint64, name string, perm, uid, gid uint32) (attr *wire.Attr, ok bool) {
	return w.create(who, parent, name, perm, uid, gid, true)
}

func (w *Creates) create(who func() ident.ID, parent uint64, name string, perm, uid, gid uint32, isDir bool) (attr *wire.Attr, ok bool) {
	dc := w.cfg.Dir
	if !w.cfg.Creates || w.cfg.Meta == nil || len(name) > 255 || wire.IsLocal(parent) || !dc.Absent(parent, name) {
		return nil, false
	}
	pattr, ok := dc.DirAttr(parent)
	if !ok {
		return nil, false
	}
	id := who()
	now := w.cfg.Now()
	w.mu.Lock()
	d := w.held[parent]
	if d == nil || w.next >= w.end {
		if d != nil && d.recalled || now.Before(w.refused[parent]) {
			w.mu.Unlock()
			return nil, false
		}
		w.mu.Unlock()
		if !w.delegate(parent) {
			return nil, false
		}
		// what the directory cache knows is complete now: look again
		if !dc.Absent(parent, name) {
			return nil, false
		}
		if pattr, ok = dc.DirAttr(parent); !ok {
			return nil, false
		}
		w.mu.Lock()
		d = w.held[parent]
	}
	if d == nil || d.recalled || w.next >= w.end {
		w.mu.Unlock()
		return nil, false
	}
	t := now.UnixNano()
	e := &wbEntry{id: id, name: name, ino: w.next, mode: perm & 0o7777,
		uid: uid, gid: gid, t: t, open: !isDir, dir: isDir}
	if pattr.Mode&syscall.S_ISGID != 0 {
		e.gid = pattr.Gid
		if isDir {
			e.mode |= syscall.S_ISGID // as the service makes it
		}
	}
	w.next++
	if !isDir {
		e.owned = w.cfg.Owned.born(e.ino, parent, name)
	}
	a := &wire.Attr{Ino: e.ino, Mode: syscall.S_IFREG | e.mode, Nlink: 1, Uid: e.uid, Gid: e.gid,
		Atime: t, Mtime: t, Ctime: t, ChunkSize: pattr.ChunkSize, StripeCnt: pattr.StripeCnt, StripeUnit: pattr.StripeUnit}
	var newDir *wire.Attr
	if isDir {
		a.Mode, a.Nlink = syscall.S_IFDIR|e.mode, 2
		newDir = a
		// delegated from birth (meta.Service.CreateBatch)
		w.held[e.ino] = &wbDir{}
		w.active.Add(1)
	}
	schedule, due := w.queueLocked(parent, d, e)
	w.mu.Unlock()
	w.queued(parent, e, pattr, newDir, schedule, due)
	return a, true
}

// Unlink answers the removal of name from parent by itself if it can (a
// delegated directory whose complete listing the mount holds, a name the
// service knows): the removal goes with the directory's next batch; ok is
// false when it must go to the service.
func (w *Creates) Unlink(who func() ident.ID, parent uint64, name string) bool {
	return w.remove(who, parent, name, false)
}

// Rmdir answers the removal of directory name from parent by itself if it
// can: both delegated to this mount, the directory known empty (complete
// listing, only removals of it waiting to be sent, which go before this
// one: flushHeld) and already made at the service. Nobody else can have put anything in it: a request naming it
// would have recalled its delegation, and a recall sends this removal
// before the delegation goes back (recalled). ok is false when the
// removal must go to the service.
func (w *Creates) Rmdir(who func() ident.ID, parent uint64, name string) bool {
	return w.remove(who, parent, name, true)
}

// remove answers the removal of name (a file, or a directory: dir) from
// parent here if it can (Unlink, Rmdir).
func (w *Creates) remove(who func() ident.ID, parent uint64, name string, dir bool) bool {
	if !w.cfg.Unlinks || w.active.Load() == 0 {
		return false
	}
	dc := w.cfg.Dir
	ino, ok := dc.Present(parent, name)
	if !ok || ino == 0 || dir && !dc.Empty(ino) {
		return false
	}
	pattr, ok := dc.DirAttr(parent)
	if !ok {
		return false
	}
	id := who()
	w.mu.Lock()
	d := w.held[parent]
	if d == nil || d.recalled || w.pending[ino] != nil {
		// not yet made at the service, or removed already under another
		// name: the request goes out once the batch has (Settle)
		w.mu.Unlock()
		return false
	}
	e := &wbEntry{id: id, name: name, ino: ino, t: w.cfg.Now().UnixNano(), remove: true, dir: dir}
	if dir {
		c := w.held[ino]
		if c == nil || c.recalled {
			w.mu.Unlock()
			return false
		}
		for _, x := range c.entries {
			if !x.remove { // (an empty listing has no creates pending)
				w.mu.Unlock()
				return false
			}
		}
		delete(w.held, ino)
		w.active.Add(-1)
		e.sub = c
	}
	schedule, due := w.queueLocked(parent, d, e)
	w.mu.Unlock()
	w.queued(parent, e, pattr, nil, schedule, due)
	if dir {
		dc.ForgetDir(ino)
	}
	return true
}

// queueLocked appends e to the entries of d (directory dir) not yet sent;
// schedule says a flush must be set off, due how: batchFull (sent in the
// background) or batchBehind (sent before the caller goes on).
func (w *Creates) queueLocked(dir uint64, d *wbDir, e *wbEntry) (schedule bool, due batchDue) {
	d.entries = append(d.entries, e)
	w.pending[e.ino] = &wbPending{dir: dir, e: e}
	schedule = !d.scheduled
	d.scheduled = true
	switch n := len(d.entries); {
	case n >= 2*wbBatchMax:
		due = batchBehind
	case n == wbBatchMax:
		due = batchFull
	}
	return schedule, due
}

// batchDue says whether a directory's entries not yet sent are due now.
type batchDue int

const (
	batchLater  batchDue = iota // at the flush interval
	batchFull                   // a batch's worth: sent in the background
	batchBehind                 // two batches' worth (the service is behind the one on its way): the caller sends them
)

// queued records a queued create or removal in the directory cache, with
// the directory's attributes pattr as it changes them (newDir: the
// attributes of a directory made), and sets off its sending.
func (w *Creates) queued(dir uint64, e *wbEntry, pattr wire.Attr, newDir *wire.Attr, schedule bool, due batchDue) {
	pattr.Mtime, pattr.Ctime = e.t, e.t
	switch {
	case e.dir && e.remove:
		pattr.Nlink--
	case e.dir:
		pattr.Nlink++
	}
	ino := e.ino
	if e.remove {
		ino = 0
	}
	w.cfg.Dir.Changed(dir, e.name, ino, !e.remove, &pattr, w.cfg.Dir.Sent(), newDir)
	if schedule {
		time.AfterFunc(w.cfg.Flush, func() { w.flush(dir) })
	}
	switch due {
	case batchFull:
		// the caller does not wait for it (a removal a batch of 512 made
		// wait for all of them, the service removing one at a time)
		go w.flush(dir)
	case batchBehind:
		w.flush(dir)
	}
}

// wbFeedWait bounds how long a new delegation waits for the change feed
// to catch up with the grant.
const wbFeedWait = time.Second

// delegate asks for the delegation of dir (or more inode numbers for
// it) and waits until the change feed has brought every change made to
// the directory before the grant (meta.Service.Delegate), so that the
// directory cache's listing is complete; false if refused (and then not
// asked again for a while) or if the feed lags.
func (w *Creates) delegate(dir uint64) bool {
	w.Settle(dir) // a directory made here must be made at the service first
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	defer cancel()
	dc := w.cfg.Dir
	resp, err := rpc.Do(ctx, w.cfg.Meta, ns.Delegate, &ns.DelegateReq{Client: dc.ID(), Dir: dir})
	if err == nil {
		for deadline := w.cfg.Now().Add(wbFeedWait); dc.Sent() < resp.Feed; time.Sleep(200 * time.Microsecond) {
			if w.cfg.Now().After(deadline) {
				w.cfg.Log.Warn("change feed behind a delegation grant: creating through the service", "dir", dir)
				break
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.refused[dir] = w.cfg.Now().Add(wbCooldown)
		if rpc.Errno(err) != syscall.EBUSY {
			w.cfg.Log.Warn("delegation request failed", "dir", dir, "err", err)
		}
		return false
	}
	if w.held[dir] == nil {
		w.held[dir] = &wbDir{}
		w.active.Add(1)
		w.cfg.Log.Debug("holding the delegation of a directory: creating its files here", "dir", dir)
	}
	w.next, w.end = resp.First, resp.First+resp.Count
	return dc.Sent() >= resp.Feed
}

// flush sends dir's creates and removals not yet sent, after any flush in
// progress, and after its parent's batch if that makes dir.
func (w *Creates) flush(dir uint64) {
	w.mu.Lock()
	d := w.held[dir]
	var maker uint64
	if p := w.pending[dir]; p != nil && !p.e.remove {
		maker = p.dir
	}
	w.mu.Unlock()
	if d == nil {
		return
	}
	if maker != 0 {
		w.flush(maker)
	}
	w.flushHeld(dir, d)
}

// flushHeld sends the entries of d (directory dir) not yet sent.
func (w *Creates) flushHeld(dir uint64, d *wbDir) {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	w.mu.Lock()
	batch := d.entries
	d.entries, d.scheduled = nil, false
	es := make([]ns.BatchEntry, len(batch))
	for i, e := range batch {
		e.inflight = true
		es[i] = ns.BatchEntry{Name: e.name, Ino: e.ino, Mode: e.mode, Open: e.open, Owned: e.owned}
		if e.remove {
			es[i] = ns.BatchEntry{Name: e.name, Ino: e.ino, Remove: true}
		}
		if e.dir {
			es[i].Mode |= syscall.S_IFDIR
		}
	}
	w.mu.Unlock()
	// a directory removed here was emptied by removals in its own
	// batches: they go first (after any of them on its way)
	for _, e := range batch {
		if e.sub != nil {
			w.flushHeld(e.ino, e.sub)
		}
	}
	// in order, one message per run of creates by one owner (removals
	// join any run)
	for i := 0; i < len(batch); {
		var owner *wbEntry // the run's first create
		j := i
		for ; j < len(batch); j++ {
			if e := batch[j]; !e.remove {
				if owner != nil && (e.uid != owner.uid || e.gid != owner.gid) {
					break
				}
				if owner == nil {
					owner = e
				}
			}
		}
		w.send(dir, batch[i:j], es[i:j], owner)
		i = j
	}
	w.mu.Lock()
	for _, e := range batch {
		if p := w.pending[e.ino]; p != nil && p.e == e {
			delete(w.pending, e.ino)
		}
	}
	w.mu.Unlock()
}

// send sends one batch of creates by one owner (nil: removals only) and
// removals. A create or removal the service refuses was acknowledged
// already: it is logged as lost.
func (w *Creates) send(dir uint64, batch []*wbEntry, es []ns.BatchEntry, owner *wbEntry) {
	id := batch[0].id
	m := &ns.BatchReq{Head: ns.Head{Who: id, Client: w.cfg.Dir.ID()}, Parent: dir, Entries: es, Mtime: batch[len(batch)-1].t}
	if owner != nil {
		m.Uid, m.Gid = owner.uid, owner.gid
	}
	if h := w.cfg.Handles; h != nil {
		h.begin()
	}
	resp, err := rpc.Do(context.Background(), w.cfg.Route(id, dir), ns.CreateBatch, m)
	// acknowledged creates are not given up while the service cannot be
	// reached or did not answer (a metadata failover, a forwarding node
	// restarted): the batch goes again, which the service takes as made
	// where an earlier send made it
	for wait, until := 100*time.Millisecond, time.Now().Add(batchRetryFor); err != nil && rpc.Unreached(err) && time.Now().Before(until); {
		w.cfg.Log.Warn("creates not acknowledged by the metadata service: sending them again", "dir", dir, "entries", len(es), "err", err)
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
		resp, err = rpc.Do(context.Background(), w.cfg.Route(id, dir), ns.CreateBatch, m)
	}
	// the directory cache already holds the names and the directory's
	// times (nobody else changes a delegated directory)
	failed := es
	if err == nil {
		failed = resp.Failed
		if h := w.cfg.Handles; h != nil {
			refused := map[uint64]bool{}
			for _, e := range failed {
				refused[e.Ino] = true
			}
			for _, e := range es {
				if e.Open && !e.Remove && e.Mode&syscall.S_IFDIR == 0 && !refused[e.Ino] {
					h.opened(e.Ino)
				}
			}
		}
	}
	if h := w.cfg.Handles; h != nil {
		h.end()
	}
	for _, e := range failed {
		why := err
		if why == nil {
			why = syscall.Errno(e.Errno)
		}
		if e.Remove {
			w.cfg.Log.Error("a removal acknowledged to the application was refused by the metadata service: the name stays",
				"dir", dir, "name", e.Name, "ino", e.Ino, "err", why)
			continue
		}
		w.cfg.Log.Error("a create acknowledged to the application was refused by the metadata service: the file is lost",
			"dir", dir, "name", e.Name, "ino", e.Ino, "err", why)
		w.cfg.Owned.Forget(e.Ino)
	}
	if len(failed) > 0 {
		w.cfg.Dir.ForgetDir(dir)
	}
}

// batchRetryFor is how long a batch of acknowledged creates is sent again
// while the service cannot be reached.
const batchRetryFor = 2 * time.Minute

// Settle sends the creates and removals that the given inodes depend on: those of a
// delegated directory among them, and of the directory of a file among
// them not yet sent. Every request that leaves the mount passes here.
func (w *Creates) Settle(inos ...uint64) {
	if w.active.Load() == 0 {
		return
	}
	var dirs []uint64
	w.mu.Lock()
	for _, x := range inos {
		if p := w.pending[x]; p != nil {
			dirs = append(dirs, p.dir)
		}
		if x != 0 && w.held[x] != nil {
			dirs = append(dirs, x) // after its maker's batch, if that is pending
		}
	}
	w.mu.Unlock()
	for _, d := range dirs {
		w.flush(d)
	}
}

// SettleFor sends what request m of operation op depends on: the creates
// and removals of the directories and files it names, and of a directory
// it removes or replaces by name (an rmdir, a rename's target), which the
// service must see as it is.
func (w *Creates) SettleFor(op wire.Op, m ns.Request) {
	if w.active.Load() == 0 {
		return
	}
	w.Settle(m.Inodes())
	switch q := m.(type) {
	case *ns.NameReq:
		if op == ns.OpRmdir {
			w.settleChild(q.Parent, q.Name)
		}
	case *ns.RenameReq:
		w.settleChild(q.NewParent, q.NewName)
	}
}

// settleChild sends the creates and removals of what name in parent
// names (all held directories' if that is not known here).
func (w *Creates) settleChild(parent uint64, name string) {
	if ino, ok := w.cfg.Dir.Present(parent, name); ok && ino != 0 {
		w.Settle(ino)
		return
	}
	if w.cfg.Dir.Absent(parent, name) {
		return
	}
	w.mu.Lock()
	dirs := make([]uint64, 0, len(w.held))
	for dir := range w.held {
		dirs = append(dirs, dir)
	}
	w.mu.Unlock()
	for _, d := range dirs {
		w.flush(d)
	}
}

// Release answers the release of a file not yet sent (the batch then
// creates it closed); false means the release must go to the service.
func (w *Creates) Release(ino uint64) bool {
	if w.active.Load() == 0 {
		return false
	}
	w.mu.Lock()
	p := w.pending[ino]
	if p != nil && !p.e.inflight && p.e.open {
		p.e.open = false
		w.mu.Unlock()
		return true
	}
	w.mu.Unlock()
	if p != nil {
		// being sent, as open: release it once the service knows it
		// (flush waits for the flush in progress)
		w.flush(p.dir)
	}
	return false
}

// Removed forgets the delegation of directory dir, removed through the
// service (the service ends it with the directory).
func (w *Creates) Removed(dir uint64) {
	if w.active.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.held[dir] != nil {
		delete(w.held, dir)
		w.active.Add(-1)
	}
	w.mu.Unlock()
}

// recalled gives back the delegation of dir (another node needs it):
// its creates are sent first.
func (w *Creates) recalled(dir uint64) {
	w.mu.Lock()
	d := w.held[dir]
	if d != nil {
		d.recalled = true
	}
	w.refused[dir] = w.cfg.Now().Add(wbCooldown)
	w.mu.Unlock()
	// a removal of the directory answered here goes first: the other
	// node must find it gone, not empty
	w.Settle(dir)
	if d != nil {
		w.flush(dir)
		w.mu.Lock()
		if w.held[dir] == d {
			delete(w.held, dir)
			w.active.Add(-1)
		}
		w.mu.Unlock()
	}
	// the files owned there are given up (their local opens opened at
	// the service) before another node may open them
	w.cfg.Owned.DisownDir(dir)
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	defer cancel()
	if _, err := rpc.Do(ctx, w.cfg.Meta, ns.Undelegate, &ns.DelegateReq{Client: w.cfg.Dir.ID(), Dir: dir}); err != nil {
		w.cfg.Log.Warn("giving back a delegation failed (it lapses)", "dir", dir, "err", err)
	}
}

// GiveBack gives back the delegation of dir if this mount holds it, its
// creates sent first (a default ACL set on dir: the service makes its
// entries from then on, with the ACL's inheritance).
func (w *Creates) GiveBack(dir uint64) {
	w.mu.Lock()
	held := w.held[dir] != nil
	w.mu.Unlock()
	if held {
		w.recalled(dir)
	}
}

// Recall handles the feed's recalls addressed to this mount.
func (w *Creates) Recall(cs []ns.Change) {
	me := w.cfg.Dir.ID()
	for _, c := range cs {
		if c.Kind == ns.ChangeRecall && c.Holder == me {
			go w.recalled(c.Ino)
		}
	}
}

// DropAll sends every create not yet sent and gives up every delegation
// (the feed was lost, so a recall may have been; or the mount closes).
func (w *Creates) DropAll() {
	if w.active.Load() == 0 {
		return
	}
	w.mu.Lock()
	var dirs []uint64
	for dir, d := range w.held {
		d.recalled = true
		dirs = append(dirs, dir)
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.recalled(dir)
		}()
	}
	wg.Wait()
	w.cfg.Owned.DisownAll()
}
