package bufpool

import (
	"testing"
	"unsafe"
)

func TestAligned(t *testing.T) {
	for _, n := range []int{1, 4096, 4097, 1 << 20, 3 << 20, 100 << 20} {
		b := Get(n)
		if len(b) != n {
			t.Fatalf("len %d want %d", len(b), n)
		}
		if uintptr(unsafe.Pointer(&b[0]))%Align != 0 {
			t.Fatalf("buffer of %d not aligned", n)
		}
		Put(b)
	}
}

func TestReuse(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		b := Get(1 << 20)
		Put(b)
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per Get/Put", allocs)
	}
}
