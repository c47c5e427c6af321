package data

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluice-hpc/sluice/tier"
)

// max_perf (Sunway §5): the bandwidth placement may count on from this
// server. Configured (Config.MaxPerfMBps) it is reported as is; otherwise
// the server measures it — a short write probe through its own device
// limits and store before it registers, again when it has been idle for
// a while every ProbeEvery — and raises it by what it has served since
// (its meter's peak write rate): a probe disturbed by a neighbour reads
// low, a busy device shows what it really gives.

// probeIno is the file the probe writes (no inode number the metadata
// service hands out comes near it).
const probeIno = math.MaxUint64 - 1

// perf holds the measured figures, bytes/s.
type perf struct {
	probed atomic.Uint64 // the last probe's write rate
	peak   atomic.Uint64 // the meter's highest write rate since
}

// maxPerf is the figure the server reports.
func (s *Server) maxPerf(observed uint64) uint64 {
	if s.cfg.MaxPerfMBps > 0 {
		return uint64(s.cfg.MaxPerfMBps * 1e6)
	}
	for {
		p := s.perf.peak.Load()
		if observed <= p || s.perf.peak.CompareAndSwap(p, observed) {
			break
		}
	}
	return max(s.perf.probed.Load(), s.perf.peak.Load())
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
	s.perf.peak.Store(0)
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
