package fwdmap

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/wire"
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
	if _, err := m.Start(JobSpec{ID: "x"}); err == nil {
		t.Fatal("job without nodes accepted")
	}
	p, err := m.Start(JobSpec{ID: "j", App: "tag:ckpt", Nodes: []string{"cn1", "cn2"}})
	if err != nil || !p.Dedicated || len(p.Fwds) != 1 || p.Fwds[0].Addr == "" {
		t.Fatalf("start: %+v %v", p, err)
	}
	got, _ := m.Map("j", "cn1")
	if got.Version != p.Version || got.Fwds[0] != p.Fwds[0] {
		t.Fatalf("map: %+v", got)
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
	// FFM mode ignores profiles
	ffm := New(Config{Mode: "ffm", Servers: func() []wire.ServerInfo { return servers },
		Profile: func(k string) (beacon.Profile, bool) { p, ok := profiles[k]; return p, ok },
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil))})
	if p, _ := ffm.Start(JobSpec{ID: "j", App: "tag:ckpt", Nodes: []string{"cn1"}}); p.Dedicated || p.Policy != "ffm" {
		t.Fatalf("ffm mode: %+v", p)
	}
}
