package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

// TestPeersEtcdTLS runs `etcdscope peers` for 60 s against a real
// 3-member etcd with TLS peer URLs on 127.0.0.1/.2/.3:2380 and checks:
//   - new connections per link against ftrace's own record of the same
//     tracepoint (an instance buffer, no BPF): every active open ftrace
//     saw by (source port, destination) is one the tracer reported, and
//     the per-link counts agree; /proc/net/snmp ActiveOpens bounds them;
//   - about one new connection per 4 s per link (the RAFT_MESSAGE prober);
//   - the metric scraped over TLS is parsed per To, matched to the peer,
//     and the report carries the inflation ratio and the model's verdict;
//   - a connection to :2380 at an address that is no member's peer
//     address (notMember) is marked "(not a member)" and counted, and no
//     member's link is.
func TestPeersEtcdTLS(t *testing.T) { peersE2E(t, true) }

// TestPeersEtcdPlain is the same with plain-HTTP peer and client URLs,
// where the metric reads below a millisecond on loopback.
func TestPeersEtcdPlain(t *testing.T) { peersE2E(t, false) }

func peersE2E(t *testing.T, withTLS bool) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, PeerTLS: withTLS, ClientTLS: withTLS})
	m1 := c.Members[0]
	metricArgs := []string{"--etcd-metrics", m1.MetricsURL}
	if withTLS {
		// the client port's /metrics, over TLS with the client certificate
		metricArgs = []string{"--etcd-metrics", m1.ClientURL + "/metrics", "--cacert", c.CAFile, "--cert", c.ClientCertFile, "--key", c.ClientKeyFile}
	}
	byIP := map[netip.Addr]*etcdtest.Member{}
	for _, m := range c.Members {
		byIP[netip.MustParseAddr(m.IP)] = m
		t.Logf("member %s ip %s pid %d id %x", m.Name, m.IP, m.PID, m.ID)
	}

	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	recording := filepath.Join(dir, "peers.jsonl")
	var out bytes.Buffer
	peersStdout = &out
	defer func() { peersStdout = os.Stdout }()
	const d = 60 * time.Second
	done := make(chan int, 1)
	go func() {
		args := []string{"peers", "--duration", d.String(), "--output", "json", "--ready-file", ready,
			"--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--record", recording}
		done <- run(append(args, metricArgs...))
	}()
	waitFile(t, ready, done)
	// One connection to a listener on the traced port at an address no
	// member has, before the oracles start (they count members' opens).
	dialNotMember(t)

	// The oracle runs inside the tool's window (starts after ready, stops
	// 5 s before the end), so each connection it saw must be in the report.
	ft := startFtrace(t, "dport == 2380 && oldstate == 2 && newstate == 1")
	snmp0 := activeOpens(t)
	// A second, library-level tracer gives the per-connection list the
	// CLI's JSON summarises.
	evsCh := make(chan []event.Peer, 1)
	go func() {
		evs, _, err := tracer.RecordPeers(context.Background(), tracer.PeersConfig{}, d-3*time.Second, nil)
		if err != nil {
			t.Error(err)
		}
		evsCh <- evs
	}()
	time.Sleep(d - 8*time.Second)
	ftraceOpens := ft.stop(t)
	snmp1 := activeOpens(t)
	evs := <-evsCh
	if rc := <-done; rc != 0 {
		t.Fatalf("etcdscope peers exited %d; output:\n%s", rc, out.String())
	}

	var rep etcdmetric.PeersReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out.String())
	}
	if rep.LostEvents != 0 {
		t.Errorf("%d events lost", rep.LostEvents)
	}

	// 1. ftrace's active opens are all in the library tracer's events.
	// Keyed by the whole 4-tuple: on loopback one local port of 127.0.0.1
	// serves connections to 127.0.0.2 and 127.0.0.3 at the same time.
	type conn struct{ local, remote netip.AddrPort }
	traced := map[conn]event.Peer{}
	for _, e := range evs {
		if e.Kind == event.PeerOpen && e.Direction == event.PeerActive {
			traced[conn{e.Local, e.Remote}] = e
		}
	}
	perLink := map[string]int{} // "pid→ip" counted by ftrace
	for _, o := range ftraceOpens {
		e, ok := traced[conn{o.local, o.remote}]
		if !ok {
			t.Errorf("ftrace saw an active open %v → %v the tracer did not report", o.local, o.remote)
			continue
		}
		perLink[fmt.Sprintf("%d→%s", e.PID, o.remote.Addr())]++
	}
	if delta := snmp1 - snmp0; delta < uint64(len(ftraceOpens)) {
		t.Errorf("/proc/net/snmp ActiveOpens grew by %d, fewer than the %d opens to :2380 ftrace saw", delta, len(ftraceOpens))
	}
	t.Logf("ftrace: %d active opens to :2380 in %v: %v; ActiveOpens +%d host-wide", len(ftraceOpens), d-8*time.Second, perLink, snmp1-snmp0)

	// 2. The CLI's links: one per (member pid, peer), ~15 new per minute,
	// and not fewer than ftrace counted in its shorter window.
	seen := 0
	for _, l := range rep.Links {
		if l.Link.Direction != event.PeerActive || l.Link.FromPID == 0 {
			continue
		}
		to := byIP[l.Link.To]
		if to == nil {
			continue
		}
		seen++
		key := fmt.Sprintf("%d→%s", l.Link.FromPID, l.Link.To)
		fcount := perLink[key]
		if l.Opened < fcount || l.Opened > fcount+3 {
			t.Errorf("%s: tool counted %d opens in %v, ftrace %d in the %v inside it", l.Link, l.Opened, d, fcount, d-8*time.Second)
		}
		if l.PerRequest.Count < 12 || l.PerRequest.Count > 17 {
			t.Errorf("%s: %d per-request connections in %v, want ~15 (one per 4 s)", l.Link, l.PerRequest.Count, d)
		}
		if l.HandshakeRTT.P50 <= 0 || l.HandshakeRTT.P50 > int64(5*time.Millisecond) {
			t.Errorf("%s: loopback handshake RTT p50 %v", l.Link, time.Duration(l.HandshakeRTT.P50))
		}
		t.Logf("%s: opened %d (%.1f/min), ftrace %d; handshake p50 %v; per-request p50 %v; srtt p50 %v (%d kept-alive)",
			l.Link, l.Opened, l.OpenedPerMinute, fcount, time.Duration(l.HandshakeRTT.P50), time.Duration(l.PerRequest.P50), time.Duration(l.SRTT.P50), l.KeptAlive)
	}
	if seen != 6 {
		t.Errorf("%d member→peer links with new connections, want 6 (3 members × 2 peers)", seen)
	}

	// 3. The metric, per To, matched to peers through the member list.
	if rep.MetricsError != "" || rep.MembersError != "" {
		t.Errorf("metrics error %q, members error %q", rep.MetricsError, rep.MembersError)
	}
	if rep.MemberPID != m1.PID {
		t.Errorf("member pid for %s: %d, want %d", rep.MetricsURL, rep.MemberPID, m1.PID)
	}
	if len(rep.Metric) != 2 {
		t.Fatalf("%d metric series, want 2 (m1's two peers): %+v", len(rep.Metric), rep.Metric)
	}
	for _, cmp := range rep.Metric {
		peer := byIP[cmp.Peer]
		if peer == nil || strconv.FormatUint(peer.ID, 16) != cmp.Key.To {
			t.Errorf("To=%s matched to peer %v", cmp.Key.To, cmp.Peer)
		}
		if cmp.Observations < 2 || cmp.Observations > 6 {
			t.Errorf("To=%s: %v observations in %v, want 4 (2 probers × 1 per 30 s)", cmp.Key.To, cmp.Observations, d)
		}
		if cmp.Inflation < 3 || cmp.ModelInflation < 3 || math.IsNaN(cmp.Inflation) {
			t.Errorf("To=%s: inflation %.1f, model %.1f: on loopback the metric reads 0.x-x ms against a ~30 µs RTT", cmp.Key.To, cmp.Inflation, cmp.ModelInflation)
		}
		if cmp.QuantileError != "" {
			t.Errorf("To=%s: %s", cmp.Key.To, cmp.QuantileError)
		}
		// 4 observations of sub-millisecond values spread over several
		// buckets: the verdict may be "too few to tell", but never that
		// the model fails.
		if !cmp.Explained && !cmp.Inconclusive {
			t.Errorf("To=%s: the model does not explain the metric: %s", cmp.Key.To, cmp.Verdict)
		}
		// Inconclusive has exactly the product's two reasons (etcdmetric.Compare):
		// closer to the model than the noise floor, or than NoiseSE standard
		// errors. (This check asked for the second alone, and would have
		// failed a verdict the product gives by the first.)
		if diff := math.Abs(cmp.Mean - cmp.Prediction.Mean); cmp.Inconclusive && diff >= etcdmetric.NoiseFloorSeconds && diff > etcdmetric.NoiseSE*cmp.StandardErrorSeconds {
			t.Errorf("To=%s: inconclusive, but the mean is %v from the model (floor %v s) with a standard error of %v", cmp.Key.To, cmp.Mean-cmp.Prediction.Mean, etcdmetric.NoiseFloorSeconds, cmp.StandardErrorSeconds)
		}
		t.Logf("To=%s (%s): metric mean %.3f ms p50 %.3f ms p99 %.3f ms, RTT %v, inflation %.0fx; model %.3f ms: %s",
			cmp.Key.To, cmp.Member, cmp.Mean*1e3, cmp.P50*1e3, cmp.P99*1e3, cmp.Input.RTT, cmp.Inflation, cmp.Prediction.Mean*1e3, cmp.Verdict)
	}
	if len(rep.Members) != 3 {
		t.Errorf("%d members listed", len(rep.Members))
	}
	if len(rep.KeptAliveProbe) != 2 || len(rep.KeptAliveProbeErrors) != 0 {
		t.Errorf("kept-alive probes %v, errors %v: want m1's two peers timed", rep.KeptAliveProbe, rep.KeptAliveProbeErrors)
	}
	// 4. The recording carries what etcd measured, as the report had it,
	// and the HTML page draws it per peer.
	rf, err := os.Open(recording)
	if err != nil {
		t.Fatal(err)
	}
	recEvs, recMetric, err := etcdmetric.ReadRecording(rf)
	rf.Close()
	if err != nil || recMetric == nil || len(recEvs) == 0 {
		t.Fatalf("recording: %d events, metric record %v, %v", len(recEvs), recMetric != nil, err)
	}
	if len(recMetric.Comparisons) != len(rep.Metric) {
		t.Errorf("recording has %d metric series, the report %d", len(recMetric.Comparisons), len(rep.Metric))
	}
	for i, cmp := range recMetric.Comparisons {
		if i < len(rep.Metric) && (cmp.Key != rep.Metric[i].Key || cmp.Mean != rep.Metric[i].Mean || cmp.Peer != rep.Metric[i].Peer) {
			t.Errorf("recorded series %d %+v differs from the report's %+v", i, cmp.Key, rep.Metric[i].Key)
		}
	}
	page := filepath.Join(dir, "page.html")
	fsyncRec := filepath.Join(dir, "fsync.jsonl")
	writeFsyncRecording(t, fsyncRec, 10, 1_000_000)
	if rc := run([]string{"report", "--html", page, "--peers", recording, fsyncRec}); rc != 0 {
		t.Fatalf("report --html with the recording: exit %d", rc)
	}
	html, _ := os.ReadFile(page)
	if n := strings.Count(string(html), "etcd metric mean (measured by etcd): "); n < len(rep.Metric) {
		t.Errorf("page draws %d bars of etcd's measured metric, want one per matched link (>= %d)", n, len(rep.Metric))
	}

	// 5. The link to notMember, and it alone, is marked as no member's.
	if len(rep.NotMemberLinks) != 1 || rep.NotMemberLinks[0].To != notMember.Addr() || rep.NotMemberLinks[0].Direction != event.PeerActive {
		t.Errorf("links_not_member %+v; want the one active link to %s", rep.NotMemberLinks, notMember.Addr())
	}

	// The same report as a user reads it.
	var table bytes.Buffer
	render.Peers(&table, &rep)
	t.Logf("table output:\n%s", table.String())
	for _, want := range []string{"HANDSHAKE RTT", "INFLATION", "MODEL MEAN", m1.Name,
		"→ " + notMember.Addr().String() + " (active) (not a member)", "1 link marked (not a member) to no member's peer address"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// notMember is the listener dialNotMember connects to: the traced peer
// port on a loopback address that no member of etcdtest's clusters has
// (their members are on 127.0.0.1-3).
var notMember = netip.MustParseAddrPort("127.0.32.77:2380")

// dialNotMember makes one connection to a listener on notMember: a byte
// each way, then closed. It takes milliseconds (logged), and fails the
// test if the address is taken.
func dialNotMember(t *testing.T) {
	t.Helper()
	start := time.Now()
	ln, err := net.Listen("tcp", notMember.String())
	if err != nil {
		t.Fatalf("listening on %s, no member's address: %v", notMember, err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		if _, err := c.Read(b); err == nil {
			c.Write(b)
		}
	}()
	// A loopback exchange: 0.4-0.7 ms in 4 runs (2026-12-07); the 5 s
	// dial and read deadlines only keep a broken listener from hanging
	// the test.
	c, err := net.DialTimeout("tcp", notMember.String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", notMember, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b := []byte{1}
	if _, err := c.Write(b); err != nil {
		t.Fatalf("writing to %s: %v", notMember, err)
	}
	if _, err := c.Read(b); err != nil {
		t.Fatalf("reading from %s: %v", notMember, err)
	}
	t.Logf("one connection to %s (no member's address) in %v", notMember, time.Since(start))
}

func waitFile(t *testing.T, path string, done chan int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case rc := <-done:
			t.Fatalf("etcdscope peers exited %d before attaching", rc)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("ready file never appeared")
}

type ftraceOpen struct{ local, remote netip.AddrPort }

type ftrace struct{ dir string }

// startFtrace enables sock:inet_sock_set_state with filter in a tracefs
// instance of its own, so it neither sees nor disturbs other users.
func startFtrace(t *testing.T, filter string) *ftrace {
	t.Helper()
	undo, err := host.Tracefs()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	root := "/sys/kernel/tracing"
	if _, err := os.Stat(root + "/instances"); err != nil {
		root = "/sys/kernel/debug/tracing"
	}
	dir := filepath.Join(root, "instances", fmt.Sprintf("etcdscope-peers-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	ev := filepath.Join(dir, "events/sock/inet_sock_set_state")
	for _, w := range [][2]string{{ev + "/filter", filter}, {ev + "/enable", "1"}} {
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			t.Fatalf("writing %s: %v", w[0], err)
		}
	}
	return &ftrace{dir: dir}
}

var ftraceLine = regexp.MustCompile(`sport=(\d+) dport=(\d+) saddr=(\S+) daddr=(\S+)`)

func (f *ftrace) stop(t *testing.T) []ftraceOpen {
	t.Helper()
	os.WriteFile(filepath.Join(f.dir, "events/sock/inet_sock_set_state/enable"), []byte("0"), 0)
	fh, err := os.Open(filepath.Join(f.dir, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []ftraceOpen
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		m := ftraceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		sp, _ := strconv.Atoi(m[1])
		dp, _ := strconv.Atoi(m[2])
		out = append(out, ftraceOpen{
			local:  netip.AddrPortFrom(netip.MustParseAddr(m[3]), uint16(sp)),
			remote: netip.AddrPortFrom(netip.MustParseAddr(m[4]), uint16(dp)),
		})
	}
	if strings.Contains(readFile(filepath.Join(f.dir, "per_cpu/cpu0/stats")), "overrun: 0") == false {
		t.Logf("ftrace stats: %s", readFile(filepath.Join(f.dir, "per_cpu/cpu0/stats")))
	}
	return out
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// activeOpens reads Tcp ActiveOpens from /proc/net/snmp (host-wide: other
// connections only add to it, so it bounds the :2380 count from above).
func activeOpens(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "Tcp: ") {
			continue
		}
		f := strings.Fields(line)[1:]
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "ActiveOpens" {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatal("no Tcp ActiveOpens in /proc/net/snmp")
	return 0
}
