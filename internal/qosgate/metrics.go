package qosgate

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics exports the gate's flows at scrape time.
type metrics struct {
	g *Gate

	bytes, reqs, wait, capped, depth, used, limit, granted *prometheus.Desc
}

var _ prometheus.Collector = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer, role, class string, g *Gate) *metrics {
	l := []string{"flow", "rule"}
	c := prometheus.Labels{"role": role, "class": class}
	m := &metrics{g: g,
		bytes:   prometheus.NewDesc("sluice_qos_bytes_total", "Bytes a QoS flow was served.", l, c),
		reqs:    prometheus.NewDesc("sluice_qos_requests_total", "Requests a QoS flow was served.", l, c),
		wait:    prometheus.NewDesc("sluice_qos_wait_seconds_total", "Time a QoS flow's requests waited in its queue.", l, c),
		capped:  prometheus.NewDesc("sluice_qos_capped_total", "Requests of a QoS flow held back by its rule's cap.", l, c),
		depth:   prometheus.NewDesc("sluice_qos_queue_depth", "Requests of a QoS flow queued now.", l, c),
		used:    prometheus.NewDesc("sluice_qos_rate_bytes", "Bytes/s a QoS flow was served over the last second.", l, c),
		limit:   prometheus.NewDesc("sluice_qos_rate_limit_bytes", "A QoS flow's cap in bytes/s (0: none).", l, c),
		granted: prometheus.NewDesc("sluice_qos_share_granted", "The fraction of the server a QoS flow's share gives it among active flows.", l, c),
	}
	reg.MustRegister(m)
	return m
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.bytes, m.reqs, m.wait, m.capped, m.depth, m.used, m.limit, m.granted} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, f := range m.g.Stats() {
		lv := []string{f.Key, f.Rule}
		ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.CounterValue, float64(f.Bytes), lv...)
		ch <- prometheus.MustNewConstMetric(m.reqs, prometheus.CounterValue, float64(f.N), lv...)
		ch <- prometheus.MustNewConstMetric(m.wait, prometheus.CounterValue, f.Wait.Seconds(), lv...)
		ch <- prometheus.MustNewConstMetric(m.capped, prometheus.CounterValue, float64(f.Capped), lv...)
		ch <- prometheus.MustNewConstMetric(m.depth, prometheus.GaugeValue, float64(f.Depth), lv...)
		ch <- prometheus.MustNewConstMetric(m.used, prometheus.GaugeValue, f.Used, lv...)
		ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, f.Rate, lv...)
		ch <- prometheus.MustNewConstMetric(m.granted, prometheus.GaugeValue, f.Granted, lv...)
	}
}
