package data

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-hpc/sluice/tier"
)

// max_perf (Sunway §5): the bandwidth placement may count on from this
// server. Configured (Config.MaxPerfMBps) it is reported as is; otherwise
// the server measures it — a short write probe through its own device
// limits and store before it registers, again when it has been idle for
// a while every ProbeEvery — and, once it has been saturated long
// enough, replaces it by the rate it has sustained lately: the bytes of
// its chunk writes over the last sustainMin of heartbeat windows in
// which at least one was in progress (device limits and store included)
// nine tenths of the time. A probe disturbed by a neighbour reads low,
// and a device that turns slow while busy is never idle to be probed
// again; a saturated device shows what it gives now, either way. (Taking
// the higher of the two, as before, kept a slowed busy server at its
// probe's figure: placement went on sending it more than its peers, and
// the fail-slow detector, which does not judge a server far more loaded
// than its peers, did not flag it.) The heartbeat meter's peak
// rate is not used: counted in whole requests per period, a slow
// device's peak reads high by up to a request per period (13 MB/s for
// 12.5, 3 for 2.5 with 1 MiB writes and 1 s periods), enough to send a
// slow server one chunk too many (docs/experiments/placement.md).

// probeIno is the file the probe writes (no inode number the metadata
// service hands out comes near it).
const probeIno = math.MaxUint64 - 1

// perf holds the measured figures.
type perf struct {
	probed atomic.Uint64 // the last probe's write rate, bytes/s

	mu       sync.Mutex // guards the fields below
	inflight int        // chunk writes in progress
	since    time.Time  // when inflight last rose from 0
	busy     time.Duration
	bytes    uint64 // written since the server started
	// the window being measured: from lastAt, with busy and bytes then
	lastAt    time.Time
	lastBusy  time.Duration
	lastBytes uint64
	// the latest windows that counted since the last probe, oldest
	// first, the oldest dropped while the others add up to sustainMin;
	// accTime and accBytes are their sums
	counted  []window
	accTime  time.Duration
	accBytes uint64
}

// window is a counted window's length and the bytes written in it.
type window struct {
	d     time.Duration
	bytes uint64
}

// A window counts towards the sustained rate when the server was busy
// for sustainBusy of it: an emulated or real device that idles between
// requests serves the next one from its burst allowance, so only a
// saturated device shows its sustained rate (the time it idled, at most
// a tenth, is counted as work: the figure errs low by as much).
const (
	sustainBusy   = 0.9
	sustainWindow = 200 * time.Millisecond
	// sustainMin is the time in counted windows after which the rate
	// is used: long enough that a request more or less is a few per
	// cent at 1 MiB and 2.5 MB/s.
	sustainMin = 10 * time.Second
)

// begin marks a chunk write started at now; the returned function marks
// it done with n bytes written (0: failed).
func (p *perf) begin(now func() time.Time) func(n uint64) {
	p.mu.Lock()
	if p.inflight == 0 {
		p.since = now()
	}
	p.inflight++
	p.mu.Unlock()
	return func(n uint64) {
		p.mu.Lock()
		p.inflight--
		p.bytes += n
		if p.inflight == 0 {
			p.busy += now().Sub(p.since)
		}
		p.mu.Unlock()
	}
}

// sustained closes the window being measured at now (counting it if the
// server was busy enough and it is long enough) and returns the write
// rate over the latest sustainMin of counted windows since the last
// probe, bytes/s (0: not sustainMin of them yet).
func (p *perf) sustained(now time.Time) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	busy := p.busy
	if p.inflight > 0 {
		busy += now.Sub(p.since)
	}
	if d := now.Sub(p.lastAt); p.lastAt.IsZero() || d >= sustainWindow {
		if !p.lastAt.IsZero() && float64(busy-p.lastBusy) >= sustainBusy*float64(d) {
			w := window{d, p.bytes - p.lastBytes}
			p.counted = append(p.counted, w)
			p.accTime += w.d
			p.accBytes += w.bytes
			for p.accTime-p.counted[0].d >= sustainMin {
				p.accTime -= p.counted[0].d
				p.accBytes -= p.counted[0].bytes
				p.counted = p.counted[1:]
			}
		}
		p.lastAt, p.lastBusy, p.lastBytes = now, busy, p.bytes
	}
	if p.accTime < sustainMin {
		return 0
	}
	return uint64(float64(p.accBytes) / p.accTime.Seconds())
}

// reset starts the sustained rate afresh (a new probe).
func (p *perf) reset() {
	p.mu.Lock()
	p.counted, p.accTime, p.accBytes = nil, 0, 0
	p.lastAt = time.Time{}
	p.mu.Unlock()
}

// maxPerf is the figure the server reports.
func (s *Server) maxPerf() uint64 {
	if s.cfg.MaxPerfMBps > 0 {
		return uint64(s.cfg.MaxPerfMBps * 1e6)
	}
	if r := s.perf.sustained(s.cfg.Now()); r > 0 {
		return r
	}
	return s.perf.probed.Load()
}

// Probe timing: the device's burst is spent in the first probeWarm, then
// the rate is timed over at least probeTime and probeBlocks blocks, the
// whole probe bounded by probeMax and probeBytes.
const (
	probeBlock  = 128 << 10
	probeBlocks = 16
	probeWarm   = 60 * time.Millisecond
	probeTime   = 150 * time.Millisecond
	probeMax    = 2 * time.Second
	probeBytes  = 32 << 20
)

// probe measures the write rate of the server's device as a client
// would see it (device limits, store, sync) and records it. A store
// without room for the probe, or the pfs tier's (plain files need a
// path), is not probed.
func (s *Server) probe(ctx context.Context) {
	if s.cfg.Kind == "pfs" {
		return
	}
	capacity, used := s.store.Usage()
	room := int64(probeBytes)
	if capacity > 0 {
		room = min(room, (capacity-used)/8)
	}
	room -= room % probeBlock
	if room < 4*probeBlock {
		return
	}
	id := tier.ChunkID{Ino: probeIno, ChunkSize: uint32(room)}
	defer s.store.DeleteFile(probeIno)
	buf := make([]byte, probeBlock)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	start := s.cfg.Now()
	var from time.Time
	var timed int64
	for off := int64(0); off+probeBlock <= room; off += probeBlock {
		now := s.cfg.Now()
		if from.IsZero() && now.Sub(start) >= probeWarm {
			from = now
		}
		if !from.IsZero() && timed >= probeBlocks*probeBlock && now.Sub(from) >= probeTime || now.Sub(start) >= probeMax {
			break
		}
		s.iops.Wait(ctx, 1)
		s.bw.Wait(ctx, probeBlock)
		if ctx.Err() != nil {
			return
		}
		if err := s.store.Write(id, off, buf, room); err != nil {
			s.cfg.Log.Debug("probe write failed", "err", err)
			return
		}
		if !from.IsZero() {
			timed += probeBlock
		}
	}
	if err := s.store.Sync(probeIno); err != nil {
		return
	}
	if from.IsZero() || timed == 0 { // fast: it all went in the warm-up
		from, timed = start, room
	}
	d := s.cfg.Now().Sub(from).Seconds()
	if d <= 0 {
		return
	}
	rate := uint64(float64(timed) / d)
	s.perf.probed.Store(rate)
	s.perf.reset()
	s.cfg.Log.Info("device probed", "tier", s.cfg.Kind, "write MB/s", float64(rate)/1e6)
}

// reprobe probes again every ProbeEvery once the server has had no
// traffic for a heartbeat period or more (an aging device's figure
// falls only this way).
func (s *Server) reprobe(ctx context.Context) {
	if s.cfg.ProbeEvery <= 0 || s.cfg.MaxPerfMBps > 0 {
		return
	}
	t := time.NewTicker(s.cfg.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w, r := s.meter.written.Load(), s.meter.read.Load()
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			if w == s.meter.written.Load() && r == s.meter.read.Load() {
				s.probe(ctx)
			}
		}
	}
}
