package layout

import (
	"math/rand"
	"testing"
)

// TestPiecesModel checks Pieces and LocalSize against a byte-by-byte model.
func TestPiecesModel(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for iter := 0; iter < 300; iter++ {
		g := 1 + r.Intn(4)
		unit := int64(1 + r.Intn(16))
		chunk := unit * int64(g) * int64(1+r.Intn(4))
		off := r.Int63n(chunk)
		n := 1 + r.Int63n(chunk-off)
		// model: byte b of the chunk goes to member (b/unit)%g at local
		// (b/unit/g)*unit + b%unit
		seen := int64(0)
		for _, p := range Pieces(off, n, g, unit) {
			for i := int64(0); i < p.Len; i++ {
				b := off + p.BufOff + i
				if p.BufOff+i != seen {
					t.Fatalf("pieces not in buffer order")
				}
				seen++
				wm := int((b / unit) % int64(g))
				if g == 1 {
					wm = 0
				}
				wl := (b/unit/int64(g))*unit + b%unit
				if g == 1 {
					wl = b
				}
				if p.Member != wm || p.LocalOff+i != wl {
					t.Fatalf("g=%d unit=%d byte %d: got member %d local %d, want %d %d", g, unit, b, p.Member, p.LocalOff+i, wm, wl)
				}
			}
		}
		if seen != n {
			t.Fatalf("covered %d of %d", seen, n)
		}
		// LocalSize: the highest local byte + 1 of each member for [0, L)
		L := r.Int63n(chunk + 1)
		want := make([]int64, g)
		if L > 0 {
			for _, p := range Pieces(0, L, g, unit) {
				if e := p.LocalOff + p.Len; e > want[p.Member] {
					want[p.Member] = e
				}
			}
		}
		for m := 0; m < g; m++ {
			if got := LocalSize(m, g, unit, L); got != want[m] {
				t.Fatalf("LocalSize(m=%d g=%d unit=%d L=%d)=%d want %d", m, g, unit, L, got, want[m])
			}
		}
	}
}

func TestSpans(t *testing.T) {
	s := Spans(10, 25, 10)
	if len(s) != 3 || s[0].Idx != 1 || s[2].Idx != 3 || s[2].Len != 5 || s[1].BufOff != 10 {
		t.Fatalf("%+v", s)
	}
	s = Spans(5<<30, 1, DefaultChunkSize)
	if s[0].Idx != (5<<30)/DefaultChunkSize {
		t.Fatal("past 4 GiB")
	}
}

// TestLogicalInvertsPieces: mapping each piece back gives the range it
// came from, and ChunkLen is the inverse of LocalSize.
func TestLogicalInvertsPieces(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for iter := 0; iter < 500; iter++ {
		g := 1 + r.Intn(4)
		unit := int64(1 + r.Intn(16))
		chunk := unit * int64(g) * int64(1+r.Intn(4))
		off := r.Int63n(chunk)
		n := 1 + r.Int63n(chunk-off)
		for _, p := range Pieces(off, n, g, unit) {
			pos := off + p.BufOff
			var got int64
			for _, run := range Logical(p.Member, g, unit, p.LocalOff, p.Len) {
				if run.Off != pos {
					t.Fatalf("g=%d unit=%d piece %+v: run at %d, want %d", g, unit, p, run.Off, pos)
				}
				pos += run.Len
				got += run.Len
			}
			if got != p.Len {
				t.Fatalf("runs cover %d of %d", got, p.Len)
			}
		}
		L := r.Int63n(chunk + 1)
		var end int64
		for m := 0; m < g; m++ {
			end = max(end, ChunkLen(m, g, unit, LocalSize(m, g, unit, L)))
		}
		if end != L {
			t.Fatalf("g=%d unit=%d: chunk of %d bytes: ChunkLen gives %d", g, unit, L, end)
		}
	}
}
