package drops

import (
	"reflect"
	"testing"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestDrops: drops added in a batch are owed once it is applied, at their
// generation only (a newer one replaces an older); they are listed per
// chunk, per server and all together, in key order, and kept across a
// reopen; forgotten, they are gone. Keys of other prefixes are not drops.
func TestDrops(t *testing.T) {
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		e := reopen()
		d := Open(e)
		var b engine.Batch
		d.Add(&b, 7, 0, 3, 5)
		d.Add(&b, 7, 0, 4, 5)
		d.Add(&b, 7, 1, 3, 6)
		d.Add(&b, 9, 0, 2, 1)
		b.Set([]byte{'S', 0, 0, 0, 0, 0, 0, 0, 3}, []byte("a server"))
		if d.Owes(7, 0, 3, 5) {
			t.Fatal("a drop owed before its batch was applied")
		}
		if err := e.Apply(&b, true); err != nil {
			t.Fatal(err)
		}
		if !d.Owes(7, 0, 3, 5) || d.Owes(7, 0, 3, 4) || d.Owes(7, 0, 5, 5) {
			t.Fatal("Owes: want server 3's drop of chunk 0 at generation 5 only")
		}
		b = engine.Batch{}
		d.Add(&b, 7, 0, 3, 8) // given up again at a newer generation
		if err := e.Apply(&b, true); err != nil {
			t.Fatal(err)
		}
		if d.Owes(7, 0, 3, 5) || !d.Owes(7, 0, 3, 8) {
			t.Fatal("a drop owed again keeps its old generation")
		}
		if t.Name() != "TestDrops/mem" {
			e = reopen()
			d = Open(e)
		}
		if got := d.Servers(7, 0); !reflect.DeepEqual(got, []uint64{3, 4}) {
			t.Fatalf("servers owing chunk 0 of 7: %v", got)
		}
		if got := d.Of(7, 1); !reflect.DeepEqual(got, []Drop{{7, 1, 3, 6}}) {
			t.Fatalf("chunk 1 of 7: %v", got)
		}
		want := []Drop{{7, 0, 3, 8}, {7, 0, 4, 5}, {7, 1, 3, 6}, {9, 0, 2, 1}}
		if got := d.All(); !reflect.DeepEqual(got, want) {
			t.Fatalf("all drops %v, want %v", got, want)
		}
		b = engine.Batch{}
		d.Forget(&b, 7, 0, 3)
		d.Forget(&b, 9, 0, 2)
		if err := e.Apply(&b, true); err != nil {
			t.Fatal(err)
		}
		if got := d.All(); !reflect.DeepEqual(got, []Drop{{7, 0, 4, 5}, {7, 1, 3, 6}}) {
			t.Fatalf("after two were forgotten: %v", got)
		}
	})
}
