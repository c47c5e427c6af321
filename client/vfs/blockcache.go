package vfs

import (
	"container/list"
	"sync"
)

// The block cache: blocks of files this mount read, kept for small reads
// (a random reader's 4 KiB pread costs a FUSE request and nothing else
// once its block is here). A small read that misses fetches the whole
// aligned block through the forwarding node in one request.
//
// Consistency is close-to-open across mounts and immediate on this one:
//   - a write, truncation or O_TRUNC open of a file through this mount
//     drops its blocks (and a fetch under way when it happened is not
//     kept: each file has a generation, bumped by every drop);
//   - another node's close or fsync of a file it wrote reaches the change
//     feed before the close returns (the forwarding node's size report),
//     and the feed drops the file's blocks here (Drop, from feed.go);
//   - an open at the service answers with the feed position it was
//     served at: if this mount has not yet applied the feed that far, the
//     file's blocks are dropped (Opened), so an open that follows another
//     node's close never reads what was cached before it;
//   - with the feed not followed nothing is cached, and a feed that lost
//     changes drops everything.
//
// Only files that fit half the budget are cached (Opened says which): a
// random reader of a larger file would fetch a block per read and keep
// none long enough to read it again. Several such files read at once
// (their blocks together past the budget) thrash the same way: a file
// whose blocks keep being evicted unread (wasteLimit of them, and more
// than wasteRatio times those read again) is fetched for no longer; its
// reads go on one by one, as with the cache off. A block pays for its
// fetch (a 1 MiB request costs about what 8 reads of 4 KiB cost) once it
// answered paidReads reads; one evicted before that was wasted.
//
// Of the files no longer fetched, one at a time (the one holding the most
// blocks and not yet whole: promoted) is fetched again at the expense of
// the others that hold fewer: random readers of files that do not all fit
// are served best by a cache that holds some files whole, whose readers
// then never wait, rather than scattered blocks of every file, which leave
// each reader waiting on its misses. The blocks kept thus gather into as
// many whole files as the budget holds.

// BlockCache is a mount's block cache; a nil *BlockCache caches nothing.
type BlockCache struct {
	block  int64
	budget int64

	mu      sync.Mutex // guards every field below
	files   map[uint64]*cachedFile
	lru     *list.List // of *cachedBlock, most recently used first
	bytes   int64
	applied uint64 // feed position whose changes have been applied here
	live    bool   // the feed is followed
	// promoted is the file no longer fetched that is fetched again at
	// the expense of the others holding fewer blocks (0: none)
	promoted uint64
	hits     uint64
	fetches  uint64
	mem      *blockArena // the blocks' memory (blockmem.go)
}

type cachedFile struct {
	gen      uint64 // bumped by every drop: a fetch from before is not kept
	eligible bool   // opened at the service, small enough to cache
	nblocks  int    // blocks of the file at its last open
	blocks   map[uint64]*list.Element
	// wasted counts its blocks evicted for room before they answered
	// paidReads reads, reused those evicted after
	wasted, reused int
}

type cachedBlock struct {
	ino, off uint64
	data     []byte // a slot of chunk (index slot), cap the block size
	chunk    *arenaChunk
	slot     int
	reads    int // reads it answered after its fetch
}

// A file stops being fetched once wasteLimit of its blocks were evicted
// before they paid for their fetch, and more than wasteRatio times as
// many as did.
const (
	paidReads  = 8
	wasteLimit = 8
	wasteRatio = 4
	// victimScan is how far from the least recently used end a promoted
	// file's fetch looks for a block to take the room of
	victimScan = 1024
)

// thrashing says whether f's blocks are evicted before they pay for their
// fetch.
func (f *cachedFile) thrashing() bool {
	return f.wasted >= wasteLimit && f.wasted > wasteRatio*f.reused
}

// NewBlockCache returns a cache of blocks of block bytes holding at most
// budget bytes; nil if either is not positive.
func NewBlockCache(block, budget int64) *BlockCache {
	if block <= 0 || budget < block {
		return nil
	}
	return &BlockCache{block: block, budget: budget, files: map[uint64]*cachedFile{}, lru: list.New(), mem: newBlockArena(block, budget)}
}

// Block is the cache's block size (0 for a nil cache).
func (c *BlockCache) Block() int64 {
	if c == nil {
		return 0
	}
	return c.block
}

func (c *BlockCache) fileLocked(ino uint64) *cachedFile {
	f := c.files[ino]
	if f == nil {
		f = &cachedFile{blocks: map[uint64]*list.Element{}}
		c.files[ino] = f
	}
	return f
}

// Opened notes an open of ino at the service, answered at feed position
// gen with the file at size bytes.
func (c *BlockCache) Opened(ino, gen, size uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.fileLocked(ino)
	if gen > c.applied || !c.live {
		c.dropLocked(ino, f)
	}
	f.eligible = size <= uint64(c.budget/2)
	f.nblocks = int((size + uint64(c.block) - 1) / uint64(c.block))
	// an open gives a file that thrashed another chance, slowly
	f.wasted /= 2
}

// Read copies into buf the bytes of ino at off from a cached block, if the
// read lies within one; n may be short at the end of the file.
func (c *BlockCache) Read(ino, off uint64, buf []byte) (n int, ok bool) {
	if c == nil {
		return 0, false
	}
	boff := off - off%uint64(c.block)
	if off+uint64(len(buf)) > boff+uint64(c.block) {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil || !c.live {
		return 0, false
	}
	e := f.blocks[boff]
	if e == nil {
		return 0, false
	}
	c.lru.MoveToFront(e)
	c.hits++
	b := e.Value.(*cachedBlock)
	b.reads++
	if rel := off - boff; rel < uint64(len(b.data)) {
		n = copy(buf, b.data[rel:])
	}
	return n, true
}

// Want says whether a read of n bytes of ino at off should fetch its
// block: the aligned block's offset, and the file's generation to give
// Fill.
func (c *BlockCache) Want(ino, off uint64, n int) (boff, gen uint64, ok bool) {
	if c == nil {
		return 0, 0, false
	}
	boff = off - off%uint64(c.block)
	if off+uint64(n) > boff+uint64(c.block) {
		return 0, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil || !f.eligible || !c.live {
		return 0, 0, false
	}
	if f.thrashing() && !c.promoteLocked(ino, f) {
		return 0, 0, false
	}
	return boff, f.gen, true
}

// promoteLocked says whether f (ino), no longer fetched, is fetched
// anyway: it is, or becomes, the promoted file (none is, the promoted
// one is whole or fetched again, or f holds more blocks than it), and
// there is room for a block or a block of another such file holding
// fewer to take it from.
func (c *BlockCache) promoteLocked(ino uint64, f *cachedFile) bool {
	if p := c.files[c.promoted]; c.promoted != ino &&
		(p == nil || !p.thrashing() || len(p.blocks) >= p.nblocks || len(f.blocks) > len(p.blocks)) {
		c.promoted = ino
	}
	return c.promoted == ino && (c.bytes+c.block <= c.budget || c.victimLocked(f) != nil)
}

// victimLocked is the least recently used block, among the victimScan
// least recently used, of a file no longer fetched that holds fewer
// blocks than f (nil: none).
func (c *BlockCache) victimLocked(f *cachedFile) *list.Element {
	e := c.lru.Back()
	for i := 0; e != nil && i < victimScan; i++ {
		b := e.Value.(*cachedBlock)
		if of := c.files[b.ino]; of != nil && of != f && of.thrashing() && len(of.blocks) < len(f.blocks) {
			return e
		}
		e = e.Prev()
	}
	return nil
}

// Fill keeps data, ino's block at boff as fetched at generation gen, unless
// the file changed since. It keeps its own copy.
func (c *BlockCache) Fill(ino, gen, boff uint64, data []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[ino]
	if f == nil || f.gen != gen || !f.eligible || !c.live {
		return
	}
	if e := f.blocks[boff]; e != nil {
		c.removeLocked(e)
	}
	if f.thrashing() {
		// a promoted file's block takes the room of blocks of files
		// holding fewer, or is not kept
		if c.promoted != ino {
			return
		}
		for c.bytes+c.block > c.budget {
			v := c.victimLocked(f)
			if v == nil {
				return
			}
			c.removeLocked(v)
		}
	}
	b := &cachedBlock{ino: ino, off: boff}
	b.data, b.chunk, b.slot = c.mem.allocLocked()
	b.data = b.data[:copy(b.data, data)]
	c.fetches++
	f.blocks[boff] = c.lru.PushFront(b)
	c.bytes += int64(cap(b.data))
	for c.bytes > c.budget {
		old := c.lru.Back()
		b := old.Value.(*cachedBlock)
		if of := c.files[b.ino]; of != nil && b.reads < paidReads {
			of.wasted++
		} else if of != nil {
			of.reused++
		}
		c.removeLocked(old)
	}
}

func (c *BlockCache) removeLocked(e *list.Element) {
	b := c.releaseLocked(e)
	if f := c.files[b.ino]; f != nil {
		delete(f.blocks, b.off)
	}
}

// Drop forgets ino's blocks (it changed, or may have); a fetch under way
// is not kept.
func (c *BlockCache) Drop(ino uint64) { c.drop(ino, false) }

// Forget drops ino and what the cache knows of it (the kernel forgot the
// inode).
func (c *BlockCache) Forget(ino uint64) { c.drop(ino, true) }

func (c *BlockCache) drop(ino uint64, forget bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.files[ino]; f != nil {
		c.dropLocked(ino, f)
		if forget {
			delete(c.files, ino)
		}
	}
}

func (c *BlockCache) dropLocked(ino uint64, f *cachedFile) {
	f.gen++
	for _, e := range f.blocks {
		c.releaseLocked(e)
	}
	clear(f.blocks)
}

// releaseLocked takes a block off the list and gives back its memory; the
// caller forgets it in its file.
func (c *BlockCache) releaseLocked(e *list.Element) *cachedBlock {
	b := c.lru.Remove(e).(*cachedBlock)
	c.bytes -= int64(cap(b.data))
	c.mem.freeLocked(b.chunk, b.slot)
	b.data, b.chunk = nil, nil
	return b
}

// Applied says the change feed's changes up to position pos have been
// applied (their drops made): the feed is followed.
func (c *BlockCache) Applied(pos uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied = max(c.applied, pos)
	c.live = true
}

// Unfollowed drops everything: the feed is not followed (or lost
// changes), so nothing cached can be known current; nothing is cached
// until Applied.
func (c *BlockCache) Unfollowed() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = false
	c.dropAllLocked()
}

// DropAll drops every block (the feed lost changes).
func (c *BlockCache) DropAll() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropAllLocked()
}

func (c *BlockCache) dropAllLocked() {
	for ino, f := range c.files {
		c.dropLocked(ino, f)
	}
}

// Mapped is the bytes of memory the blocks take outside the Go heap
// (blockmem.go): the bytes held, and the free slots of chunks partly held.
func (c *BlockCache) Mapped() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mem.mapped
}

// Stats are the bytes held, the reads answered here and the blocks
// fetched and kept.
func (c *BlockCache) Stats() (bytes int64, hits, fetches uint64) {
	if c == nil {
		return 0, 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.hits, c.fetches
}
