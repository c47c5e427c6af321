package client

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/beacon/beaconrpc"
	"github.com/sluice-hpc/sluice/internal/ident"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// record adds one operation to the monitor.
func (fs *FS) record(h *fuse.InHeader, id ident.ID, name string, ino, off, size uint64, start time.Time, failed bool) {
	if name == "" {
		return
	}
	fs.met.requests.WithLabelValues(name).Inc()
	fs.met.latency.WithLabelValues(name).Observe(fs.cfg.Now().Sub(start).Seconds())
	if fs.cfg.Monitor == nil {
		return
	}
	fs.cfg.Monitor.Add(beacon.Op{Start: start, Who: id, Uid: h.Uid,
		Name: name, Ino: ino, Off: off, Size: size, Lat: fs.cfg.Now().Sub(start), Err: failed})
}

// answered records an operation the mount answered itself (directory
// cache): the application asked for it, so Beacon counts it.
func (fs *FS) answered(h *fuse.InHeader, op wire.Op, ino uint64, start time.Time, failed bool) {
	fs.met.local.Inc()
	fs.record(h, fs.ident(h, op), beaconrpc.OpName(op), ino, 0, 0, start, failed)
}

type clientMetrics struct {
	requests  *prometheus.CounterVec   // op
	latency   *prometheus.HistogramVec // op
	local     prometheus.Counter       // answered from the directory cache
	wbLocal   prometheus.Counter       // creates answered here (write-back)
	wbCloses  prometheus.Counter       // closes that returned before their report (write-back)
	wbUnlinks prometheus.Counter       // removals answered here (write-back)
	owned     prometheus.Counter       // opens and reads of owned files answered here
	cached    prometheus.Counter       // reads answered from the block cache
}

func newClientMetrics(reg prometheus.Registerer, fs *FS) clientMetrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := clientMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_client_requests_total",
			Help: "File system operations served by the mount, as the application saw them."}, []string{"op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_client_request_duration_seconds",
			Help: "Latency of file system operations as the application saw them.", Buckets: prometheus.ExponentialBuckets(5e-6, 2, 22)}, []string{"op"}),
		local: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_dircache_hits_total",
			Help: "Directory getattrs and lookups of absent names answered by the mount without a round trip."}),
		wbLocal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_writeback_creates_total",
			Help: "Creates answered by the mount and sent to the metadata service in batches."}),
		wbCloses: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_writeback_closes_total",
			Help: "Closes of owned files that returned before their writes and size reached the service (sent in the background)."}),
		wbUnlinks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_writeback_unlinks_total",
			Help: "Removals answered by the mount and sent to the metadata service in batches."}),
		owned: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_owned_answers_total",
			Help: "Read-only opens and reads of files this mount owns, answered from the bytes it keeps."}),
		cached: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_client_block_cache_hits_total",
			Help: "Small reads answered from the mount's block cache."}),
	}
	stream := func(name, help string, v func() int64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	reg.MustRegister(m.requests, m.latency, m.local, m.wbLocal, m.wbCloses, m.wbUnlinks, m.owned, m.cached,
		stream("sluice_client_writeback_closing", "Closes of owned files whose writes and size are on their way.", func() int64 { return int64(fs.own.Closing()) }),
		stream("sluice_client_block_cache_bytes", "Bytes the block cache holds.", func() int64 { b, _, _ := fs.bc.Stats(); return b }),
		stream("sluice_client_block_cache_mapped_bytes", "Memory the block cache's blocks take outside the Go heap.", fs.bc.Mapped),
		stream("sluice_client_owned_files", "Files this mount owns (their bytes kept here).", func() int64 { return int64(fs.own.Len()) }),
		stream("sluice_client_owned_bytes", "Bytes the mount keeps of the files it owns.", func() int64 { return fs.own.Bytes() }),
		stream("sluice_client_writebehind_bytes", "Bytes of writes in flight in the background.", func() int64 { wb, _ := fs.st.InFlight(); return wb }),
		stream("sluice_client_readahead_bytes", "Bytes held in readahead buffers.", func() int64 { _, ra := fs.st.InFlight(); return ra }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_client_kept_writes_total",
			Help: "Background writes sent from the kernel request's buffer they came in (go-fuse WriteOwner), without a copy."},
			func() float64 { return float64(fs.st.Kept()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_client_byref_writes_total",
			Help: "Background writes whose payload went to the forwarding node by reference (vmsplice over a local socket)."},
			func() float64 { return float64(fs.byRef.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_client_spliced_reads_total",
			Help: "Reads that took a readahead buffer whole from its pipe: the reply spliced into the FUSE device (--splice-reads)."},
			func() float64 { return float64(fs.st.Spliced()) }))
	return m
}
