package e2e

import (
	"bytes"
	"math/rand"
	"os"
	"sync"
	"testing"
)

// TestZeroCopyReads reads a file through a cluster whose data servers
// answer with sendfile and whose forwarding daemons splice the answers on
// (--zero-copy): reads inside one chunk, across chunks, at the end of the
// file, in a hole and past the end, concurrently, each checked byte by
// byte; then a rewrite is read back.
func TestZeroCopyReads(t *testing.T) {
	c := startCluster(t, "--zero-copy=all")
	const chunk = 4 << 20
	size := 3*chunk + 12345
	want := pattern(7, size)
	clear(want[chunk+1000 : chunk+300000]) // a hole inside the second chunk
	p := c.path("zc")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, chunk + 1000}, {chunk + 300000, size}} {
		if _, err := f.WriteAt(want[r[0]:r[1]], int64(r[0])); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check := func(off, n int) {
		got := make([]byte, n)
		k, _ := f.ReadAt(got, int64(off))
		if off >= size {
			if k != 0 {
				t.Errorf("read of %d at %d past the end (%d): %d bytes", n, off, size, k)
			}
			return
		}
		end := min(off+n, size)
		if k != end-off || !bytes.Equal(got[:k], want[off:end]) {
			t.Errorf("read of %d at %d: %d bytes, want %d, equal %v", n, off, k, end-off, bytes.Equal(got[:k], want[off:end]))
		}
	}
	for _, r := range [][2]int{{0, 1 << 20}, {4096, 4096}, {chunk - 100, 200}, {chunk, chunk},
		{chunk + 500, 4096}, {chunk + 2000, 1 << 20}, {3 * chunk, 1 << 20}, {size - 10, 10}, {size + 1, 100}} {
		check(r[0], r[1])
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 50; i++ {
				check(rng.Intn(size), 1+rng.Intn(1<<20))
			}
		}(g)
	}
	wg.Wait()
	copy(want[10:], pattern(8, 5000))
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	check(0, 1<<20)
}
