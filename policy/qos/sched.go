package qos

import (
	"math"
	"sort"
	"time"
)

// Sched orders one server's requests (docs/qos.md, "Scheduling"). Each
// request joins its flow's queue; Next hands out the head with the
// smallest start tag among flows whose caps allow it now (start-time fair
// queueing: a request's start tag is the later of the server's virtual
// time and its flow's last finish tag, its finish tag the start plus its
// cost over the flow's weight). A flow with nothing queued banks no
// credit: it restarts at the virtual time, so an idle guaranteed share is
// used by the others meanwhile. A cap is a token bucket that may go into
// debt by one request: a request leaves when its flow's bucket is not
// negative, and pays its cost then.
//
// Not safe for concurrent use: the caller serialises calls.
type Sched struct {
	// OpCost is what one operation weighs in bytes for the fair share
	// (a metadata operation moves no data but takes the server's time).
	OpCost float64
	// Burst is how long a capped flow may save its rate for (its buckets
	// hold Burst × rate).
	Burst time.Duration

	rules []Rule
	flows map[string]*flow
	items map[uint64]*item
	vtime float64 // start tag of the last request handed out
	seq   uint64
}

type flow struct {
	key    string
	rule   int // index in rules; -1 unmatched
	weight float64
	q      []*item
	finish float64 // finish tag of the flow's last request
	bytes  bucket
	ops    bucket
	last   time.Time // last enqueue or dispatch

	st FlowStats
	// the current one-second window of bytes and operations handed out
	winAt        time.Time
	winB, winO   float64
	rateB, rateO float64 // the last full window's
}

type item struct {
	id            uint64
	req           Req
	cost          float64
	start, finish float64
	at            time.Time
	f             *flow
	held          bool // a cap held it back at the head of its flow
}

// bucket is a token bucket: rate per second, at most cap stored; tokens
// may go negative by one request (debt).
type bucket struct {
	rate, cap, tokens float64
	at                time.Time
}

func (b *bucket) set(rate, capacity float64, now time.Time) {
	if rate != b.rate {
		b.fill(now)
		b.rate, b.cap = rate, capacity
		b.tokens = math.Min(b.tokens, capacity)
		if b.at.IsZero() {
			b.tokens, b.at = capacity, now
		}
	}
}

func (b *bucket) fill(now time.Time) {
	if b.rate <= 0 {
		return
	}
	if !b.at.IsZero() && now.After(b.at) {
		b.tokens = math.Min(b.cap, b.tokens+b.rate*now.Sub(b.at).Seconds())
	}
	if b.at.IsZero() || now.After(b.at) {
		b.at = now
	}
}

// ready says when the bucket holds need tokens (now, or a later time).
// Bytes go into debt (need 0: the bucket only must not be in debt), an
// operation needs its token.
func (b *bucket) ready(now time.Time, need float64) time.Time {
	if b.rate <= 0 {
		return now
	}
	b.fill(now)
	if b.tokens >= need {
		return now
	}
	return now.Add(time.Duration(math.Ceil((need - b.tokens) / b.rate * float64(time.Second))))
}

// FlowStats is one flow's state for `sluice qos stats` and metrics.
type FlowStats struct {
	Key  string // "rule:NAME", "job:ID", "node:NAME" or "other"
	Rule string `json:",omitempty"`
	// Rate and Ops are the caps (0: none); Share the flow's weight and
	// Granted the fraction of the server its weight gives it among the
	// flows with requests queued or in the last second.
	Rate, Ops, Share, Granted float64
	// Used and UsedOps are the bytes/s and ops/s handed out over the last
	// full second.
	Used, UsedOps float64
	Bytes, N      uint64 // handed out in all
	Depth         int    // queued now
	// Wait is the time its requests spent queued in all; Capped counts
	// the requests that waited for a cap's tokens.
	Wait   time.Duration
	Capped uint64
}

// NewSched returns a scheduler with no rules: every job is its own flow
// of share 1.
func NewSched() *Sched {
	return &Sched{OpCost: 4096, Burst: 100 * time.Millisecond, flows: map[string]*flow{}, items: map[uint64]*item{}}
}

// Rules returns the rules in force.
func (s *Sched) Rules() []Rule { return s.rules }

// SetRules replaces the rules; queued requests are classified again (a
// request keeps its place in the order when its flow stays the same).
func (s *Sched) SetRules(rules []Rule, now time.Time) {
	s.rules = append([]Rule(nil), rules...)
	var queued []*item
	for k, f := range s.flows {
		queued = append(queued, f.q...)
		f.q = nil
		if f.rule < 0 {
			continue
		}
		// a rule's flow stays (with its buckets) while a rule of that
		// name exists
		f.rule = -1
		for i, r := range s.rules {
			if "rule:"+r.Name == k {
				f.rule = i
			}
		}
		if f.rule < 0 {
			delete(s.flows, k)
			continue
		}
		f.st.Rule = s.rules[f.rule].Name
		s.configure(f, now)
	}
	sort.Slice(queued, func(i, j int) bool { return queued[i].id < queued[j].id })
	for _, it := range queued {
		f := s.flowFor(it.req, now)
		if f != it.f {
			s.tag(f, it)
		}
		f.q = append(f.q, it)
	}
}

func (s *Sched) configure(f *flow, now time.Time) {
	w, rate, ops := 1.0, 0.0, 0.0
	if f.rule >= 0 {
		r := s.rules[f.rule]
		w, rate, ops = r.Weight(), r.Rate, r.Ops
	}
	f.weight = w
	burst := s.Burst.Seconds()
	f.bytes.set(rate, rate*burst, now)
	f.ops.set(ops, math.Max(1, ops*burst), now)
	f.st.Rate, f.st.Ops, f.st.Share = rate, ops, w
}

func (s *Sched) flowFor(q Req, now time.Time) *flow {
	key, ri := flowKey(s.rules, q)
	f := s.flows[key]
	if f == nil {
		if len(s.flows) >= 4096 {
			s.forget(now)
		}
		f = &flow{key: key, rule: ri, finish: s.vtime}
		f.st.Key = key
		if ri >= 0 {
			f.st.Rule = s.rules[ri].Name
		}
		s.configure(f, now)
		s.flows[key] = f
	}
	return f
}

// forget drops unmatched flows idle for a minute (their counters go).
func (s *Sched) forget(now time.Time) {
	for k, f := range s.flows {
		if f.rule < 0 && len(f.q) == 0 && now.Sub(f.last) > time.Minute {
			delete(s.flows, k)
		}
	}
}

func (s *Sched) tag(f *flow, it *item) {
	it.f = f
	it.start = math.Max(s.vtime, f.finish)
	it.finish = it.start + it.cost/f.weight
	f.finish = it.finish
}

// Enqueue queues a request and returns its ticket.
func (s *Sched) Enqueue(now time.Time, q Req) uint64 {
	s.seq++
	it := &item{id: s.seq, req: q, cost: float64(q.Bytes) + s.OpCost, at: now}
	f := s.flowFor(q, now)
	s.tag(f, it) // an idle flow banks no credit: it starts at the virtual time
	f.q = append(f.q, it)
	f.last = now
	s.items[it.id] = it
	return it.id
}

// Cancel takes a queued request out (its caller gave up).
func (s *Sched) Cancel(id uint64) {
	it := s.items[id]
	if it == nil {
		return
	}
	delete(s.items, id)
	f := it.f
	for i, x := range f.q {
		if x == it {
			f.q = append(f.q[:i], f.q[i+1:]...)
			break
		}
	}
}

// Pending is how many requests are queued.
func (s *Sched) Pending() int { return len(s.items) }

// Next hands out the next request: its ticket and true; or, when every
// queued request waits for a cap, false and the time the first one may go
// (the zero time when nothing is queued).
func (s *Sched) Next(now time.Time) (uint64, bool, time.Time) {
	var best *flow
	var wake time.Time
	for _, f := range s.flows {
		if len(f.q) == 0 {
			continue
		}
		at := f.bytes.ready(now, 0)
		if t := f.ops.ready(now, 1); t.After(at) {
			at = t
		}
		if at.After(now) {
			f.q[0].held = true
			if wake.IsZero() || at.Before(wake) {
				wake = at
			}
			continue
		}
		if best == nil || f.q[0].start < best.q[0].start ||
			(f.q[0].start == best.q[0].start && f.q[0].id < best.q[0].id) {
			best = f
		}
	}
	if best == nil {
		return 0, false, wake
	}
	it := best.q[0]
	best.q = best.q[1:]
	delete(s.items, it.id)
	if it.start > s.vtime {
		s.vtime = it.start
	}
	best.bytes.tokens -= float64(it.req.Bytes)
	best.ops.tokens--
	best.last = now
	waited := now.Sub(it.at)
	if it.held {
		best.st.Capped++
	}
	best.st.Wait += waited
	best.st.Bytes += it.req.Bytes
	best.st.N++
	best.count(now, float64(it.req.Bytes))
	return it.id, true, time.Time{}
}

func (f *flow) count(now time.Time, b float64) {
	if f.winAt.IsZero() {
		f.winAt = now
	}
	if d := now.Sub(f.winAt); d >= time.Second {
		if d < 2*time.Second {
			f.rateB, f.rateO = f.winB/d.Seconds(), f.winO/d.Seconds()
		} else {
			f.rateB, f.rateO = 0, 0 // a silent second in between
		}
		f.winAt, f.winB, f.winO = now, 0, 0
	}
	f.winB += b
	f.winO++
}

// Stats returns every flow's figures, by key.
func (s *Sched) Stats(now time.Time) []FlowStats {
	var sum float64
	active := func(f *flow) bool { return len(f.q) > 0 || now.Sub(f.last) < time.Second }
	for _, f := range s.flows {
		if active(f) {
			sum += f.weight
		}
	}
	out := make([]FlowStats, 0, len(s.flows))
	for _, f := range s.flows {
		st := f.st
		st.Depth = len(f.q)
		if active(f) && sum > 0 {
			st.Granted = f.weight / sum
		}
		st.Used, st.UsedOps = f.rateB, f.rateO
		if now.Sub(f.winAt) >= 2*time.Second {
			st.Used, st.UsedOps = 0, 0
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
