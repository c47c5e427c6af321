package engine_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestConformance runs the same behaviour checks against every registered
// engine, including a randomised sequence checked against a plain map.
func TestConformance(t *testing.T) {
	for _, name := range engine.Names() {
		t.Run(name, func(t *testing.T) {
			spec, dir := enginetest.Spec(t, name)
			e, err := engine.Open(spec, dir)
			if err != nil {
				t.Fatal(err)
			}
			basic(t, e)
			model(t, e)
			reentrant(t, e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if name == "mem" {
				return
			}
			// persistence: reopen sees the data
			e2, err := engine.Open(spec, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer e2.Close()
			if v, err := e2.Get([]byte("a/1")); err != nil || string(v) != "one" {
				t.Fatalf("after reopen: %q %v", v, err)
			}
		})
	}
}

func basic(t *testing.T, e engine.Engine) {
	if _, err := e.Get([]byte("nope")); err != engine.ErrNotFound {
		t.Fatalf("missing key: %v", err)
	}
	var b engine.Batch
	b.Set([]byte("a/1"), []byte("one"))
	b.Set([]byte("a/2"), []byte("two"))
	b.Set([]byte("a/3"), []byte("three"))
	b.Set([]byte("b/1"), []byte("bee"))
	b.Set([]byte("a/4"), []byte("x"))
	b.Del([]byte("a/4"))
	if err := e.Apply(&b, true); err != nil {
		t.Fatal(err)
	}
	var got []string
	e.Scan([]byte("a/"), nil, func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if fmt.Sprint(got) != "[a/1=one a/2=two a/3=three]" {
		t.Fatalf("scan: %v", got)
	}
	got = nil
	e.Scan([]byte("a/"), []byte("a/2"), func(k, v []byte) bool {
		got = append(got, string(k))
		return len(got) < 1
	})
	if fmt.Sprint(got) != "[a/2]" {
		t.Fatalf("scan from start with stop: %v", got)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	// values returned by Get are copies
	v, _ := e.Get([]byte("a/1"))
	v[0] = 'X'
	if v2, _ := e.Get([]byte("a/1")); string(v2) != "one" {
		t.Fatal("Get returned an alias")
	}
}

func model(t *testing.T, e engine.Engine) {
	r := rand.New(rand.NewSource(1))
	m := map[string]string{}
	for k := range 3 {
		m[fmt.Sprintf("a/%d", k+1)] = []string{"one", "two", "three"}[k]
	}
	for i := 0; i < 2000; i++ {
		var b engine.Batch
		for j := r.Intn(4); j >= 0; j-- {
			k := fmt.Sprintf("r/%03d", r.Intn(200))
			if r.Intn(3) == 0 {
				b.Del([]byte(k))
				delete(m, k)
			} else {
				v := fmt.Sprint(r.Int())
				b.Set([]byte(k), []byte(v))
				m[k] = v
			}
		}
		if err := e.Apply(&b, false); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for k, v := range m {
		if k[0] == 'r' {
			want = append(want, k+"="+v)
		}
	}
	sort.Strings(want)
	var got []string
	e.Scan([]byte("r/"), nil, func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("model mismatch: %d vs %d entries", len(got), len(want))
	}
	for k, v := range m {
		g, err := e.Get([]byte(k))
		if err != nil || !bytes.Equal(g, []byte(v)) {
			t.Fatalf("get %s: %q %v", k, g, err)
		}
	}
}

// BenchmarkCreateDurable measures single-key durable commits from 8
// concurrent writers: the metadata service's create path. Run with
//
//	go test ./meta/engine -bench CreateDurable -benchtime 2000x
func BenchmarkCreateDurable(b *testing.B) {
	for _, name := range []string{"pebble", "bolt"} {
		b.Run(name, func(b *testing.B) {
			e, err := engine.Open(name, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			b.SetParallelism(8)
			var n int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var bt engine.Batch
					k := fmt.Sprintf("i/%d-%d", rand.Int63(), n)
					bt.Set([]byte(k), make([]byte, 64))
					bt.Set([]byte("d/"+k), make([]byte, 16))
					if err := e.Apply(&bt, true); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// reentrant: fn may call the engine during a Scan — Get, and Apply from
// another goroutine that the scan then waits for — without deadlock, over
// more entries than one batch, and sees every entry that was there before
// the scan once, in order.
func reentrant(t *testing.T, e engine.Engine) {
	var b engine.Batch
	for i := 0; i < 1000; i++ {
		b.Set([]byte(fmt.Sprintf("reentrant/%04d", i)), []byte("v"))
	}
	if err := e.Apply(&b, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var last string
		n := 0
		err := e.Scan([]byte("reentrant/"), nil, func(k, v []byte) bool {
			if string(k) <= last {
				t.Errorf("scan went back: %q after %q", k, last)
			}
			last = string(k)
			n++
			if _, err := e.Get(k); err != nil {
				t.Errorf("get %q inside the scan: %v", k, err)
			}
			if n%100 == 0 {
				// a writer from elsewhere, waited for inside the scan
				w := make(chan error)
				go func() {
					var wb engine.Batch
					wb.Set([]byte(fmt.Sprintf("reentrant-w/%d", n)), []byte("x"))
					w <- e.Apply(&wb, false)
				}()
				if err := <-w; err != nil {
					t.Errorf("apply during the scan: %v", err)
				}
			}
			return true
		})
		if err == nil && n != 1000 {
			err = fmt.Errorf("scanned %d of 1000", n)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a scan calling the engine deadlocked")
	}
}
