package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// server is a running `etcdscope serve`.
type server struct {
	cmd    *exec.Cmd
	addr   string             // host:port it listens on
	stderr testenv.SyncBuffer // read while serve runs
}

// startServe starts `etcdscope serve --listen 127.0.0.1:0 <args>` and
// waits for its --ready-file, which holds the address it bound.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	return startServeIn(t, "", nil, args...)
}

// startServeIn is startServe with the process in cgroup directory cgroup
// (none if "") and env added to the test's environment.
func startServeIn(t *testing.T, cgroup string, env []string, args ...string) *server {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	s := &server{}
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--ready-file", ready}, args...)
	s.cmd = etcdscopeIn(t, cgroup, all...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { s.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				s.cmd.Process.Kill()
				<-done
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			s.addr = strings.TrimSpace(string(b))
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcdscope serve not ready after 20 s; stderr:\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scrape reads /metrics as Prometheus' text format, parsed by expfmt.
func (s *server) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// labelsMatch reports whether m's labels include every pair in match.
func labelsMatch(m *dto.Metric, match map[string]string) bool {
	l := labelsOf(m)
	for k, v := range match {
		if l[k] != v {
			return false
		}
	}
	return true
}

// histCount sums the sample count of a histogram family's series whose
// labels include every pair in match.
func histCount(f *dto.MetricFamily, match map[string]string) uint64 {
	var n uint64
	for _, m := range f.GetMetric() {
		if labelsMatch(m, match) {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// TestServeCountsFdatasync starts `etcdscope serve --pid <this test>`, makes
// a known number of fdatasync calls, and checks that the scraped histogram
// counts exactly those calls, in the total and in every layer, that
// nothing was lost, that the native histogram is served over protobuf, and
// that per-program BPF run counts appear once BPF stats are on and count at
// least one run per call of the program that ends it. Twice: on the
// syscall tracepoints, and with --data-dir /var/tmp (ext4 here) on ext4's
// tracepoints with no syscall tracepoint attached.
func TestServeCountsFdatasync(t *testing.T) {
	testenv.RequireRoot(t)
	t.Run("syscalls", func(t *testing.T) { serveCountsFdatasync(t, nil, "sys_exit_fdatasync") })
	t.Run("ext4", func(t *testing.T) {
		if fs, err := host.FSTypeOf("/var/tmp"); err != nil || fs != "ext4" {
			testenv.Missing(t, fmt.Sprintf("/var/tmp is on %q (%v), not ext4", fs, err))
		}
		serveCountsFdatasync(t, []string{"--data-dir", "/var/tmp"}, "ext4_sync_file_exit")
	})
}

func serveCountsFdatasync(t *testing.T, extra []string, exitProg string) {
	// BPF_ENABLE_STATS turns run time/count on for as long as this fd is
	// open (the sysctl reads 1 meanwhile) and off again at Close, so the
	// host's setting is left as it was.
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()

	s := startServe(t, append([]string{"--pid", strconv.Itoa(os.Getpid())}, extra...)...)
	f, err := os.CreateTemp("/var/tmp", "etcdscope-serve-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const calls = 300
	buf := make([]byte, 2300) // one etcd WAL entry's worth
	for i := 0; i < calls; i++ {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	fdatasync := map[string]string{"syscall": "fdatasync"}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = s.scrape(t)
		if f := fams["etcdscope_fsync_duration_seconds"]; f != nil && histCount(f, fdatasync) >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fdatasync count did not reach %d in 10 s; stderr:\n%s", calls, s.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := histCount(fams["etcdscope_fsync_duration_seconds"], fdatasync); got != calls {
		t.Errorf("etcdscope_fsync_duration_seconds_count{syscall=fdatasync} = %d, made %d calls", got, calls)
	}
	if got := histCount(fams["etcdscope_fsync_duration_seconds"], map[string]string{"syscall": "fsync"}); got != 0 {
		t.Errorf("%d fsync calls counted, made none", got)
	}
	for _, l := range []string{"data_writeback", "journal", "device_flush", "block_queue", "other"} {
		if got := histCount(fams["etcdscope_fsync_layer_duration_seconds"], map[string]string{"layer": l}); got != calls {
			t.Errorf("layer %s counted %d calls, want %d", l, got, calls)
		}
	}
	for _, m := range fams["etcdscope_lost_events_total"].GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			t.Errorf("lost events %v for %v", v, labelsOf(m))
		}
	}
	attached := map[string]float64{}
	for _, m := range fams["etcdscope_bpf_programs_attached"].GetMetric() {
		attached[labelsOf(m)["tracer"]] = m.GetGauge().GetValue()
	}
	// fsync: 4 syscall + 4 block programs at least (journal probes vary by
	// kernel); peers: its three tp_btf programs.
	if attached["fsync"] < 8 || attached["peers"] != 3 {
		t.Errorf("programs attached %v, want fsync >= 8 and peers 3", attached)
	}
	runs := map[string]float64{}
	for _, m := range fams["etcdscope_bpf_program_runs_total"].GetMetric() {
		l := labelsOf(m)
		runs[l["tracer"]+"/"+l["program"]] = m.GetCounter().GetValue()
	}
	if runs["fsync/"+exitProg] < calls {
		t.Errorf("%s ran %v times by bpf_prog_info, want >= %d (stats on); runs: %v", exitProg, runs["fsync/"+exitProg], calls, runs)
	}
	if exitProg != "sys_exit_fdatasync" && runs["fsync/sys_exit_fdatasync"] != 0 {
		t.Errorf("sys_exit_fdatasync ran %v times: the syscall tracepoints are attached beside ext4's", runs["fsync/sys_exit_fdatasync"])
	}
	h := fams["etcdscope_fsync_duration_seconds"].GetMetric()[0].GetHistogram()
	t.Logf("%d fdatasync calls; scraped count %d, sum %.6f s; %s runs %v; %d classic buckets",
		calls, h.GetSampleCount(), h.GetSampleSum(), exitProg, runs["fsync/"+exitProg], len(h.GetBucket()))

	// Native histogram: only in the protobuf exposition.
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Accept", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	found := false
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding protobuf /metrics: %v", err)
		}
		if mf.GetName() != "etcdscope_fsync_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			nh := m.GetHistogram()
			if labelsOf(m)["syscall"] == "fdatasync" && nh.Schema != nil && len(nh.GetPositiveSpan()) > 0 && len(nh.GetBucket()) == 25 {
				found = true
				t.Logf("native histogram: schema %d, %d spans, zero count %d; classic buckets %d", nh.GetSchema(), len(nh.GetPositiveSpan()), nh.GetZeroCount(), len(nh.GetBucket()))
			}
		}
	}
	if !found {
		t.Error("protobuf exposition has no native histogram beside the classic buckets for fdatasync")
	}

	hz, err := http.Get("http://" + s.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hz.Body.Close()
	if hz.StatusCode != http.StatusOK {
		t.Errorf("/healthz %s", hz.Status)
	}
	// SIGTERM: a clean exit, the ready file removed.
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve exit: %v; stderr:\n%s", err, s.stderr.String())
	}
}

// TestServeListensIPv6Loopback: `serve --listen [::1]:0` needs no
// --listen-public (::1 is loopback), binds the IPv6 loopback only, and
// serves /metrics there.
func TestServeListensIPv6Loopback(t *testing.T) {
	testenv.RequireRoot(t)
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		testenv.Missing(t, fmt.Sprintf("no IPv6 loopback: %v", err))
	} else {
		ln.Close()
	}
	s := startServe(t, "--listen", "[::1]:0")
	host, _, err := net.SplitHostPort(s.addr)
	if err != nil || host != "::1" {
		t.Fatalf("ready file names %q (%v), want [::1]:PORT", s.addr, err)
	}
	fams := s.scrape(t)
	if fams["etcdscope_build_info"] == nil {
		t.Errorf("no etcdscope_build_info on http://%s/metrics", s.addr)
	}
	// Bound to ::1 alone: the same port on 127.0.0.1 is not this server.
	_, port, _ := net.SplitHostPort(s.addr)
	if c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", port), time.Second); err == nil {
		c.Close()
		if resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", port) + "/metrics"); err == nil {
			resp.Body.Close()
			t.Errorf("127.0.0.1:%s answers /metrics too: serve bound more than ::1", port)
		}
	}
}

// TestServeRefusesPublicListen: a non-loopback --listen without
// --listen-public is a usage error (exit 2) before anything is loaded.
func TestServeRefusesPublicListen(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:10380"}, "--listen-public"},
		{[]string{"--listen", ":10380"}, "--listen-public"},
		{[]string{"--listen", "[::]:10380"}, "--listen-public"},
		{[]string{"--listen", "localhost"}, "host:port"}, // a bare IP is accepted (default port); a bare name is not
		{[]string{"--listen", "127.0.0.1:70000"}, "0-65535"},
		{[]string{"--port", "0"}, "--port 0"},
		{[]string{"--etcd-metrics", "ftp://x"}, "http://"},
		{[]string{"--compare-window", "1s"}, "--compare-window"},
		{[]string{"--etcd-endpoints", "http://127.0.0.1:2379"}, "goes with --etcd-metrics"},
		{[]string{"--etcd-metrics", "http://127.0.0.1:2381/metrics", "--cert", "c.pem"}, "--cert and --key"},
		{[]string{"--comm", "a-comm-longer-than-15"}, "15-byte"},
	} {
		// Bounded: a case that is no longer refused starts a real server,
		// which must fail the test, not hang it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, etcdscope(t), append([]string{"serve"}, c.args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestReportHTML runs `etcdscope report --html` on the recordings in
// report/testdata (made with the real tool) and checks the wiring: the
// page is written, it has the layer bars, the heatmaps and the peers
// chart; bad flag combinations exit 2. The page itself is tested in
// package report.
func TestReportHTML(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.html")
	cmd := exec.Command(etcdscope(t), "report", "--html", out, "--peers", "../report/testdata/peers.jsonl", "../report/testdata/etcd-fsync.jsonl")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("report --html: %v\n%s", err, b)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!DOCTYPE html>", `aria-label="share of each kernel layer in the mean call, by level (each bar 100%)"`,
		`aria-label="heatmap of call latency over time"`, `aria-label="per-peer RTT against etcd&#39;s peer RTT metric"`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("page has no %s", want)
		}
	}
	for _, args := range [][]string{
		{"report", "--peers", "../report/testdata/peers.jsonl", "../report/testdata/etcd-fsync.jsonl"},
		{"report", "--html", out, "--output", "json", "../report/testdata/etcd-fsync.jsonl"},
		{"report", "--html", "/nonexistent-dir/x.html", "../report/testdata/etcd-fsync.jsonl"},
		{"report", "--html", out, "--peers", "../report/testdata/etcd-fsync.jsonl", "../report/testdata/etcd-fsync.jsonl"},
	} {
		err := exec.Command(etcdscope(t), args...).Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2", args, err)
		}
	}
}

// TestServeEtcdInflation runs serve beside a real three-member etcd
// (plain HTTP on 127.0.0.1-3) with --etcd-metrics for member 0 and
// --etcd-endpoints, and waits for a comparison window that holds an
// observation of etcd_network_peer_round_trip_time_seconds. Checked: one
// series per other member, labelled with that member's ID (the metric's To)
// and its peer address from the member list; the ratio is the metric mean
// over the traced RTT; on loopback, where the network RTT is tens of µs,
// the metric (dial + request + answer of a probe) reads well above it. It
// takes 10 to 40 s: etcd observes the metric 5 s after a prober starts,
// then every 30 s, and serve compares every 10 s.
func TestServeEtcdInflation(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	m1 := c.Members[0]
	s := startServe(t, "--comm", "etcd", "--etcd-metrics", m1.MetricsURL,
		"--etcd-endpoints", m1.ClientURL, "--compare-window", "10s")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Put(ctx, 1000000, 20, 256) // some Raft traffic, until the test ends

	want := map[string]string{} // To label → peer address
	for _, m := range c.Members[1:] {
		want[fmt.Sprintf("%x", m.ID)] = m.IP
	}
	t0 := time.Now()
	deadline := t0.Add(60 * time.Second)
	var fams map[string]*dto.MetricFamily
	for {
		fams = s.scrape(t)
		if len(fams["etcdscope_etcd_peer_rtt_inflation_ratio"].GetMetric()) == len(want) {
			t.Logf("inflation series after %v", time.Since(t0).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no inflation series for %v within 60 s; got %v; stderr:\n%s", want,
				fams["etcdscope_etcd_peer_rtt_inflation_ratio"].GetMetric(), s.stderr.String())
		}
		time.Sleep(time.Second)
	}
	gauge := func(name string, l map[string]string) float64 {
		for _, m := range fams[name].GetMetric() {
			if labelsOf(m)["to"] == l["to"] && labelsOf(m)["peer"] == l["peer"] {
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s for %v", name, l)
		return 0
	}
	for _, m := range fams["etcdscope_etcd_peer_rtt_inflation_ratio"].GetMetric() {
		l := labelsOf(m)
		if want[l["to"]] == "" || l["peer"] != want[l["to"]] || l["etcd"] != strings.TrimPrefix(strings.TrimSuffix(m1.MetricsURL, "/metrics"), "http://") {
			t.Errorf("series %v: want to=<member ID> with its peer address (%v), etcd=%s", l, want, m1.MetricsURL)
			continue
		}
		ratio := m.GetGauge().GetValue()
		mean := gauge("etcdscope_etcd_peer_rtt_metric_mean_seconds", l)
		rtt := gauge("etcdscope_etcd_peer_rtt_traced_seconds", l)
		t.Logf("to %s (%s): etcd metric mean %.3f ms, traced RTT %.1f µs, inflation %.1f", l["to"], l["peer"], mean*1e3, rtt*1e6, ratio)
		if math.Abs(ratio-mean/rtt) > 1e-9*ratio {
			t.Errorf("inflation %v is not metric mean / traced RTT = %v", ratio, mean/rtt)
		}
		if rtt <= 0 || rtt > 0.005 || ratio <= 1 {
			t.Errorf("loopback: traced RTT %v s (want under 5 ms), inflation %v (want > 1)", rtt, ratio)
		}
	}
	for _, m := range fams["etcdscope_etcd_metrics_scrape_errors_total"].GetMetric() {
		t.Errorf("scrape errors: %v = %v", labelsOf(m), m.GetCounter().GetValue())
	}
}
