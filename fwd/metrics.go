package fwd

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// metrics are the daemon's Prometheus series. Job id is a label only of
// the per-job byte counters (aggregated per job, never per rank).
type metrics struct {
	requests *prometheus.CounterVec   // class, op
	latency  *prometheus.HistogramVec // class
	bytes    *prometheus.CounterVec   // dir
	jobBytes *prometheus.CounterVec   // job, dir
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_fwd_requests_total",
			Help: "Requests served by the forwarding daemon."}, []string{"class", "op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_fwd_request_duration_seconds",
			Help: "Time from dequeue to reply, per pipeline class.", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)},
			[]string{"class"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_fwd_bytes_total",
			Help: "File data moved by the forwarding daemon."}, []string{"dir"}),
		jobBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_job_bytes_total",
			Help: "File data moved per job through this forwarding daemon."}, []string{"job", "dir"}),
	}
	reg.MustRegister(m.requests, m.latency, m.bytes, m.jobBytes)
	files := func(unsynced bool) func() float64 {
		return func() float64 {
			s.fmu.Lock()
			defer s.fmu.Unlock()
			if unsynced {
				return float64(len(s.unsynced))
			}
			return float64(len(s.files))
		}
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_fwd_file_states",
		Help: "Files the forwarding daemon holds state of (open, or closed with work left)."}, files(false)))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_fwd_unsynced_files",
		Help: "Closed files whose writes through this daemon no fsync synced yet, whose data servers it remembers for a later fsync."}, files(true)))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_fwd_spliced_reads_total",
		Help: "Reads whose data was spliced from the data server's socket into the reply (--zero-copy)."},
		func() float64 { return float64(s.relays.Load()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_fwd_spliced_writes_total",
		Help: "Writes whose data was kept in a pipe and spliced on to the data servers (--zero-copy)."},
		func() float64 { return float64(s.bodyWrites.Load()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_fwd_write_stalls_total",
		Help: "New chunks whose writes waited for a tier at its write-stall threshold (Cs-w)."},
		func() float64 { return float64(s.stalls.Load()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_fwd_write_stall_seconds_total",
		Help: "Time writes waited for a tier at its write-stall threshold (Cs-w)."},
		func() float64 { return float64(s.stallNs.Load()) / 1e9 }))
	for c := wire.Class(0); c < wire.NumClasses; c++ {
		c := c
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_fwd_queue_depth",
			Help: "Requests waiting in a pipeline queue.", ConstLabels: prometheus.Labels{"class": c.String()}},
			func() float64 { return float64(s.Depth[c].Load()) }))
	}
	return m
}

func (m *metrics) observe(c wire.Class, op wire.Op, who wire.Who, d time.Duration, n int) {
	m.requests.WithLabelValues(c.String(), op.String()).Inc()
	m.latency.WithLabelValues(c.String()).Observe(d.Seconds())
	dir := ""
	switch op {
	case ns.OpRead:
		dir = "read"
	case ns.OpWrite:
		dir = "write"
	default:
		return
	}
	m.bytes.WithLabelValues(dir).Add(float64(n))
	job := who.Job
	if job == "" {
		job = "-"
	}
	m.jobBytes.WithLabelValues(job, dir).Add(float64(n))
}
