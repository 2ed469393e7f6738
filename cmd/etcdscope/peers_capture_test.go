package main

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/etcdinfo"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
)

// TestPeersCaptureReplaysMetric runs `etcdscope peers --etcd-metrics
// --capture` against a real 3-member etcd, then `etcdscope report` on the
// capture: the oracle is the live run's own table, whose verdict lines and
// etcd_network_peer_round_trip_time_seconds section the replay must print
// byte for byte (until 2026-12-07 the replay printed the links only, and
// not a word about the comparison it had dropped).
func TestPeersCaptureReplaysMetric(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, IPs: []string{"127.0.47.1", "127.0.47.2", "127.0.47.3"}})
	dir := t.TempDir()
	ready, capFile := filepath.Join(dir, "ready"), filepath.Join(dir, "peers.cap")
	var out bytes.Buffer
	peersStdout = &out
	defer func() { peersStdout = os.Stdout }()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"peers", "--duration", "20s", "--ready-file", ready, "--capture", capFile,
			"--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--etcd-metrics", c.Members[0].MetricsURL})
	}()
	waitFile(t, ready, done)
	if rc := <-done; rc != 0 {
		t.Fatalf("etcdscope peers exited %d; output:\n%s", rc, out.String())
	}
	live := out.String()
	replay := string(reportOutput(t, capFile))
	metric := func(s string) (verdicts []string, section string) {
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "verdict: ") {
				verdicts = append(verdicts, l)
			}
		}
		if i := strings.Index(s, "\netcd_network_peer_round_trip_time_seconds from "); i >= 0 {
			section = s[i:]
		}
		return verdicts, section
	}
	lv, ls := metric(live)
	rv, rs := metric(replay)
	if len(lv) == 0 || ls == "" {
		t.Fatalf("the live run printed no verdict or no metric section; output:\n%s", live)
	}
	if strings.Join(lv, "\n") != strings.Join(rv, "\n") || ls != rs {
		t.Errorf("the replay's metric comparison differs from the live run's:\nlive:\n%s\nreplay:\n%s", live, replay)
	}
	t.Logf("live and replay agree on %d verdict lines", len(lv))

	// The page draws etcd's measured mean beside the model from the
	// capture as from a recording (the links' bars; an fsync recording of
	// another run: the page also says they are apart).
	page := filepath.Join(dir, "page.html")
	reportOutput(t, "--html", page, "--peers", capFile, "../../report/testdata/etcd-fsync.jsonl")
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "etcd metric mean (measured by etcd): ") {
		t.Errorf("the page from the capture draws no measured metric")
	}
}

// TestReplayPeersCaptureMetric: a capture whose end line carries the two
// scrapes (real ones of etcd 3.6.16) replays the metric comparison: one
// verdict per series and the metric's section, as the live run prints
// them; a capture with the member list but no scrapes (made before they
// were kept) says in one line that the comparison is not in it and how to
// get it, where it used to say nothing.
func TestReplayPeersCaptureMetric(t *testing.T) {
	scrape := func(name string) *capture.Scrape {
		f, err := os.Open("../../analysis/etcdmetric/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		s, err := etcdmetric.Parse(f)
		if err != nil && !errors.Is(err, etcdmetric.ErrNoMetric) { // the start: no observation yet
			t.Fatal(err)
		}
		return capture.FromScrape(s)
	}
	members := []etcdmetric.Member{{ID: 0x3d823c658ed0bde8, Name: "m2", PeerIPs: []netip.Addr{netip.MustParseAddr("127.0.0.2")}},
		{ID: 0x75571700ac8cd21f, Name: "m3", PeerIPs: []netip.Addr{netip.MustParseAddr("127.0.0.3")}}}
	ev := &capture.Etcd{MetricsURL: "http://127.0.0.1:2381/metrics", StartUnixNs: time.Now().UnixNano(),
		From: scrape("etcd-3.6.16-tls-loopback-start.prom"), To: scrape("etcd-3.6.16-tls-loopback-end.prom"), Timeouts: etcdmetric.DefaultTimeouts}
	replay := func(end capture.End) string {
		rd, err := capture.NewReader(bytes.NewReader(peersCapture(t, nil, end)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		peersStdout = &out
		defer func() { peersStdout = os.Stdout }()
		if err := replayPeers(rd, "test.capture", ""); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	out := replay(capture.End{WindowNs: 60e9, Members: members, Etcd: ev})
	for _, want := range []string{"verdict: 3d823c658ed0bde8", "verdict: 75571700ac8cd21f", "\netcd_network_peer_round_trip_time_seconds from http://127.0.0.1:2381/metrics"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not in this capture") {
		t.Errorf("replay says the comparison is missing:\n%s", out)
	}
	out = replay(capture.End{WindowNs: 60e9, Members: members})
	if strings.Contains(out, "verdict:") || !strings.Contains(out, render.PeersMetricNotCaptured()) {
		t.Errorf("a capture without the scrapes: want no verdict and the line %q:\n%s", render.PeersMetricNotCaptured(), out)
	}
}

// TestReplayPeersCaptureMembersError: what the live run said of etcd's
// member list and metric (--etcd-endpoints without a leader, an end scrape
// that did not answer) its capture's replay says again, on stderr as live,
// where the replay used to say nothing (the last session's note).
func TestReplayPeersCaptureMembersError(t *testing.T) {
	members := []etcdmetric.Member{{ID: 0x3d823c658ed0bde8, Name: "m2", PeerIPs: []netip.Addr{netip.MustParseAddr("127.0.0.2")}}}
	end := capture.End{WindowNs: 5e9, Members: members, MembersError: etcdinfo.ErrLeaderUnknown.Error(),
		Etcd: &capture.Etcd{MetricsURL: "http://127.0.0.1:2381/metrics", MetricsError: "end scrape: no answer within 1s of the stop signal", Timeouts: etcdmetric.DefaultTimeouts}}
	rd, err := capture.NewReader(bytes.NewReader(peersCapture(t, nil, end)))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	peersStdout, peersStderr = &out, &errOut
	defer func() { peersStdout, peersStderr = os.Stdout, os.Stderr }()
	if err := replayPeers(rd, "test.capture", ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{render.PeersMembersError(etcdinfo.ErrLeaderUnknown.Error()),
		render.PeersMetricsError("http://127.0.0.1:2381/metrics", "end scrape: no answer within 1s of the stop signal")} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("the replay's stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}
