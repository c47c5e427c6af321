package vfs

import (
	"golang.org/x/sys/unix"
)

// The block cache's memory: blocks live outside the Go heap, in chunks
// of 2 MiB (a multiple for budgets past 16 GiB) mapped anonymously and
// marked MADV_HUGEPAGE, each holding chunk/block blocks.
//
// On the Go heap a mebibyte block costs 256 page faults when it is first
// written (the heap grows by small pages: the kernel's transparent huge
// pages are "madvise" on Debian, and Go does not ask for them), which made
// a cold cache fill at a third of the speed it later reads at; and the
// garbage collector lets the heap grow to twice what is live, so a cache
// of 512 MiB could hold the mount at a gibibyte. Here a chunk costs one
// fault (with huge pages; 512 without), is counted once, and is unmapped
// as soon as none of its blocks is held. Blocks are only touched under
// BlockCache.mu (Fill copies in, Read copies out), so a slot given back
// can be handed out again at once.
//
// Chunks partly held stay mapped: the mapped bytes are the held blocks'
// and the free slots of such chunks (a fill takes one of those before it
// maps a chunk), with mebibyte blocks at most a block per chunk.

// hugeChunk is the size of a chunk: an x86-64 huge page; a budget past
// maxChunks of them takes chunks of several, so that the mappings (each
// an area the kernel counts: 65,530 a process by default) stay few.
const (
	hugeChunk = 2 << 20
	maxChunks = 8192
)

// blockArena hands out block-sized slots. Guarded by BlockCache.mu.
type blockArena struct {
	block int
	chunk int           // bytes per mapping
	slots int           // blocks per chunk (0: blocks are made on the Go heap)
	part  []*arenaChunk // chunks with a free slot
	// mapped is the bytes of chunks mapped
	mapped int64
}

type arenaChunk struct {
	mem  []byte
	free []int // free slots' indexes
	held int
	pos  int // index in blockArena.part, -1 if not there
}

func newBlockArena(block, budget int64) *blockArena {
	a := &blockArena{block: int(block), chunk: hugeChunk * int(max(1, (budget+maxChunks*hugeChunk-1)/(maxChunks*hugeChunk)))}
	if block > 0 && block <= hugeChunk && hugeChunk%block == 0 {
		a.slots = a.chunk / int(block)
	}
	return a
}

// allocLocked returns a slot of block bytes, the chunk it came from
// (nil: from the Go heap, where mapping failed or the block does not
// divide a chunk) and its index there.
func (a *blockArena) allocLocked() ([]byte, *arenaChunk, int) {
	if a.slots == 0 {
		return make([]byte, a.block), nil, 0
	}
	if len(a.part) == 0 {
		mem, err := unix.Mmap(-1, 0, a.chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return make([]byte, a.block), nil, 0
		}
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // a hint: small pages work too
		ch := &arenaChunk{mem: mem, free: make([]int, 0, a.slots)}
		for i := a.slots - 1; i >= 0; i-- {
			ch.free = append(ch.free, i)
		}
		ch.pos = len(a.part)
		a.part = append(a.part, ch)
		a.mapped += int64(a.chunk)
	}
	ch := a.part[len(a.part)-1]
	i := ch.free[len(ch.free)-1]
	ch.free = ch.free[:len(ch.free)-1]
	ch.held++
	if len(ch.free) == 0 {
		a.unlistLocked(ch)
	}
	return ch.mem[i*a.block : (i+1)*a.block : (i+1)*a.block], ch, i
}

// freeLocked gives back slot i of ch, as allocLocked returned it.
func (a *blockArena) freeLocked(ch *arenaChunk, i int) {
	if ch == nil {
		return
	}
	ch.free = append(ch.free, i)
	ch.held--
	if ch.held == 0 {
		a.unlistLocked(ch)
		a.mapped -= int64(len(ch.mem))
		_ = unix.Munmap(ch.mem) // cannot fail for a mapping of ours
		ch.mem = nil
		return
	}
	if ch.pos < 0 {
		ch.pos = len(a.part)
		a.part = append(a.part, ch)
	}
}

func (a *blockArena) unlistLocked(ch *arenaChunk) {
	if ch.pos < 0 {
		return
	}
	last := a.part[len(a.part)-1]
	a.part[ch.pos] = last
	last.pos = ch.pos
	a.part = a.part[:len(a.part)-1]
	ch.pos = -1
}
