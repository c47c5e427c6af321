package vfs

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/ident"
)

type routeBed struct {
	home  *fakeFwd
	mgr   *fakeManager
	clock *fakeClock
	fwds  map[string]*fakeFwd
	dials int
	r     *Router
}

func newRouteBed() *routeBed {
	b := &routeBed{home: newFakeFwd("home"), mgr: &fakeManager{}, clock: &fakeClock{t: time.Unix(1e9, 0)},
		fwds: map[string]*fakeFwd{}}
	for _, a := range []string{"f1", "f2", "f3"} {
		b.fwds[a] = newFakeFwd(a)
	}
	b.r = NewRouter(RouterConfig{Home: b.home, HomeAddr: "home", Manager: b.mgr,
		Dial: func(addr string) Caller { b.dials++; return b.fwds[addr] },
		Now:  b.clock.Now,
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil))})
	return b
}

func (b *routeBed) name(c Caller) string { return c.(*fakeFwd).name }

// waitAsked waits until the manager was asked n times.
func (b *routeBed) waitAsked(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 500 && b.mgr.count() < n; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if got := b.mgr.count(); got < n {
		t.Fatalf("manager asked %d times, want %d", got, n)
	}
	time.Sleep(10 * time.Millisecond) // let the answer be installed
}

func TestRouteWithoutJobGoesHome(t *testing.T) {
	b := newRouteBed()
	b.mgr.set(1, "f1")
	if c := b.r.Pick(ident.ID{Rank: -1}, 5); b.name(c) != "home" {
		t.Fatalf("a request outside any job went to %s", b.name(c))
	}
	if b.mgr.count() != 0 {
		t.Fatal("the manager was asked for a request outside any job")
	}
	r := NewRouter(RouterConfig{Home: b.home})
	if c := r.Pick(caller, 5); c != Caller(b.home) {
		t.Fatal("without a manager a job's request left the home node")
	}
}

// A job's requests go to its forwarding nodes, one file to one node; the
// placement is asked once per TTL and a change moves new requests.
func TestRouteFollowsPlacement(t *testing.T) {
	b := newRouteBed()
	b.mgr.set(1, "f1", "f2")
	got := map[uint64]string{}
	for ino := uint64(0); ino < 4; ino++ {
		got[ino] = b.name(b.r.Pick(caller, ino))
	}
	if got[0] != "f1" || got[1] != "f2" || got[2] != "f1" || got[3] != "f2" {
		t.Fatalf("spread over the job's nodes by inode: %v", got)
	}
	if b.name(b.r.Pick(caller, 1)) != got[1] {
		t.Fatal("one file's requests changed node")
	}
	if n := b.mgr.count(); n != 1 {
		t.Fatalf("manager asked %d times within the TTL", n)
	}
	if b.dials != 2 {
		t.Fatalf("%d dials for two forwarding nodes (clients are pooled)", b.dials)
	}

	b.mgr.set(2, "f3")
	b.clock.Advance(RouteTTL / 2)
	b.r.Pick(caller, 0)
	if b.mgr.count() != 1 {
		t.Fatal("placement asked again before the TTL")
	}
	b.clock.Advance(RouteTTL)
	// the request that finds the route old still goes where it was
	// (the refresh runs in the background); later ones follow it
	b.r.Pick(caller, 0)
	b.waitAsked(t, 2)
	if c := b.name(b.r.Pick(caller, 0)); c != "f3" {
		t.Fatalf("after the placement changed a request went to %s, want f3", c)
	}
	// another job on the same node has its own route
	other := caller
	other.Job = "7002"
	b.mgr.set(1, "f2")
	if c := b.name(b.r.Pick(other, 0)); c != "f2" {
		t.Fatalf("job 7002 went to %s", c)
	}
}

// A manager that fails leaves the last placement in use (or the home node
// at first) and is asked again after the TTL.
func TestRouteManagerFailure(t *testing.T) {
	b := newRouteBed()
	b.mgr.err = errors.New("manager down")
	if c := b.name(b.r.Pick(caller, 0)); c != "home" {
		t.Fatalf("with no placement a request went to %s", c)
	}
	b.mgr.mu.Lock()
	b.mgr.err = nil
	b.mgr.mu.Unlock()
	b.mgr.set(1, "f1")
	b.clock.Advance(RouteTTL + time.Millisecond)
	b.r.Pick(caller, 0)
	b.waitAsked(t, 2)
	if c := b.name(b.r.Pick(caller, 0)); c != "f1" {
		t.Fatalf("after the manager came back: %s", c)
	}
	b.mgr.mu.Lock()
	b.mgr.err = errors.New("manager down again")
	b.mgr.mu.Unlock()
	b.clock.Advance(RouteTTL + time.Millisecond)
	b.r.Pick(caller, 0)
	b.waitAsked(t, 3)
	if c := b.name(b.r.Pick(caller, 0)); c != "f1" {
		t.Fatalf("a failed refresh dropped the placement: %s", c)
	}
}

// Requests that come while a job's first placement is being fetched wait
// for it rather than going to the home node (write-behind sends several
// at once; they must not split between two nodes).
func TestRouteFirstFetchShared(t *testing.T) {
	b := newRouteBed()
	b.mgr.set(1, "f2")
	b.mgr.mu.Lock() // hold the manager
	var wg sync.WaitGroup
	names := make([]string, 8)
	for i := range names {
		wg.Add(1)
		go func() { defer wg.Done(); names[i] = b.name(b.r.Pick(caller, 0)) }()
	}
	time.Sleep(50 * time.Millisecond)
	b.mgr.mu.Unlock()
	wg.Wait()
	for i, n := range names {
		if n != "f2" {
			t.Fatalf("request %d went to %s during the first fetch", i, n)
		}
	}
	if n := b.mgr.count(); n != 1 {
		t.Fatalf("manager asked %d times for one job", n)
	}
}

// A job's forwarding node is dialled with its stand-ins behind it (the
// placement's Fallbacks), which its client turns to when it is lost.
func TestRouteStandIns(t *testing.T) {
	b := newRouteBed()
	var dialled []string
	b.r.cfg.Dial = func(addr string) Caller { dialled = append(dialled, addr); return b.fwds["f1"] }
	b.mgr.set(1, "f1")
	b.mgr.pl.Fallbacks = []fwdmap.Target{{ID: "f2", Addr: "f2"}, {ID: "f1", Addr: "f1"}, {ID: "f3", Addr: "f3"}}
	b.r.Pick(caller, 0)
	if len(dialled) != 1 || dialled[0] != "f1,f2,f3" {
		t.Fatalf("dialled %q, want the job's node then its stand-ins: f1,f2,f3", dialled)
	}
}
