package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-hpc/sluice/policy/tiering"
	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/flow"
)

// The mem tier of a machine (machine.MemTier): one mem data server per
// storage group, beside its targets. What it mirrors of the daemons
// (docs/sim.md "The mem tier"):
//   - placement: a write phase's bytes behind one forwarding node go to
//     its group's mem server as far as its room above the write-stall
//     threshold (Cs-w) goes, the rest waits there for room in the order
//     the writers came (meta/stallorder.go), at most StallMax, then
//     spills to the group's targets (policy/place); with tiering manual,
//     or with the server stuck (policy/tiering Stuck: not calm, and a look
//     with nothing moving found nothing to move) there is no reserve, and
//     a full server spills at once;
//   - the tiering manager calls policy/tiering's Plan for each server
//     every Every and, after a move ends or a writer begins to wait at
//     Cs-w, again at once but at most every 100 ms (manager/tiering
//     Kick), and carries out its moves: a file's bytes
//     copied from the mem server to the group's targets (placed by
//     policy/place), its room free when the copy ends;
//   - a job's write phase is one file per forwarding node (its I/O
//     nodes' files there together), open while the phase writes, closed
//     when it ends; what a job reads back it reads from where its files
//     are now.
//
// Where it parts from the daemons: a phase's bytes claim their room when
// the phase starts, not chunk by chunk as they are written (so a
// migration that ends during a long write gives its room to the next
// waiter, not to the rest of the same write); the metadata service's
// view of a server's usage is exact, not a heartbeat's; a server's write
// bandwidth for the policy's N is its capacity, and one migration
// stream's the mean of its group's targets; a job alone on the machine
// (its IOAlone) meets an empty mem tier that never drains.

// memServer is one storage group's mem data server.
type memServer struct {
	g    int
	r    *flow.Resource
	used float64 // bytes placed on it (written, being written, or moving off until the move ends)
	// files with bytes on it, in the order first placed
	files    []*memFile
	inflight int // moves off it running
	decision tiering.Decision
	seen     bool // a look has decided
	// calm: the last look found it calm and nothing has changed since
	// (a look would find it calm again: a calm server's decision does
	// not depend on the time)
	calm    bool
	waiters []*memWaiter // writes waiting at Cs-w, in the order they came
}

// memFile is a job's write phase behind one forwarding node: its I/O
// nodes' files there together.
type memFile struct {
	ino       uint64
	ms        *memServer
	j         *job // its job while it runs (nil after)
	bytes     float64
	open      bool
	opened    engine.Time
	closed    engine.Time
	migrating float64 // bytes of it moving off (0: none)
}

// memWaiter is the part of a write waiting for room at a mem server.
type memWaiter struct {
	j     *job
	ms    *memServer
	file  *memFile
	rest  float64
	since engine.Time // it began to wait
	// last is when it last got room: each of its chunks waits at most
	// StallMax from there
	last  engine.Time
	toMem func(bytes float64) *flow.Flow
	toPFS func(bytes float64) []*flow.Flow
	done  bool
}

// MemStats is what the mem tier did in a run (nil: the machine has none).
type MemStats struct {
	Written float64 `json:"written"` // bytes jobs wrote onto it
	Spilled float64 `json:"spilled"` // bytes that found it full and went to the PFS
	// Stalls are the writes that waited at Cs-w, StallSpills those of
	// them that spilled after StallMax; StallTime their waits together.
	Stalls      int     `json:"stalls"`
	StallSpills int     `json:"stall_spills"`
	StallTime   float64 `json:"stall_s"`
	// Moves are the migrations policy/tiering started (Forced of them of
	// open files), Moved their bytes.
	Moves   int     `json:"moves"`
	Forced  int     `json:"forced"`
	Moved   float64 `json:"moved"`
	ReadMem float64 `json:"read_mem"` // bytes read back from it
	// Peak is the fullest a server was, bytes; Looks the policy's calls.
	Peak  float64 `json:"peak"`
	Looks int     `json:"looks"`
}

// memView is what flows places on the mem tier for one job: the live
// servers, or (alone) an empty tier of its own.
type memView struct {
	alone bool
	used  []float64 // alone: per group, bytes this phase placed
	onMem []float64 // per group, what the job has on its mem server
}

func (s *Sim) newMemTier() {
	mt := s.m.MemTier
	if mt == nil {
		return
	}
	s.res.Mem = &MemStats{}
	chunk := uint64(4 << 20)
	if c := s.m.Storage.ChunkSize; c > 0 {
		chunk = uint64(c)
	}
	s.memCfg = tiering.Config{ChunkSize: chunk}
	if t := mt.Thresholds; t != [3]float64{} {
		s.memCfg.Thresholds = tiering.Thresholds{StallWrite: uint64(t[0]), ForcedOut: uint64(t[1]), NormalOut: uint64(t[2])}
	}
	for g := 0; g < s.m.Storage.Groups; g++ {
		r := s.fm.NewResource(fmt.Sprintf("mem%04d", g), mt.BW)
		r.Grouped = len(s.cfg.QoS) > 0
		ms := &memServer{g: g, r: r, calm: true}
		s.mem = append(s.mem, ms)
	}
	s.memStall = engine.FromSeconds(15)
	if mt.StallMax > 0 {
		s.memStall = engine.FromSeconds(mt.StallMax)
	}
	s.memEvery = engine.Second
	if mt.Every > 0 {
		s.memEvery = engine.FromSeconds(mt.Every)
	}
	s.memPhase = s.memEvery / 2
	if mt.Phase > 0 {
		s.memPhase = engine.FromSeconds(mt.Phase) % s.memEvery
	}
	s.memTimer = s.e.NewTimer()
	s.memAt = -1
	// an empty server's reserve (a job alone meets an empty tier)
	s.memEmptyReserve = float64(tiering.Plan(simTime(0), s.memCfg, s.memServerView(&memServer{}, false), 0, s.memTargets(0)).Thresholds.StallWrite)
	if mt.Manual {
		s.memEmptyReserve = 0
	}
}

// simTime is simulated time as the policy's clock (from the Unix epoch).
func simTime(t engine.Time) time.Time { return time.Unix(0, int64(t)) }

// memReserve is the room a new write may not take on ms: Cs-w, unless
// tiering is manual or the server is stuck (policy/tiering Stuck), as
// the metadata service's placement does.
func (s *Sim) memReserve(ms *memServer) float64 {
	if s.m.MemTier.Manual {
		return 0
	}
	if !ms.seen {
		return s.memEmptyReserve
	}
	if tiering.Stuck(ms.decision, ms.inflight) {
		return 0
	}
	return float64(ms.decision.Thresholds.StallWrite)
}

// memRoom is what a new write may place on ms now.
func (s *Sim) memRoom(ms *memServer) float64 {
	return math.Max(0, s.m.MemTier.Capacity-ms.used-s.memReserve(ms))
}

// memPlace places b bytes of j's write phase behind a forwarding node of
// group g on the mem tier: it returns the bytes on mem now, the file
// they are in (nil: none), and whether the rest waits for room (else it
// spills to the PFS).
func (s *Sim) memPlace(j *job, mv *memView, g int, b float64, now engine.Time) (onMem float64, file *memFile, wait bool) {
	if mv.alone {
		onMem = math.Min(b, math.Max(0, s.m.MemTier.Capacity-s.memEmptyReserve-mv.used[g]))
		mv.used[g] += onMem
		if mv.onMem != nil {
			mv.onMem[g] += onMem
		}
		return onMem, nil, false
	}
	ms := s.mem[g]
	manual := s.m.MemTier.Manual
	if !manual && len(ms.waiters) > 0 {
		onMem = 0 // behind the writers waiting before it
	} else {
		onMem = math.Min(b, s.memRoom(ms))
	}
	wait = b > onMem && !manual && s.memReserve(ms) > 0
	if onMem > 0 || wait {
		s.memIno++
		file = &memFile{ino: s.memIno, ms: ms, j: j, open: true, opened: now}
		ms.files = append(ms.files, file)
		j.memOpen = append(j.memOpen, file)
		j.memFiles = append(j.memFiles, file)
		s.memAdd(ms, file, onMem, now)
	}
	return onMem, file, wait
}

// memAdd places bytes of file on ms.
func (s *Sim) memAdd(ms *memServer, file *memFile, bytes float64, now engine.Time) {
	if bytes <= 0 {
		return
	}
	file.bytes += bytes
	ms.used += bytes
	s.res.Mem.Written += bytes
	s.res.Mem.Peak = math.Max(s.res.Mem.Peak, ms.used)
	if j := file.j; j != nil {
		j.onMem[ms.g] += bytes
		j.res.MemBytes += bytes
	}
	s.memDirty(ms, now)
}

// memDirty marks ms as changed, for the manager's next tick.
func (s *Sim) memDirty(ms *memServer, now engine.Time) {
	ms.calm = false
	if s.m.MemTier.Manual || s.memAt >= 0 {
		return
	}
	s.memSchedule(s.memNextTick(now, true))
}

func (s *Sim) memSchedule(at engine.Time) {
	if s.memAt >= 0 && s.memAt <= at {
		return
	}
	s.memAt = at
	s.e.Set(s.memTimer, at, engine.Func(s.memTick))
}

// memNextTick is the manager's first tick at or after now (after, unless
// atOrAfter): its ticks fall at memPhase + k × memEvery from the start of
// the run (MemTier.Phase).
func (s *Sim) memNextTick(now engine.Time, atOrAfter bool) engine.Time {
	if now < s.memPhase {
		return s.memPhase
	}
	next := s.memPhase + (now-s.memPhase)/s.memEvery*s.memEvery // the last at or before now
	if next < now || !atOrAfter {
		next += s.memEvery
	}
	return next
}

// memKick is a move's end: the manager looks again at once, at most
// every 100 ms.
func (s *Sim) memKick(now engine.Time) {
	s.memSchedule(max(now, s.memLast+100*engine.Millisecond))
}

// memTick is the tiering manager's look at every server that changed or
// is not calm.
func (s *Sim) memTick(now engine.Time) {
	s.memAt = -1
	s.memLast = now
	again := false
	for _, ms := range s.mem {
		if ms.calm && len(ms.waiters) == 0 {
			continue
		}
		s.memLook(ms, now)
		if !ms.calm || len(ms.waiters) > 0 {
			again = true
		}
	}
	if again {
		s.memSchedule(s.memNextTick(now, false))
	}
}

// memServerView is the policy's view of ms (files: with its files).
func (s *Sim) memServerView(ms *memServer, files bool) tiering.Server {
	mt := s.m.MemTier
	sv := tiering.Server{ID: uint64(ms.g + 1), Tier: "mem", Capacity: uint64(mt.Capacity), Used: uint64(ms.used), WriteBW: mt.BW, InFlight: ms.inflight}
	if !files {
		return sv
	}
	for _, f := range ms.files {
		pf := tiering.File{Ino: f.ino, Bytes: uint64(f.bytes), Open: f.open, Migrating: f.migrating > 0, LastAccess: simTime(s.e.Now())}
		if !f.open {
			pf.LastClose, pf.LastAccess = simTime(f.closed), simTime(f.closed)
			pf.MeanToc = time.Duration(f.closed - f.opened)
		}
		sv.Files = append(sv.Files, pf)
	}
	return sv
}

// memTargets is the tier below group g's mem server, for the policy: the
// PFS, unbounded, one migration stream at the mean of the group's
// targets.
func (s *Sim) memTargets(g int) []tiering.Target {
	T := s.m.Storage.Targets
	var bw float64
	alive := false
	for k := 0; k < T && g*T+k < len(s.targets); k++ {
		c := s.targets[g*T+k].Capacity()
		bw += c / float64(T)
		alive = alive || c > 0
	}
	return []tiering.Target{{ID: 1 << 32, Tier: "pfs", Rank: 1, Unbounded: true, StreamBW: bw, Alive: alive}}
}

// memLook runs policy/tiering on ms and starts its moves, then lets the
// writers waiting there in as room allows.
func (s *Sim) memLook(ms *memServer, now engine.Time) {
	ms.decision = tiering.Plan(simTime(now), s.memCfg, s.memServerView(ms, true), 0, s.memTargets(ms.g))
	ms.seen = true
	s.res.Mem.Looks++
	ms.calm = ms.decision.Mode == tiering.Calm
	for _, mv := range ms.decision.Moves {
		i := slices.IndexFunc(ms.files, func(f *memFile) bool { return f.ino == mv.Ino })
		if i < 0 {
			continue
		}
		s.memMove(ms, ms.files[i], mv.Forced, now)
	}
	s.memServe(ms, now)
}

// memMove copies file f from ms to its group's targets (placed by
// policy/place); its room is free when the copy ends.
func (s *Sim) memMove(ms *memServer, f *memFile, forced bool, now engine.Time) {
	bytes := f.bytes
	f.migrating = bytes
	ms.inflight++
	s.res.Mem.Moves++
	if forced {
		s.res.Mem.Forced++
	}
	T := s.m.Storage.Targets
	g := ms.g
	// in chunks, at most 16 units per target (as a job's writes)
	units := max(1, min(int(math.Ceil(bytes/float64(s.memCfg.ChunkSize))), 16*T))
	parts := s.placeUnits(f.ino|1<<62, units, g, bytes, s.placed,
		func(t int) float64 { return s.targets[t].Busy(s.e.Now()) })
	path := []flow.Use{{R: ms.r}}
	var onTargets []targetBytes
	for k, x := range parts {
		if x > 0 {
			path = append(path, flow.Use{R: s.targets[g*T+k], W: x / bytes})
			onTargets = append(onTargets, targetBytes{t: g*T + k, bytes: x})
		}
	}
	s.fm.Start(path, bytes, 0, 0, 0, migrateTag, func(_ *flow.Flow, now engine.Time) {
		f.migrating = 0
		f.bytes -= bytes
		ms.used -= bytes
		ms.inflight--
		s.res.Mem.Moved += bytes
		if j := f.j; j != nil {
			j.onMem[g] -= bytes
			if j.wrote != nil {
				for _, p := range onTargets {
					j.wrote[p.t] += p.bytes
				}
			}
		}
		if f.bytes <= 0 && !f.open { // (an open file may get more)
			ms.files = slices.DeleteFunc(ms.files, func(x *memFile) bool { return x == f })
		}
		s.memDirty(ms, now)
		s.memKick(now)
		s.memServe(ms, now)
	})
}

// migrateTag marks the flows of the mem tier's moves.
const migrateTag = "migrate"

// memServe lets the writers waiting at ms place what room allows, in
// turn.
func (s *Sim) memServe(ms *memServer, now engine.Time) {
	for len(ms.waiters) > 0 {
		w := ms.waiters[0]
		x := math.Min(w.rest, s.memRoom(ms))
		if x <= 0 {
			return
		}
		s.memAdd(ms, w.file, x, now)
		w.j.flows = append(w.j.flows, w.toMem(x))
		w.j.pending++
		w.rest -= x
		w.last = now
		if w.rest > 0 {
			return
		}
		s.memUnwait(w, now, true)
	}
}

// memWait queues the rest of a write at ms; after StallMax it spills.
func (s *Sim) memWait(j *job, ms *memServer, file *memFile, rest float64, now engine.Time, toMem func(float64) *flow.Flow, toPFS func(float64) []*flow.Flow) {
	w := &memWaiter{j: j, ms: ms, file: file, rest: rest, since: now, last: now, toMem: toMem, toPFS: toPFS}
	ms.waiters = append(ms.waiters, w)
	j.waiters = append(j.waiters, w)
	s.res.Mem.Stalls++
	s.memDirty(ms, now)
	if !s.m.MemTier.Manual {
		s.memKick(now) // a stalled writer kicks the manager (cmd/sluice: SetOnStall)
	}
	var timeout engine.Func
	timeout = func(now engine.Time) {
		if w.done {
			return
		}
		if now < w.last+s.memStall {
			s.e.At(w.last+s.memStall, timeout)
			return
		}
		s.res.Mem.StallSpills++
		s.res.Mem.Spilled += w.rest
		fl := w.toPFS(w.rest)
		w.j.flows = append(w.j.flows, fl...)
		w.j.pending += len(fl)
		s.memUnwait(w, now, true)
		s.memServe(ms, now) // the next in turn
	}
	s.e.At(now+s.memStall, timeout)
}

// memUnwait ends w's wait; with count its job's pending work is one
// less (the phase may end).
func (s *Sim) memUnwait(w *memWaiter, now engine.Time, count bool) {
	w.done = true
	w.ms.waiters = slices.DeleteFunc(w.ms.waiters, func(x *memWaiter) bool { return x == w })
	w.j.waiters = slices.DeleteFunc(w.j.waiters, func(x *memWaiter) bool { return x == w })
	d := (now - w.since).Seconds()
	s.res.Mem.StallTime += d
	w.j.res.Stalled += d
	if count {
		s.flowDone(w.j, now)
	}
}

// memClose closes j's open files on the mem tier (its phase ended).
func (s *Sim) memClose(j *job, now engine.Time) {
	for _, f := range j.memOpen {
		f.open, f.closed = false, now
		if f.bytes <= 0 && f.migrating == 0 {
			f.ms.files = slices.DeleteFunc(f.ms.files, func(x *memFile) bool { return x == f })
		}
		s.memDirty(f.ms, now)
	}
	j.memOpen = j.memOpen[:0]
}

// memForget lets a finished job's files go of it (they stay on the tier
// until moved).
func (s *Sim) memForget(j *job) {
	for _, f := range j.memFiles {
		f.j = nil
	}
	j.memFiles, j.memOpen, j.memFlows = nil, nil, nil
}

// memUnplace takes back what a cancelled flow to f's server had not
// written yet (a remap places it anew).
func (s *Sim) memUnplace(f *memFile, left float64) {
	ms := f.ms
	f.bytes -= left
	ms.used -= left
	s.res.Mem.Written -= left
	if j := f.j; j != nil {
		j.onMem[ms.g] -= left
		j.res.MemBytes -= left
	}
}

func (s *Sim) memSample() float64 {
	var used float64
	for _, ms := range s.mem {
		used += ms.used
	}
	return used / (float64(len(s.mem)) * s.m.MemTier.Capacity)
}
