package beaconrpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/internal/rendezvous"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Monitors is Beacon's service spread over several monitor daemons
// (`sluice monitor`), seen as one: an rpc.Invoker of Beacon's operations
// that daemons ship their records through and the metadata daemon
// answers Beacon's questions with.
//
// The monitors divide the jobs between them: a job's records, its
// decisions and the profile of an application go to the first of the
// monitors in the key's rendezvous order (highest hash of monitor and
// key) that answers, so every daemon sends a job's records to the same
// monitor without asking anyone, and when that one is down they go to the
// next in the order (it is marked down for a while, so the senders do not
// wait on it each time). Questions go to every monitor and the answers
// are merged: records by window, jobs by name, profiles by key; a monitor
// that does not answer is left out (and logged), so a dead monitor hides
// its own records until it is back, and nothing else.
type Monitors struct {
	addrs   []string
	clients []*rpc.Client
	log     *slog.Logger
	now     func() time.Time

	mu   sync.Mutex // guards down
	down map[int]time.Time
}

// downFor is how long a monitor that could not be reached is passed over.
const downFor = 10 * time.Second

// askTimeout bounds each monitor's answer to a question (a dead one's
// connection may take that long to fail).
const askTimeout = 5 * time.Second

var _ rpc.Invoker = (*Monitors)(nil)

// NewMonitors returns the service of the monitors at addrs
// (comma-separated), reached with the cluster secret.
func NewMonitors(addrs string, secret []byte, timeout time.Duration, log *slog.Logger) (*Monitors, error) {
	m := &Monitors{log: log, now: time.Now, down: map[int]time.Time{}}
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(m.addrs, a) {
			m.addrs = append(m.addrs, a)
		}
	}
	if len(m.addrs) == 0 {
		return nil, errors.New("no monitor address")
	}
	for _, a := range m.addrs {
		m.clients = append(m.clients, rpc.NewClient(a, secret, rpc.ClientOptions{Timeout: timeout, Name: "monitor " + a}))
	}
	return m, nil
}

// Addrs lists the monitors.
func (m *Monitors) Addrs() []string { return m.addrs }

// Close drops the connections.
func (m *Monitors) Close() {
	for _, c := range m.clients {
		c.Close()
	}
}

// Order is the monitors in key's rendezvous order: the first is the one
// that keeps the key's records.
func (m *Monitors) Order(key string) []int {
	type ranked struct {
		i int
		h uint64
	}
	rs := make([]ranked, len(m.addrs))
	for i, a := range m.addrs {
		rs[i] = ranked{i, rendezvous.Score(key, a)}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].h > rs[j].h })
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.i
	}
	return out
}

// Owner is the address of the monitor key's records go to now.
func (m *Monitors) Owner(key string) string {
	order := m.Order(key)
	for _, i := range order {
		if !m.isDown(i) {
			return m.addrs[i]
		}
	}
	return m.addrs[order[0]]
}

func (m *Monitors) isDown(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.down[i]
	if ok && m.now().After(until) {
		delete(m.down, i)
		return false
	}
	return ok
}

func (m *Monitors) markDown(i int, err error) {
	m.mu.Lock()
	_, was := m.down[i]
	m.down[i] = m.now().Add(downFor)
	m.mu.Unlock()
	if !was && m.log != nil {
		m.log.Warn("monitor cannot be reached: its share goes to the next monitors meanwhile", "monitor", m.addrs[i], "err", err)
	}
}

// toOwner sends one request for key to its monitor, or the next ones in
// its order while they cannot be reached.
func (m *Monitors) toOwner(ctx context.Context, key string, op wire.Op, req, rep wire.Message, payload []byte) ([]byte, error) {
	order := m.Order(key)
	// the live ones first, in order; then the ones marked down
	var live, downs []int
	for _, i := range order {
		if m.isDown(i) {
			downs = append(downs, i)
		} else {
			live = append(live, i)
		}
	}
	var err error
	for _, i := range append(live, downs...) {
		var p []byte
		if p, err = m.clients[i].Invoke(ctx, op, req, rep, payload, nil); err == nil || !rpc.Unreached(err) {
			return p, err
		}
		m.markDown(i, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no monitor answered (%s): %w", strings.Join(m.addrs, ", "), err)
}

// answer is one monitor's answer to a question.
type answer struct {
	rep     wire.Message
	payload []byte
	err     error
}

// ask sends a question to every monitor at once (but those marked down:
// a cut-off one would hold every question for askTimeout); it returns
// the answers of those that answered, refusals included, and the
// addresses of those left out (an error if none answered).
func (m *Monitors) ask(ctx context.Context, op wire.Op, req wire.Message, newRep func() wire.Message) ([]answer, []string, error) {
	out := make([]answer, len(m.clients))
	var wg sync.WaitGroup
	for i, c := range m.clients {
		if m.isDown(i) {
			out[i].err = &rpc.TransportError{Err: errors.New("marked down after a failure")}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, askTimeout)
			defer cancel()
			rep := newRep()
			p, err := c.Invoke(cctx, op, req, rep, nil, nil)
			out[i] = answer{rep: rep, payload: p, err: err}
			if err != nil && rpc.Unreached(err) {
				m.markDown(i, err)
			}
		}()
	}
	wg.Wait()
	var got []answer
	var missing, errs []string
	for i, a := range out {
		if a.err != nil && rpc.Unreached(a.err) {
			missing = append(missing, m.addrs[i])
			errs = append(errs, fmt.Sprintf("%s: %v", m.addrs[i], a.err))
			continue
		}
		got = append(got, a) // an answer, or a refusal
	}
	if len(got) == 0 {
		return nil, missing, rpc.Errorf(syscall.EIO, "no monitor answered: %s", strings.Join(errs, "; "))
	}
	return got, missing, nil
}

// partial is the error of a question that found nothing while monitors
// were missing: what it asks for may be theirs.
func partial(what string, missing []string) error {
	return rpc.Errorf(syscall.EIO, "%s: not on the monitors that answered; monitor %s does not answer (it keeps its jobs' records)",
		what, strings.Join(missing, ", "))
}

// Invoke implements rpc.Invoker for Beacon's operations.
func (m *Monitors) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	switch op {
	case OpPut:
		return nil, m.put(ctx, payload)
	case OpProfilePut:
		return m.toOwner(ctx, "app\x00"+req.(*beacon.Profile).Key, op, req, rep, nil)
	case OpProfileJob:
		return m.toOwner(ctx, req.(*JobReq).Job, op, req, rep, nil)
	case OpDecisionPut:
		return m.toOwner(ctx, req.(*DecisionReq).Job, op, req, rep, nil)
	case OpQuery:
		return m.query(ctx, req.(*Query))
	case OpJobs:
		return nil, m.jobs(ctx, rep.(*JobsRep))
	case OpHealth:
		return nil, m.health(ctx, rep.(*HealthRep))
	case OpInterference:
		return nil, m.interference(ctx, req.(*Query), rep.(*InterferenceRep))
	case OpProfileGet:
		return nil, m.profile(ctx, req.(*ProfileKey), rep.(*beacon.Profile))
	case OpProfiles:
		return nil, m.profiles(ctx, rep.(*ProfilesRep))
	case OpDecisions:
		return nil, m.decisions(ctx, req.(*JobReq), rep.(*DecisionsRep))
	}
	return nil, rpc.Errorf(syscall.ENOSYS, "monitors: unsupported operation %v", op)
}

// put sends each job's records of a batch to the job's monitor.
func (m *Monitors) put(ctx context.Context, batch []byte) error {
	recs, err := beacon.Decode(batch)
	if err != nil {
		return rpc.Errorf(syscall.EINVAL, "beacon batch: %v", err)
	}
	byJob := map[string][]beacon.Record{}
	for _, r := range recs {
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	// one message per monitor: the jobs whose owner it is now
	byOwner := map[string][]beacon.Record{}
	for job, rs := range byJob {
		o := m.Owner(job)
		byOwner[o] = append(byOwner[o], rs...)
	}
	var failed error
	for owner, rs := range byOwner {
		// a monitor that fails on the way is marked down, and the jobs
		// go to the next one of each job's order
		enc := batch // the batch as it came when it is all this monitor's
		if len(byOwner) > 1 {
			enc = beacon.Encode(rs)
		}
		if err := m.putTo(ctx, owner, rs, enc); err != nil {
			failed = err
		}
	}
	return failed
}

// putTo sends records rs (encoded: enc) to the monitor at owner, or, if
// it cannot be reached, each job's records to the next monitor of the
// job's order.
func (m *Monitors) putTo(ctx context.Context, owner string, rs []beacon.Record, enc []byte) error {
	i := slices.Index(m.addrs, owner)
	_, err := m.clients[i].Invoke(ctx, OpPut, &wire.Empty{}, &wire.Empty{}, enc, nil)
	if err == nil || !rpc.Unreached(err) {
		return err
	}
	m.markDown(i, err)
	byJob := map[string][]beacon.Record{}
	for _, r := range rs {
		byJob[r.Job] = append(byJob[r.Job], r)
	}
	var failed error
	for job, jrs := range byJob {
		if _, err := m.toOwner(ctx, job, OpPut, &wire.Empty{}, &wire.Empty{}, beacon.Encode(jrs)); err != nil {
			failed = err
		}
	}
	return failed
}

func (m *Monitors) query(ctx context.Context, q *Query) ([]byte, error) {
	got, missing, err := m.ask(ctx, OpQuery, q, func() wire.Message { return &wire.Empty{} })
	if err != nil {
		return nil, err
	}
	var all []beacon.Record
	for _, a := range got {
		if a.err != nil {
			return nil, a.err
		}
		recs, err := beacon.Decode(a.payload)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	if len(all) == 0 && len(missing) > 0 && q.Job != "" {
		return nil, partial(fmt.Sprintf("no records of job %q", q.Job), missing)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Window < all[j].Window })
	return beacon.Encode(all), nil
}

func (m *Monitors) jobs(ctx context.Context, rep *JobsRep) error {
	got, _, err := m.ask(ctx, OpJobs, &wire.Empty{}, func() wire.Message { return &JobsRep{} })
	if err != nil {
		return err
	}
	byJob := map[string]*beacon.JobInfo{}
	for _, a := range got {
		if a.err != nil {
			return a.err
		}
		for _, j := range a.rep.(*JobsRep).Jobs {
			o := byJob[j.Job]
			if o == nil {
				j := j
				byJob[j.Job] = &j
				continue
			}
			if o.App == "" {
				o.App, o.Uid = j.App, j.Uid
			}
			o.First, o.Last = min(o.First, j.First), max(o.Last, j.Last)
			o.Ops += j.Ops
			o.Bytes += j.Bytes
			o.Profiled = max(o.Profiled, j.Profiled)
		}
	}
	rep.Jobs = rep.Jobs[:0]
	for _, j := range byJob {
		rep.Jobs = append(rep.Jobs, *j)
	}
	sort.Slice(rep.Jobs, func(i, j int) bool {
		if rep.Jobs[i].Last != rep.Jobs[j].Last {
			return rep.Jobs[i].Last > rep.Jobs[j].Last
		}
		return rep.Jobs[i].Job < rep.Jobs[j].Job
	})
	return nil
}

func (m *Monitors) health(ctx context.Context, rep *HealthRep) error {
	got, _, err := m.ask(ctx, OpHealth, &wire.Empty{}, func() wire.Message { return &HealthRep{} })
	if err != nil {
		return err
	}
	seen := map[string]int{}
	rep.Slow = rep.Slow[:0]
	for _, a := range got {
		if a.err != nil {
			return a.err
		}
		for _, s := range a.rep.(*HealthRep).Slow {
			k := fmt.Sprintf("%d %s", s.Layer, s.Server)
			if i, ok := seen[k]; ok {
				// each monitor saw a share of the jobs: the worst
				o := &rep.Slow[i]
				o.Ratio, o.Windows, o.Since = max(o.Ratio, s.Ratio), max(o.Windows, s.Windows), min(o.Since, s.Since)
				continue
			}
			seen[k] = len(rep.Slow)
			rep.Slow = append(rep.Slow, s)
		}
	}
	return nil
}

// interference asks every monitor for the span's records (every job's:
// a pair's two jobs may be kept by two monitors) and finds the pairs here.
func (m *Monitors) interference(ctx context.Context, q *Query, rep *InterferenceRep) error {
	all := *q
	all.Job = ""
	p, err := m.query(ctx, &all)
	if err != nil {
		return err
	}
	recs, err := beacon.Decode(p)
	if err != nil {
		return err
	}
	rep.Pairs = rep.Pairs[:0]
	for _, x := range beacon.DetectInterference(recs, beacon.InterferenceOptions{}) {
		if q.Job == "" || x.Victim == q.Job || x.Aggressor == q.Job {
			rep.Pairs = append(rep.Pairs, x)
		}
	}
	return nil
}

func (m *Monitors) profile(ctx context.Context, q *ProfileKey, rep *beacon.Profile) error {
	got, missing, err := m.ask(ctx, OpProfileGet, q, func() wire.Message { return &beacon.Profile{} })
	if err != nil {
		return err
	}
	found := false
	for _, a := range got {
		if a.err != nil {
			if rpc.Errno(a.err) == syscall.ENOENT {
				continue
			}
			return a.err
		}
		p := a.rep.(*beacon.Profile)
		if !found {
			*rep, found = *p, true
		} else {
			*rep = rep.Merge(*p)
		}
	}
	if !found && len(missing) > 0 {
		return partial(fmt.Sprintf("no profile for %q", q.Key), missing)
	}
	if !found {
		return rpc.Errorf(syscall.ENOENT, "no profile for %q", q.Key)
	}
	return nil
}

func (m *Monitors) profiles(ctx context.Context, rep *ProfilesRep) error {
	got, _, err := m.ask(ctx, OpProfiles, &wire.Empty{}, func() wire.Message { return &ProfilesRep{} })
	if err != nil {
		return err
	}
	byKey := map[string]beacon.Profile{}
	var keys []string
	for _, a := range got {
		if a.err != nil {
			return a.err
		}
		for _, p := range a.rep.(*ProfilesRep).Profiles {
			if o, ok := byKey[p.Key]; ok {
				byKey[p.Key] = o.Merge(p)
				continue
			}
			byKey[p.Key] = p
			keys = append(keys, p.Key)
		}
	}
	sort.Strings(keys)
	rep.Profiles = rep.Profiles[:0]
	for _, k := range keys {
		rep.Profiles = append(rep.Profiles, byKey[k])
	}
	return nil
}

func (m *Monitors) decisions(ctx context.Context, q *JobReq, rep *DecisionsRep) error {
	got, _, err := m.ask(ctx, OpDecisions, q, func() wire.Message { return &DecisionsRep{} })
	if err != nil {
		return err
	}
	rep.Decisions = rep.Decisions[:0]
	for _, a := range got {
		if a.err != nil {
			return a.err
		}
		rep.Decisions = append(rep.Decisions, a.rep.(*DecisionsRep).Decisions...)
	}
	sort.SliceStable(rep.Decisions, func(i, j int) bool { return rep.Decisions[i].At < rep.Decisions[j].At })
	return nil
}

// DecisionLog keeps the managers' decisions on the monitors (the
// managers' DecisionLog): each job's on its monitor. M is the monitors,
// or a daemon that answers Beacon's operations (the metadata daemon, for
// a manager in a process of its own).
type DecisionLog struct {
	M       Caller
	Timeout time.Duration
}

// PutDecision sends one decision of job.
func (l DecisionLog) PutDecision(job string, at time.Time, v []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.Timeout)
	defer cancel()
	_, err := rpc.Do(ctx, l.M, DecisionPut, &DecisionReq{Job: job, At: at.UnixNano(), V: v})
	return err
}

// Decisions returns job's decisions, oldest first.
func (l DecisionLog) Decisions(job string) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.Timeout)
	defer cancel()
	r, err := rpc.Do(ctx, l.M, DecisionsOp, &JobReq{Job: job})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(r.Decisions))
	for i, d := range r.Decisions {
		out[i] = d.V
	}
	return out, nil
}
