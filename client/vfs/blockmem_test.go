package vfs

import (
	"bytes"
	"math/rand"
	"testing"
)

// The blocks outside the Go heap: random fills, reads, drops and
// evictions of a cache of mebibyte blocks against a model of what each
// file's blocks hold; every read returns the model's bytes, the memory
// mapped is the blocks held plus at most the free slots of chunks partly
// held, and all of it is given back once nothing is held.
func TestBlockMemoryModel(t *testing.T) {
	const block = 64 << 10 // 32 to a chunk
	c := NewBlockCache(block, 24*block)
	c.Applied(1)
	rng := rand.New(rand.NewSource(1))
	model := map[[2]uint64][]byte{} // ino, block offset → bytes kept
	gens := map[uint64]uint64{}
	for ino := uint64(1); ino <= 4; ino++ {
		c.Opened(ino, 1, 8*block)
	}
	buf := make([]byte, 4096)
	for step := 0; step < 3000; step++ {
		ino := uint64(1 + rng.Intn(4))
		boff := uint64(rng.Intn(8)) * block
		switch r := rng.Intn(10); {
		case r < 5: // a miss fetches the block; short at the file's end sometimes
			_, gen, ok := c.Want(ino, boff, 4096)
			if !ok {
				continue
			}
			n := block
			if rng.Intn(4) == 0 {
				n = 1 + rng.Intn(block)
			}
			data := make([]byte, n)
			rng.Read(data)
			c.Fill(ino, gen, boff, data)
			model[[2]uint64{ino, boff}] = data
			gens[ino] = gen
		case r < 9: // a read: a hit must give the last bytes filled there
			off := boff + uint64(rng.Intn(block-4096))
			n, ok := c.Read(ino, off, buf)
			if !ok {
				continue
			}
			want := model[[2]uint64{ino, boff}]
			rel := int(off - boff)
			var exp []byte
			if rel < len(want) {
				exp = want[rel:min(len(want), rel+4096)]
			}
			if !bytes.Equal(buf[:n], exp) {
				t.Fatalf("step %d: ino %d off %d: read %d bytes not those filled", step, ino, off, n)
			}
		default:
			c.Drop(ino)
			for k := range model {
				if k[0] == ino {
					delete(model, k)
				}
			}
		}
		c.mu.Lock()
		held, mapped, free := c.bytes, c.mem.mapped, 0
		for _, ch := range c.mem.part {
			free += len(ch.free)
		}
		c.mu.Unlock()
		if held > 24*block || mapped != held+int64(free)*block {
			t.Fatalf("step %d: %d bytes held, %d mapped with %d free slots", step, held, mapped, free)
		}
	}
	c.DropAll()
	if m := c.Mapped(); m != 0 {
		t.Fatalf("%d bytes still mapped with nothing held", m)
	}
}

// Blocks that do not divide a chunk live on the Go heap; a budget past
// maxChunks huge pages takes chunks of several, so that a full cache is
// at most maxChunks mappings.
func TestBlockMemoryChunks(t *testing.T) {
	for _, c := range []struct{ budget, chunk int64 }{{512 << 20, 2 << 20}, {16 << 30, 2 << 20}, {16<<30 + 1, 4 << 20}, {40 << 30, 6 << 20}} {
		a := newBlockArena(1<<20, c.budget)
		if int64(a.chunk) != c.chunk || a.slots != a.chunk>>20 || (c.budget+c.chunk-1)/c.chunk > maxChunks {
			t.Errorf("budget %d: chunks of %d bytes, %d blocks each; want %d", c.budget, a.chunk, a.slots, c.chunk)
		}
	}
	c := NewBlockCache(3<<20, 12<<20)
	c.Applied(1)
	c.Opened(1, 1, 6<<20)
	_, gen, ok := c.Want(1, 0, 4096)
	if !ok {
		t.Fatal("not fetched")
	}
	c.Fill(1, gen, 0, []byte("abc"))
	buf := make([]byte, 3)
	if n, ok := c.Read(1, 0, buf); !ok || string(buf[:n]) != "abc" {
		t.Fatalf("read %q %v", buf[:n], ok)
	}
	if m := c.Mapped(); m != 0 {
		t.Fatalf("%d bytes mapped for blocks on the heap", m)
	}
}
