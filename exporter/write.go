package exporter

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdscope/etcdscope/analysis"
)

// writeMetrics are the write(2)-family histograms (serve --writes): the
// same labels as the fsync ones, bounded the same way (MaxFsyncLabelSets
// label sets, then everything under OtherLabel) and expired after
// SeriesTTL with the fsync series.
type writeMetrics struct {
	duration *prometheus.HistogramVec
	layer    *prometheus.HistogramVec

	mu     sync.Mutex
	series map[fsyncLabels]*fsyncObservers // flushes unused
}

func newWriteMetrics() *writeMetrics {
	return &writeMetrics{
		duration: durationHistogram("write_duration_seconds",
			"Wall time of write/pwrite64/writev/pwritev/pwritev2 calls on files the fsync tracer follows (files a traced process fsyncs), syscall entry to exit; only with --writes.",
			"comm", "device", "fs", "file_kind", "syscall"),
		layer: durationHistogram("write_layer_duration_seconds",
			"Time of each write call in one layer: throttled (balance_dirty_pages), writeback_wait (a page under writeback), other; a call's layers sum to its wall time.",
			"comm", "device", "file_kind", "layer"),
		series: map[fsyncLabels]*fsyncObservers{},
	}
}

// ObserveWrite records one write call: its wall time and each layer.
func (m *Metrics) ObserveWrite(r *analysis.WriteRecord) {
	w := m.writes
	k := labelsOf(r.Comm, r.DevName, r.Dev, r.FS, r.FileKind, r.Syscall)
	w.mu.Lock()
	o := w.series[k]
	if o == nil && len(w.series) >= MaxFsyncLabelSets {
		k.comm, k.dev, k.fs = OtherLabel, OtherLabel, OtherLabel
		o = w.series[k]
		m.overflow.WithLabelValues("write_label_set").Inc()
	}
	if o == nil {
		o = &fsyncObservers{total: w.duration.WithLabelValues(k.comm, k.dev, k.fs, k.kind, k.syscall)}
		for _, l := range analysis.WriteLayerNames {
			o.layers = append(o.layers, w.layer.WithLabelValues(k.comm, k.dev, k.kind, l))
		}
		w.series[k] = o
	}
	w.mu.Unlock()
	o.seen.Store(m.clock.now())
	o.total.Observe(float64(r.TotalNs) / 1e9)
	for i, l := range analysis.WriteLayerNames {
		o.layers[i].Observe(float64(r.Layers.Get(l)) / 1e9)
	}
}

// Write is the pipeline's write sink (pipeline.WriteSink): ObserveWrite.
func (m *Metrics) Write(r *analysis.WriteRecord) error {
	m.ObserveWrite(r)
	return nil
}

// expire deletes the label sets old says are stale.
func (w *writeMetrics) expire(old func(seen int64) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gone, live := staleSeries(w.series, old)
	for _, k := range gone {
		delete(w.series, k)
		w.duration.DeleteLabelValues(k.comm, k.dev, k.fs, k.kind, k.syscall)
		if !live[k.triple()] {
			for _, l := range analysis.WriteLayerNames {
				w.layer.DeleteLabelValues(k.comm, k.dev, k.kind, l)
			}
		}
	}
}
