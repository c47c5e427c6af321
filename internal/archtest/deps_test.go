// Package archtest holds tests of the package graph itself: which packages
// may link which (docs/architecture.md, "Package graph").
package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/sluice-hpc/sluice/"

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestDataPathLinksNoServerCode: the mount, the forwarding daemon and the
// data server link contracts, not the metadata daemon's services, stores or
// policies: mount → contract ← daemon. The one policy the daemons run
// themselves is the QoS scheduler (policy/qos) at their request gates; it
// is pure, so linking it brings no server code with it.
func TestDataPathLinksNoServerCode(t *testing.T) {
	forbidden := []string{
		"github.com/cockroachdb/pebble", "go.etcd.io/bbolt", "github.com/DataDog/zstd",
		mod + "policy/", mod + "manager/", mod + "beacon/store", mod + "meta",
	}
	allowed := map[string]string{"fwd": mod + "policy/qos", "data": mod + "policy/qos"}
	for _, pkg := range []string{"client", "fwd", "data"} {
		for _, d := range deps(t, pkg) {
			if d == allowed[pkg] {
				continue
			}
			for _, f := range forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s links %s", pkg, d)
				}
			}
		}
	}
}

// TestPoliciesArePure: a policy package links the standard library and
// sluice's core and contract packages only: no RPC, no store, no daemon,
// no network or file system of its own (what it decides from, it is
// given).
func TestPoliciesArePure(t *testing.T) {
	out, err := exec.Command("go", "list", mod+"policy/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{mod + "policy/", mod + "beacon", mod + "layout", mod + "internal/wire", mod + "internal/varbuf", mod + "internal/size", mod + "internal/rendezvous",
		mod + "fwdmap", "github.com/klauspost/compress"}
	forbiddenStd := []string{"net", "net/http", "os/exec", "database/sql"}
	for _, p := range strings.Fields(string(out)) {
		pkg := strings.TrimPrefix(p, mod)
		for _, d := range deps(t, pkg) {
			if d == mod+"beacon/store" || strings.HasPrefix(d, mod+"beacon/beaconrpc") {
				t.Errorf("%s links %s", pkg, d)
				continue
			}
			if !strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
				for _, f := range forbiddenStd {
					if d == f {
						t.Errorf("%s links %s", pkg, d)
					}
				}
				continue // the standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(d, a)
			}
			if !ok {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}

// TestPoliciesReadNoClock: policies are given the time; they never read
// the wall clock, sleep or start timers.
func TestPoliciesReadNoClock(t *testing.T) {
	files, err := filepath.Glob("../../policy/*/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no policy sources found: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"time.Now(", "time.Sleep(", "time.After(", "time.NewTimer(", "time.NewTicker(", "time.Since(", "time.Until("} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s calls %s", f, bad)
			}
		}
	}
}

// TestClientCoreWithoutFUSE: the client core (client/vfs) is tested and
// reused without a mount: it links neither go-fuse nor the adapter, nor
// metrics or Beacon (the adapter records and exports).
func TestClientCoreWithoutFUSE(t *testing.T) {
	prefixes := []string{"github.com/hanwen/go-fuse", "github.com/prometheus", mod + "beacon"}
	for _, d := range deps(t, "client/vfs") {
		bad := d == mod+"client"
		for _, f := range prefixes {
			bad = bad || strings.HasPrefix(d, f)
		}
		if bad {
			t.Errorf("client/vfs links %s", d)
		}
	}
}
