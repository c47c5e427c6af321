package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine/etcdserver"
)

// TestEtcdEngine: a local cluster whose metadata lives in a three-member
// etcd cluster (`sluice cluster up --engine etcd`, every member a process
// of its own). Files and directories made, renamed and removed read back
// right; a member killed -9 does not stop the namespace (two of three
// keep the quorum), and neither does its return; the metadata service
// killed -9 and restarted finds every file on etcd.
func TestEtcdEngine(t *testing.T) {
	if !etcdserver.Available("") {
		if os.Getenv("SLUICE_REQUIRE_ETCD") == "1" {
			t.Fatal("SLUICE_REQUIRE_ETCD=1 and no etcd on PATH (apt-get install etcd-server)")
		}
		t.Skip("no etcd on PATH (apt-get install etcd-server)")
	}
	c := startCluster(t, "--engine", "etcd")
	want := map[string][]byte{}
	write := func(name string, data []byte) {
		t.Helper()
		mustWrite(t, c.path(name), data)
		want[name] = data
	}
	check := func(when string) {
		t.Helper()
		for name, data := range want {
			if got, err := os.ReadFile(c.path(name)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: %s reads back wrong (%d bytes, %v)", when, name, len(got), err)
			}
		}
		ents, err := os.ReadDir(c.path("small"))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		n := 0
		for name := range want {
			if strings.HasPrefix(name, "small/") {
				n++
			}
		}
		if len(ents) != n {
			t.Fatalf("%s: small/ lists %d entries, want %d", when, len(ents), n)
		}
	}
	if err := os.Mkdir(c.path("small"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		write(fmt.Sprintf("small/f%03d", i), pattern(i, 4096))
	}
	write("big", pattern(7, 16<<20))
	for i := 0; i < 300; i += 3 { // renames and removals
		old, nw := fmt.Sprintf("small/f%03d", i), fmt.Sprintf("small/r%03d", i)
		if err := os.Rename(c.path(old), c.path(nw)); err != nil {
			t.Fatal(err)
		}
		want[nw] = want[old]
		delete(want, old)
		if i%2 == 0 {
			if err := os.Remove(c.path(nw)); err != nil {
				t.Fatal(err)
			}
			delete(want, nw)
		}
	}
	check("before any failure")

	// the member dies while creates are in flight: the transactions on
	// its connection go to the others, and no acknowledged create is lost
	done := make(chan struct{})
	var mu sync.Mutex // guards want while the writer runs
	go func() {
		defer close(done)
		for i := 300; i < 400; i++ {
			name, data := fmt.Sprintf("small/f%03d", i), pattern(i, 4096)
			if err := os.WriteFile(c.path(name), data, 0o644); err != nil {
				t.Errorf("%s while a member dies: %v", name, err)
				return
			}
			mu.Lock()
			want[name] = data
			mu.Unlock()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	c.kill9("etcd0")
	<-done
	check("with one etcd member killed while creates ran")
	c.restart("etcd0")

	c.kill9("meta")
	c.restart("meta")
	check("after the metadata service's kill -9 and restart")
	write("after", pattern(9, 1<<20))
	check("written after the restart")
	if out, err := c.sluice("cluster", "status"); err != nil || !strings.Contains(out, "fwd") {
		t.Fatalf("status: %v\n%s", err, out)
	}
}
