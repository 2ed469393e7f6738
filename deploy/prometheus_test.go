package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/exporter"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/buildinfo"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// growingSource is a tracer as the self-metrics see it, whose counters
// grow at every read (so increase() and rate() have something to show).
type growingSource struct{ n atomic.Uint64 }

func (s *growingSource) Lost() (uint64, error) { return s.n.Add(1), nil }
func (s *growingSource) Missed() uint64        { return s.n.Load() }
func (s *growingSource) ProgramStats() []event.ProgramStats {
	n := s.n.Load() + 1
	return []event.ProgramStats{{Name: "sys_exit_fdatasync", RunTimeNs: 500 * n, RunCount: n}}
}

// ownerSource is a fake peers tracer whose socket-owner look-ups drop
// one of each kind per scrape (exporter.OwnerSource).
type ownerSource struct{ growingSource }

func (s *ownerSource) OwnerStats() host.SocketOwnerStats {
	n := s.n.Load()
	return host.SocketOwnerStats{Resolved: 3 * n, Unowned: n, QueueDrops: n, Evicted: n, LearnedDrops: n, Scans: n}
}

// fakeNode is one control-plane node as Prometheus scrapes it: the real
// exporter.Metrics and exporter.NewHandler, fed synthetic events, next to
// the etcd metrics the dashboard and rules read (classic histograms only,
// as etcd serves them).
type fakeNode struct {
	name    string
	srtt    time.Duration // every srtt sample of this node's peer
	leader  bool
	m       *exporter.Metrics
	commit  *exporter.CommitMetrics
	etcdWAL prometheus.Histogram
	etcdRTT prometheus.Histogram
	addr    string
}

// walFsyncNs is every fake WAL fdatasync: over the 10 ms budget, so the
// WAL alert's expression is true.
const walFsyncNs = 20_000_000

func startNode(t *testing.T, name string, srtt time.Duration, leader bool) *fakeNode {
	t.Helper()
	n := &fakeNode{name: name, srtt: srtt, leader: leader, m: exporter.NewMetrics(), commit: exporter.NewCommitMetrics(nil, 1, nil, 1)}
	n.m.AddSource("fsync", &growingSource{}, 13)
	n.m.AddSource("peers", &ownerSource{}, 7)
	n.m.DecodeError("fsync")
	n.etcdWAL = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "etcd_disk_wal_fsync_duration_seconds",
		Help: "etcd's WAL fsync (fake).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	rtt := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "etcd_network_peer_round_trip_time_seconds",
		Help: "etcd's peer RTT (fake).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"To"})
	n.etcdRTT = rtt.WithLabelValues("8e9e05c52164694d").(prometheus.Histogram)
	isLeader := prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcd_server_is_leader", Help: "fake"})
	if leader {
		isLeader.Set(1)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.m, n.commit, exporter.NewBuildInfo(buildinfo.Info{Version: "v0.0.0-test", Revision: "0123abc", GoVersion: "go1.test"}),
		n.etcdWAL, rtt, isLeader)
	// Every comm the bound allows, so that the feed's "late" comm
	// overflows it (etcdscope_series_overflow_total{label="comm"}).
	for i := 1; i < exporter.MaxComms; i++ {
		r := walRecord()
		r.Comm = fmt.Sprintf("fill-%d", i)
		n.m.ObserveFsync(&r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: exporter.NewHandler(reg, http.NotFoundHandler()), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	n.addr = ln.Addr().String()
	remote := netip.MustParseAddrPort("10.0.0.2:2380")
	n.m.SetComparisons("127.0.0.1:2381", []etcdmetric.PeerComparison{{Peer: remote.Addr(), Comparison: etcdmetric.Comparison{
		Key: etcdmetric.Key{To: "8e9e05c52164694d"}, Observations: 8, Mean: 2 * srtt.Seconds(), Inflation: 2.0,
		Input: etcdmetric.ModelInput{RTT: srtt}}}})
	return n
}

// walLayers is every fake WAL fdatasync's split: all six layers, each a
// different time, so the stacked panel's answer names which layer is which.
var walLayers = analysis.Layers{DataWritebackNs: 2_000_000, JournalNs: 3_000_000, DeviceFlushNs: 6_000_000,
	BlockQueueNs: 4_000_000, DMNs: 1_000_000, OtherNs: walFsyncNs - 16_000_000}

// walSched is the scheduler split of every fake WAL fdatasync's other
// layer (serve --sched): it sums to walLayers.OtherNs.
var walSched = analysis.SchedSplit{RunnableNs: 1_000_000, RunningNs: 1_000_000, BlockedNs: 2_000_000}

// walWrite is every fake write(2) on the WAL (serve --writes).
var walWrite = analysis.WriteLayers{ThrottledNs: 3_000_000, WritebackWaitNs: 1_000_000, OtherNs: 2_000_000}

// commitParts is every fake etcd write's split (serve --commit-pid), on
// the leader.
var commitParts = map[string]int64{commit.PartPropose: 1_000_000, commit.PartWALAppend: 5_000_000,
	commit.PartQuorumWait: 3_000_000, commit.PartApply: 1_000_000}

// walDM is the device-mapper level of the stacked record: the dm target
// held the call's bios for walLayers.DMNs, the disk beneath spent lower.
var walDM = analysis.DMLevel{Dev: "253:2", DevName: "dm-0", Targets: []string{"253:1"}, TargetNames: []string{"vda1"},
	Bios: 2, HeldNs: walLayers.DMNs, Lower: analysis.Layers{DataWritebackNs: 2_000_000, JournalNs: 3_000_000, DeviceFlushNs: 6_000_000, BlockQueueNs: 4_000_000}}

// walRecord is every fake WAL fdatasync.
func walRecord() analysis.FsyncRecord {
	return analysis.FsyncRecord{Type: "fsync", Comm: "etcd", Syscall: "fdatasync", Dev: "253:1", DevName: "vda1",
		FS: "ext4", FileKind: analysis.KindWAL, TotalNs: walFsyncNs, Layers: walLayers, Flushes: 1,
		Sched: &analysis.Sched{Other: walSched}}
}

// feed makes one round of events: a WAL fdatasync split into layers (with
// its scheduler split, and once more from a comm over the bound), the
// same call on a dm disk as the stacked levels see it, a write to the WAL,
// an etcd write's commit split, a block flush, a peer connection with its
// handshake, srtt sample and a retransmit, a failed etcd scrape, and
// etcd's own observations.
func (n *fakeNode) feed() {
	r := walRecord()
	n.m.ObserveFsync(&r)
	late := walRecord()
	late.Comm = "late"
	n.m.ObserveFsync(&late)
	onDM := walRecord()
	onDM.Dev, onDM.DevName, onDM.DM = walDM.Dev, walDM.DevName, &walDM
	n.m.ObserveStacked(&onDM)
	n.m.ObserveWrite(&analysis.WriteRecord{Type: "write", Comm: "etcd", Syscall: "write", Dev: "253:1", DevName: "vda1",
		FS: "ext4", FileKind: analysis.KindWAL, TotalNs: walWrite.Sum(), Layers: walWrite})
	var total int64
	for _, v := range commitParts {
		total += v
	}
	n.commit.ObserveWrite(&commit.Write{Role: commit.RoleLeader, StartNs: 1e9, EndNs: 1e9 + uint64(total), PartsNs: commitParts,
		WALSyncNs: walFsyncNs, BatchEntries: 1, Acks: []commit.Ack{{Member: 0x28d1, AfterSendNs: 4_000_000}}}, commit.Names{0x28d1: "m2"})
	n.commit.ObserveFollowerEntry(commit.FollowerSplit{TotalNs: 3_000_000, QueueNs: 100_000, WALNs: 2_800_000, FdatasyncNs: 2_500_000, RespondNs: 100_000})
	n.m.ScrapeError("127.0.0.1:2381")
	n.m.ObserveBlock(event.Block{Dev: event.MkDev(253, 0), Op: event.OpFlush, Final: true, IssueNs: 100, CompleteNs: 100 + walFsyncNs/2}, "vda")
	remote := netip.MustParseAddrPort("10.0.0.2:2380")
	n.m.ObservePeer(event.Peer{Kind: event.PeerOpen, Direction: event.PeerActive, Remote: remote, DurationNs: uint64(n.srtt)})
	n.m.ObservePeer(event.Peer{Kind: event.PeerRTT, Remote: remote, SRTTus: uint32(n.srtt.Microseconds())})
	n.m.ObservePeer(event.Peer{Kind: event.PeerRetransmit, Remote: remote})
	n.etcdWAL.Observe(0.02)
	n.etcdRTT.Observe(2 * n.srtt.Seconds())
}

// promResult is the part of an instant query's answer these tests read.
type promResult struct {
	Metric    map[string]string `json:"metric"`
	Value     []any             `json:"value"`     // float sample
	Histogram []any             `json:"histogram"` // native histogram sample
}

func (r promResult) float() float64 {
	if len(r.Value) != 2 {
		return math.NaN()
	}
	s, _ := r.Value[1].(string)
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		return math.NaN()
	}
	return v
}

func query(t *testing.T, base, q string) []promResult {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promResult `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	return r.Data.Result
}

// prometheusBinaries returns every Prometheus to test against: Debian's
// (2.42 on bookworm; scripts/deps.sh installs it) and, when `make
// prometheus` built it, a current 3.x (bin/prometheus), so that one run
// checks both where both exist.
func prometheusBinaries(t *testing.T) []string {
	t.Helper()
	return []string{testenv.LookPath(t, "prometheus", "prometheus"), builtPrometheus}
}

// skipUnbuilt skips a subtest of the built 3.x when `make prometheus` has
// not run (a skip that says so, never a subtest quietly absent), and fails
// it under ETCDSCOPE_REQUIRE_BPF=1: `make test-go` builds it (about 4 min
// with empty caches), so CI checks Debian's 2.42 and a current 3.x in every
// run.
func skipUnbuilt(t *testing.T, bin string) {
	t.Helper()
	if bin != builtPrometheus {
		return
	}
	if _, err := os.Stat(bin); err != nil {
		if testenv.Required() {
			t.Fatal("ETCDSCOPE_REQUIRE_BPF=1 but no Prometheus 3.x at bin/prometheus: run make prometheus (make test-go builds it)")
		}
		t.Skip("SKIPPED: no Prometheus 3.x at bin/prometheus (make prometheus, then go test ./deploy): checked on Debian's 2.42 only")
	}
}

// builtPrometheus is where `make prometheus` installs its Prometheus 3.
const builtPrometheus = "../bin/prometheus"

// startPrometheus runs a Prometheus that scrapes the nodes every second
// and evaluates alerts.yaml every second, with native histograms on or
// off, and returns its base URL once every target is up.
func startPrometheus(t *testing.T, bin string, native bool, nodes []*fakeNode) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [alerts.yaml]\nscrape_configs:\n  - job_name: etcdscope\n")
	if native {
		// Prometheus 3.8+ reads this setting; older ones take the feature
		// flag below and ignore nothing (the key is only written for 3.x).
		if bin == builtPrometheus {
			cfg.WriteString("    scrape_native_histograms: true\n")
		}
	}
	cfg.WriteString("    static_configs:\n")
	for _, n := range nodes {
		fmt.Fprintf(&cfg, "      - targets: [%q]\n        labels: {node: %q}\n", n.addr, n.name)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	args := []string{"--config.file=" + filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + listen}
	if native {
		args = append(args, "--enable-feature=native-histograms")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var log bytes.Buffer
	var logMu sync.Mutex
	pc := exec.CommandContext(ctx, bin, args...)
	pc.Stdout, pc.Stderr = lockedWriter{&log, &logMu}, lockedWriter{&log, &logMu}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); pc.Wait() })
	base := "http://" + listen
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/-/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK && len(query(t, base, `up == 1`)) == len(nodes) {
				break
			}
		}
		if time.Now().After(deadline) {
			logMu.Lock()
			defer logMu.Unlock()
			t.Fatalf("%s: not ready with %d targets up within 30 s; log:\n%s", bin, len(nodes), log.String())
		}
		time.Sleep(250 * time.Millisecond)
	}
	return base
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// rulesFile is the part of alerts.yaml these tests read.
type rulesFile struct {
	Groups []struct {
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestDashboardAndRulesBothHistogramModes is the real-Prometheus check of
// deploy/: three fake control-plane nodes (the real exporter.Metrics and
// handler, fed synthetic events; etcd's metrics beside them) scraped by a
// real Prometheus storing classic histograms, and by one with native
// histograms on, which stores only the native series of a histogram that
// has both. In each mode: which series exist proves the mode; every
// Grafana panel query and every variable selector returns data; the
// recording rule gives each node's srtt mean as fed; every alert's
// expression holds (the data is made to fire them) so each shows in
// ALERTS. The pre-fix classic-only WAL p99 query is shown to be empty in
// native mode: what this guards against.
func TestDashboardAndRulesBothHistogramModes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs two Prometheus servers for ~20 s")
	}
	bins := prometheusBinaries(t)
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	rb, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf rulesFile
	if err := yaml.Unmarshal(rb, &rf); err != nil {
		t.Fatal(err)
	}

	// Node a leads with the highest srtt: EtcdLeaderHasHighestPeerRTT.
	srtts := map[string]time.Duration{"a": 60 * time.Millisecond, "b": 15 * time.Millisecond, "c": 30 * time.Millisecond}
	var nodes []*fakeNode
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, name, srtts[name], name == "a"))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			for _, n := range nodes {
				n.feed()
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	// The group returns once every parallel run is done, before the
	// deferred stop of the feeder.
	t.Run("mode", func(t *testing.T) {
		for _, bin := range bins {
			for _, mode := range []string{"classic", "native"} {
				name := "debian"
				if bin == builtPrometheus {
					name = "built-3.x"
				}
				t.Run(name+"/"+mode, func(t *testing.T) {
					skipUnbuilt(t, bin)
					t.Parallel()
					testMode(t, bin, mode, nodes, d, rf, srtts)
				})
			}
		}
	})
}

// testMode is one Prometheus (bin) in one histogram mode: which series
// exist proves the mode; every panel query, variable selector, recording
// rule and alert of deploy/ returns what the nodes were fed.
func testMode(t *testing.T, bin, mode string, nodes []*fakeNode, d dashboard, rf rulesFile, srtts map[string]time.Duration) {
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "$instance", ".*", "$comm", ".*")
	native := mode == "native"
	base := startPrometheus(t, bin, native, nodes)
	// Rates need two samples of a growing series; the rules need a
	// few evaluations after that.
	time.Sleep(6 * time.Second)

	// etcd's own series (the fill and overflow comms have theirs too).
	buckets := len(query(t, base, `etcdscope_fsync_duration_seconds_bucket{comm="etcd"}`))
	hists := query(t, base, `etcdscope_fsync_duration_seconds{comm="etcd"}`)
	nativeSeries := 0
	for _, r := range hists {
		if r.Histogram != nil {
			nativeSeries++
		}
	}
	t.Logf("%s (%s): %d classic _bucket series, %d native histogram series of etcdscope_fsync_duration_seconds", bin, mode, buckets, nativeSeries)
	if native && (buckets != 0 || nativeSeries != len(nodes)) || !native && (buckets == 0 || nativeSeries != 0) {
		t.Fatalf("not the %s mode: %d _bucket series, %d native series", mode, buckets, nativeSeries)
	}
	old := `histogram_quantile(0.99, sum by (instance, device, le) (rate(etcdscope_fsync_duration_seconds_bucket{file_kind="wal"}[1m])))`
	if got := len(query(t, base, old)); native && got != 0 || !native && got != len(nodes) {
		t.Errorf("the classic-only WAL p99 query gave %d series in %s mode", got, mode)
	}

	check := func(what, expr string) {
		t.Helper()
		res := query(t, base, vars.Replace(expr))
		if len(res) == 0 {
			t.Errorf("%s: no data in %s mode:\n%s", what, mode, expr)
			return
		}
		for _, r := range res {
			if r.Histogram == nil && math.IsNaN(r.float()) {
				t.Errorf("%s: NaN for %v in %s mode", what, r.Metric, mode)
			}
		}
	}
	panels := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
			panels++
		}
	}
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		s, _ := q["query"].(string)
		sel, ok := strings.CutPrefix(s, "label_values(")
		if i := strings.LastIndex(sel, ","); ok && i > 0 {
			check("variable "+v.Name, sel[:i])
		}
	}
	// The owner look-ups that left an owner unknown: the three drop kinds
	// of each node's peers tracer, and not the answers (resolved, unowned).
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "etcdscope_peer_owner_lookups_total") {
				continue
			}
			got := map[string]int{}
			for _, r := range query(t, base, vars.Replace(tg.Expr)) {
				got[r.Metric["result"]]++
			}
			if len(got) != 3 || got["queue_drops"] != len(nodes) || got["evicted"] != len(nodes) || got["learned_drops"] != len(nodes) {
				t.Errorf("%s: owner look-up series by result %v in %s mode, want queue_drops, evicted and learned_drops of each of %d nodes", p.Title, got, mode, len(nodes))
			}
		}
	}
	// The WAL p99 panel against the fed value: every call took 20 ms.
	for _, p := range d.Panels {
		if !strings.HasPrefix(p.Title, "WAL fdatasync p99") {
			continue
		}
		for _, r := range query(t, base, vars.Replace(p.Targets[0].Expr)) {
			// Classic: interpolated inside the bucket (16.4, 32.8] ms
			// holding 20 ms; native: within a bucket of factor 1.09.
			lo, hi := 0.016, 0.033
			if native {
				lo, hi = 0.020/1.1, 0.020*1.1
			}
			if v := r.float(); v < lo || v > hi {
				t.Errorf("WAL p99 %v s for %v, want within [%v, %v] (every call 20 ms)", v, r.Metric, lo, hi)
			}
		}
	}

	// The split panels against what was fed: every call is the same, so
	// each series is that call's part exactly (shares for the stacked
	// levels), per instance.
	wantLayers := map[string]float64{}
	for _, l := range analysis.LayerNames {
		wantLayers[l] = float64(walLayers.Get(l)) / 1e9
	}
	wantLevels := map[string]float64{}
	for _, lv := range []struct {
		key    string
		layers analysis.Layers
	}{{"upper dm-0/ext4", walLayers}, {"dm dm-0/dm", analysis.Layers{DMNs: walDM.HeldNs}}, {"lower vda1/disk", walDM.Lower}} {
		for _, l := range analysis.LayerNames {
			wantLevels[lv.key+" "+l] = float64(lv.layers.Get(l)) / float64(lv.layers.Sum())
		}
	}
	wantSched, wantWrite, wantCommit := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, st := range analysis.SchedNames {
		wantSched[st] = float64(walSched.Get(st)) / 1e9
	}
	for _, l := range analysis.WriteLayerNames {
		wantWrite[l] = float64(walWrite.Get(l)) / 1e9
	}
	for p, v := range commitParts {
		wantCommit["leader "+p] = float64(v) / 1e9
	}
	for _, c := range []struct {
		query string // the panel's first query uses this series
		key   func(m map[string]string) string
		want  map[string]float64
	}{
		{"etcdscope_fsync_layer_duration_seconds", func(m map[string]string) string { return m["layer"] }, wantLayers},
		{"etcdscope_stacked_layer_seconds_total", func(m map[string]string) string {
			return m["level"] + " " + m["device"] + "/" + m["fs"] + " " + m["layer"]
		}, wantLevels},
		{"etcdscope_fsync_other_state_duration_seconds", func(m map[string]string) string { return m["state"] }, wantSched},
		{"etcdscope_write_layer_duration_seconds", func(m map[string]string) string { return m["layer"] }, wantWrite},
		{"etcdscope_commit_part_duration_seconds", func(m map[string]string) string { return m["role"] + " " + m["part"] }, wantCommit},
	} {
		found := false
		for _, p := range d.Panels {
			if len(p.Targets) == 0 || !strings.Contains(p.Targets[0].Expr, c.query) {
				continue
			}
			found = true
			perInstance := map[string]map[string]float64{}
			for _, r := range query(t, base, vars.Replace(p.Targets[0].Expr)) {
				in := r.Metric["instance"]
				if perInstance[in] == nil {
					perInstance[in] = map[string]float64{}
				}
				perInstance[in][c.key(r.Metric)] = r.float()
			}
			// Per instance, or one series set over all of them (a panel
			// summed over instances).
			if _, all := perInstance[""]; all && len(perInstance) != 1 || !all && len(perInstance) != len(nodes) {
				t.Errorf("%s: instances %d in %s mode, want %d or one sum", p.Title, len(perInstance), mode, len(nodes))
			}
			for in, got := range perInstance {
				if len(got) != len(c.want) {
					t.Errorf("%s, %s: series %v in %s mode, want %v", p.Title, in, got, mode, c.want)
				}
				// 1%: a scrape between a call's total and its parts
				// miscounts one call of the thousands in the window.
				for k, want := range c.want {
					if v, ok := got[k]; !ok || math.Abs(v-want) > 0.01*want+1e-12 {
						t.Errorf("%s, %s: %s = %v in %s mode, want %v (every call)", p.Title, in, k, v, mode, want)
					}
				}
			}
		}
		if !found {
			t.Errorf("no panel queries %s", c.query)
		}
	}

	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				res := query(t, base, r.Record)
				if len(res) != len(nodes) {
					t.Errorf("recording rule %s: %d series in %s mode, want %d", r.Record, len(res), mode, len(nodes))
				}
				for _, s := range res {
					want := srtts[s.Metric["node"]].Seconds()
					if v := s.float(); math.Abs(v-want) > 1e-9 {
						t.Errorf("%s{node=%q} = %v, want %v (every srtt sample)", r.Record, s.Metric["node"], v, want)
					}
				}
				continue
			}
			alerts++
			check("alert "+r.Alert, r.Expr)
			if len(query(t, base, fmt.Sprintf(`ALERTS{alertname=%q}`, r.Alert))) == 0 {
				t.Errorf("alert %s neither pending nor firing in %s mode", r.Alert, mode)
			}
		}
	}
	t.Logf("%s, %s mode: %d panel queries, %d alerts, recording rule checked", bin, mode, panels, alerts)
}
