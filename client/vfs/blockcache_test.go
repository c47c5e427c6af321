package vfs

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestBlockCache(t *testing.T) {
	c := NewBlockCache(8, 32)
	buf := make([]byte, 4)
	// the feed not followed yet: nothing is cached
	c.Opened(1, 0, 16)
	if _, _, ok := c.Want(1, 0, 4); ok {
		t.Fatal("a fetch wanted with the feed not followed")
	}
	c.Applied(5)
	c.Opened(1, 5, 16)
	boff, gen, ok := c.Want(1, 10, 4)
	if !ok || boff != 8 {
		t.Fatalf("want block at 8, got %d %v", boff, ok)
	}
	c.Fill(1, gen, boff, []byte("ABCDEFGH"))
	if n, ok := c.Read(1, 10, buf); !ok || n != 4 || string(buf) != "CDEF" {
		t.Fatalf("read %d %v %q", n, ok, buf[:n])
	}
	// a read across two blocks is not answered
	if _, ok := c.Read(1, 6, buf); ok {
		t.Fatal("a read across blocks answered")
	}
	if _, _, ok := c.Want(1, 6, 4); ok {
		t.Fatal("a fetch wanted for a read across blocks")
	}
	// a short block: the end of the file
	_, gen, _ = c.Want(1, 16, 4)
	c.Fill(1, gen, 16, []byte("IJ"))
	if n, ok := c.Read(1, 17, buf); !ok || n != 1 || buf[0] != 'J' {
		t.Fatalf("read at the end %d %v", n, ok)
	}
	if n, ok := c.Read(1, 19, buf); !ok || n != 0 {
		t.Fatalf("read past the end %d %v", n, ok)
	}
	// a drop during a fetch: the fetch is not kept
	_, gen, _ = c.Want(1, 0, 4)
	c.Drop(1)
	c.Fill(1, gen, 0, []byte("stale..."))
	if _, ok := c.Read(1, 0, buf); ok {
		t.Fatal("a block fetched before a drop kept")
	}
	if _, ok := c.Read(1, 10, buf); ok {
		t.Fatal("a block kept after the drop")
	}
	// an open answered at a feed position not applied yet drops the
	// file's blocks: close-to-open
	_, gen, _ = c.Want(1, 0, 4)
	c.Fill(1, gen, 0, []byte("abcdefgh"))
	c.Opened(1, 5, 16)
	if _, ok := c.Read(1, 0, buf); !ok {
		t.Fatal("an open at an applied position dropped the blocks")
	}
	c.Opened(1, 6, 16)
	if _, ok := c.Read(1, 0, buf); ok {
		t.Fatal("an open at a position not applied yet kept the blocks")
	}
	// a file larger than half the budget is not cached
	c.Opened(2, 5, 17)
	if _, _, ok := c.Want(2, 0, 4); ok {
		t.Fatal("a file larger than half the budget wanted")
	}
	// the budget: least recently used blocks go
	c.Opened(3, 5, 16)
	c.Opened(4, 5, 16)
	for i, ino := range []uint64{3, 3, 4, 4} {
		off := uint64(i%2) * 8
		_, gen, _ := c.Want(ino, off, 4)
		c.Fill(ino, gen, off, bytes.Repeat([]byte{byte('0' + i)}, 8))
	}
	c.Read(3, 0, buf) // 3@0 used: 3@8 is the least recently used
	_, gen, _ = c.Want(1, 0, 4)
	c.Fill(1, gen, 0, []byte("12345678"))
	if _, ok := c.Read(3, 8, buf); ok {
		t.Fatal("the least recently used block kept past the budget")
	}
	if b, _, _ := c.Stats(); b > 32 {
		t.Fatalf("%d bytes held, budget 32", b)
	}
	if _, ok := c.Read(3, 0, buf); !ok {
		t.Fatal("a recently used block dropped")
	}
	// the feed lost: everything goes, and nothing is kept until it is
	// followed again
	c.Unfollowed()
	if b, _, _ := c.Stats(); b != 0 {
		t.Fatalf("%d bytes held with the feed not followed", b)
	}
	if _, _, ok := c.Want(3, 0, 4); ok {
		t.Fatal("a fetch wanted with the feed not followed")
	}
	var nilCache *BlockCache
	if _, ok := nilCache.Read(1, 0, buf); ok || NewBlockCache(8, 4) != nil {
		t.Fatal("a nil cache answered, or a cache smaller than a block made")
	}
}

// TestBlockCacheThrash: files read at random whose blocks together exceed
// the budget get their blocks evicted before they answered enough reads
// to pay for their fetch; after wasteLimit such evictions a file is
// fetched no more (its reads go on one by one), while a file whose
// blocks answer many reads keeps its cache.
func TestBlockCacheThrash(t *testing.T) {
	c := NewBlockCache(8, 32) // 4 blocks
	c.Applied(1)
	c.Opened(1, 1, 16*8) // 16 blocks: over half the budget
	if _, _, ok := c.Want(1, 0, 4); ok {
		t.Fatal("a file larger than half the budget fetched")
	}
	c.Opened(1, 1, 16)
	c.Opened(2, 1, 16)
	c.Opened(3, 1, 16)
	buf := make([]byte, 4)
	fetch := func(ino, off uint64) bool {
		boff, gen, ok := c.Want(ino, off, 4)
		if ok {
			c.Fill(ino, gen, boff, make([]byte, 8))
		}
		return ok
	}
	// file 3: both blocks read again and again (it stays, and pays)
	fetch(3, 0)
	fetch(3, 8)
	// files 1 and 2: each block fetched, read a few times (fewer than
	// pay for it), evicted by the next fetches
	for i := 0; i < 2*wasteLimit+4; i++ {
		ino := uint64(1 + i%2)
		off := uint64(i/2%2) * 8
		if !fetch(ino, off) {
			if i < 2*wasteLimit {
				t.Fatalf("fetch %d refused after %d wasted blocks", i, i/2)
			}
			continue
		}
		for r := 0; r < paidReads-2; r++ {
			c.Read(ino, off, buf)
		}
		for r := 0; r < paidReads; r++ {
			c.Read(3, 0, buf) // file 3 stays the most recently used
			c.Read(3, 8, buf)
		}
	}
	for _, ino := range []uint64{1, 2} {
		if _, _, ok := c.Want(ino, 0, 4); ok {
			t.Fatalf("file %d still fetched after its blocks were evicted before paying", ino)
		}
	}
	// file 3's blocks go for room, having paid: it is fetched still
	c.Opened(4, 1, 16)
	for i := 0; i < 4; i++ {
		fetch(4, uint64(i%2)*8)
	}
	if _, _, ok := c.Want(3, 0, 4); !ok {
		t.Fatal("a file whose blocks answered many reads stopped being fetched")
	}
	// a reopen halves the count: fetched again until it wastes more
	c.Opened(1, 1, 16)
	if _, _, ok := c.Want(1, 0, 4); !ok {
		t.Fatal("a reopened file not fetched again")
	}
}

// Four random readers of files that together are twice the budget: the
// cache ends up holding two of them whole (their readers then never
// wait), not scattered blocks of every file, which answer some of their
// readers' reads and leave every one of those readers waiting on its
// misses. Each reader reads a block at random from its file as soon as
// its previous read is answered, as four fio jobs at iodepth 1 do: a hit
// costs it a unit of time, a remote read 30, a block's fetch 40 (the
// mount's ~8 µs, the path's ~250 µs and a 1 MiB fetch on this host).
func TestBlockCacheKeepsWholeFiles(t *testing.T) {
	const blocks = 256 // per file (256 MiB in 1 MiB blocks); the budget holds two files
	c := NewBlockCache(8, 2*blocks*8)
	c.Applied(1)
	for ino := uint64(1); ino <= 4; ino++ {
		c.Opened(ino, 1, blocks*8)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4)
	var next [4]int // each reader's time of its next read
	hits := 0
	const reads = 2000 * blocks
	for i := 0; i < reads; i++ {
		r := 0 // the reader whose read comes first
		for k := range next {
			if next[k] < next[r] {
				r = k
			}
		}
		ino := uint64(1 + r)
		off := uint64(rng.IntN(blocks)) * 8
		if _, ok := c.Read(ino, off, buf); ok {
			next[r]++
			if i >= reads/2 {
				hits++
			}
			continue
		}
		if boff, gen, ok := c.Want(ino, off, 4); ok {
			c.Fill(ino, gen, boff, make([]byte, 8))
			next[r] += 40
		} else {
			next[r] += 30
		}
	}
	whole := 0
	for ino := uint64(1); ino <= 4; ino++ {
		if n := len(c.files[ino].blocks); n == blocks {
			whole++
		} else {
			t.Logf("file %d: %d of %d blocks", ino, n, blocks)
		}
	}
	t.Logf("the second half's reads: %.2f answered here", float64(hits)/float64(reads/2))
	if whole < 2 {
		t.Errorf("%d files whole, want 2", whole)
	}
}

// A promoted file takes room only from stopped files holding fewer
// blocks than it, never from one holding more or from a file still
// fetched, and a whole file gives up the promotion.
func TestBlockCachePromotion(t *testing.T) {
	c := NewBlockCache(8, 64) // 8 blocks; files of 4 blocks are eligible
	c.Applied(1)
	fill := func(ino uint64, n int) {
		for i := 0; i < n; i++ {
			boff, gen, ok := c.Want(ino, uint64(i)*8, 4)
			if !ok {
				t.Fatalf("file %d block %d not fetched", ino, i)
			}
			c.Fill(ino, gen, boff, make([]byte, 8))
		}
	}
	for ino := uint64(1); ino <= 3; ino++ {
		c.Opened(ino, 1, 32)
	}
	fill(1, 4)
	fill(2, 3)
	fill(3, 1) // the cache is full: 4 + 3 + 1 blocks
	for ino := uint64(1); ino <= 3; ino++ {
		c.files[ino].wasted = wasteLimit // all three stopped
	}
	held := func() (n [4]int) {
		for ino := 1; ino <= 3; ino++ {
			n[ino] = len(c.files[uint64(ino)].blocks)
		}
		return n
	}
	// file 3 holds the fewest: nothing to take room from
	if _, _, ok := c.Want(3, 8, 4); ok {
		t.Fatal("a stopped file holding the fewest blocks fetched with the cache full")
	}
	// file 2 holds more than file 3: it takes file 3's block, not file 1's
	boff, gen, ok := c.Want(2, 24, 4)
	if !ok {
		t.Fatal("the stopped file holding the most blocks and not whole not fetched")
	}
	c.Fill(2, gen, boff, make([]byte, 8))
	if n := held(); n != [4]int{0, 4, 4, 0} {
		t.Fatalf("blocks held by files 1-3: %v, want 4 4 0", n[1:])
	}
	// file 2 is whole: file 3 may be promoted, but nothing holds fewer
	if _, _, ok := c.Want(3, 0, 4); ok {
		t.Fatal("a stopped file took room from files holding more")
	}
	// a file still fetched evicts by recency as before, stopped or not
	c.Opened(4, 1, 32)
	fill(4, 1)
	if n := held(); n[1]+n[2] != 7 {
		t.Fatalf("a fetched file's block took %d blocks' room, want 1", 8-n[1]-n[2])
	}
}
