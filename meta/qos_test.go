package meta

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// qosCall is a QoS request in the test's table of calls.
type qosCall struct {
	Rule   qos.Rule
	Before string
}

// badRule is a rule whose field 1 (the rule, a message) is sent as a
// number: a request that does not decode.
type badRule struct{}

func (badRule) Fields(c *wire.Codec) {
	x := uint64(7)
	c.Uint64(1, &x)
}

// TestQoSRules: rules go in order (replaced in place, put in front of
// another), every change raises the version, bad rules and names are
// refused, and the rules and version survive a restart on every engine.
func TestQoSRules(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open func() *Service) {
		s := open()
		c := serveOn(t, s)
		call := func(name string, q qosCall) (QoSRules, error) {
			var r *QoSRules
			var err error
			ctx := context.Background()
			switch name {
			case "add":
				r, err = rpc.Do(ctx, c, api.QoSAdd, &api.QoSAddReq{Rule: q.Rule, Before: q.Before})
			case "rm":
				r, err = rpc.Do(ctx, c, api.QoSRemove, &api.RuleRef{Name: q.Rule.Name})
			case "list":
				r, err = rpc.Do(ctx, c, api.QoSList, &wire.Empty{})
			default:
				t.Fatalf("no call %q", name)
			}
			if err != nil {
				return QoSRules{}, err
			}
			return *r, nil
		}
		rule := func(name, words string) qos.Rule {
			r, err := qos.ParseRule(name, strings.Fields(words))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		names := func(r QoSRules) string {
			var n []string
			for _, x := range r.Rules {
				n = append(n, x.Name)
			}
			return strings.Join(n, ",")
		}
		if r, err := call("list", qosCall{}); err != nil || r.Version != 0 || len(r.Rules) != 0 || s.QoSVersion() != 0 {
			t.Fatalf("a new service: %+v %v", r, err)
		}
		call("add", qosCall{Rule: rule("a", "job=1 share=3")})
		call("add", qosCall{Rule: rule("b", "job=2 rate=10M")})
		r, err := call("add", qosCall{Rule: rule("c", "op=meta iops=100"), Before: "b"})
		if err != nil || names(r) != "a,c,b" || r.Version != 3 {
			t.Fatalf("after three adds: %s v%d %v", names(r), r.Version, err)
		}
		// the same name replaces in place
		if r, _ = call("add", qosCall{Rule: rule("a", "job=1 share=5")}); names(r) != "a,c,b" || r.Rules[0].Share != 5 || r.Version != 4 {
			t.Fatalf("replacing a: %s %+v", names(r), r.Rules[0])
		}
		if _, err := call("add", qosCall{Rule: rule("d", "job=4 share=1"), Before: "zz"}); rpc.Errno(err) != syscall.ENOENT {
			t.Fatalf("in front of a rule that is not there: %v", err)
		}
		// a rule that does not parse back (sent by hand) is refused
		if _, err := call("add", qosCall{Rule: qos.Rule{Name: "e", Uid: -1, Gid: -1}}); rpc.Errno(err) != syscall.EINVAL {
			t.Fatalf("a rule with no match and no action: %v", err)
		}
		if _, err := call("rm", qosCall{Rule: qos.Rule{Name: "zz"}}); rpc.Errno(err) != syscall.ENOENT {
			t.Fatalf("removing a rule that is not there: %v", err)
		}
		if r, _ = call("rm", qosCall{Rule: qos.Rule{Name: "c"}}); names(r) != "a,b" || r.Version != 5 || s.QoSVersion() != 5 {
			t.Fatalf("after rm c: %s v%d", names(r), r.Version)
		}
		if _, err := c.Invoke(context.Background(), api.OpQoSAdd, badRule{}, &QoSRules{}, nil, nil); rpc.Errno(err) != syscall.EINVAL {
			t.Fatalf("a rule that does not decode: %v", err)
		}
		if strings.HasSuffix(t.Name(), "/mem") {
			return // nothing survives the in-memory engine
		}
		s = open()
		c = serveOn(t, s)
		if r, _ = call("list", qosCall{}); names(r) != "a,b" || r.Version != 5 || s.QoSVersion() != 5 || r.Rules[1].Rate != 10<<20 {
			t.Fatalf("after a restart: %+v", r)
		}
	})
}

// TestQoSWatch: a watch with the version in force waits for the next
// change and returns it; with another version it returns at once; with
// nothing changing it returns after its bound.
func TestQoSWatch(t *testing.T) {
	s, err := New(Config{Engine: engine.NewMem(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := qos.ParseRule("a", []string{"job=1", "share=2"})
	if _, err := s.AddQoS(r1, ""); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.WatchQoS(0, time.Minute); r.Version != 1 {
		t.Fatalf("a watch of version 0 returned version %d", r.Version)
	}
	start := time.Now()
	if r, _ := s.WatchQoS(1, 50*time.Millisecond); r.Version != 1 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("an idle watch returned version %d after %v", r.Version, time.Since(start))
	}
	got := make(chan QoSRules)
	go func() {
		r, _ := s.WatchQoS(1, time.Minute)
		got <- r
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("the watch returned version %d before any change", r.Version)
	default:
	}
	start = time.Now()
	if _, err := s.RemoveQoS("a"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.Version != 2 || len(r.Rules) != 0 {
			t.Fatalf("the watch returned %+v", r)
		}
		t.Logf("the change reached the watch in %v", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not see the change")
	}
}
