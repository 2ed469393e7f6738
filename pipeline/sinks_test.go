package pipeline_test

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
)

const goldenDir = "../testdata/capture"

// replaySource is a capture's end line as serve's self-metrics read a
// tracer's counters.
type replaySource struct{ end capture.End }

func (s replaySource) Lost() (uint64, error)              { return s.end.LostEvents, nil }
func (s replaySource) Missed() uint64                     { return s.end.MissedEvents }
func (s replaySource) ProgramStats() []event.ProgramStats { return nil }

// TestCLIAndServeSinksAgree feeds each golden fsync capture through the
// pipeline with the CLI's sink (the report) and serve's (the metrics)
// and checks that they tell the same story: per table, the count, the
// sums of the total and of each layer, the flush requests; per stacked
// level, the count, sum, flushes and nested share; the lost and missed
// events; and p50/p99 of the report within one histogram bucket of the
// bucket the histogram puts them in.
func TestCLIAndServeSinksAgree(t *testing.T) {
	caps, _ := filepath.Glob(filepath.Join(goldenDir, "*.capture.jsonl"))
	n := 0
	for _, c := range caps {
		f, err := os.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := capture.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if rd.Header().Tracer != capture.TracerFsync {
			f.Close()
			continue
		}
		n++
		t.Run(filepath.Base(c), func(t *testing.T) {
			defer f.Close()
			rs := pipeline.NewReportSink(false)
			m := exporter.NewMetrics()
			cfg := pipeline.FsyncLoopConfig{Host: pipeline.ReplayHost(rd), Sinks: []pipeline.FsyncSink{rs, m},
				OnDecodeError: func(error) { m.DecodeError("fsync") }}
			if d := rd.Header().Disk; d != "" {
				if cfg.Disk, err = capture.ParseDev(d); err != nil {
					t.Fatal(err)
				}
			}
			p := pipeline.NewFsyncLoop(cfg)
			if err := p.Run(pipeline.ReadFunc(rd.ReadEvent)); err != nil {
				t.Fatal(err)
			}
			end, ok := rd.End()
			if !ok {
				t.Fatal("capture has no end line")
			}
			m.AddSource("fsync", replaySource{end}, 1)
			rep := rs.Report(end.LostEvents, end.MissedEvents, nil)
			fams := gather(t, m)
			compareGroups(t, rep, fams)
			compareLevels(t, rep, fams)
			if got := counter(fams, "etcdscope_lost_events_total", map[string]string{"tracer": "fsync"}); got != float64(rep.LostEvents) {
				t.Errorf("lost: metrics %v, report %d", got, rep.LostEvents)
			}
			if got := counter(fams, "etcdscope_missed_events_total", map[string]string{"tracer": "fsync"}); got != float64(rep.MissedEvents) {
				t.Errorf("missed: metrics %v, report %d", got, rep.MissedEvents)
			}
			if got := counter(fams, "etcdscope_decode_errors_total", map[string]string{"tracer": "fsync"}); got != float64(p.DecodeErrors()) {
				t.Errorf("decode errors: metrics %v, pipeline %d", got, p.DecodeErrors())
			}
			if rep.Fsyncs == 0 || uint64(rep.Fsyncs) != p.Records() {
				t.Errorf("report counts %d fsyncs, the pipeline passed on %d", rep.Fsyncs, p.Records())
			}
		})
	}
	if n < 4 {
		t.Fatalf("%d fsync captures in %s, want the four goldens", n, goldenDir)
	}
}

func compareGroups(t *testing.T, rep analysis.Report, fams map[string]*dto.MetricFamily) {
	t.Helper()
	type key struct{ comm, dev, fs, kind string }
	seen := map[key]bool{}
	for _, g := range rep.Groups {
		dev := g.Key.DevName
		if dev == "" {
			dev = g.Key.Dev
		}
		k := key{g.Key.Comm, dev, g.Key.FS, g.Key.FileKind}
		if seen[k] {
			t.Fatalf("two report groups map to the series of %+v (two pids of one comm): compare by pid", k)
		}
		seen[k] = true
		lbl := map[string]string{"comm": k.comm, "device": k.dev, "fs": k.fs, "file_kind": k.kind}
		h := histogram(fams, "etcdscope_fsync_duration_seconds", lbl)
		if h == nil {
			t.Errorf("%+v: no fsync_duration_seconds series", k)
			continue
		}
		if int64(h.GetSampleCount()) != g.Total.Count {
			t.Errorf("%+v: count metrics %d, report %d", k, h.GetSampleCount(), g.Total.Count)
		}
		near(t, "total sum", h.GetSampleSum(), float64(g.Total.Sum)/1e9)
		for _, q := range []struct {
			name string
			q    float64
			v    int64
		}{{"p50", 0.50, g.Total.P50}, {"p99", 0.99, g.Total.P99}} {
			hb, rb := quantileBucket(h, q.q), bucketOf(h, float64(q.v)/1e9)
			if d := hb - rb; d < -1 || d > 1 {
				t.Errorf("%+v: %s %s ms is in bucket %d, the histogram's %s in bucket %d", k, q.name, render.Ms(q.v), rb, q.name, hb)
			}
		}
		for _, l := range g.Layers {
			lh := histogram(fams, "etcdscope_fsync_layer_duration_seconds", map[string]string{"comm": k.comm, "device": k.dev, "file_kind": k.kind, "layer": l.Name})
			if lh == nil || int64(lh.GetSampleCount()) != l.Stats.Count {
				t.Errorf("%+v layer %s: series %v, report count %d", k, l.Name, lh, l.Stats.Count)
				continue
			}
			near(t, k.kind+" "+l.Name+" sum", lh.GetSampleSum(), float64(l.Stats.Sum)/1e9)
		}
		fh := histogram(fams, "etcdscope_fsync_flush_requests", map[string]string{"comm": k.comm, "device": k.dev, "file_kind": k.kind})
		if fh == nil || fh.GetSampleSum() != float64(g.Flushes) {
			t.Errorf("%+v: flush requests %v, report %d", k, fh, g.Flushes)
		}
	}
}

func compareLevels(t *testing.T, rep analysis.Report, fams map[string]*dto.MetricFamily) {
	t.Helper()
	var upperCount float64
	for _, r := range rep.Levels {
		if r.Level == analysis.LevelUpper {
			upperCount += float64(r.Total.Count)
		}
	}
	if series := len(fams["etcdscope_stacked_fsync_duration_seconds"].GetMetric()); series != len(rep.Levels) {
		t.Errorf("%d stacked series, the report has %d level rows", series, len(rep.Levels))
	}
	for _, r := range rep.Levels {
		lbl := map[string]string{"level": r.Level, "device": r.Device, "fs": r.FS}
		h := histogram(fams, "etcdscope_stacked_fsync_duration_seconds", lbl)
		if h == nil {
			t.Errorf("level %s %s/%s: no series", r.Level, r.Device, r.FS)
			continue
		}
		if int64(h.GetSampleCount()) != r.Total.Count {
			t.Errorf("level %s: count metrics %d, report %d", r.Level, h.GetSampleCount(), r.Total.Count)
		}
		near(t, r.Level+" sum", h.GetSampleSum(), float64(r.Total.Sum)/1e9)
		for _, q := range []struct {
			q float64
			v int64
		}{{0.5, r.Total.P50}, {0.99, r.Total.P99}} {
			if d := quantileBucket(h, q.q) - bucketOf(h, float64(q.v)/1e9); d < -1 || d > 1 {
				t.Errorf("level %s: q%.2f %s ms more than one bucket from the histogram's", r.Level, q.q, render.Ms(q.v))
			}
		}
		for _, l := range r.Layers {
			got := counter(fams, "etcdscope_stacked_layer_seconds_total", map[string]string{"level": r.Level, "device": r.Device, "fs": r.FS, "layer": l.Name})
			near(t, r.Level+" "+l.Name, got, float64(l.Stats.Sum)/1e9)
		}
		flushes := counter(fams, "etcdscope_stacked_flush_requests_total", lbl)
		near(t, r.Level+" flushes/fs", flushes/upperCount, r.FlushesPerFsync)
		if r.Level == analysis.LevelBacking {
			nestIn := counter(fams, "etcdscope_stacked_nesting_device_flush_seconds_total", map[string]string{"device": r.Device, "fs": r.FS})
			near(t, "backing nested share", h.GetSampleSum()/nestIn, r.NestedShare)
		}
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: metrics %v, report %v", what, got, want)
	}
}

func gather(t *testing.T, m *exporter.Metrics) map[string]*dto.MetricFamily {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fs {
		out[f.GetName()] = f
	}
	return out
}

// find returns the series of family name whose labels include lbl.
func find(fams map[string]*dto.MetricFamily, name string, lbl map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		ok := true
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range lbl {
			if have[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// histogram merges the classic buckets of the matching series (one per
// syscall for the fsync histograms).
func histogram(fams map[string]*dto.MetricFamily, name string, lbl map[string]string) *dto.Histogram {
	ms := find(fams, name, lbl)
	if len(ms) == 0 {
		return nil
	}
	var count uint64
	var sum float64
	cum := map[float64]uint64{}
	for _, m := range ms {
		h := m.GetHistogram()
		count += h.GetSampleCount()
		sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			cum[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	var bounds []float64
	for b := range cum {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	h := &dto.Histogram{SampleCount: &count, SampleSum: &sum}
	for _, b := range bounds {
		ub, c := b, cum[b]
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &ub, CumulativeCount: &c})
	}
	return h
}

func counter(fams map[string]*dto.MetricFamily, name string, lbl map[string]string) float64 {
	var v float64
	for _, m := range find(fams, name, lbl) {
		v += m.GetCounter().GetValue()
	}
	return v
}

// bucketOf is the index of the classic bucket holding v (len: +Inf).
func bucketOf(h *dto.Histogram, v float64) int {
	for i, b := range h.GetBucket() {
		if v <= b.GetUpperBound() {
			return i
		}
	}
	return len(h.GetBucket())
}

// quantileBucket is the index of the bucket holding the nearest-rank
// q-quantile of the histogram's observations (stats.Summarize's rule).
func quantileBucket(h *dto.Histogram, q float64) int {
	rank := uint64(math.Ceil(q * float64(h.GetSampleCount()))) // stats.Quantile's rank
	if rank < 1 {
		rank = 1
	}
	for i, b := range h.GetBucket() {
		if b.GetCumulativeCount() >= rank {
			return i
		}
	}
	return len(h.GetBucket())
}
