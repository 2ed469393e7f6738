package otlp

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names: the sink's counters on serve's /metrics.
const (
	MetricSpansExported = "etcdscope_otlp_spans_exported_total"
	MetricSpansDropped  = "etcdscope_otlp_spans_dropped_total"
	MetricWritesDropped = "etcdscope_otlp_writes_dropped_total"
	MetricEntries       = "etcdscope_otlp_entries_total"
)

// Collector returns the sink's counters as Prometheus metrics, read at
// scrape time.
func (s *Sink) Collector() prometheus.Collector { return (*collector)(s) }

type collector Sink

var (
	descExported = prometheus.NewDesc(MetricSpansExported,
		"Spans the OTLP collector (serve --otlp-endpoint) accepted.", nil, nil)
	descDropped = prometheus.NewDesc(MetricSpansDropped,
		"Spans made but not exported: the collector failed or timed out (reason=export).", []string{"reason"}, nil)
	descWrites = prometheus.NewDesc(MetricWritesDropped,
		"Writes whose spans were not made: the sink's queue was full (reason=queue) or their Raft term was unknown (reason=no_term).", []string{"reason"}, nil)
	descEntries = prometheus.NewDesc(MetricEntries,
		"Raft entries this member's window held, by what the OTLP sink did: exported, not_sampled (--otlp-sample-every/--otlp-min-duration), incomplete, missed.", []string{"outcome"}, nil)
)

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExported
	ch <- descDropped
	ch <- descWrites
	ch <- descEntries
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := (*Sink)(c)
	ch <- prometheus.MustNewConstMetric(descExported, prometheus.CounterValue, float64(s.exp.exported.Load()))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.exp.failed.Load()), "export")
	ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(s.droppedQueue.Load()), "queue")
	ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(s.writesNoTerm.Load()), "no_term")
	for _, o := range []struct {
		name string
		n    uint64
	}{{"exported", s.entriesExported.Load()}, {"not_sampled", s.entriesSkipped.Load()}, {"incomplete", s.incomplete.Load()}, {"missed", s.entriesMissed.Load()}} {
		ch <- prometheus.MustNewConstMetric(descEntries, prometheus.CounterValue, float64(o.n), o.name)
	}
}
