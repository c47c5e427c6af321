package client

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/client/vfs"
)

type clientMetrics struct {
	requests *prometheus.CounterVec   // op
	latency  *prometheus.HistogramVec // op
}

func newClientMetrics(reg prometheus.Registerer) clientMetrics {
	m := clientMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_client_requests_total",
			Help: "File system operations served by the mount, as the application saw them."}, []string{"op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_client_request_duration_seconds",
			Help: "Latency of file system operations as the application saw them.", Buckets: prometheus.ExponentialBuckets(5e-6, 2, 22)}, []string{"op"}),
	}
	return m
}

// register exports the operations' series and the core's counts and
// gauges.
func (m clientMetrics) register(reg prometheus.Registerer, v *vfs.FS) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	count := func(name, help string, c func() int64) prometheus.CounterFunc {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(c()) })
	}
	gauge := func(name, help string, g func(vfs.Gauges) int64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(g(v.Gauges())) })
	}
	c := &v.Counts
	reg.MustRegister(m.requests, m.latency,
		count("sluice_client_dircache_hits_total", "Directory getattrs and lookups of absent names answered by the mount without a round trip.", c.DirCacheHits.Load),
		count("sluice_client_writeback_creates_total", "Creates answered by the mount and sent to the metadata service in batches.", c.WritebackCreates.Load),
		count("sluice_client_writeback_closes_total", "Closes of owned files that returned before their writes and size reached the service (sent in the background).", c.WritebackCloses.Load),
		count("sluice_client_writeback_unlinks_total", "Removals answered by the mount and sent to the metadata service in batches.", c.WritebackUnlinks.Load),
		count("sluice_client_owned_answers_total", "Read-only opens and reads of files this mount owns, answered from the bytes it keeps.", c.OwnedAnswers.Load),
		count("sluice_client_block_cache_hits_total", "Small reads answered from the mount's block cache.", c.BlockCacheHits.Load),
		count("sluice_client_byref_writes_total", "Background writes whose payload went to the forwarding node by reference (vmsplice over a local socket).", c.ByRef.Load),
		gauge("sluice_client_writeback_closing", "Closes of owned files whose writes and size are on their way.", func(g vfs.Gauges) int64 { return int64(g.Closing) }),
		gauge("sluice_client_block_cache_bytes", "Bytes the block cache holds.", func(g vfs.Gauges) int64 { return g.BlockCacheBytes }),
		gauge("sluice_client_block_cache_mapped_bytes", "Memory the block cache's blocks take outside the Go heap.", func(g vfs.Gauges) int64 { return g.BlockCacheMapped }),
		gauge("sluice_client_owned_files", "Files this mount owns (their bytes kept here).", func(g vfs.Gauges) int64 { return int64(g.OwnedFiles) }),
		gauge("sluice_client_owned_bytes", "Bytes the mount keeps of the files it owns.", func(g vfs.Gauges) int64 { return g.OwnedBytes }),
		gauge("sluice_client_writebehind_bytes", "Bytes of writes in flight in the background.", func(g vfs.Gauges) int64 { return g.WriteBehind }),
		gauge("sluice_client_readahead_bytes", "Bytes held in readahead buffers.", func(g vfs.Gauges) int64 { return g.Readahead }),
		count("sluice_client_kept_writes_total", "Background writes sent from the kernel request's buffer they came in (go-fuse WriteOwner), without a copy.",
			func() int64 { return int64(v.Gauges().KeptWrites) }),
		count("sluice_client_spliced_reads_total", "Reads that took a readahead buffer whole from its pipe: the reply spliced into the FUSE device (--splice-reads).",
			func() int64 { return int64(v.Gauges().SplicedReads) }))
}
