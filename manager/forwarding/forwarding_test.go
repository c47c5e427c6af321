package forwarding

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/store"
	"github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/dfra"
)

func TestManagerStartMapEndRemap(t *testing.T) {
	servers := []wire.ServerInfo{
		{ID: 1, Role: "fwd", Addr: "a:1", Alive: true},
		{ID: 2, Role: "fwd", Addr: "a:2", Alive: true},
		{ID: 3, Role: "fwd", Addr: "a:3", Alive: true},
		{ID: 4, Role: "data", Tier: "mem", Alive: true},
	}
	var slow []beacon.SlowServer
	profiles := map[string]beacon.Profile{"ckpt": {Key: "ckpt", Mode: beacon.ModeN1, IONodes: 2}}
	m := New(Config{Servers: func() []wire.ServerInfo { return servers },
		Health:  func() []beacon.SlowServer { return slow },
		Profile: func(k string) (beacon.Profile, bool) { p, ok := profiles[k]; return p, ok },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := m.Start(fwdmap.JobSpec{ID: "x"}); err == nil {
		t.Fatal("job without nodes accepted")
	}
	p, err := m.Start(fwdmap.JobSpec{ID: "j", App: "tag:ckpt", Nodes: []string{"cn1", "cn2"}})
	if err != nil || !p.Dedicated || len(p.Fwds) != 1 || p.Fwds[0].Addr == "" {
		t.Fatalf("start: %+v %v", p, err)
	}
	got, _ := m.Map("j", "cn1")
	if got.Version != p.Version || got.Fwds[0] != p.Fwds[0] {
		t.Fatalf("map: %+v", got)
	}
	// the other live nodes stand in for the job's, in their order
	if want := dfra.StandIns(p.Fwds[0].ID, []dfra.Fwd{{ID: "fwd-1", Alive: true}, {ID: "fwd-2", Alive: true}, {ID: "fwd-3", Alive: true}}); len(got.Fallbacks) != 2 ||
		got.Fallbacks[0].ID != want[0] || got.Fallbacks[0].Addr == "" {
		t.Fatalf("a registered job's stand-ins %+v, want %v with addresses", got.Fallbacks, want)
	}
	// an unregistered job gets the fixed mapping of its node
	if f, err := m.Map("other", "cn9"); err != nil || f.Policy != "ffm" || len(f.Fwds) != 1 {
		t.Fatalf("unregistered: %+v %v", f, err)
	}
	// its node turns fail-slow: remapped, with a new version
	slow = []beacon.SlowServer{{Server: p.Fwds[0].ID}}
	m.Check()
	got, _ = m.Map("j", "cn1")
	if got.Version == p.Version || got.Fwds[0].ID == p.Fwds[0].ID || !strings.Contains(strings.Join(got.Reasons, ";"), "remapped") {
		t.Fatalf("not remapped: %+v", got)
	}
	m.End("j")
	if len(m.List()) != 0 {
		t.Fatal("job not ended")
	}
	checkHistory(t, m)
	// decisions kept in Beacon's store survive the manager
	store, err := store.Open("", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Unix(1000, 0)
	cfg := Config{Servers: func() []wire.ServerInfo { return servers }, Decisions: store,
		Now: func() time.Time { now = now.Add(time.Second); return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	slow = nil
	m1 := New(cfg)
	m1.Start(fwdmap.JobSpec{ID: "j", Nodes: []string{"cn1"}})
	m1.End("j")
	checkHistory(t, New(cfg))
	// FFM mode ignores profiles
	ffm := New(Config{Mode: "ffm", Servers: func() []wire.ServerInfo { return servers },
		Profile: func(k string) (beacon.Profile, bool) { p, ok := profiles[k]; return p, ok },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	if p, _ := ffm.Start(fwdmap.JobSpec{ID: "j", App: "tag:ckpt", Nodes: []string{"cn1"}}); p.Dedicated || p.Policy != "ffm" {
		t.Fatalf("ffm mode: %+v", p)
	}
}

// checkHistory: job j was started and ended (and maybe remapped between).
func checkHistory(t *testing.T, m *Manager) {
	t.Helper()
	h, err := m.History("j")
	if err != nil || len(h) < 2 || h[0].Event != "start" || len(h[0].Fwds) == 0 || h[len(h)-1].Event != "end" {
		t.Fatalf("history: %+v %v", h, err)
	}
	for i := 1; i < len(h); i++ {
		if h[i].At < h[i-1].At {
			t.Fatalf("history out of order: %+v", h)
		}
	}
	if h, _ := m.History("nobody"); len(h) != 0 {
		t.Fatalf("history of an unknown job: %+v", h)
	}
}

// TestMapShare: a registered job's compute nodes each get their share of
// its forwarding nodes.
func TestMapShare(t *testing.T) {
	var servers []wire.ServerInfo
	for i := 1; i <= 4; i++ {
		servers = append(servers, wire.ServerInfo{ID: uint64(i), Role: "fwd", Addr: fmt.Sprintf("a:%d", i), Alive: true})
	}
	big := beacon.Profile{Key: "wide", Mode: beacon.ModeNN, IONodes: 4, NodeBW: 500e6, Volume: 100 << 30}
	m := New(Config{Servers: func() []wire.ServerInfo { return servers }, Policy: dfra.Config{Ratio: 8, HighBW: 10},
		Profile: func(k string) (beacon.Profile, bool) { return big, k == "wide" },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	p, err := m.Start(fwdmap.JobSpec{ID: "j", App: "tag:wide", Nodes: []string{"cn0", "cn1", "cn2", "cn3"}})
	if err != nil || len(p.Fwds) != 2 {
		t.Fatalf("want scale-up to 2: %+v %v", p, err)
	}
	seen := map[string]int{}
	for _, n := range []string{"cn0", "cn1", "cn2", "cn3"} {
		got, _ := m.Map("j", n)
		if len(got.Fwds) != 1 {
			t.Fatalf("%s: %+v", n, got)
		}
		seen[got.Fwds[0].ID]++
	}
	if len(seen) != 2 {
		t.Fatalf("compute nodes not spread: %v", seen)
	}
	if got, _ := m.Map("j", "elsewhere"); len(got.Fwds) != 2 {
		t.Fatalf("a node outside the job: %+v", got)
	}
}

// jobMap is a JobStore in memory, as the engine would keep it.
type jobMap map[string][]byte

func (j jobMap) SaveJob(job string, v []byte) error { j[job] = append([]byte(nil), v...); return nil }
func (j jobMap) DeleteJob(job string) error         { delete(j, job); return nil }
func (j jobMap) Jobs() (map[string][]byte, error)   { return j, nil }

// TestJobsResumed: a manager started on its predecessor's job store (a
// metadata daemon that restarted, or a standby that took over) serves
// the running jobs' placements as they were, and versions go on rising.
func TestJobsResumed(t *testing.T) {
	servers := []wire.ServerInfo{
		{ID: 1, Role: "fwd", Addr: "a:1", Alive: true},
		{ID: 2, Role: "fwd", Addr: "a:2", Alive: true},
		{ID: 3, Role: "fwd", Addr: "a:3", Alive: true},
	}
	kept := jobMap{}
	var slow []beacon.SlowServer
	cfg := Config{Jobs: kept, Servers: func() []wire.ServerInfo { return servers }, Health: func() []beacon.SlowServer { return slow },
		Policy: dfra.Config{Ratio: 1}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	old := New(cfg)
	p, err := old.Start(fwdmap.JobSpec{ID: "j", App: "a", Nodes: []string{"cn1", "cn2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Start(fwdmap.JobSpec{ID: "gone", Nodes: []string{"cn3"}}); err != nil {
		t.Fatal(err)
	}
	old.End("gone")
	m := New(cfg)
	if l := m.List(); len(l) != 1 || l[0].Job != "j" {
		t.Fatalf("jobs after a restart: %+v, want j alone", l)
	}
	got, err := m.Map("j", "cn1")
	if err != nil || got.Version != p.Version || got.Policy != p.Policy || got.Fwds[0] != p.Fwds[0] {
		t.Fatalf("job j's placement after a restart: %+v %v, want %+v", got, err, p)
	}
	slow = []beacon.SlowServer{{Server: p.Fwds[0].ID}}
	m.Check()
	moved, _ := m.Map("j", "cn1")
	if moved.Version <= p.Version {
		t.Fatalf("a remap after a restart has version %d, not above %d", moved.Version, p.Version)
	}
	if again, _ := New(cfg).Map("j", "cn1"); again.Version != moved.Version || again.Fwds[0] != moved.Fwds[0] {
		t.Fatalf("the remap is not what a successor finds: %+v, want %+v", again, moved)
	}
}
