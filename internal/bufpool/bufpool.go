// Package bufpool owns the page-aligned payload buffers of the data path.
// Buffers come in a few power-of-two size classes and are recycled through
// sync.Pools, so the hot path allocates no data buffers per request. It must
// not know about files, frames or connections.
package bufpool

import (
	"sync"
	"unsafe"
)

// Align is the alignment of every buffer (one page), so O_DIRECT and the
// kernel's zero-copy paths can use them.
const Align = 4096

const (
	minShift = 12 // 4 KiB
	maxShift = 26 // 64 MiB
)

var pools [maxShift - minShift + 1]sync.Pool

func class(n int) int {
	c := 0
	for (1 << (minShift + c)) < n {
		c++
	}
	return c
}

// Get returns a page-aligned buffer of length n. Buffers larger than the
// largest class are allocated directly.
func Get(n int) []byte {
	if n > 1<<maxShift {
		return alloc(n)
	}
	c := class(n)
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return alloc(1 << (minShift + c))[:n]
}

// Put returns a buffer obtained from Get. Buffers of foreign origin are
// ignored.
func Put(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c > 1<<maxShift || c&(c-1) != 0 {
		return
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))%Align != 0 {
		return
	}
	b = b[:c]
	pools[class(c)].Put(&b)
}

func alloc(n int) []byte {
	raw := make([]byte, n+Align)
	off := int(uintptr(unsafe.Pointer(&raw[0])) % Align)
	if off != 0 {
		off = Align - off
	}
	return raw[off : off+n : off+n]
}
