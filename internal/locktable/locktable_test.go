package locktable

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// cells is the model's bytes: 0..63, and cell 64 standing for every byte
// from 64 to MaxEnd (no range starts or ends inside it).
const cells = 65

// model is each owner's lock of each kind on each cell of one file:
// 0 none, 1 read, 2 write.
type model map[Owner]*[2][cells]uint8

func (m model) of(o Owner) *[2][cells]uint8 {
	if m[o] == nil {
		m[o] = new([2][cells]uint8)
	}
	return m[o]
}

func cellsOf(start, end uint64) (int, int) {
	e := int(min(end, 64))
	return int(start), e
}

// TestTableAgainstModel: random grants, unlocks and dropped mounts on one
// file by owners of two mounts, checked byte by byte against a model that
// keeps each owner's mode per byte, and the table's form (an owner's
// locks of one kind never overlap; those of one type never touch).
func TestTableAgainstModel(t *testing.T) {
	owners := []Owner{{1, 10}, {1, 11}, {2, 10}, {2, 20}}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		var tb Table
		m := model{}
		const ino = 5
		for step := range 300 {
			o := owners[r.IntN(len(owners))]
			k := Kind(r.IntN(2))
			start := uint64(r.IntN(64))
			end := start + uint64(r.IntN(8))
			switch r.IntN(6) {
			case 0:
				end = MaxEnd
			case 1:
				end = min(end, 63)
			}
			end = min(end, MaxEnd)
			if end > 63 && end != MaxEnd {
				end = 63
			}
			if k == Flock {
				start, end = 0, MaxEnd
			}
			s, e := cellsOf(start, end)
			switch op := r.IntN(10); {
			case op < 6: // lock
				typ := Type(r.IntN(2))
				l := Lock{Owner: o, Kind: k, Type: typ, Start: start, End: end}
				var want []Owner
				for other, c := range m {
					if other == o {
						continue
					}
					for i := s; i <= e; i++ {
						if c[k][i] != 0 && (c[k][i] == 2 || typ == Write) {
							want = append(want, other)
							break
						}
					}
				}
				got := tb.Blockers(ino, l)
				_, conflict := tb.Conflict(ino, l)
				slices.SortFunc(want, func(a, b Owner) int { return int(a.Client*100+a.ID) - int(b.Client*100+b.ID) })
				slices.SortFunc(got, func(a, b Owner) int { return int(a.Client*100+a.ID) - int(b.Client*100+b.ID) })
				if !slices.Equal(got, want) || conflict != (len(want) > 0) {
					t.Fatalf("seed %d step %d: %+v blocked by %v (conflict %v), model %v", seed, step, l, got, conflict, want)
				}
				if conflict {
					continue
				}
				tb.Set(ino, l)
				c := m.of(o)
				for i := s; i <= e; i++ {
					c[k][i] = uint8(typ) + 1
				}
			case op < 9: // unlock
				tb.Unlock(ino, k, o, start, end)
				c := m.of(o)
				for i := s; i <= e; i++ {
					c[k][i] = 0
				}
			default: // the mount dies
				tb.DropClient(o.Client)
				for other := range m {
					if other.Client == o.Client {
						delete(m, other)
					}
				}
			}
			check(t, seed, step, &tb, ino, m)
		}
	}
}

// check compares the table's locks on ino with the model.
func check(t *testing.T, seed uint64, step int, tb *Table, ino uint64, m model) {
	t.Helper()
	got := model{}
	ls := tb.files[ino]
	for i, l := range ls {
		if l.End < l.Start {
			t.Fatalf("seed %d step %d: empty lock %+v", seed, step, l)
		}
		if (l.Start > 63 && !(l.Start == 64 && l.End == MaxEnd)) || (l.End > 63 && l.End != MaxEnd) {
			t.Fatalf("seed %d step %d: lock %+v outside every range asked", seed, step, l)
		}
		s, e := cellsOf(l.Start, l.End)
		c := got.of(l.Owner)
		for i := s; i <= e; i++ {
			c[l.Kind][i] = uint8(l.Type) + 1
		}
		for _, n := range ls[i+1:] {
			if n.Owner != l.Owner || n.Kind != l.Kind {
				continue
			}
			if l.overlaps(n) {
				t.Fatalf("seed %d step %d: %+v and %+v overlap", seed, step, l, n)
			}
			if n.Type == l.Type && (l.End+1 == n.Start || n.End+1 == l.Start) {
				t.Fatalf("seed %d step %d: %+v and %+v touch and were not merged", seed, step, l, n)
			}
		}
	}
	for o, c := range m {
		g := got[o]
		if g == nil {
			g = new([2][cells]uint8)
		}
		if *g != *c {
			t.Fatalf("seed %d step %d: owner %v holds %v, model %v", seed, step, o, *g, *c)
		}
	}
	for o := range got {
		if m[o] == nil {
			t.Fatalf("seed %d step %d: owner %v holds locks the model does not", seed, step, o)
		}
	}
}

// TestPosixAndFlockApart: a flock lock and a POSIX lock of the same file
// do not conflict (Linux keeps them apart); an OFD-style owner conflicts
// with a process owner of the same mount.
func TestPosixAndFlockApart(t *testing.T) {
	var tb Table
	a, b := Owner{1, 1}, Owner{1, 2}
	tb.Set(9, Lock{Owner: a, Kind: Flock, Type: Write})
	if _, c := tb.Conflict(9, Lock{Owner: b, Kind: Posix, Type: Write, Start: 0, End: MaxEnd}); c {
		t.Fatal("a POSIX lock conflicts with a flock lock")
	}
	if _, c := tb.Conflict(9, Lock{Owner: b, Kind: Flock, Type: Read, End: MaxEnd}); !c {
		t.Fatal("a shared flock lock granted beside an exclusive one")
	}
	if hs := tb.Of(1); len(hs) != 1 || hs[0].End != MaxEnd {
		t.Fatalf("held %+v", hs)
	}
	if !tb.Unlock(9, Flock, a, 0, 0) || tb.Len() != 0 {
		t.Fatal("flock unlock left the lock")
	}
}
