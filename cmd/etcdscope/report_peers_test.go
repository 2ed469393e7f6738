package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/capture"
	"github.com/etcdscope/etcdscope/event"
)

// loopback3 holds the real inputs of a new user's README walk: three
// etcd v3.6.16 members. peers.txt and peers.jsonl: members a, b, c on
// 127.0.43.1-3 (peer port 24380, client 24379), idle, up for about a
// minute, traced by `etcdscope peers --port 24380 --duration 40s
// --etcd-metrics http://127.0.43.1:24379/metrics --etcd-endpoints
// http://127.0.43.1:24379,... --record peers.jsonl > peers.txt` (member
// a, pid 2059, scraped; its headline went to stderr), recorded again on
// 2026-12-07 with this build: the recording of 2026-12 before it printed
// the streams opened before tracing as "(unknown)" rows, which the code
// no longer makes. commit.jsonl: `commit --pid <c> --load 20/s --output
// json` and fsync-idle.jsonl: `fsync --pid <a> --duration 3s --output
// json` while the cluster was idle (a summary line only), both of the
// earlier walk (127.0.0.61-63).
const loopback3 = "../../testdata/loopback3"

// TestReportPeersModelAgrees: the table the live run printed (peers.txt)
// and the page that `report --html --peers` draws from the same run's
// recording give each of the scraped member's links the same model mean;
// etcd's measured metric, scraped from that member, is drawn on its links
// only, never on another member's link to the same peer; etcdscope's own
// probe connections, which the live table left out, are left out.
func TestReportPeersModelAgrees(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(loopback3, "peers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// The metric table: TO PROBER MEMBER PEER OBS MEAN p50 p99 RTT
	// INFLATION MODEL MEAN ...: the model per peer; its heading names the
	// scraped member's pid.
	tableModel := map[string]time.Duration{}
	memberPID := ""
	inMetric := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if m := regexp.MustCompile(`\(member pid (\d+)\), between the two scrapes:$`).FindStringSubmatch(l); m != nil {
			memberPID = m[1]
		}
		switch {
		case len(f) > 0 && f[0] == "TO":
			inMetric = true
		case inMetric && len(f) >= 11 && !strings.HasSuffix(f[0], ":"):
			d, err := time.ParseDuration(f[10])
			if err != nil {
				t.Fatalf("model mean %q of %q: %v", f[10], l, err)
			}
			tableModel[f[3]] = d
		}
	}
	if len(tableModel) != 2 || memberPID == "" {
		t.Fatalf("live table: models %v, member pid %q; want 2 peers of a scraped member:\n%s", tableModel, memberPID, b)
	}

	page := filepath.Join(t.TempDir(), "page.html")
	reportOutput(t, "--html", page, "--peers", filepath.Join(loopback3, "peers.jsonl"), "../../report/testdata/etcd-fsync.jsonl")
	bars := pagePeerBars(t, page)
	member := "etcd[" + memberPID + "] "
	seen := 0
	for label, titles := range bars {
		// The live run left etcdscope's own kept-alive probe connections
		// out of every link (the recording's own_conns): so does the page.
		if strings.HasPrefix(label, "etcdscope[") {
			t.Errorf("%s: etcdscope's own probe connection drawn as a link", label)
		}
		peer := ""
		if m := regexp.MustCompile(`→ (\S+) \(active\)$`).FindStringSubmatch(label); m != nil {
			peer = m[1]
		}
		want, compared := tableModel[peer]
		if !strings.HasPrefix(label, member) || !compared {
			if titles[5] != "" {
				t.Errorf("%s: %q: etcd's metric was scraped from pid %s, not from this link's end", label, titles[5], memberPID)
			}
			continue
		}
		seen++
		got := pageSeconds(t, strings.TrimPrefix(titles[4], "etcd metric mean (model): "))
		// The table rounds to 1 µs, the page to 3 digits.
		if d := math.Abs(got - want.Seconds()); d > 0.005*got+0.5e-6 {
			t.Errorf("%s: page model %s, live table %v", label, titles[4], want)
		}
		if !strings.HasPrefix(titles[5], "etcd metric mean (measured by etcd): ") {
			t.Errorf("%s: no measured bar (%q)", label, titles[5])
		}
	}
	if seen != len(tableModel) {
		t.Errorf("%d of the scraped member's links found on the page, want %d: %v", seen, len(tableModel), bars)
	}
}

// pagePeerBars reads the peers chart of a page: per link label, the
// titles of its six bars by series ("" where none is drawn).
func pagePeerBars(t *testing.T, page string) map[string][6]string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	const row = 16.0 // report's peerRowH
	labels := map[float64]string{}
	for _, m := range regexp.MustCompile(`<text x="[^"]*" y="([^"]*)" text-anchor="end">([^<]*→[^<]*)<`).FindAllStringSubmatch(s, -1) {
		y, _ := strconv.ParseFloat(m[1], 64)
		labels[y-3*row] = html.UnescapeString(m[2]) // the label sits mid-group
	}
	out := map[string][6]string{}
	for _, l := range labels {
		out[l] = [6]string{}
	}
	for _, m := range regexp.MustCompile(`<rect x="[^"]*" y="([^"]*)"[^>]*><title>([^<]*)</title>`).FindAllStringSubmatch(s, -1) {
		y, _ := strconv.ParseFloat(m[1], 64)
		for top, l := range labels {
			if i := int((y - top) / row); y >= top && i < 6 {
				v := out[l]
				v[i] = html.UnescapeString(m[2])
				out[l] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no peers chart on the page")
	}
	return out
}

// pageSeconds parses the page's "694 µs" / "1.02 ms" / "1.5 s".
func pageSeconds(t *testing.T, s string) float64 {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 2 {
		t.Fatalf("page value %q", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("page value %q: %v", s, err)
	}
	switch f[1] {
	case "µs":
		return v * 1e-6
	case "ms":
		return v * 1e-3
	}
	return v
}

// TestReportHTMLPeersCapture: a peers capture (peers --capture) is given
// to --peers as it is, replayed by the path of `report peers.cap`: the
// page's peers section holds the replay's events and links (the committed
// replay, testdata/capture/peers.report.json, is the oracle), and the
// capture given as the recording is refused naming that command, which
// works.
func TestReportHTMLPeersCapture(t *testing.T) {
	const capFile = "../../testdata/capture/peers.capture.jsonl"
	b, err := os.ReadFile("../../testdata/capture/peers.report.json")
	if err != nil {
		t.Fatal(err)
	}
	var replay struct {
		Events int `json:"events"`
		Links  []struct {
			PerRequest struct{ Count, Sum int64 } `json:"per_request_ns"`
		} `json:"links"`
	}
	if err := json.Unmarshal(b, &replay); err != nil {
		t.Fatal(err)
	}
	if len(replay.Links) != 1 || replay.Links[0].PerRequest.Count == 0 {
		t.Fatalf("peers.report.json: %+v, want one link with requests", replay)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	etcdscope := func(args ...string) (int, string) {
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "ETCDSCOPE_TEST_MAIN=1")
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	page := filepath.Join(t.TempDir(), "page.html")
	// The walk's first step: refused, naming the command to run instead.
	rc, out := etcdscope("report", "--html", page, capFile)
	fix := "etcdscope report --html " + page + " --peers " + capFile + " FSYNC-RECORDING"
	if rc != 2 || !strings.Contains(out, fix) {
		t.Fatalf("report --html %s: exit %d, want 2 naming %q:\n%s", capFile, rc, fix, out)
	}
	// That command, with an fsync recording: the page.
	if rc, out := etcdscope(strings.Fields(strings.ReplaceAll(fix, "FSYNC-RECORDING", "../../report/testdata/etcd-fsync.jsonl"))[1:]...); rc != 0 {
		t.Fatalf("exit %d:\n%s", rc, out)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	note := fmt.Sprintf("%d peer events over ", replay.Events)
	if !strings.Contains(string(html), note) || !strings.Contains(string(html), ", 1 links.") {
		t.Errorf("page's peers note has no %q and 1 link", note)
	}
	bars := pagePeerBars(t, page)
	if len(bars) != 1 {
		t.Fatalf("%d links on the page, want 1: %v", len(bars), bars)
	}
	want := float64(replay.Links[0].PerRequest.Sum) / float64(replay.Links[0].PerRequest.Count) / 1e9
	for label, titles := range bars {
		// The page prints 3 digits.
		got := pageSeconds(t, titles[3][strings.LastIndex(titles[3], ": ")+2:])
		if math.Abs(got-want) > 0.005*want {
			t.Errorf("%s: per-request mean %q, the replay's %.6f s", label, titles[3], want)
		}
	}
}

// TestReportPeersStoppedMember: the replay of a real capture of three
// members with m3 (127.0.6.3) under SIGSTOP for 10.09 s
// (testdata/peers-stopped/README.md) says first that m3 stopped
// answering: a verdict line naming it with the largest connection setup
// p99 of the links to it, as the table prints them, over the election
// timeout and within the stop; no such line for m1 or m2, whose links'
// p99s stay under the heartbeat interval.
func TestReportPeersStoppedMember(t *testing.T) {
	out := string(reportOutput(t, "../../testdata/peers-stopped/peers-stopped.capture.jsonl"))
	var worst time.Duration
	for _, l := range strings.Split(out, "\n") {
		// LINK ... SETUP p50/p99 (n) is the 3rd field from "(active)" on.
		if !strings.Contains(l, "→ 127.0.6.3 (active)") {
			continue
		}
		m := regexp.MustCompile(`\(active\)\s+\S+\s+\S+\s+\S+ \(\d+\)\s+\S+ \(\d+\)\s+\S+\s+\S+/(\S+) \(\d+\)`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("no SETUP column in %q", l)
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, d)
	}
	const stopped = 10090 * time.Millisecond // 08:46:18.110 to 08:46:28.199
	if worst <= time.Second || worst > stopped {
		t.Fatalf("setup p99 to m3 %v in the table: want over 1 s and within the %v stop:\n%s", worst, stopped, out)
	}
	verdicts := regexp.MustCompile(`(?m)^verdict: .*$`).FindAllString(out, -1)
	want := "verdict: 127.0.6.3: connection setup p99 " + worst.Round(time.Millisecond).String() + " from etcd["
	if len(verdicts) != 1 || !strings.HasPrefix(verdicts[0], want) || !strings.Contains(verdicts[0], "over the election timeout (1s, etcd's default)") {
		t.Errorf("verdicts %q, want one starting %q, over the election timeout", verdicts, want)
	}
}

// TestReplayPeersCaptureLeavesOutOwnConns: a peers capture's end line
// names the live run's own probe connections (capture.End.OwnConns), and
// its replay leaves them out as the live table did: one of etcd's links,
// not the probe's beside it (a new user's walk saw the probe's link in
// the replay only).
func TestReplayPeersCaptureLeavesOutOwnConns(t *testing.T) {
	etcdA, etcdB := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.2:2380")
	probe := netip.MustParseAddrPort("127.0.0.3:45000")
	evs := []event.Peer{
		{Kind: event.PeerOpen, TimeNs: 1e9, Socket: 1, Direction: event.PeerActive, PID: 7, Comm: "etcd", Local: etcdA, Remote: etcdB, DurationNs: 100_000},
		{Kind: event.PeerOpen, TimeNs: 2e9, Socket: 2, Direction: event.PeerActive, PID: 9, Comm: "etcdscope", Local: probe, Remote: etcdB, DurationNs: 100_000},
		{Kind: event.PeerRTT, TimeNs: 3e9, Socket: 2, Direction: event.PeerActive, Local: probe, Remote: etcdB, SRTTus: 300, MinRTTus: 200, BytesReceived: 500},
	}
	links := func(own []netip.AddrPort) []peers.LinkStats {
		rd, err := capture.NewReader(bytes.NewReader(peersCapture(t, evs, capture.End{WindowNs: 4e9, OwnConns: own})))
		if err != nil {
			t.Fatal(err)
		}
		rep, _, _, err := assemblePeerCapture(rd, "test.capture")
		if err != nil {
			t.Fatal(err)
		}
		return rep.Links
	}
	if got := links(nil); len(got) != 2 {
		t.Fatalf("without own_conns: %d links, want etcd's and the probe's", len(got))
	}
	got := links([]netip.AddrPort{probe})
	if len(got) != 1 || got[0].Link.From != etcdA.Addr() {
		t.Fatalf("with own_conns: %+v, want only etcd's link from %s", got, etcdA.Addr())
	}
}

// TestReplayPeersCaptureMarksNotMembers: a peers capture's end line holds
// the member list the live run read (capture.End.Members), and the replay
// marks and counts the links to no member as the live table did (a walk's
// replay lost the marks), in the table and in its JSON.
func TestReplayPeersCaptureMarksNotMembers(t *testing.T) {
	m1, m2, other := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.2:2380"), netip.MustParseAddrPort("127.0.0.4:2380")
	evs := []event.Peer{
		{Kind: event.PeerOpen, TimeNs: 1e9, Socket: 1, Direction: event.PeerActive, PID: 7, Comm: "etcd", Local: m1, Remote: m2, DurationNs: 100_000},
		{Kind: event.PeerOpen, TimeNs: 2e9, Socket: 2, Direction: event.PeerActive, PID: 8, Comm: "curl", Local: netip.MustParseAddrPort("127.0.0.1:40001"), Remote: other, DurationNs: 100_000},
	}
	members := []etcdmetric.Member{{ID: 0xa1, Name: "m1", PeerIPs: []netip.Addr{m1.Addr()}, Leader: true}, {ID: 0xa2, Name: "m2", PeerIPs: []netip.Addr{m2.Addr()}}}
	b := peersCapture(t, evs, capture.End{WindowNs: 4e9, Members: members})
	replay := func(output string) string {
		rd, err := capture.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		peersStdout = &out
		defer func() { peersStdout = os.Stdout }()
		if err := replayPeers(rd, "test.capture", output); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	table := replay("")
	for _, want := range []string{"127.0.0.1 → 127.0.0.4 (active) (not a member)", "1 link marked (not a member)", "member a2 m2 peer URLs on [127.0.0.2]"} {
		if !strings.Contains(table, want) {
			t.Errorf("replay's table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "127.0.0.2 (active) (not a member)") {
		t.Errorf("the link to member m2 marked:\n%s", table)
	}
	var rep etcdmetric.PeersReport
	if err := json.Unmarshal([]byte(replay("json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.NotMemberLinks) != 1 || rep.NotMemberLinks[0].To != other.Addr() || len(rep.Members) != 2 {
		t.Errorf("replay's JSON: links_not_member %+v, %d members; want the link to %s and 2 members", rep.NotMemberLinks, len(rep.Members), other.Addr())
	}
}

// peersCapture writes a peers capture on port 2380 of evs, ended by end.
func peersCapture(t *testing.T, evs []event.Peer, end capture.End) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := capture.NewWriter(&b, capture.Header{Tracer: capture.TracerPeers, Command: "peers", Port: 2380})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		w.Peer(&evs[i])
	}
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
