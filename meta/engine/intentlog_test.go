package engine

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestIntentLogReplay: a batch that reached only the intent log (the
// process died before the engine persisted it) is there after reopening,
// and a torn tail is ignored.
func TestIntentLogReplay(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	l, err := openIntentLog(filepath.Join(dir, "intent.log"))
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.Set([]byte("k1"), []byte("v1"))
	b.Set([]byte("k2"), []byte("v2"))
	l.append(&b)
	var b2 Batch
	b2.Del([]byte("k2"))
	l.append(&b2)
	l.f.Write([]byte{9, 0, 0, 0, 1, 2}) // torn record
	l.f.Close()
	p, err = OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if v, err := p.Get([]byte("k1")); err != nil || string(v) != "v1" {
		t.Fatalf("k1: %q %v", v, err)
	}
	if _, err := p.Get([]byte("k2")); err != ErrNotFound {
		t.Fatalf("k2 should be deleted: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "intent.log")); st.Size() != 0 {
		t.Fatalf("log not emptied after replay: %d bytes", st.Size())
	}
}

func FuzzDecodeBatch(f *testing.F) {
	var b Batch
	b.Set([]byte("a"), []byte("b"))
	b.Del([]byte("c"))
	f.Add(encodeBatch(nil, &b))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := decodeBatch(p)
		if err != nil {
			return
		}
		again, err := decodeBatch(encodeBatch(nil, b))
		if err != nil || len(again.Ops) != len(b.Ops) {
			t.Fatalf("re-encode: %v", err)
		}
		for i := range b.Ops {
			if !reflect.DeepEqual(string(b.Ops[i].Key), string(again.Ops[i].Key)) || b.Ops[i].Delete != again.Ops[i].Delete {
				t.Fatal("round trip changed a key")
			}
		}
	})
}

// TestReplayKeepsSyncedOrder: an unsynced batch and then a synced one
// that overwrites its key, then a crash (the directory as the dead process
// left it): after reopening, the key holds the synced batch's value, not
// the older one the intent log's replay would bring back if synced
// batches bypassed the log.
func TestReplayKeepsSyncedOrder(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var b1, b2 Batch
	b1.Set([]byte("loc"), []byte("mem, generation 0"))
	b2.Set([]byte("loc"), []byte("ssd, generation 1"))
	if err := p.Apply(&b1, false); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(&b2, true); err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir() // what a kill -9 leaves: the files as they are
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	q, err := OpenPebble(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if v, err := q.Get([]byte("loc")); err != nil || string(v) != "ssd, generation 1" {
		t.Fatalf("after the crash loc = %q (%v), want the synced batch's value", v, err)
	}
}
