package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

type fakeSource struct {
	lost, missed uint64
	progs        []event.ProgramStats
}

func (f fakeSource) Lost() (uint64, error)              { return f.lost, nil }
func (f fakeSource) Missed() uint64                     { return f.missed }
func (f fakeSource) ProgramStats() []event.ProgramStats { return f.progs }

// ownerSource is a fakeSource whose socket owners a real
// host.SocketOwnerResolver looks up (the peers tracer's).
type ownerSource struct {
	fakeSource
	r *host.SocketOwnerResolver
}

func (o ownerSource) OwnerStats() host.SocketOwnerStats { return o.r.Stats() }

var errTest = errors.New("test failure")

func walRecord(total int64, flushes int) analysis.FsyncRecord {
	// A partition that sums to total: half device flush, a quarter data,
	// the rest other.
	l := analysis.Layers{DeviceFlushNs: total / 2, DataWritebackNs: total / 4}
	l.OtherNs = total - l.DeviceFlushNs - l.DataWritebackNs
	return analysis.FsyncRecord{Type: "fsync", Comm: "etcd", Syscall: "fdatasync", Dev: "253:1", DevName: "vda1",
		FS: "ext4", FileKind: analysis.KindWAL, TotalNs: total, Layers: l, Flushes: flushes}
}

// populated returns Metrics with every metric observed at least once.
func populated(t *testing.T) *Metrics {
	t.Helper()
	m := NewMetrics()
	m.statsEnabled = func() bool { return true }
	m.AddSource("fsync", fakeSource{lost: 3, missed: 1, progs: []event.ProgramStats{{Name: "sys_exit_fdatasync", RunTimeNs: 2_500_000_000, RunCount: 7}}}, 12)
	owners := host.NewSocketOwnerResolver(host.SocketOwnerConfig{})
	t.Cleanup(owners.Close)
	m.AddSource("peers", ownerSource{fakeSource{progs: []event.ProgramStats{{Name: "tcp_probe"}}}, owners}, 3)
	rec := walRecord(2_000_000, 1)
	// Traced with --sched: its other layer (0.5 ms) by state.
	rec.Sched = &analysis.Sched{Other: analysis.SchedSplit{RunnableNs: 300_000, RunningNs: 150_000, BlockedNs: 50_000}}
	m.ObserveFsync(&rec)
	rec = walRecord(40_000, 0)
	m.ObserveFsync(&rec)
	m.ObserveBlock(event.Block{Dev: event.MkDev(253, 0), Op: event.OpFlush, Final: true, IssueNs: 100, CompleteNs: 1_100}, "vda")
	m.ObserveWrite(&analysis.WriteRecord{Type: "write", Comm: "etcd", Syscall: "write", Dev: "253:1", DevName: "vda1", FS: "ext4",
		FileKind: analysis.KindWAL, TotalNs: 3_000_000, Layers: analysis.WriteLayers{ThrottledNs: 2_000_000, WritebackWaitNs: 500_000, OtherNs: 500_000}})
	remote := netip.MustParseAddrPort("10.0.0.2:2380")
	m.ObservePeer(event.Peer{Kind: event.PeerOpen, Direction: event.PeerActive, Remote: remote, DurationNs: 25_000_000})
	m.ObservePeer(event.Peer{Kind: event.PeerRTT, Remote: remote, SRTTus: 25_100})
	m.ObservePeer(event.Peer{Kind: event.PeerRetransmit, Remote: remote})
	m.ObservePeer(event.Peer{Kind: event.PeerSetup, Direction: event.PeerActive, Remote: remote, DurationNs: 2_050_000_000})
	cmp := etcdmetric.PeerComparison{Peer: remote.Addr(), Comparison: etcdmetric.Comparison{
		Key: etcdmetric.Key{To: "8e9e05c52164694d"}, Observations: 8, Mean: 0.05, Inflation: 2.0,
		Input: etcdmetric.ModelInput{RTT: 25 * time.Millisecond}}}
	m.SetComparisons("127.0.0.1:2381", []etcdmetric.PeerComparison{cmp})
	m.ScrapeError("127.0.0.1:2382")
	m.DecodeError("fsync")
	return m
}

// TestLint runs client_golang's promlint over every metric the exporter
// can export, and checks that every one of them was there to be linted.
func TestLint(t *testing.T) {
	m := populated(t)
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.GetName())
	}
	want := []string{
		"etcdscope_block_flush_duration_seconds", "etcdscope_bpf_program_run_seconds_total",
		"etcdscope_bpf_program_runs_total", "etcdscope_bpf_programs_attached", "etcdscope_bpf_stats_enabled",
		"etcdscope_decode_errors_total", "etcdscope_etcd_metrics_scrape_errors_total",
		"etcdscope_etcd_peer_rtt_inflation_ratio", "etcdscope_etcd_peer_rtt_metric_mean_seconds",
		"etcdscope_etcd_peer_rtt_traced_seconds", "etcdscope_fsync_duration_seconds",
		"etcdscope_fsync_flush_requests", "etcdscope_fsync_layer_duration_seconds", "etcdscope_fsync_other_state_duration_seconds",
		"etcdscope_lost_events_total", "etcdscope_missed_events_total",
		"etcdscope_peer_connections_opened_total", "etcdscope_peer_handshake_rtt_seconds",
		"etcdscope_peer_owner_lookups_total", "etcdscope_peer_owner_scans_total",
		"etcdscope_peer_retransmits_total", "etcdscope_peer_setup_seconds", "etcdscope_peer_srtt_seconds",
		"etcdscope_write_duration_seconds", "etcdscope_write_layer_duration_seconds",
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("metric families:\n got %v\nwant %v", got, want)
	}
}

func TestDurationBuckets(t *testing.T) {
	b := DurationBuckets
	if len(b) != 25 || b[0] != 0.01/8192 || b[len(b)-1] != 20.48 {
		t.Fatalf("buckets %v: want 25 from 10ms/2^13 to 20.48 s", b)
	}
	budget := false
	for i, v := range b {
		if i > 0 && v != 2*b[i-1] {
			t.Fatalf("bucket %d is %v, want twice %v", i, v, b[i-1])
		}
		// As the exposition prints it: short decimals, the budget among them.
		// (ExponentialBucketsRange's 0.003999999999999997 had 16 digits.)
		s := strconv.FormatFloat(v, 'e', -1, 64)
		if digits := strings.Count(strings.SplitN(s, "e", 2)[0], "") - 2; digits > 10 {
			t.Errorf("bound %d prints as %s: %d significant digits", i, s, digits)
		}
		budget = budget || v == analysis.WALFsyncBudget.Seconds()
	}
	if !budget {
		t.Errorf("no bound at the WAL fsync budget %v: %v", analysis.WALFsyncBudget, b)
	}
}

func family(t *testing.T, c prometheus.Collector, name string) *dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestObserveFsync checks counts, sums, the per-layer split and that the
// native histogram is there beside the classic buckets.
func TestObserveFsync(t *testing.T) {
	m := populated(t)
	f := family(t, m, "etcdscope_fsync_duration_seconds")
	if len(f.Metric) != 1 {
		t.Fatalf("%d series, want 1", len(f.Metric))
	}
	h := f.Metric[0].GetHistogram()
	if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.00204) > 1e-12 {
		t.Errorf("count %d sum %g, want 2 and 0.00204", h.GetSampleCount(), h.GetSampleSum())
	}
	if want := map[string]string{"comm": "etcd", "device": "vda1", "fs": "ext4", "file_kind": "wal", "syscall": "fdatasync"}; !equalMaps(labels(f.Metric[0]), want) {
		t.Errorf("labels %v, want %v", labels(f.Metric[0]), want)
	}
	if len(h.GetBucket()) != 25 {
		t.Errorf("%d classic buckets, want 25", len(h.GetBucket()))
	}
	if h.Schema == nil || h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 {
		t.Errorf("native histogram missing: schema %v spans %v", h.Schema, h.GetPositiveSpan())
	}
	// Layers: one observation per call and layer; the sums add up to the
	// wall time.
	lf := family(t, m, "etcdscope_fsync_layer_duration_seconds")
	var sum float64
	for _, s := range lf.Metric {
		if s.GetHistogram().GetSampleCount() != 2 {
			t.Errorf("layer %s count %d, want 2", labels(s)["layer"], s.GetHistogram().GetSampleCount())
		}
		sum += s.GetHistogram().GetSampleSum()
	}
	if len(lf.Metric) != len(analysis.LayerNames) || math.Abs(sum-0.00204) > 1e-12 {
		t.Errorf("%d layers summing to %g s, want %d summing to 0.00204", len(lf.Metric), sum, len(analysis.LayerNames))
	}
}

// TestObserveWrite: one write is one observation of its wall time and one
// per layer, labelled as the fsync series; the layers sum to the wall time.
func TestObserveWrite(t *testing.T) {
	m := populated(t)
	f := family(t, m, "etcdscope_write_duration_seconds")
	if len(f.Metric) != 1 || f.Metric[0].GetHistogram().GetSampleCount() != 1 || f.Metric[0].GetHistogram().GetSampleSum() != 0.003 {
		t.Fatalf("write duration %v", f.Metric)
	}
	if want := map[string]string{"comm": "etcd", "device": "vda1", "fs": "ext4", "file_kind": "wal", "syscall": "write"}; !equalMaps(labels(f.Metric[0]), want) {
		t.Errorf("labels %v, want %v", labels(f.Metric[0]), want)
	}
	lf := family(t, m, "etcdscope_write_layer_duration_seconds")
	got := map[string]float64{}
	for _, s := range lf.Metric {
		got[labels(s)["layer"]] = s.GetHistogram().GetSampleSum()
	}
	if want := map[string]float64{"throttled": 0.002, "writeback_wait": 0.0005, "other": 0.0005}; len(got) != 3 ||
		got["throttled"] != want["throttled"] || got["writeback_wait"] != want["writeback_wait"] || got["other"] != want["other"] {
		t.Errorf("layers %v, want %v", got, want)
	}
}

// TestObserveOtherState: a call with a scheduler split (serve --sched) is
// observed once per state, labelled as its layers; calls without one add
// nothing to the family.
func TestObserveOtherState(t *testing.T) {
	m := populated(t)
	f := family(t, m, "etcdscope_fsync_other_state_duration_seconds")
	got := map[string]float64{}
	for _, s := range f.Metric {
		if s.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("%v: %d observations, want 1 (one call had --sched's split)", labels(s), s.GetHistogram().GetSampleCount())
		}
		l := labels(s)
		if l["comm"] != "etcd" || l["device"] != "vda1" || l["file_kind"] != "wal" {
			t.Errorf("labels %v", l)
		}
		got[l["state"]] = s.GetHistogram().GetSampleSum()
	}
	if len(got) != 3 || got["runnable"] != 300e-6 || got["running"] != 150e-6 || got["blocked"] != 50e-6 {
		t.Errorf("states %v, want runnable 300 µs, running 150 µs, blocked 50 µs", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFlushKind(t *testing.T) {
	for _, c := range []struct {
		op    event.Op
		flags event.ReqFlags
		want  string
	}{
		{event.OpFlush, 0, "flush"},
		{event.OpWrite, event.ReqPreflush | event.ReqSync, "preflush"},
		{event.OpWrite, event.ReqPreflush | event.ReqFUA, "preflush"},
		{event.OpWrite, event.ReqFUA | event.ReqSync, "fua"},
		{event.OpWrite, event.ReqSync | event.ReqMeta, ""},
		{event.OpRead, 0, ""},
	} {
		b := event.Block{Op: c.op, Flags: c.flags}
		if got := FlushKind(&b); got != c.want {
			t.Errorf("%s: %q, want %q", event.Rwbs(c.op, c.flags), got, c.want)
		}
	}
}

func TestObserveBlockSkips(t *testing.T) {
	m := NewMetrics()
	dev := event.MkDev(8, 0)
	m.ObserveBlock(event.Block{Dev: dev, Op: event.OpFlush, Final: false, IssueNs: 1, CompleteNs: 5}, "")      // partial completion
	m.ObserveBlock(event.Block{Dev: dev, Op: event.OpFlush, Final: true, IssueNs: 0, CompleteNs: 5}, "")       // never issued
	m.ObserveBlock(event.Block{Dev: dev, Op: event.OpWrite, Final: true, IssueNs: 1, CompleteNs: 5}, "")       // not a flush
	m.ObserveBlock(event.Block{Dev: dev, Op: event.OpFlush, Final: true, IssueNs: 1000, CompleteNs: 3000}, "") // counted
	f := family(t, m, "etcdscope_block_flush_duration_seconds")
	if len(f.Metric) != 1 || f.Metric[0].GetHistogram().GetSampleCount() != 1 ||
		f.Metric[0].GetHistogram().GetSampleSum() != 2e-6 || labels(f.Metric[0])["device"] != "8:0" {
		t.Fatalf("got %v", f.Metric)
	}
}

func TestObservePeer(t *testing.T) {
	m := NewMetrics()
	r := netip.MustParseAddrPort("[::ffff:10.0.0.3]:40000")
	m.ObservePeer(event.Peer{Kind: event.PeerOpen, Direction: event.PeerActive, Remote: r, DurationNs: 2_000_000})
	m.ObservePeer(event.Peer{Kind: event.PeerOpen, Direction: event.PeerPassive, Remote: r, SRTTus: 3000})
	m.ObservePeer(event.Peer{Kind: event.PeerOpen, Direction: event.PeerPassive, Remote: r}) // no RTT yet: counted, not observed
	f := family(t, m, "etcdscope_peer_handshake_rtt_seconds")
	got := map[string]float64{}
	for _, s := range f.Metric {
		got[labels(s)["peer"]+"/"+labels(s)["direction"]] = s.GetHistogram().GetSampleSum()
	}
	if len(got) != 2 || got["10.0.0.3/active"] != 0.002 || got["10.0.0.3/passive"] != 0.003 {
		t.Errorf("handshake sums %v, want active 0.002 and passive 0.003 for 10.0.0.3", got)
	}
	if v := testutil.ToFloat64(m.connsOpened.WithLabelValues("10.0.0.3", "passive")); v != 2 {
		t.Errorf("passive opens %v, want 2", v)
	}
	// Retransmits count segments, as Tcp RetransSegs does: a GSO skb of 3
	// sent again is 3; an event without the count (an old recording) is 1.
	m.ObservePeer(event.Peer{Kind: event.PeerRetransmit, Remote: r, Segments: 3})
	m.ObservePeer(event.Peer{Kind: event.PeerRetransmit, Remote: r})
	if v := testutil.ToFloat64(m.retransmits.WithLabelValues("10.0.0.3")); v != 4 {
		t.Errorf("retransmitted segments %v, want 4", v)
	}
}

func TestSetComparisonsReplaces(t *testing.T) {
	m := populated(t)
	m.SetComparisons("127.0.0.1:2381", []etcdmetric.PeerComparison{{Comparison: etcdmetric.Comparison{
		Key: etcdmetric.Key{To: "aa"}, Observations: 3, Mean: 0.004, Inflation: 1.6, Input: etcdmetric.ModelInput{RTT: 2500 * time.Microsecond}}}})
	f := family(t, m, "etcdscope_etcd_peer_rtt_inflation_ratio")
	if len(f.Metric) != 1 || labels(f.Metric[0])["to"] != "aa" || f.Metric[0].GetGauge().GetValue() != 1.6 {
		t.Fatalf("got %v, want only to=aa at 1.6", f.Metric)
	}
	// No traced RTT: nothing exported rather than +Inf.
	m.SetComparisons("127.0.0.1:2381", []etcdmetric.PeerComparison{{Comparison: etcdmetric.Comparison{Key: etcdmetric.Key{To: "aa"}, Observations: 3, Mean: 0.004}}})
	if n := testutil.CollectAndCount(m.inflation); n != 0 {
		t.Fatalf("%d inflation series left, want 0", n)
	}
}

// TestSelfMetricsStatsOff: run time and count are not exported while the
// kernel does not count them (they would read as a flat 0), and are once
// it has counted runs (BPF_ENABLE_STATS, which the sysctl does not show).
func TestSelfMetricsStatsOff(t *testing.T) {
	m := populated(t)
	m.statsEnabled = func() bool { return false }
	if n := testutil.CollectAndCount(m, "etcdscope_bpf_program_runs_total"); n != 1 {
		t.Fatalf("%d run-count series with the sysctl off, want 1 (fsync's program, which has counted runs)", n)
	}
	m.statsEnabled = func() bool { return true }
	if n := testutil.CollectAndCount(m, "etcdscope_bpf_program_runs_total"); n != 2 {
		t.Fatalf("%d run-count series with the sysctl on, want 2", n)
	}
	want := `
# HELP etcdscope_bpf_program_run_seconds_total Time spent in the BPF program (bpf_prog_info.run_time_ns); exported while kernel.bpf_stats_enabled=1 or once BPF_ENABLE_STATS has made the kernel count runs.
# TYPE etcdscope_bpf_program_run_seconds_total counter
etcdscope_bpf_program_run_seconds_total{program="sys_exit_fdatasync",tracer="fsync"} 2.5
etcdscope_bpf_program_run_seconds_total{program="tcp_probe",tracer="peers"} 0
# HELP etcdscope_lost_events_total Events that did not fit in the tracer's ring buffer (per-CPU lost_events counter summed); alert on any increase.
# TYPE etcdscope_lost_events_total counter
etcdscope_lost_events_total{tracer="fsync"} 3
etcdscope_lost_events_total{tracer="peers"} 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "etcdscope_bpf_program_run_seconds_total", "etcdscope_lost_events_total"); err != nil {
		t.Fatal(err)
	}
}

// TestHandler serves the registry and reads it back with expfmt, and
// checks /healthz in both states.
func TestHandler(t *testing.T) {
	m := populated(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	h := &health{}
	srv := httptest.NewServer(NewHandler(reg, h))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if c := fams["etcdscope_fsync_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); c != 2 {
		t.Errorf("scraped fsync count %d, want 2", c)
	}
	for _, c := range []struct {
		fail bool
		code int
	}{{false, 200}, {true, 503}} {
		if c.fail {
			h.fail("fsync tracer", errTest)
		}
		r, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != c.code {
			t.Errorf("healthz %d, want %d", r.StatusCode, c.code)
		}
	}
}

// TestObserveFsyncSeriesPerLabelSet: ObserveFsync's cache of series keys
// on the label values as exported, so two unnamed devices (tmpfs, overlay:
// DevName "", labelled by major:minor) stay two series, and a record of
// another syscall goes to its own.
func TestObserveFsyncSeriesPerLabelSet(t *testing.T) {
	m := NewMetrics()
	for _, r := range []struct {
		dev, syscall string
	}{{"0:27", "fdatasync"}, {"0:28", "fdatasync"}, {"0:27", "fdatasync"}, {"0:27", "fsync"}} {
		rec := walRecord(1000, 0)
		rec.DevName, rec.Dev, rec.Syscall = "", r.dev, r.syscall
		m.ObserveFsync(&rec)
	}
	got := map[string]uint64{}
	for _, s := range family(t, m, "etcdscope_fsync_duration_seconds").Metric {
		l := labels(s)
		got[l["device"]+" "+l["syscall"]] = s.GetHistogram().GetSampleCount()
	}
	want := map[string]uint64{"0:27 fdatasync": 2, "0:28 fdatasync": 1, "0:27 fsync": 1}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("series %q: %d observations, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

// TestObserveStackedDM: a call on a device-mapper device is observed at
// upper (its own time and layers), dm (the target's hold) and lower
// (the requests beneath it), the way the report's levels table counts it.
func TestObserveStackedDM(t *testing.T) {
	m := NewMetrics()
	rec := analysis.FsyncRecord{Type: "fsync", Comm: "etcd", Dev: "253:0", DevName: "dm-0", FS: "ext4", TotalNs: 25e6, Flushes: 2,
		Layers:   analysis.Layers{DMNs: 21e6, DeviceFlushNs: 1e6, BlockQueueNs: 5e5, DataWritebackNs: 5e5, OtherNs: 2e6},
		Requests: []analysis.Request{{Role: analysis.RoleFlush, DM: true}, {Role: analysis.RoleFlush}, {Role: analysis.RoleData}},
		DM: &analysis.DMLevel{Dev: "253:0", DevName: "dm-0", Targets: []string{"7:0"}, TargetNames: []string{"loop0"}, Bios: 2, HeldNs: 21e6,
			Lower: analysis.Layers{DeviceFlushNs: 1e6, BlockQueueNs: 5e5, DataWritebackNs: 5e5}}}
	m.ObserveStacked(&rec)
	for _, c := range []struct {
		level, dev, fs, layer string
		want                  float64
	}{
		{analysis.LevelUpper, "dm-0", "ext4", analysis.LayerDM, 0.021},
		{analysis.LevelUpper, "dm-0", "ext4", analysis.LayerOther, 0.002},
		{analysis.LevelDM, "dm-0", "dm", analysis.LayerDM, 0.021},
		{analysis.LevelDM, "dm-0", "dm", analysis.LayerDeviceFlush, 0},
		{analysis.LevelLower, "loop0", "disk", analysis.LayerDeviceFlush, 0.001},
		{analysis.LevelLower, "loop0", "disk", analysis.LayerDM, 0},
	} {
		if got := testutil.ToFloat64(m.stackedLayer.WithLabelValues(c.level, c.dev, c.fs, c.layer)); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s %s/%s %s: %v s, want %v", c.level, c.dev, c.fs, c.layer, got, c.want)
		}
	}
	for _, c := range []struct {
		level, dev, fs string
		want           float64
	}{{analysis.LevelUpper, "dm-0", "ext4", 2}, {analysis.LevelDM, "dm-0", "dm", 1}, {analysis.LevelLower, "loop0", "disk", 1}} {
		if got := testutil.ToFloat64(m.stackedFlushes.WithLabelValues(c.level, c.dev, c.fs)); got != c.want {
			t.Errorf("%s %s/%s flushes %v, want %v", c.level, c.dev, c.fs, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.stackedFsync); n != 3 {
		t.Errorf("%d stacked fsync series, want 3 (upper, dm, lower)", n)
	}
}

// TestOwnerLookups: the peers tracer's socket-owner look-ups are exported
// as they happen: a real resolver finds this process as the holder of its
// own socket by scanning /proc (the oracle: the pid that made the socket),
// and the scrape carries the resolver's own counters, one series per
// result and the scans.
func TestOwnerLookups(t *testing.T) {
	m := NewMetrics()
	m.statsEnabled = func() bool { return false }
	r := host.NewSocketOwnerResolver(host.SocketOwnerConfig{})
	defer r.Close()
	m.AddSource("peers", ownerSource{fakeSource{}, r}, 3)
	ino := testenv.OwnSocket(t)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if o, known := r.Lookup(1, ino); known {
			if o.PID != uint32(os.Getpid()) {
				t.Fatalf("owner %+v, want pid %d", o, os.Getpid())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("own socket not resolved in 5 s")
		}
	}
	s := r.Stats()
	if s.Resolved < 1 || s.Scans+s.HotScans < 1 {
		t.Fatalf("resolver stats %+v after resolving a socket", s)
	}
	want := fmt.Sprintf(`
# HELP etcdscope_peer_owner_lookups_total %s
# TYPE etcdscope_peer_owner_lookups_total counter
etcdscope_peer_owner_lookups_total{result="evicted"} %d
etcdscope_peer_owner_lookups_total{result="learned_drops"} %d
etcdscope_peer_owner_lookups_total{result="queue_drops"} %d
etcdscope_peer_owner_lookups_total{result="resolved"} %d
etcdscope_peer_owner_lookups_total{result="unowned"} %d
# HELP etcdscope_peer_owner_scans_total %s
# TYPE etcdscope_peer_owner_scans_total counter
etcdscope_peer_owner_scans_total %d
`, helpOf(t, m, "etcdscope_peer_owner_lookups_total"), s.Evicted, s.LearnedDrops, s.QueueDrops, s.Resolved, s.Unowned,
		helpOf(t, m, "etcdscope_peer_owner_scans_total"), s.Scans)
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "etcdscope_peer_owner_lookups_total", "etcdscope_peer_owner_scans_total"); err != nil {
		t.Fatal(err)
	}
	// A source without owner look-ups (the fsync tracer) exports none.
	m = NewMetrics()
	m.AddSource("fsync", fakeSource{}, 1)
	if n := testutil.CollectAndCount(m, "etcdscope_peer_owner_lookups_total"); n != 0 {
		t.Errorf("%d owner look-up series from a source without look-ups", n)
	}
}

// helpOf returns the help text of the metric family name as m exports it.
func helpOf(t *testing.T, m *Metrics, name string) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetHelp()
		}
	}
	t.Fatalf("no family %s", name)
	return ""
}

// TestOutsideLabelValuesEscaped (issue 25): a comm and a device name with
// a byte 0xff, ESC, CR and a C1 control (any local process names itself)
// are exported escaped (render.Escape) as valid UTF-8 with no control in
// the /metrics text; before, client_golang panicked on the invalid UTF-8
// and serve ended. The operator's kept comm matches as before.
func TestOutsideLabelValuesEscaped(t *testing.T) {
	m := NewMetrics()
	m.KeepComms("etcd")
	for _, comm := range []string{"e\xff\x1b[2J\r\u009b", "etcd"} {
		r := analysis.FsyncRecord{Type: "fsync", Comm: comm, Dev: "1:1", DevName: "sd\xfe\x1b]0;t\a", FS: "ext4", FileKind: "wal", Syscall: "fsync", TotalNs: 5}
		if err := m.Fsync(&r); err != nil {
			t.Fatal(err)
		}
	}
	_, comms := scrape(t, m, "comm")
	for _, want := range []string{`e\\xff\\x1b[2J\\x0d\\u009b`, "etcd"} { // the text format doubles a backslash
		if !comms[want] {
			t.Errorf("no comm=%q series: %v", want, comms)
		}
	}
	b := scrapeText(t, m)
	if !utf8.Valid(b) {
		t.Errorf("/metrics is not UTF-8")
	}
	if i := bytes.IndexFunc(b, func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f }); i >= 0 {
		t.Errorf("a control %q raw in /metrics at byte %d", b[i], i)
	}
	if !bytes.Contains(b, []byte(`device="sd\\xfe\\x1b]0;t\\x07"`)) {
		t.Errorf("the device label is not escaped:\n%.2000s", b)
	}
}
