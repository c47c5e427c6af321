package e2e

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestBlockCache: small reads of a file mount a opened are answered from
// its block cache once their block was fetched (its counter of answers
// moves and the bytes are right), and the cache never answers with what a
// file held before a change that a later open must see: this mount's own
// write and truncation (at once), and another mount's write, its
// truncation and its O_TRUNC rewrite, each closed before a reopens the
// file (close-to-open), also when a keeps the file open meanwhile and
// reopens it.
func TestBlockCache(t *testing.T) {
	c := startCluster(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	maddr := ln.Addr().String()
	ln.Close()
	a := c.mount2(t, "--metrics", maddr, "--read-cache", "512M")
	b := c.mnt
	const size = 3<<20 + 123
	data := pattern(7, size)
	if err := os.WriteFile(filepath.Join(b, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	pa := filepath.Join(a, "f")
	// pread 4 KiB pieces through a fresh handle of a and check them
	// against want
	check := func(what string, want []byte, offs ...int64) {
		t.Helper()
		f, err := os.Open(pa)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for _, off := range offs {
			n, _ := f.ReadAt(buf, off)
			var exp []byte
			if off < int64(len(want)) {
				exp = want[off:min(off+4096, int64(len(want)))]
			}
			if !bytes.Equal(buf[:n], exp) {
				t.Fatalf("%s: 4 KiB at %d on mount a differ from the file's bytes (%d read)", what, off, n)
			}
		}
	}
	offs := []int64{0, 4096, 1 << 20, 1<<20 + 8192, 3 << 20, size - 100, size + 10}
	check("first reads", data, offs...)
	before := metric(t, maddr, "sluice_client_block_cache_hits_total")
	check("reads again", data, offs...)
	if n := metric(t, maddr, "sluice_client_block_cache_hits_total") - before; n < len(offs)-1 {
		t.Fatalf("%d reads answered from the block cache for %d reads of fetched blocks", n, len(offs))
	}
	// a writes the file itself
	h, err := os.OpenFile(pa, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[4096:], "mount a wrote this")
	if _, err := h.WriteAt([]byte("mount a wrote this"), 4096); err != nil {
		t.Fatal(err)
	}
	check("after a's own write (still open)", data, offs...)
	h.Close()
	// b overwrites bytes (the size stays) and closes: a's next open
	// reads them
	keep, err := os.Open(pa) // a keeps a handle open across the change
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	check("before b's write", data, offs...)
	hb, err := os.OpenFile(filepath.Join(b, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	copy(data[1<<20:], "mount b wrote this")
	if _, err := hb.WriteAt([]byte("mount b wrote this"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := hb.Close(); err != nil {
		t.Fatal(err)
	}
	check("after b's write and close", data, offs...)
	// b truncates; a's reopen sees the shorter file
	if err := os.Truncate(filepath.Join(b, "f"), 1<<20+4096); err != nil {
		t.Fatal(err)
	}
	data = data[:1<<20+4096]
	check("after b's truncate", data, offs...)
	// b rewrites the whole file through O_TRUNC, longer again
	data = pattern(8, size)
	if err := os.WriteFile(filepath.Join(b, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	check("after b's rewrite", data, offs...)
	// a truncates the file itself
	if err := os.Truncate(pa, 2048); err != nil {
		t.Fatal(err)
	}
	data = data[:2048]
	check("after a's truncate", data, offs...)
}
