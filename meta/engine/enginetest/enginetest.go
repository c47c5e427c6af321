// Package enginetest runs a test against every registered metadata
// engine (meta/engine), reopened over the same directory (or, for a
// remote engine, the same key prefix) as a restart does. For the etcd
// engine it starts an etcd member of its own (meta/engine/etcdserver)
// with its data on /dev/shm, killed with the test binary; without an
// etcd binary the etcd cases are skipped, unless SLUICE_REQUIRE_ETCD=1
// (make test) makes that a failure. It is for the tests of the services
// that keep their state in an engine; it must not be linked by anything
// but tests.
package enginetest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/etcdserver"
)

// Each runs f once per engine, as a subtest named after it. open closes
// the engine its last call returned, if any, and opens the engine again
// on the same directory: a restart. The last one is closed when the
// subtest ends.
func Each(t *testing.T, f func(t *testing.T, open func() engine.Engine)) {
	for _, name := range engine.Names() {
		t.Run(name, func(t *testing.T) {
			spec, dir := Spec(t, name)
			var e engine.Engine
			open := func() engine.Engine {
				t.Helper()
				if e != nil {
					e.Close()
				}
				var err error
				if e, err = engine.Open(spec, dir); err != nil {
					t.Fatal(err)
				}
				return e
			}
			t.Cleanup(func() {
				if e != nil {
					e.Close()
				}
			})
			f(t, open)
		})
	}
}

// Spec returns what opens a fresh store of engine name for t, and the
// directory it keeps its files in: the name and a temporary directory,
// or for a remote engine its URI with a key prefix of t's own.
func Spec(t testing.TB, name string) (spec, dir string) {
	t.Helper()
	dir = t.TempDir()
	if !engine.Remote(name) {
		return name, dir
	}
	if name != "etcd" {
		t.Fatalf("enginetest: no server for remote engine %s", name)
	}
	c := etcd(t)
	prefix := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return c.URI(fmt.Sprintf("t%d-%s", seq(), prefix)), dir
}

var (
	etcdOnce sync.Once
	etcdC    *etcdserver.Cluster
	etcdErr  error
	seqMu    sync.Mutex // guards seqN
	seqN     int
)

func seq() int {
	seqMu.Lock()
	defer seqMu.Unlock()
	seqN++
	return seqN
}

// etcd is the test binary's etcd member, started by the first test that
// asks for it and killed with the binary.
func etcd(t testing.TB) *etcdserver.Cluster {
	t.Helper()
	if !etcdserver.Available("") {
		if os.Getenv("SLUICE_REQUIRE_ETCD") == "1" {
			t.Fatal("SLUICE_REQUIRE_ETCD=1 and no etcd binary on PATH (apt-get install etcd-server)")
		}
		t.Skip("no etcd binary on PATH (apt-get install etcd-server)")
	}
	etcdOnce.Do(func() {
		base := "/dev/shm"
		if _, err := os.Stat(base); err != nil {
			base = ""
		}
		dir, err := os.MkdirTemp(base, "sluice-enginetest-etcd.")
		if err != nil {
			etcdErr = err
			return
		}
		etcdC, etcdErr = etcdserver.Start(etcdserver.Config{Dir: dir, DieWithParent: true, RemoveWithParent: true})
		if etcdErr != nil {
			os.RemoveAll(dir)
		}
	})
	if etcdErr != nil {
		t.Fatal(etcdErr)
	}
	return etcdC
}
