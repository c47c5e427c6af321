package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestHeapPeak: the profile is written at the first check and again only
// once the live heap has grown by an eighth; it is a gzipped pprof file.
func TestHeapPeak(t *testing.T) {
	var none *heapPeak // --memprofile not given
	none.check()
	if err := none.done(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "heap.pb.gz")
	h := newHeapPeak(path)
	runtime.GC()
	h.check()
	first := h.written
	if first == 0 {
		t.Fatal("no profile written at the first check")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	h.check() // the heap has not grown by an eighth
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("written again without growth (%d bytes before)", st.Size())
	}
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 1<<20)) // 64 MiB live
	}
	runtime.GC()
	h.check()
	if h.written < first+60<<20 {
		t.Fatalf("live heap %d after 64 MiB more than %d", h.written, first)
	}
	runtime.KeepAlive(keep)
	if err := h.done(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a gzipped profile: %v", err)
	}
	if n, err := io.Copy(io.Discard, z); err != nil || n == 0 {
		t.Fatalf("profile: %d bytes, %v", n, err)
	}
}
