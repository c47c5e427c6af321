// Package qos is sluice's per-job quality of service (docs/qos.md): rules
// in the spirit of Lustre's NRS TBF that match requests by job id, uid,
// gid, compute node, application and operation class and cap them in
// bytes/s and operations/s or give them a weighted share of a server, and
// the scheduler that orders one server's requests by those rules: start-
// time fair queueing between flows (a matched rule's requests, or one
// unmatched job's), each flow behind the token buckets of its caps.
//
// Pure: the caller passes the time with every call, and the package neither
// sleeps nor reads a clock nor does I/O; internal/qosgate is the blocking
// wrapper the forwarding daemons and data servers run it in, and the
// simulator can drive it directly. It must not know what a request does.
package qos

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/sluice-hpc/sluice/internal/size"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Class is a request's operation class as rules match it.
type Class uint8

const (
	Any   Class = iota // every class (a rule's default)
	Read               // data read
	Write              // data written
	Meta               // everything else: namespace and attribute operations
)

var classNames = [...]string{"any", "read", "write", "meta"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class" + strconv.Itoa(int(c))
}

// Req is what a rule sees of one request.
type Req struct {
	Job, Node, App string
	Uid, Gid       uint32
	Class          Class
	Bytes          uint64 // data moved (0 for metadata operations)
}

// Rule matches requests and says what they get. A field left empty (or
// -1 for Uid and Gid, Any for Op) matches everything.
type Rule struct {
	Name string
	// Job, Node and App are shell patterns (path.Match): "12*", "cn[0-3]".
	Job, Node, App string
	Uid, Gid       int64
	Op             Class
	// Rate caps the matched requests' bytes per second, Ops their
	// operations per second (0: no cap).
	Rate, Ops float64
	// Share is the flow's weight when the server is saturated: active
	// flows get bandwidth in proportion to their shares (an unmatched job
	// has share 1); a flow with nothing queued leaves its share to the
	// others. 0 means 1.
	Share float64
}

// ParseRule reads a rule from its words, each key=value: job=, node=,
// app= (patterns), uid=, gid= (numbers), op= (read, write, meta),
// rate= (bytes/s with an optional K/M/G suffix, powers of 1024), iops=
// (operations/s), share= (weight). A rule needs at least one match and
// one of rate, iops and share.
func ParseRule(name string, words []string) (Rule, error) {
	r := Rule{Name: name, Uid: -1, Gid: -1}
	if name == "" || strings.ContainsAny(name, " \t\n=/") {
		return r, fmt.Errorf("rule name %q: want a word", name)
	}
	matches, actions := 0, 0
	seen := map[string]bool{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || v == "" {
			return r, fmt.Errorf("rule %s: %q: want key=value", name, w)
		}
		if seen[k] {
			return r, fmt.Errorf("rule %s: %s given twice", name, k)
		}
		seen[k] = true
		switch k {
		case "job", "node", "app":
			if _, err := path.Match(v, ""); err != nil {
				return r, fmt.Errorf("rule %s: %s pattern %q: %v", name, k, v, err)
			}
			switch k {
			case "job":
				r.Job = v
			case "node":
				r.Node = v
			default:
				r.App = v
			}
			matches++
		case "uid", "gid":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return r, fmt.Errorf("rule %s: %s=%q: want a number", name, k, v)
			}
			if k == "uid" {
				r.Uid = int64(n)
			} else {
				r.Gid = int64(n)
			}
			matches++
		case "op":
			c := -1
			for i, s := range classNames[1:] {
				if v == s {
					c = i + 1
				}
			}
			if c < 0 {
				return r, fmt.Errorf("rule %s: op=%q: want read, write or meta", name, v)
			}
			r.Op = Class(c)
			matches++
		case "rate":
			n, err := size.Parse(strings.TrimSuffix(strings.TrimSuffix(v, "/s"), "B"))
			if err != nil || n <= 0 {
				return r, fmt.Errorf("rule %s: rate=%q: want bytes per second (e.g. 100M)", name, v)
			}
			r.Rate = float64(n)
			actions++
		case "iops", "share":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 || f > 1e12 {
				return r, fmt.Errorf("rule %s: %s=%q: want a positive number", name, k, v)
			}
			if k == "iops" {
				r.Ops = f
			} else {
				r.Share = f
			}
			actions++
		default:
			return r, fmt.Errorf("rule %s: unknown key %q (job, uid, gid, node, app, op, rate, iops, share)", name, k)
		}
	}
	if matches == 0 {
		return r, fmt.Errorf("rule %s: matches nothing: give job=, uid=, gid=, node=, app= or op=", name)
	}
	if actions == 0 {
		return r, fmt.Errorf("rule %s: does nothing: give rate=, iops= or share=", name)
	}
	return r, nil
}

// Words is the rule in ParseRule's syntax.
func (r Rule) Words() []string {
	var w []string
	add := func(k, v string) {
		if v != "" {
			w = append(w, k+"="+v)
		}
	}
	add("job", r.Job)
	if r.Uid >= 0 {
		add("uid", strconv.FormatInt(r.Uid, 10))
	}
	if r.Gid >= 0 {
		add("gid", strconv.FormatInt(r.Gid, 10))
	}
	add("node", r.Node)
	add("app", r.App)
	if r.Op != Any {
		add("op", r.Op.String())
	}
	if r.Rate > 0 {
		add("rate", rateWord(r.Rate))
	}
	if r.Ops > 0 {
		add("iops", strconv.FormatFloat(r.Ops, 'f', -1, 64))
	}
	if r.Share > 0 {
		add("share", strconv.FormatFloat(r.Share, 'f', -1, 64))
	}
	return w
}

// rateWord prints bytes/s in the largest binary unit that divides it
// (20M, not 20971520), as ParseRule reads it.
func rateWord(v float64) string {
	if v == math.Trunc(v) {
		for i, u := range []string{"T", "G", "M", "K"} {
			div := float64(uint64(1) << (10 * (4 - i)))
			if v >= div && math.Mod(v, div) == 0 {
				return strconv.FormatFloat(v/div, 'f', -1, 64) + u
			}
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (r Rule) String() string { return r.Name + " " + strings.Join(r.Words(), " ") }

// Matches reports whether q falls under r.
func (r Rule) Matches(q Req) bool {
	return glob(r.Job, q.Job) && glob(r.Node, q.Node) && glob(r.App, q.App) &&
		(r.Uid < 0 || uint32(r.Uid) == q.Uid) && (r.Gid < 0 || uint32(r.Gid) == q.Gid) &&
		(r.Op == Any || r.Op == q.Class)
}

func glob(pat, s string) bool {
	if pat == "" {
		return true
	}
	ok, _ := path.Match(pat, s)
	return ok
}

// Weight is the rule's share as a scheduler weighs it (0 means 1).
func (r Rule) Weight() float64 {
	if r.Share > 0 {
		return r.Share
	}
	return 1
}

// Classify returns the index of the first rule q matches (rules are
// tried in order, as Lustre's TBF tries its rules), or -1.
func Classify(rules []Rule, q Req) int {
	for i, r := range rules {
		if r.Matches(q) {
			return i
		}
	}
	return -1
}

// flowKey names the flow q belongs to: its rule's, or its own job's (its
// node's outside a job) when no rule matches.
func flowKey(rules []Rule, q Req) (string, int) {
	if i := Classify(rules, q); i >= 0 {
		return "rule:" + rules[i].Name, i
	}
	if q.Job != "" {
		return "job:" + q.Job, -1
	}
	if q.Node != "" {
		return "node:" + q.Node, -1
	}
	return "other", -1 // no job, no node: the daemons' own requests
}

// ReqBy is a request of class c moving n bytes made by who.
func ReqBy(who wire.Who, c Class, n uint64) Req {
	return Req{Job: who.Job, Node: who.Node, App: who.App, Uid: who.User, Gid: who.Group, Class: c, Bytes: n}
}

// RuleSet is the cluster's rules as the metadata service keeps and hands
// them out (JSON): in order, and the version every change raises.
type RuleSet struct {
	Version uint64
	Rules   []Rule
}

// GateStats is one daemon gate's state for `sluice qos stats` (JSON).
type GateStats struct {
	Role, Class string
	Version     uint64 // of the rules it runs
	Flows       []FlowStats
}
