package bb

import (
	"cmp"
	"fmt"
	"time"

	"github.com/sluice-hpc/sluice/internal/iosched"
	"github.com/sluice-hpc/sluice/policy/bbos"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/workload"
)

// The burst-buffer model (docs/sim.md, "Burst buffer"): a shared buffer of
// capacity S in front of a PFS, checkpointing applications (a
// workload.CkptMix, the description `sluice bb replay` runs on real
// daemons) and the burst-buffer manager's loop as the metadata daemon runs
// it (manager/bbos): grants admitted at the start, a period state (DWSF,
// DWPP predicted from past periods), the policy's plan and throttles,
// demotion of the coldest data in the policy's order, eviction of demoted
// copies when writers need room, and bypass. Every decision is
// policy/bbos's; the model only moves bytes.
//
// Time advances in ticks (the manager's loop); within a tick the buffer
// writes at the throttle's write rate and demotes at its demotion rate,
// the two sharing the device as equation 1 says (demotionShare).
// Checkpoints are served one application at a time by the buffer's I/O
// scheduler, the data servers' own (internal/iosched: a phase ends once
// its application has had nothing in flight for Gap, and the one that has
// waited longest goes next), except under Dedicated, where they share the
// buffer (DataWarp has no scheduler).

// Config is a burst-buffer run.
type Config struct {
	Mix    workload.CkptMix
	Policy bbos.Policy
	// S is the buffer's capacity in bytes; Rates its figures (the whole
	// buffer's, bytes/s); ReadBW the rate restarts read it at, PFSRead
	// the PFS's read rate for restarts that miss.
	S       float64
	Rates   bbos.Rates
	ReadBW  float64
	PFSRead float64
	// Bypass sends checkpoints the policy calls cold on arrival to the
	// PFS (bbos only, as the daemons).
	Bypass bool
	// NoVersions: cold data by MTBF alone (the paper's Figure 9 baseline).
	NoVersions bool
	// Tick is the devices' time step (0: the mix's period / 3800, one
	// second of the paper's period). Every (0: period / 24, the daemons'
	// 250 ms at the 6 s period of bench/bbos) the manager looks: it sets
	// the plan's rates, learns the finished checkpoints, and evicts
	// demoted copies until it believes Room bytes are free. ServerIdle
	// (0: period / 300, the data servers' 20 ms at 6 s) is how long
	// after their last checkpoint byte the buffer's servers switch to
	// the idle demotion rate.
	Tick, Every, ServerIdle time.Duration
	// CapBurst is how much of their rate the servers' throttles let
	// through at once (0: their 50 ms, not scaled with the period: at
	// the paper's scale a burst of period / 120, 31 s, let whole
	// checkpoints past the caps); DeviceBurst the device's (0: period /
	// 1200, bench/bbos's --device-burst 5ms at its 6 s period; 5 ms at the
	// paper's scale leaves Dedicated under high congestion serving 0.4 S
	// in a cycle of waits for the scaled ServerIdle, not looked into).
	CapBurst, DeviceBurst time.Duration
	// Reserve is the free space writers leave (placement's write-stall
	// reserve: a chunk; 0: S/32, 4 MiB of bench/bbos's 128 MiB). The
	// manager keeps the largest grant (at most S/2) above it free.
	Reserve float64
	// Chunk is the size a checkpoint's room is placed in (0: 4 MiB, the
	// daemons' chunk): a checkpoint takes the room of the chunks its
	// writer's window reaches (WriteBehind) when it begins, whether or
	// not the I/O scheduler lets it write yet, and the next as it
	// writes; a chunk finding the buffer full with nothing on
	// it to free (every checkpoint there still being written) spills to
	// the PFS, as placement does.
	Chunk float64
	// AdmitAll runs every application, whatever admission says (the
	// paper's utilisation runs: a policy is over-subscribed until its
	// checkpoints come late); Refused then lists the ones admission
	// would have refused.
	AdmitAll bool
	// Restarts is how many applications restart at the end (drawn by
	// failure rate, workload.CkptMix.Restarts).
	Restarts int
	// WriteBehind is how many bytes of a checkpoint its writer has on
	// their way to the buffer at once, sent in requests of a mebibyte
	// (0: 32 MiB, the mount's window): the device shares itself between
	// those requests and demotion's blocks by their numbers, and a
	// writer's chunks are placed as those requests reach the forwarding
	// daemon, whether or not the buffer's I/O scheduler lets them in.
	// SharedWindow: the writers share one such window (one mount), each
	// an equal part of it while they have bytes left (client/vfs).
	WriteBehind  float64
	SharedWindow bool
	// Setup is what a checkpoint costs beside its bytes before its first
	// write: its writer starting, creating the file and, at the end,
	// closing it (0: none). `sluice bb replay` times a checkpoint from
	// its schedule to the end of the dd that writes it; on bench/bbos's
	// daemons that is 6.5 ms beside the bytes (bench/bbos/setup.sh).
	// The application's next checkpoint waits for it as for the bytes;
	// other applications write meanwhile.
	Setup time.Duration
	// Gap and MaxWait are the buffer's I/O scheduler's (iosched.Phases):
	// a phase ends once its application has had nothing in flight for
	// Gap (0: the data servers' 10 ms, at every scale), and an
	// application waiting MaxWait takes the turn (0: period × 5/3, the
	// servers' 10 s at bench/bbos's 6 s period; their 10 s is a third of
	// their callers' timeout, which at the paper's scale, checkpoints of
	// minutes, would interleave every burst's checkpoints). A writer has a
	// request in flight in a step where it has room placed to write; one
	// waiting for room has none, so its turn passes after Gap, and when
	// it has room again it waits behind the applications that came to
	// the scheduler before.
	Gap, MaxWait time.Duration
	// Trace, if set, is told the I/O scheduler's decisions (iosched.Phases
	// Trace), in the model's time from the run's start.
	Trace func(iosched.Event)
	// Phase is when, from the run's start, the manager's first period
	// began (0: with the run; negative: before it), and Ticks how long
	// after that its ticker first ticks (0: then; less than Every). The
	// manager looks on that ticker, every Every (manager/bbos runs on a
	// time.Ticker, which does not drift), and its periods roll on those
	// looks, or at a checkpoint's bypass decision past the period's end
	// (manager/bbos Hint). On the daemons the pool's period begins with
	// the first grant, and `sluice bb replay` starts its clock after the
	// last: a run records it (its timeline's samples' T less the pool's
	// Elapsed). Their ticker's phase against it is chance (Every/2 on
	// average); runs record it since 2026-12-05 (the pool's Ticked in
	// manager/bbos's status).
	Phase, Ticks time.Duration
}

// bbVersion is one checkpoint file as the model tracks it.
type bbVersion struct {
	bbos.Version
	app      int
	written  float64 // on the buffer so far (a bypassed one: on the PFS)
	alloc    float64 // room its chunks were given on the buffer
	spilled  float64 // of its chunks placed on the PFS (Chunk)
	spillW   float64 // written of those
	complete bool
	demoted  float64 // copied to the PFS so far
	onPFS    bool    // fully demoted: the buffer's copy is a clean cache
	resident bool    // on the buffer
	bypassed bool
	atPFS    bool // in the PFS's queue of bypassing writers (writePFS)
	waits    bool // its writer waits for room (placement's stalled writer)
	ck       int  // index in Result.Checkpoints
	// its requests at the device (writeDevice): their bytes, and how
	// many runs of them are queued there
	inDev float64
	reqs  int
	// its chunks on the buffer (in the order placed) whose first request
	// was issued to the device (heads) and written (landed), and the
	// bytes of the other requests of landed chunks issued (body): a
	// chunk's first write goes alone (fwd chunkForWrite)
	heads, landed int
	body          float64
}

type bbModel struct {
	cfg   Config
	e     *engine.Engine
	res   *Result
	tick  time.Duration
	end   time.Duration
	apps  []workload.CkptApp
	grant []bool

	// the period state (manager/bbos's pool)
	start    time.Duration
	dwsf     float64
	placed   float64    // checkpoints begun on the buffer this period, bytes
	pfsQ     []*pfsTurn // the bypassing writers in the PFS's queue (writePFS)
	bypassed float64    // checkpoints sent straight to the PFS this period, bytes
	history  []float64
	loads    []float64 // the periods' checkpoint bytes, bypassed ones included (bbos.PeriodLoad)
	declared float64
	period   time.Duration

	used     float64 // bytes resident on the buffer
	promised float64 // room given to chunks not written yet
	canFree  int     // freeable's answer this step: 0 not asked yet, 1 no, 2 yes
	versions []*bbVersion
	// the manager's view, as of its last look
	nextLook time.Duration
	believed float64         // free space it believes there is
	room     float64         // what it keeps free for writers
	wCap     float64         // checkpoint writes while writing
	dWrite   float64         // demotion while writing
	dIdle    float64         // demotion while idle
	known    map[uint64]bool // finished checkpoints it has seen
	// the data servers' token buckets (data/bb.go): the checkpoint write
	// cap and the demotion caps hold CapBurst of their rate, the device
	// (writes and demotion reads together) DeviceBurst of WriteMax
	wTok, dTok, devTok float64
	queue              []*bbVersion // checkpoints waiting or being written, in arrival order
	pending            [][]int      // per app: events waiting for its previous checkpoint
	// demotion's reads queued at the device behind owedBehind's head
	// (checkpoint bytes of the device), served before the next head
	owed       float64
	owedBehind *bbVersion
	starting   []bool // per app: a checkpoint in its setup (Setup)
	sched      iosched.Phases
	lastW      time.Duration
	seq        int64
	// the writers' requests at the device, in the order they reserved
	// (writeDevice)
	devQ []devReq
}

// Run runs a burst-buffer workload.
func Run(cfg Config) (*Result, error) {
	if cfg.S <= 0 || cfg.Mix.Period <= 0 || cfg.Mix.Periods <= 0 {
		return nil, fmt.Errorf("sim bb: want a buffer and a mix with a period")
	}
	if err := cfg.Rates.Validate(); err != nil {
		return nil, fmt.Errorf("sim bb: %v", err)
	}
	if cfg.ReadBW <= 0 {
		cfg.ReadBW = cfg.Rates.WriteMax
	}
	if cfg.PFSRead <= 0 {
		cfg.PFSRead = cfg.Rates.DemoteMax
	}
	m := &bbModel{cfg: cfg, e: engine.New(), apps: cfg.Mix.Apps,
		res: &Result{Policy: string(cfg.Policy), S: cfg.S, Periods: cfg.Mix.Periods}}
	m.tick = cfg.Tick
	if m.tick <= 0 {
		m.tick = max(cfg.Mix.Period/3800, time.Millisecond)
	}
	if m.cfg.Every <= 0 {
		m.cfg.Every = cfg.Mix.Period / 24
	}
	if m.cfg.ServerIdle <= 0 {
		m.cfg.ServerIdle = cfg.Mix.Period / 300
	}
	if m.cfg.CapBurst <= 0 {
		m.cfg.CapBurst = 50 * time.Millisecond
	}
	if m.cfg.DeviceBurst <= 0 {
		m.cfg.DeviceBurst = cfg.Mix.Period / 1200
	}
	if m.cfg.Reserve <= 0 {
		m.cfg.Reserve = cfg.S / 32
	}
	if m.cfg.Chunk <= 0 {
		m.cfg.Chunk = 4 << 20
	}
	if m.cfg.WriteBehind <= 0 {
		m.cfg.WriteBehind = 32 << 20
	}
	m.sched = iosched.Phases{Gap: cmp.Or(cfg.Gap, iosched.DefaultGap), MaxWait: cmp.Or(cfg.MaxWait, cfg.Mix.Period*5/3), Trace: cfg.Trace}
	m.known = map[uint64]bool{}
	m.start = cfg.Phase
	m.end = cfg.Mix.Period * time.Duration(cfg.Mix.Periods)
	if err := m.admit(); err != nil {
		return nil, err
	}
	m.pending = make([][]int, len(m.apps))
	m.starting = make([]bool, len(m.apps))
	m.lastW = -1 << 62
	for _, ev := range cfg.Mix.Events() {
		if !m.grant[ev.App] {
			continue
		}
		m.e.At(engine.Time(ev.At), engine.Func(func(engine.Time) { m.arrive(ev) }))
	}
	for _, f := range cfg.Mix.Failures() {
		if !m.grant[f.App] {
			continue
		}
		m.e.At(engine.Time(f.At), engine.Func(func(engine.Time) { m.fail(f) }))
	}
	var step engine.Func
	step = func(now engine.Time) {
		m.step()
		// past the last period, the checkpoints under way finish (as
		// `sluice bb replay` waits for them), for at most a period
		if time.Duration(now) < m.end || len(m.queue) > 0 && time.Duration(now) < m.end+m.period {
			m.e.At(now+engine.Time(m.tick), step)
		}
	}
	m.e.At(0, step)
	m.e.Run(-1)
	m.restarts()
	m.res.PeriodWritten = append(m.history, m.dwsf)
	m.res.Events = m.e.Fired()
	m.res.Phases, m.res.Preempted = m.sched.Phases, m.sched.Preempted
	every := map[string]time.Duration{}
	for _, a := range m.apps {
		every[a.Name] = a.Period
	}
	for i := range m.res.Checkpoints {
		c := &m.res.Checkpoints[i]
		c.Late = c.Done == 0 || c.Done > c.At+every[c.App]
	}
	return m.res, nil
}

// admit asks the policy for every application's grant, in order; a
// refused one does not run (as `sluice bb replay`).
func (m *bbModel) admit() error {
	var grants []bbos.Grant
	m.grant = make([]bool, len(m.apps))
	for i, a := range m.apps {
		g := bbos.Grant{Job: a.Name, Size: float64(a.Size), Period: a.Period.Seconds()}
		ad, err := bbos.Admit(m.cfg.Policy, m.cfg.S, m.cfg.Rates, grants, g)
		if err != nil {
			return err
		}
		if !ad.OK {
			m.res.Refused = append(m.res.Refused, a.Name)
			if !m.cfg.AdmitAll {
				continue
			}
		}
		grants = append(grants, g)
		m.grant[i] = true
		m.res.Admitted = append(m.res.Admitted, a.Name)
	}
	var period float64
	m.declared, period = bbos.Load(m.cfg.Policy, grants)
	m.period = m.cfg.Mix.Period
	if period > 0 {
		m.period = time.Duration(period * float64(time.Second))
	}
	m.res.AdmittedDWP = m.declared
	for i, a := range m.apps {
		if m.grant[i] {
			m.room = max(m.room, float64(a.Size))
		}
	}
	m.room = min(m.room, m.cfg.S/2) + m.cfg.Reserve
	if m.cfg.Policy == bbos.Dedicated && period > 0 {
		// lifetime holds: what they write per period
		m.res.AdmittedDWP, _ = bbos.Load(bbos.BBOS, grants)
	}
	return nil
}

// arrive is application ev.App's checkpoint ev.Version coming due: it
// starts now, or after the application's previous one ends.
func (m *bbModel) arrive(ev workload.CkptEvent) {
	a := m.apps[ev.App]
	m.res.Checkpoints = append(m.res.Checkpoints, Checkpoint{App: a.Name, Version: ev.Version, Bytes: float64(a.Size), At: ev.At})
	ck := len(m.res.Checkpoints) - 1
	busy := m.starting[ev.App]
	for _, q := range m.queue {
		busy = busy || q.app == ev.App
	}
	if busy {
		m.pending[ev.App] = append(m.pending[ev.App], ck)
		return
	}
	m.launch(ev.App, ck, 0)
}

// launch begins checkpoint ck of application app after its setup, from
// the engine's time plus after; with no setup, at once.
func (m *bbModel) launch(app, ck int, after time.Duration) {
	if m.cfg.Setup <= 0 {
		m.begin(app, ck)
		return
	}
	m.starting[app] = true
	m.e.At(m.e.Now()+engine.Time(after+m.cfg.Setup), engine.Func(func(engine.Time) {
		m.starting[app] = false
		m.begin(app, ck)
	}))
}

// begin starts checkpoint ck of application app.
func (m *bbModel) begin(app, ck int) {
	a := m.apps[app]
	now := m.e.Now()
	m.seq++
	v := &bbVersion{Version: bbos.Version{ID: uint64(m.seq), Job: a.Name, Seq: m.res.Checkpoints[ck].Version,
		Bytes: uint64(a.Size), MTBF: a.MTBF.Seconds(), Written: int64(now), Used: int64(now)}, app: app, ck: ck}
	// bypass is decided at the file's first chunk, against what the
	// period has written or will have once the checkpoints begun on the
	// buffer are written (manager/bbos Hint)
	bypass := m.cfg.Bypass && m.cfg.Policy == bbos.BBOS
	if bypass {
		// in the period it begins in, rolled or not by a look
		m.roll(time.Duration(now))
	}
	in := bbos.Sequence{Job: a.Name, MTBF: a.MTBF.Seconds(), Bytes: uint64(a.Size)}
	var queued float64 // bypassed checkpoints still writing the PFS
	writing := 0
	for _, q := range m.queue {
		if q.bypassed {
			queued += float64(q.Bytes) - q.written
			writing++
		}
	}
	at := bbos.Period{DWPP: bbos.PeriodLoad(m.loads, m.declared, m.dwsf, m.bypassed), DWSF: max(m.dwsf, m.placed), Load: m.declared,
		S: m.cfg.S, T: m.period.Seconds(), Left: (m.start + m.period - time.Duration(now)).Seconds(), PFS: m.cfg.Rates.DemoteMax,
		Queued: queued, Bypassing: writing}
	if bypass && bbos.Bypass(m.sequences(), in, at) {
		v.bypassed = true
		m.res.Checkpoints[ck].Bypassed = true
		m.bypassed += float64(a.Size)
	} else {
		m.placed += float64(a.Size)
	}
	m.queue = append(m.queue, v)
	m.versions = append(m.versions, v)
}

// fail is application f.App failing: its newest finished checkpoint is a
// hit if the buffer holds it.
func (m *bbModel) fail(f workload.Failure) {
	out := Failure{App: m.apps[f.App].Name, At: f.At}
	if v := m.newest(f.App); v != nil {
		out.Version = v.Seq
		out.Hit = v.resident && v.spilled == 0
		if out.Hit {
			v.Used = int64(m.e.Now())
		}
	}
	m.res.Failures = append(m.res.Failures, out)
}

// roll starts the periods over by now (manager/bbos rollLocked).
func (m *bbModel) roll(now time.Duration) {
	for now >= m.start+m.period {
		m.history = append(m.history, m.dwsf)
		m.loads = append(m.loads, m.dwsf+m.bypassed)
		m.start += m.period
		m.dwsf, m.placed, m.bypassed = 0, 0, 0
	}
}

// look is the manager's loop (manager/bbos Tick): the period rolls, the
// plan and its rates are set on the servers, the finished checkpoints are
// learnt, and demoted copies are evicted, coldest first, until the free
// space it believes there is (what the servers said, plus what it
// evicted since) reaches its room.
func (m *bbModel) look(now time.Duration, writing bool) {
	m.roll(now)
	dwpp := max(bbos.PredictDWPP(m.history, m.declared), m.dwsf)
	pl, err := bbos.PlanPeriod(m.cfg.Policy, dwpp, m.cfg.S, m.cfg.Rates)
	if err == nil {
		m.wCap, m.dWrite = bbos.Throttle(m.cfg.Policy, pl, m.dwsf, dwpp, true, m.cfg.Rates)
		_, m.dIdle = bbos.Throttle(m.cfg.Policy, pl, m.dwsf, dwpp, false, m.cfg.Rates)
	}
	for _, v := range m.versions {
		if v.complete {
			m.known[v.ID] = true
		}
	}
	m.believed = m.cfg.S - m.used
	// room for one more checkpoint per writer waiting for room: those
	// queued that have not begun (the daemons count placement's stalled
	// writers), at most half the buffer
	room := m.room
	if m.believed < m.room {
		room = m.stallRoom()
	}
	if m.believed < room {
		m.evict(room - m.believed)
	}
}

// step is one time step of the buffer's devices, and the manager's look
// when it is due.
func (m *bbModel) step() {
	now := time.Duration(m.e.Now())
	dt := m.tick.Seconds()
	writing := m.lastW >= 0 && now-m.lastW < m.cfg.ServerIdle
	if now >= m.nextLook {
		m.look(now, writing)
		m.nextLook = m.nextTick(now)
	}
	// demotion: the servers pick the rate by their own writing state,
	// and demote the manager's known files, coldest first (a demoted copy
	// stays on the buffer as a cache until evicted); demotion reads and
	// checkpoint writes share the device (equation 1's trade-off, in
	// written bytes: demoteCost)
	dRate := m.dIdle
	if writing {
		dRate = m.dWrite
	}
	refill := func(tok *float64, rate float64, burst time.Duration) {
		*tok = min(*tok+rate*dt, rate*(burst.Seconds()+dt))
	}
	refill(&m.devTok, m.cfg.Rates.WriteMax, m.cfg.DeviceBurst)
	refill(&m.dTok, dRate, m.cfg.CapBurst)
	refill(&m.wTok, m.wCap, m.cfg.CapBurst)
	// checkpoints bypassing the buffer write the PFS all at once (the I/O
	// scheduler is the buffer's), sharing its bandwidth with the
	// manager's demotion streams (manager/bbos: two) by their requests in
	// flight; a bypassed byte is one not to demote
	pfs := m.bypass(m.cfg.Rates.DemoteMax * dt)
	order := m.order()
	pfs = m.demote(order, pfs)
	m.canFree = 0
	// every checkpoint begun on the buffer has the room of the chunks its
	// window's requests reach (the daemons place a chunk at its first
	// write, before the servers' scheduler lets the data through), in
	// the order they began: the first that has to wait for room stops
	// the others (placement gives stalled writers room in the order
	// they stalled: meta/stallorder.go), and those behind it whose
	// windows reach past their room wait too
	part := m.part()
	stopped := false
	for _, v := range m.queue {
		switch {
		case v.bypassed:
		case stopped:
			v.waits = v.waits || v.windowNeed(part) > 0
		case !m.placeWindow(v, order, part):
			stopped = true
		}
	}
	// writes to the buffer: the application whose turn it is at the I/O
	// scheduler (non-overlap), or all sharing (Dedicated), into the free
	// space above the reserve, within the write cap and what the device
	// has left; a writer waiting for room with nothing placed left to
	// write has no requests at the servers
	active := m.writers(now)
	m.writeDevice(now, active, order)
	for _, v := range active {
		// its spilled chunks go to the PFS beside demotion
		ns := min(v.spilled-v.spillW, max(pfs, 0))
		v.spillW += ns
		pfs -= ns
	}
	if m.cfg.Policy != bbos.Dedicated {
		for _, v := range active {
			m.sched.Done(v.Job, bbTime(now+m.tick))
		}
	}
	m.finished(now)
}

// nextTick is the manager's next tick after now (its ticker began at
// Phase).
func (m *bbModel) nextTick(now time.Duration) time.Duration {
	first := m.cfg.Phase + m.cfg.Ticks
	k := (now - first) / m.cfg.Every
	if now < first {
		k = -((first - now + m.cfg.Every - 1) / m.cfg.Every) // floor
	}
	return first + m.cfg.Every*(k+1)
}

// bypass has the checkpoints bypassing the buffer write the PFS, pfs
// bytes of it this step, and returns what is left of it: they write all
// at once (the I/O scheduler is the buffer's), sharing its bandwidth
// with the manager's demotion streams (manager/bbos: two) by their
// requests in flight; a bypassed byte is one not to demote.
func (m *bbModel) bypass(pfs float64) float64 {
	var bypassing []*bbVersion
	for _, v := range m.queue {
		if v.bypassed {
			bypassing = append(bypassing, v)
		}
	}
	if len(bypassing) == 0 {
		return pfs
	}
	var demotable float64
	for _, v := range m.versions {
		if m.known[v.ID] && v.resident && !v.onPFS {
			demotable += v.written - v.demoted
		}
	}
	// the PFS serves requests in the order they come: a bypassing
	// writer's window, issued at once, queues ahead of the blocks
	// the demotion streams issue after it, so demotion has a block
	// per stream beside the writer's whole window until the writer
	// is done (not beside its requests left: docs/sim.md)
	var w float64
	for _, v := range bypassing {
		w += m.requests(float64(v.Bytes) - v.spillW)
	}
	demShare := min(m.dTok, m.devTok/m.demoteCost(), demotable, pfs*bbos.DemoteStreams/(bbos.DemoteStreams+w))
	give := pfs - max(demShare, 0)
	return pfs - (give - m.writePFS(bypassing, give))
}

// demote moves the manager's known files to the PFS in cold order
// (order), within the demotion cap, the device's share for it and the
// pfs bytes left this step, and returns what is left of those.
func (m *bbModel) demote(order []bbos.Version, pfs float64) float64 {
	devDem := m.demotionShare(pfs)
	k := m.demoteCost()
	for _, o := range order {
		if m.dTok <= 0 || devDem <= 0 || pfs <= 0 {
			break
		}
		v := m.byID(o.ID)
		if !m.known[v.ID] || v.onPFS || !v.resident {
			continue
		}
		n := min(m.dTok, devDem/k, pfs, v.written-v.demoted)
		v.demoted += n
		m.dTok -= n
		m.devTok -= n * k
		devDem -= n * k
		pfs -= n
		m.owed = max(m.owed-n*k, 0)
		m.res.Demoted += n
		if v.demoted >= v.written {
			v.onPFS = true
		}
	}
	return pfs
}

// finished takes the finished checkpoints out of the queue (their phase
// ends: the writer's fsync) and starts their applications' next.
func (m *bbModel) finished(now time.Duration) {
	var q []*bbVersion
	var next []int
	for _, v := range m.queue {
		if v.written+v.spillW >= float64(v.Bytes) {
			v.complete = true
			m.sched.End(v.Job, bbTime(now+m.tick))
			v.onPFS = v.bypassed
			m.res.Checkpoints[v.ck].Done = now + m.tick
			if len(m.pending[v.app]) > 0 {
				next = append(next, v.app)
			}
			continue
		}
		q = append(q, v)
	}
	m.queue = q
	for _, app := range next {
		ck := m.pending[app][0]
		m.pending[app] = m.pending[app][1:]
		// after this one's end (the step's tick), as its writer
		m.launch(app, ck, m.tick)
	}
}

// restarts reads the newest checkpoints of the applications drawn to
// restart at the end: from the buffer where it holds them, else the PFS.
func (m *bbModel) restarts() {
	if m.cfg.Restarts <= 0 {
		return
	}
	for _, app := range m.cfg.Mix.Restarts(m.cfg.Restarts) {
		if !m.grant[app] {
			continue
		}
		v := m.newest(app)
		if v == nil {
			continue
		}
		m.res.Restarts++
		m.res.RestartBytes += float64(v.Bytes)
		if v.resident {
			m.res.RestartHits++
			m.res.RestartSeconds += float64(v.Bytes) / m.cfg.ReadBW
		} else {
			m.res.RestartSeconds += float64(v.Bytes) / m.cfg.PFSRead
		}
	}
}

// bbTime is the model's time as the scheduler's clock (iosched takes
// times, not durations).
func bbTime(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }
