package qosrules

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/rpc/rpctest"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// badRule is a rule whose field 1 (the rule, a message) is sent as a
// number: a request that does not decode.
type badRule struct{}

func (badRule) Fields(c *wire.Codec) {
	x := uint64(7)
	c.Uint64(1, &x)
}

func serve(t *testing.T, r *Rules) *rpc.Client {
	tb := &rpc.Table{Name: "metadata service"}
	r.Serve(tb)
	return rpctest.Serve(t, &rpc.Mux{Name: "metadata service", Tables: []*rpc.Table{tb}})
}

func open(t *testing.T, e engine.Engine) *Rules {
	t.Helper()
	r, err := Open(e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRules: rules go in order (replaced in place, put in front of
// another), every change raises the version, bad rules and names are
// refused, and the rules and version survive a restart on every engine.
func TestRules(t *testing.T) {
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		r := open(t, reopen())
		c := serve(t, r)
		ctx := context.Background()
		add := func(x qos.Rule, before string) (*qos.RuleSet, error) {
			return rpc.Do(ctx, c, api.QoSAdd, &api.QoSAddReq{Rule: x, Before: before})
		}
		rm := func(name string) (*qos.RuleSet, error) {
			return rpc.Do(ctx, c, api.QoSRemove, &api.RuleRef{Name: name})
		}
		list := func() (*qos.RuleSet, error) { return rpc.Do(ctx, c, api.QoSList, &wire.Empty{}) }
		rule := func(name, words string) qos.Rule {
			x, err := qos.ParseRule(name, strings.Fields(words))
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		names := func(rs *qos.RuleSet) string {
			if rs == nil {
				return "<nil>"
			}
			var n []string
			for _, x := range rs.Rules {
				n = append(n, x.Name)
			}
			return strings.Join(n, ",")
		}
		if rs, err := list(); err != nil || rs.Version != 0 || len(rs.Rules) != 0 || r.Version() != 0 {
			t.Fatalf("no rules yet: %+v %v", rs, err)
		}
		add(rule("a", "job=1 share=3"), "")
		add(rule("b", "job=2 rate=10M"), "")
		rs, err := add(rule("c", "op=meta iops=100"), "b")
		if err != nil || names(rs) != "a,c,b" || rs.Version != 3 {
			t.Fatalf("after three adds: %s %v", names(rs), err)
		}
		// the same name replaces in place
		if rs, _ = add(rule("a", "job=1 share=5"), ""); names(rs) != "a,c,b" || rs.Rules[0].Share != 5 || rs.Version != 4 {
			t.Fatalf("replacing a: %s %+v", names(rs), rs)
		}
		if _, err := add(rule("d", "job=4 share=1"), "zz"); rpc.Errno(err) != syscall.ENOENT {
			t.Fatalf("in front of a rule that is not there: %v", err)
		}
		// a rule that does not parse back (sent by hand) is refused
		if _, err := add(qos.Rule{Name: "e", Uid: -1, Gid: -1}, ""); rpc.Errno(err) != syscall.EINVAL {
			t.Fatalf("a rule with no match and no action: %v", err)
		}
		if _, err := rm("zz"); rpc.Errno(err) != syscall.ENOENT {
			t.Fatalf("removing a rule that is not there: %v", err)
		}
		if rs, _ = rm("c"); names(rs) != "a,b" || rs.Version != 5 || r.Version() != 5 {
			t.Fatalf("after rm c: %s %+v", names(rs), rs)
		}
		if _, err := c.Invoke(ctx, api.OpQoSAdd, badRule{}, &qos.RuleSet{}, nil, nil); rpc.Errno(err) != syscall.EINVAL {
			t.Fatalf("a rule that does not decode: %v", err)
		}
		if strings.HasSuffix(t.Name(), "/mem") {
			return // nothing survives the in-memory engine
		}
		r = open(t, reopen())
		c = serve(t, r)
		if rs, _ = list(); names(rs) != "a,b" || rs.Version != 5 || r.Version() != 5 || rs.Rules[1].Rate != 10<<20 {
			t.Fatalf("after a restart: %+v", rs)
		}
	})
}

// TestWatch: a watch with the version in force waits for the next change
// and returns it; with another version it returns at once; with nothing
// changing it returns after its bound.
func TestWatch(t *testing.T) {
	r := open(t, engine.NewMem())
	r1, _ := qos.ParseRule("a", []string{"job=1", "share=2"})
	if _, err := r.Add(r1, ""); err != nil {
		t.Fatal(err)
	}
	if rs, _ := r.Watch(0, time.Minute); rs.Version != 1 {
		t.Fatalf("a watch of version 0 returned version %d", rs.Version)
	}
	start := time.Now()
	if rs, _ := r.Watch(1, 50*time.Millisecond); rs.Version != 1 || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("an idle watch returned version %d after %v", rs.Version, time.Since(start))
	}
	got := make(chan qos.RuleSet)
	go func() {
		rs, _ := r.Watch(1, time.Minute)
		got <- rs
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case rs := <-got:
		t.Fatalf("the watch returned version %d before any change", rs.Version)
	default:
	}
	start = time.Now()
	if _, err := r.Remove("a"); err != nil {
		t.Fatal(err)
	}
	select {
	case rs := <-got:
		if rs.Version != 2 || len(rs.Rules) != 0 {
			t.Fatalf("the watch returned %+v", rs)
		}
		t.Logf("the change reached the watch in %v", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not see the change")
	}
}
