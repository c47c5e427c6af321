package vfs

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// Owned files (the service's side is meta/deleg.go, "Owned files"). A
// regular file this mount creates under a directory delegation (Creates)
// is born owned: nobody else can know it, and the service recalls the
// delegation before another client opens it for writing or changes its
// size. While the mount owns a file it keeps the file's bytes as its own
// writes left them, and answers read-only opens, reads and their closes by
// itself once no handle that may write is open (a small file written,
// closed and read back, as mdtest and job scripts do, costs no round
// trip). The service does not count such a local open.
//
// A file stops being owned (Disown) before anything that lets another
// client at it or changes it other than by a write through this mount: a
// recall of its directory's delegation (Creates.recalled, before the
// delegation goes back), its unlink, a rename or link of it, a truncate,
// an open with O_TRUNC, a write or close that failed, two writes at once
// (their order at the forwarding node is not known here), or growing past
// MaxFile or the Budget. Its local opens are then opened at the service
// (Promote), so an unlink that follows keeps the file for them, and their
// reads go to the forwarding node from then on.
//
// The budget (bytes, and MaxFiles files) is kept by letting the oldest
// idle files go: a file born or grown past it makes the files owned
// longest that no handle holds open, no write touches and no close report
// is on its way stop being owned, oldest first (evictLocked), before the
// new or growing file is refused. Such a file needs no promotion and no
// request: its bytes and size have reached the service. A job creating
// more small files than the budget holds thus keeps its creates, writes
// and closes answered here (until 2026-12-04 every file born past the
// budget was created, written and closed at the service before its
// calls returned: mdtest's create phase fell from 2,500 to 760 files/s,
// at three times the CPU per file, once 16,384 files of 4 KiB were
// owned).
//
// Write-back closes: a close of an owned file may return before its
// writes and its size reach the service (DeferClose; the client's Flush
// sends them in the background). The file stays owned until they have:
// Disown waits for them, so a recall (another client's open or getattr of
// the file, or any request naming its directory) finds them sent, and the
// mount's own requests naming the file wait for them (WaitClosed).
//
// Beacon still records every read and open answered here (the adapter
// does); the forwarding node does not see them, so the file's last access
// the service knows for coolness is its last write.

// OwnedConfig configures Owned.
type OwnedConfig struct {
	// MaxFile is the largest size an owned file may reach (default 64
	// KiB); Budget bounds the bytes all owned files hold (default 64 MiB).
	MaxFile, Budget int64
	// MaxFiles bounds the files owned (default 65,536).
	MaxFiles int
	// Promote opens at the service a handle that was opened here; tag is
	// what OpenLocal was given. False: it could not (logged by the caller).
	Promote func(ino uint64, tag any) bool
	// MaxClosing bounds the closes of owned files whose report is on its
	// way (DeferClose; default 256; negative: none deferred).
	MaxClosing int
	Log        *slog.Logger
}

type ownedFile struct {
	dir     uint64
	name    string
	data    []byte // the file's bytes (its size is len)
	writers int    // open handles that may write
	opens   int    // open handles (Track, OpenLocal), writers among them
	writing int    // writes under way
	closing int    // closes whose report is on its way (DeferClose)
}

// idle says f may stop being owned without a promotion or a wait.
func (f *ownedFile) idle() bool { return f.opens == 0 && f.writing == 0 && f.closing == 0 }

type ownedHandle struct {
	ino      uint64
	writer   bool
	local    bool // opened here: the service does not count it
	promoted bool // then opened at the service after all (Disown)
	// promoting is closed when a promotion under way has ended (nil: none
	// began)
	promoting chan struct{}
	tag       any
}

type ownedName struct {
	dir  uint64
	name string
}

// Owned holds a mount's owned files.
type Owned struct {
	cfg OwnedConfig
	n   atomic.Int64 // owned files: callers skip the lookups at 0

	mu      sync.Mutex // guards the fields below and every ownedFile's and ownedHandle's fields
	files   map[uint64]*ownedFile
	byDir   map[uint64]map[uint64]bool
	byName  map[ownedName]uint64
	handles map[uint64]*ownedHandle // file handle → handle, of files owned when opened
	bytes   int64                   // held by files' data
	closing int                     // closes on their way, of all files
	closed  *sync.Cond              // on mu: a close's report went, or a file was forgotten
	// age holds the owned files' inodes oldest first (from head on),
	// with inodes no longer owned among them, dropped as they come up
	age  []uint64
	head int
}

// NewOwned returns an empty set of owned files; nil configuration
// functions are allowed except Promote.
func NewOwned(cfg OwnedConfig) *Owned {
	if cfg.MaxFile == 0 {
		cfg.MaxFile = 64 << 10
	}
	if cfg.Budget == 0 {
		cfg.Budget = 64 << 20
	}
	if cfg.MaxClosing == 0 {
		cfg.MaxClosing = 256
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = 1 << 16
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	o := &Owned{cfg: cfg, files: map[uint64]*ownedFile{}, byDir: map[uint64]map[uint64]bool{},
		byName: map[ownedName]uint64{}, handles: map[uint64]*ownedHandle{}}
	o.closed = sync.NewCond(&o.mu)
	return o
}

// DeferClose lets a close of owned file ino return before its report (its
// writes, then its size) reaches the service: the file stays owned, so no
// other client can open it or see its size, and this mount's own
// requests naming it wait (WaitClosed), until done is called once the
// report went (or failed). ok is false when ino is not owned or
// MaxClosing closes are on their way already: the close then reports
// before it returns.
func (o *Owned) DeferClose(ino uint64) (done func(), ok bool) {
	if o.Len() == 0 || o.cfg.MaxClosing < 0 {
		return nil, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.files[ino]
	if f == nil || o.closing >= o.cfg.MaxClosing {
		return nil, false
	}
	f.closing++
	o.closing++
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			f.closing--
			o.closing--
			o.mu.Unlock()
			o.closed.Broadcast()
		})
	}, true
}

// WaitClosed waits until no close of ino is on its way (DeferClose).
func (o *Owned) WaitClosed(ino uint64) {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waitClosedLocked(ino)
}

// waitClosedLocked is WaitClosed. Caller holds mu.
func (o *Owned) waitClosedLocked(ino uint64) {
	for {
		if f := o.files[ino]; f == nil || f.closing == 0 {
			return
		}
		o.closed.Wait()
	}
}

// WaitAllClosed waits until no close is on its way (the mount closes).
func (o *Owned) WaitAllClosed() {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.closing > 0 {
		o.closed.Wait()
	}
}

// Closing is the number of closes whose report is on its way.
func (o *Owned) Closing() int {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.closing
}

// Len is the number of files owned.
func (o *Owned) Len() int {
	if o == nil {
		return 0
	}
	return int(o.n.Load())
}

// Bytes is what the owned files hold.
func (o *Owned) Bytes() int64 {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bytes
}

// born makes new, empty file ino, name in directory dir, owned if the
// budget allows; it says whether it did. A nil Owned owns nothing.
func (o *Owned) born(ino, dir uint64, name string) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := ownedName{dir, name}
	if o.files[ino] != nil || o.byName[k] != 0 {
		return false
	}
	if len(o.files) >= o.cfg.MaxFiles || o.bytes >= o.cfg.Budget {
		o.evictLocked(max(0, len(o.files)-o.cfg.MaxFiles+1), max(0, o.bytes-o.cfg.Budget+1))
	}
	if len(o.files) >= o.cfg.MaxFiles || o.bytes >= o.cfg.Budget {
		return false
	}
	o.files[ino] = &ownedFile{dir: dir, name: name}
	o.compactAgeLocked()
	o.age = append(o.age, ino)
	o.byName[k] = ino
	if o.byDir[dir] == nil {
		o.byDir[dir] = map[uint64]bool{}
	}
	o.byDir[dir][ino] = true
	o.n.Add(1)
	return true
}

// Owns says whether ino is owned.
func (o *Owned) Owns(ino uint64) bool {
	if o.Len() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.files[ino] != nil
}

// Track records handle fh of ino, opened at the service (or created
// here), if ino is owned; writer says it may write.
func (o *Owned) Track(ino, fh uint64, writer bool) {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.files[ino]
	if f == nil {
		return
	}
	o.handles[fh] = &ownedHandle{ino: ino, writer: writer}
	f.opens++
	if writer {
		f.writers++
	}
}

// OpenLocal opens ino read-only as handle fh here, without the service,
// if it is owned and no handle that may write is open; tag is given to
// Promote if the file is disowned while the handle is open.
func (o *Owned) OpenLocal(ino, fh uint64, tag any) bool {
	if o.Len() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.files[ino]
	if f == nil || f.writers > 0 {
		return false
	}
	o.handles[fh] = &ownedHandle{ino: ino, local: true, tag: tag}
	f.opens++
	return true
}

// Release forgets handle fh; remote is false when its release must not go
// to the service (opened here and never promoted).
func (o *Owned) Release(fh uint64) (remote bool) {
	if o == nil {
		return true
	}
	o.mu.Lock()
	h := o.handles[fh]
	if h == nil {
		o.mu.Unlock()
		return true
	}
	delete(o.handles, fh)
	if f := o.files[h.ino]; f != nil {
		f.opens--
		if h.writer {
			f.writers--
		}
	}
	wait := h.promoting
	o.mu.Unlock()
	if wait != nil {
		<-wait // its release must follow its open at the service
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return !h.local || h.promoted
}

// Read copies the bytes of owned file ino at off into buf and returns how
// many; ok is false when the read must go to the forwarding node (not
// owned, or a handle that may write is open).
func (o *Owned) Read(ino, off uint64, buf []byte) (n int, ok bool) {
	if o.Len() == 0 {
		return 0, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.files[ino]
	if f == nil || f.writers > 0 || f.writing > 0 {
		return 0, false
	}
	if off >= uint64(len(f.data)) {
		return 0, true
	}
	return copy(buf, f.data[off:]), true
}

// BeginWrite is called before a write to ino goes out; EndWrite after,
// with its bytes and whether it succeeded.
func (o *Owned) BeginWrite(ino uint64) {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.files[ino]; f != nil {
		f.writing++
	}
}

// EndWrite applies a write that BeginWrite announced: the file keeps its
// bytes, or is disowned (the write failed, another ran at the same time,
// or the file grew too large).
func (o *Owned) EndWrite(ino, off uint64, data []byte, ok bool) {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	f := o.files[ino]
	if f == nil {
		o.mu.Unlock()
		return
	}
	alone := f.writing == 1
	end := off + uint64(len(data))
	grow := int64(end) - int64(len(f.data))
	if ok && alone && end <= uint64(o.cfg.MaxFile) && grow > 0 && o.bytes+grow > o.cfg.Budget {
		o.evictLocked(0, o.bytes+grow-o.cfg.Budget) // f is being written: not among them
	}
	f.writing--
	if ok && alone && end <= uint64(o.cfg.MaxFile) && (grow <= 0 || o.bytes+grow <= o.cfg.Budget) {
		if grow > 0 {
			f.data = append(f.data, make([]byte, grow)...)
			o.bytes += grow
		}
		copy(f.data[off:], data)
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	o.Disown(ino)
}

// Disown stops owning ino, opening its local handles at the service.
func (o *Owned) Disown(ino uint64) {
	if o.Len() == 0 {
		return
	}
	o.disown(ino, true)
}

// DisownName disowns the file owned under name in directory dir, if any
// (it is being unlinked or renamed, or replaced by a rename).
func (o *Owned) DisownName(dir uint64, name string) {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	ino := o.byName[ownedName{dir, name}]
	o.mu.Unlock()
	if ino != 0 {
		o.disown(ino, true)
	}
}

// Forget stops owning ino without opening its local handles at the
// service (the file does not exist there: its create was refused).
func (o *Owned) Forget(ino uint64) {
	if o.Len() == 0 {
		return
	}
	o.disown(ino, false)
}

// DisownDir disowns every file owned in directory dir (its delegation is
// going back).
func (o *Owned) DisownDir(dir uint64) {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	inos := make([]uint64, 0, len(o.byDir[dir]))
	for ino := range o.byDir[dir] {
		inos = append(inos, ino)
	}
	o.mu.Unlock()
	o.disownAll(inos)
}

// DisownAll disowns every file.
func (o *Owned) DisownAll() {
	if o.Len() == 0 {
		return
	}
	o.mu.Lock()
	inos := make([]uint64, 0, len(o.files))
	for ino := range o.files {
		inos = append(inos, ino)
	}
	o.mu.Unlock()
	o.disownAll(inos)
}

func (o *Owned) disownAll(inos []uint64) {
	for _, ino := range inos {
		o.disown(ino, true)
	}
}

func (o *Owned) disown(ino uint64, promote bool) {
	o.mu.Lock()
	if promote {
		// what the service is to see of it first: its closes' reports
		// (a file forgotten has no service to see it)
		o.waitClosedLocked(ino)
	}
	f := o.files[ino]
	if f == nil {
		o.mu.Unlock()
		return
	}
	o.dropLocked(ino, f)
	if f.closing > 0 {
		o.closed.Broadcast() // forgotten: nobody waits for its reports
	}
	var local []*ownedHandle
	for fh, h := range o.handles {
		switch {
		case h.ino != ino:
		case !h.local:
			delete(o.handles, fh) // opened at the service: its release goes there
		case promote && h.promoting == nil:
			// local handles stay until released: whether their release
			// goes to the service depends on the promotion
			h.promoting = make(chan struct{})
			local = append(local, h)
		}
	}
	o.mu.Unlock()
	for _, h := range local {
		ok := o.cfg.Promote(ino, h.tag)
		o.mu.Lock()
		h.promoted = ok
		o.mu.Unlock()
		close(h.promoting)
		if !ok {
			o.cfg.Log.Warn("a read-only open answered here could not be opened at the service: an unlink now frees the file under it", "ino", ino)
		}
	}
}

// dropLocked forgets owned file ino (f). Caller holds mu.
func (o *Owned) dropLocked(ino uint64, f *ownedFile) {
	delete(o.files, ino)
	delete(o.byName, ownedName{f.dir, f.name})
	delete(o.byDir[f.dir], ino)
	if len(o.byDir[f.dir]) == 0 {
		delete(o.byDir, f.dir)
	}
	o.n.Add(-1)
	o.bytes -= int64(len(f.data))
}

// evictScan bounds the files evictLocked looks at in one call beyond
// those it lets go, so a budget held by busy files costs little.
const evictScan = 16

// evictLocked lets the oldest idle owned files go until at least files of
// them went and their bytes add up to at least bytes, looking at
// evictScan busy files at most: busy ones go to the back of the line.
// Caller holds mu.
func (o *Owned) evictLocked(files int, bytes int64) {
	busy := 0
	for (files > 0 || bytes > 0) && o.head < len(o.age) && busy < evictScan {
		ino := o.age[o.head]
		o.head++
		f := o.files[ino]
		switch {
		case f == nil: // no longer owned
		case !f.idle():
			o.age = append(o.age, ino)
			busy++
		default:
			files--
			bytes -= int64(len(f.data))
			o.dropLocked(ino, f)
		}
	}
	o.compactAgeLocked()
}

// compactAgeLocked keeps the age line's memory bounded: once most of it
// is entries evictLocked went past, or entries of files disowned
// otherwise (unlinked, recalled), it keeps only the owned files' entries,
// in order. Caller holds mu.
func (o *Owned) compactAgeLocked() {
	live := len(o.age) - o.head
	if (o.head <= 1024 || o.head <= len(o.age)/2) && live <= 2*len(o.files)+1024 {
		return
	}
	kept := make([]uint64, 0, min(live, 2*len(o.files)+1))
	for _, i := range o.age[o.head:] {
		if o.files[i] != nil {
			kept = append(kept, i)
		}
	}
	o.age, o.head = kept, 0
}
