package tiers

import (
	"fmt"
	"time"

	"github.com/sluice-hpc/sluice/policy/tiering"
	"github.com/sluice-hpc/sluice/sim/engine"
)

// The tiering scenario (`Config`, `Simulate`): one writer puts
// files, one after the other, through a mem tier in front of an ssd tier,
// the set-up of the tiering experiment (bench/tiers/threshold.sh,
// docs/experiments/tiers.md). With tiering auto the tiering manager's
// loop calls policy/tiering's Plan on the mem server, as
// manager/tiering does, and carries out its moves; new chunks wait at the
// mem server's Cs-w while it frees space (placement's write stall), then
// spill once they have waited StallMax. With tiering manual nothing moves
// and a full mem tier spills new chunks to the ssd tier.
//
// What it mirrors of the daemons (each a place where the model and the
// daemons could part; docs/sim.md):
//   - the manager looks every Every (1 s; at Phase, Every/2, and every
//     Every after) and, after a move ends or a
//     writer begins to wait at Cs-w, again at once but at most every
//     100 ms;
//   - the metadata service learns a server's usage from its heartbeats
//     (every Heartbeat, 1 s), counts a chunk placed since as used and a
//     moved chunk as gone at once;
//   - a server's write bandwidth (the policy's N) is the peak of its
//     per-heartbeat rates over the last 30; a migration stream's is the
//     moving average (0.7/0.3) of each finished file move;
//   - the ssd device is shared max-min between the writer and the
//     migration streams; the mem device is never the bound here.

// Config is one tiering run.
type Config struct {
	MemBytes uint64  // the mem tier's capacity
	MemRate  float64 // its write bandwidth, bytes/s
	SsdRate  float64 // the ssd tier's, bytes/s
	// Auto runs policy/tiering (sluice meta --tiering auto); false:
	// nothing moves, a full mem tier spills (manual).
	Auto   bool
	Policy tiering.Config // thresholds (--tier-free)
	// WriterRate is the client path's own write speed (FUSE, forwarding,
	// data server) onto an idle tier, bytes/s.
	WriterRate float64
	// FileBytes per file; Total bytes in all, in bursts of Burst bytes
	// (Total: one stream) with Pause between them.
	FileBytes, Total, Burst uint64
	Pause                   time.Duration
	// StallMax is the longest a new chunk waits at Cs-w before it spills
	// (the forwarding daemon's; default 15 s, half of sluice cluster up's timeout).
	StallMax time.Duration
	// Every is the manager's tick (default 1 s); Heartbeat the data
	// servers' (default 1 s); Settle how long the run goes on after the
	// writer (default 3 s, the experiment's); Step the model's time step
	// (default 1 ms); Sample the timeline's (default 250 ms).
	Every, Heartbeat, Settle, Step, Sample time.Duration
	// Phase: the manager's ticks fall at Phase + k × Every from the run's
	// start (default Every/2: a daemon's ticker runs from the metadata
	// daemon's start, at a phase the writer does not know, and half a
	// period is the expected wait for its first look).
	Phase time.Duration
}

// Burst is one burst of the writer.
type Burst struct {
	At, Seconds float64
	Bytes       uint64
	MBps        float64
}

// Sample is the mem tier at a time: bytes used and the policy's
// mode.
type Sample struct {
	T    float64
	Used uint64
	Mode string
}

// Result is what a run did.
type Result struct {
	Bursts []Burst
	// WriteSecs is the bursts' time together; MBps the writer's
	// bandwidth over it (the experiment's "writer MB/s").
	WriteSecs, MBps float64
	SlowestFile     float64 // seconds
	Files           int
	// FilesOnMem and FilesMigrated are counted once the run settled;
	// Spilled are the files whose chunks went to the ssd tier at write.
	FilesOnMem, FilesMigrated, Spilled int
	Stalls                             int // chunks that waited at Cs-w
	Moves                              int // migrations the policy started
	Timeline                           []Sample
}

type tierFile struct {
	ino            uint64
	size, written  uint64
	placed         bool // its chunk has a place
	onSSD          bool // its chunk's tier
	open           bool
	opened, closed time.Duration
	migrating      bool
	moved          bool
	left           float64 // bytes of its move still to copy
	moveStart      time.Duration
}

type tierModel struct {
	cfg Config
	e   *engine.Engine
	res Result

	files []*tierFile
	// the mem server: bytes stored; what the metadata service last heard
	// (heartbeat) less what moved off since; chunks placed since
	used, reported, placed uint64
	// per-heartbeat write rates (peak of the last 30: its WriteBW)
	memW, ssdW         []float64
	memSince, ssdSince float64 // bytes written since the last heartbeat
	streamBW           float64 // migration stream into the ssd (EWMA)

	decision tiering.Decision
	seen     bool
	nextLook time.Duration
	lastLook time.Duration
	kicked   bool

	// the writer
	cur        *tierFile
	stallSince time.Duration // -1: not waiting for a chunk
	burstStart time.Duration
	burstBytes uint64
	pauseTill  time.Duration
	fileStart  time.Duration
	done       bool
	end        time.Duration
}

// Simulate runs one tiering scenario.
func Simulate(cfg Config) (Result, error) {
	if cfg.MemBytes == 0 || cfg.MemRate <= 0 || cfg.SsdRate <= 0 || cfg.WriterRate <= 0 || cfg.FileBytes == 0 || cfg.Total == 0 {
		return Result{}, fmt.Errorf("sim tiers: want the mem capacity, the rates, the writer's speed, the file size and the total")
	}
	if cfg.Auto && cfg.Policy.Thresholds != (tiering.Thresholds{}) {
		if err := cfg.Policy.Thresholds.Valid(); err != nil {
			return Result{}, fmt.Errorf("sim tiers: %v", err)
		}
	}
	if cfg.Burst == 0 || cfg.Burst > cfg.Total {
		cfg.Burst = cfg.Total
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.StallMax, 15*time.Second)
	def(&cfg.Every, time.Second)
	def(&cfg.Heartbeat, time.Second)
	def(&cfg.Settle, 3*time.Second)
	def(&cfg.Step, time.Millisecond)
	def(&cfg.Sample, 250*time.Millisecond)
	def(&cfg.Phase, cfg.Every/2)
	m := &tierModel{cfg: cfg, e: engine.New(), stallSince: -1, nextLook: cfg.Phase % cfg.Every}
	var step engine.Func
	step = func(now engine.Time) {
		m.step(time.Duration(now))
		if !m.done || time.Duration(now) < m.end {
			m.e.At(now+engine.Time(cfg.Step), step)
		}
	}
	m.e.At(0, step)
	m.e.Run(-1)
	r := &m.res
	for _, b := range r.Bursts {
		r.WriteSecs += b.Seconds
	}
	if r.WriteSecs > 0 {
		r.MBps = float64(cfg.Total) / r.WriteSecs / 1e6
	}
	r.Files = len(m.files)
	for _, f := range m.files {
		switch {
		case !f.onSSD:
			r.FilesOnMem++
		case f.moved:
			r.FilesMigrated++
		}
	}
	return *r, nil
}

// step is one time step: heartbeats, the manager's look, the writer and
// the migrations move bytes, the timeline.
func (m *tierModel) step(now time.Duration) {
	dt := m.cfg.Step.Seconds()
	if now%m.cfg.Heartbeat == 0 && now > 0 {
		m.heartbeat()
	}
	if m.cfg.Auto && (now >= m.nextLook || m.kicked && now >= m.lastLook+100*time.Millisecond) {
		m.look(now)
	}
	if now%m.cfg.Sample == 0 {
		mode := ""
		if m.cfg.Auto && m.seen {
			mode = m.decision.Mode.String()
		}
		m.res.Timeline = append(m.res.Timeline, Sample{T: now.Seconds(), Used: m.used, Mode: mode})
	}
	// who shares the ssd now: the writer if its chunk is there, each move
	var moves []*tierFile
	for _, f := range m.files {
		if f.migrating {
			moves = append(moves, f)
		}
	}
	// the ssd is shared max-min: the writer (if its chunk is there) up to
	// its own speed, the moves the rest
	// within the step the writer goes on to its next file where one
	// ends (the part of the step it used is when the file closed)
	ssd := m.cfg.SsdRate * dt
	frac := 0.0 // of the step the writer has used
	for w := m.writerWants(now); w != nil && frac < 1; w = m.writerWants(now + time.Duration(frac*float64(m.cfg.Step))) {
		rate := min(m.cfg.WriterRate, m.cfg.MemRate)
		if w.onSSD {
			rate = min(m.cfg.WriterRate, m.cfg.SsdRate/float64(len(moves)+1))
		}
		can := rate * dt * (1 - frac)
		n := min(uint64(can+0.5), w.size-w.written)
		w.written += n
		used := float64(n) / (rate * dt)
		frac += used
		if w.onSSD {
			m.ssdSince += float64(n)
			ssd -= float64(n)
		} else {
			m.used += n
			m.memSince += float64(n)
		}
		if w.written < w.size {
			break
		}
		m.closeFile(now + time.Duration(frac*float64(m.cfg.Step)))
	}
	ssd = max(ssd, 0)
	ssdShare := 0.0
	if len(moves) > 0 {
		ssdShare = ssd / float64(len(moves))
	}
	for _, f := range moves {
		f.left -= ssdShare
		m.ssdSince += ssdShare
		if f.left <= 0 {
			m.moveDone(f, now+m.cfg.Step)
		}
	}
	if m.done && m.end == 0 {
		m.end = now + m.cfg.Settle
	}
}

// writerWants is the file the writer writes now (nil: it pauses, waits
// for a chunk or is done), opening the next file and placing its chunk as
// due.
func (m *tierModel) writerWants(now time.Duration) *tierFile {
	if m.done || now < m.pauseTill {
		return nil
	}
	if m.cur == nil {
		if m.burstBytes == 0 {
			m.burstStart = now
		}
		m.cur = &tierFile{ino: uint64(len(m.files) + 1), size: m.cfg.FileBytes, open: true, opened: now}
		m.files = append(m.files, m.cur)
		m.fileStart = now
	}
	f := m.cur
	if !f.placed && !m.place(f, now) {
		return nil
	}
	return f
}

// place asks placement for the file's chunk: the mem tier if it has room
// above its write-stall reserve, a wait while the manager frees space
// there (at most StallMax), else the ssd tier.
func (m *tierModel) place(f *tierFile, now time.Duration) bool {
	reserve := uint64(0)
	if m.cfg.Auto {
		d := m.decision
		if !m.seen {
			d = tiering.Plan(now2t(now), m.cfg.Policy, m.server(nil), 0, nil)
		}
		if !m.seen || !m.stuck() {
			reserve = d.Thresholds.StallWrite
		}
	}
	view := m.reported + m.placed
	fits := func(r uint64) bool { return view+f.size+r <= m.cfg.MemBytes }
	switch {
	case fits(reserve):
		m.placed += f.size
		f.onSSD = false
	case reserve > 0 && now-m.stallSinceOr(now) < m.cfg.StallMax:
		if m.stallSince < 0 {
			m.stallSince = now
			m.res.Stalls++
			m.kicked = true // a stalled writer kicks the manager (cmd/sluice: SetOnStall)
		}
		return false
	default:
		f.onSSD = true
		m.res.Spilled++
	}
	m.stallSince = -1
	f.placed = true
	return true
}

func (m *tierModel) stallSinceOr(now time.Duration) time.Duration {
	if m.stallSince < 0 {
		return now
	}
	return m.stallSince
}

// closeFile is the writer's fsync and close: the next file, or the next
// burst after the pause, or the end.
func (m *tierModel) closeFile(now time.Duration) {
	f := m.cur
	f.open, f.closed = false, now
	m.res.SlowestFile = max(m.res.SlowestFile, (now - m.fileStart).Seconds())
	m.cur = nil
	m.burstBytes += f.size
	total := uint64(len(m.files)) * m.cfg.FileBytes
	if m.burstBytes >= m.cfg.Burst || total >= m.cfg.Total {
		secs := (now - m.burstStart).Seconds()
		m.res.Bursts = append(m.res.Bursts, Burst{At: m.burstStart.Seconds(), Seconds: secs, Bytes: m.burstBytes,
			MBps: float64(m.burstBytes) / secs / 1e6})
		m.burstBytes = 0
		m.pauseTill = now + m.cfg.Pause
	}
	if total >= m.cfg.Total {
		m.done = true
	}
}

// heartbeat: the data servers report their usage and rates.
func (m *tierModel) heartbeat() {
	secs := m.cfg.Heartbeat.Seconds()
	push := func(h []float64, v float64) []float64 {
		h = append(h, v)
		if len(h) > 30 {
			h = h[1:]
		}
		return h
	}
	m.memW = push(m.memW, m.memSince/secs)
	m.ssdW = push(m.ssdW, m.ssdSince/secs)
	m.memSince, m.ssdSince = 0, 0
	m.reported, m.placed = m.used, 0
}

func peakOf(h []float64) float64 {
	var p float64
	for _, v := range h {
		p = max(p, v)
	}
	return p
}

// server is the policy's view of the mem server: what the metadata
// service knows of its usage (the last heartbeat's, less what moved off
// since, plus the chunks placed since), its files (nil: none listed).
func (m *tierModel) server(files []tiering.File) tiering.Server {
	inflight := 0
	for _, f := range m.files {
		if f.migrating {
			inflight++
		}
	}
	return tiering.Server{ID: 1, Tier: "mem", Capacity: m.cfg.MemBytes, Used: m.reported + m.placed, WriteBW: peakOf(m.memW),
		InFlight: inflight, Files: files}
}

func (m *tierModel) stuck() bool {
	return tiering.Stuck(m.decision, m.server(nil).InFlight)
}

// look is the tiering manager's Tick on the mem server.
func (m *tierModel) look(now time.Duration) {
	if now >= m.nextLook {
		m.nextLook += (now-m.nextLook)/m.cfg.Every*m.cfg.Every + m.cfg.Every
	}
	m.lastLook, m.kicked = now, false
	var files []tiering.File
	for _, f := range m.files {
		if f.onSSD || f.written == 0 {
			continue
		}
		pf := tiering.File{Ino: f.ino, Bytes: f.written, Open: f.open, Migrating: f.migrating,
			LastAccess: now2t(now)}
		if !f.open {
			pf.LastClose = now2t(f.closed)
			pf.LastAccess = now2t(f.closed)
			pf.MeanToc = f.closed - f.opened
		}
		files = append(files, pf)
	}
	stream := m.streamBW
	if stream == 0 {
		stream = peakOf(m.ssdW)
	}
	targets := []tiering.Target{{ID: 2, Tier: "ssd", Rank: 1, Free: 1 << 50, StreamBW: stream, Alive: true}}
	m.decision = tiering.Plan(now2t(now), m.cfg.Policy, m.server(files), 0, targets)
	m.seen = true
	for _, mv := range m.decision.Moves {
		f := m.files[mv.Ino-1]
		f.migrating, f.left, f.moveStart = true, float64(f.written), now
		m.res.Moves++
	}
}

// moveDone: file f is on the ssd tier; the space it held on mem is free
// (and known to be at once).
func (m *tierModel) moveDone(f *tierFile, now time.Duration) {
	f.migrating, f.onSSD, f.moved = false, true, true
	m.used -= f.written
	m.reported -= min(m.reported, f.written)
	if d := (now - f.moveStart).Seconds(); d > 0 && f.written >= 1<<20 {
		bw := float64(f.written) / d
		if m.streamBW > 0 {
			bw = 0.7*m.streamBW + 0.3*bw
		}
		m.streamBW = bw
	}
	m.kicked = true
}

// now2t is simulated time as the policy's clock (from the Unix epoch).
func now2t(d time.Duration) time.Time { return time.Unix(0, int64(d)) }
