package render

import (
	"bytes"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// TestTableSaysPeerDown: the table names a dead peer and prints no
// sentinel for its RTT, model or inflation (issue 14: MIN RTT
// "1h11m34.967295s", model 4292 s, inflation 0.0x).
func TestTableSaysPeerDown(t *testing.T) {
	peer := netip.MustParseAddr("10.77.3.1")
	l := peers.LinkStats{Link: peers.Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: netip.MustParseAddr("10.77.1.1"), To: peer, Peer: peer},
		Failed: 1811, Closed: 1811, ClosedPerMinute: 1811}
	in := etcdmetric.InputFromLink(l, time.Minute)
	cmp := etcdmetric.PeerComparison{Peer: peer, Member: "m3", Comparison: etcdmetric.Compare(etcdmetric.Series{Key: etcdmetric.Key{To: "abc"}}, in)}
	var out bytes.Buffer
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, Links: []peers.LinkStats{l}, MetricsURL: "http://10.77.1.1:2381/metrics", Metric: []etcdmetric.PeerComparison{cmp}})
	s := out.String()
	for _, want := range []string{"PEER DOWN / UNREACHABLE (1811 connects failed)", "peer down / unreachable"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range []string{"1h11m", "4292", "0.0x"} {
		if strings.Contains(s, bad) {
			t.Errorf("table shows the sentinel %q:\n%s", bad, s)
		}
	}
}

// TestTableSaysOwnerLookupsDropped: dropped or late owner look-ups are
// said under the table (a link without a pid is then not "no owner"),
// and nothing is said when none was dropped.
func TestTableSaysOwnerLookupsDropped(t *testing.T) {
	var out bytes.Buffer
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, Owners: &etcdmetric.OwnerLookups{Resolved: 3, QueueDrops: 5, LearnedDrops: 1, LateOwnersMissed: 2}})
	if want := "socket owners: 8 look-ups dropped or too late (queue full 5, not handed over 1, connection folded first 2)"; !strings.Contains(out.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, Owners: &etcdmetric.OwnerLookups{Resolved: 3, Unowned: 9}})
	if strings.Contains(out.String(), "socket owners") {
		t.Errorf("owner line with nothing dropped:\n%s", out.String())
	}
}

// TestProbeErrorShownWithTheEstimate: when etcdscope's kept-alive probe
// failed, the model's lines say so where it falls back to the kernel srtt
// (issue 14: "Get .../raft/probing: EOF" reconnecting every 4 s, and the
// table said only "estimated from kernel srtt").
func TestProbeErrorShownWithTheEstimate(t *testing.T) {
	in := etcdmetric.ModelInput{RTT: 50 * time.Millisecond, ReusedProbe: 52 * time.Millisecond, NewConnProbe: 101 * time.Millisecond,
		NewConnPerMinute: 15, ProbeError: "Get \"http://10.77.3.1:2380/raft/probing\": EOF"}
	s := metricSeries("abc", 0.08, 0.08, 0.08, 0.08)
	m := strings.Join(ComparisonModel(etcdmetric.Compare(s, in)), "\n")
	if !strings.Contains(m, "estimated from kernel srtt") || !strings.Contains(m, "\netcdscope's kept-alive probe failed: Get \"http://10.77.3.1:2380/raft/probing\": EOF") {
		t.Errorf("model lines do not carry the probe error:\n%s", m)
	}
	in.ProbeError, in.ReusedMeasured = "", true
	if m := strings.Join(ComparisonModel(etcdmetric.Compare(s, in)), "\n"); strings.Contains(m, "probe failed") || !strings.Contains(m, "(52.00ms, etcdscope's kept-alive probe)") {
		t.Errorf("measured probe:\n%s", m)
	}
}

// TestTableOneMember: a one-member cluster says it has no peer traffic,
// and an empty metric comparison prints no table header without rows (a
// fresh user read the member's own peer URL as "a peer").
func TestTableOneMember(t *testing.T) {
	var out bytes.Buffer
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, MetricsURL: "http://127.0.0.1:2379/metrics",
		Members: []etcdmetric.Member{{ID: 0xab, Name: "w1", PeerIPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Leader: true}}})
	s := out.String()
	for _, want := range []string{"member ab w1 peer URLs on [127.0.0.1] (leader)", "a one-member cluster: no peer traffic on port 2380 to trace", "no etcd_network_peer_round_trip_time_seconds series"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "PROBER") {
		t.Errorf("a metric table header without rows:\n%s", s)
	}
}

// TestTableStoppedPeer: etcd's metric with no observation in the window is
// "n/a" in the VERDICT column, not "not explained" (nothing was compared),
// and a peer whose connection setup p99 is over the election timeout has
// a verdict line of its own, first, naming it and the number. The link's
// numbers are testdata/peers-stopped's m2 → m3 (m3 under SIGSTOP for 10 s).
func TestTableStoppedPeer(t *testing.T) {
	peer := netip.MustParseAddr("127.0.6.3")
	l := peers.LinkStats{Link: peers.Link{Direction: event.PeerActive, FromPID: 14074, FromComm: "etcd", From: netip.MustParseAddr("127.0.0.1"), To: peer, Peer: peer},
		Opened: 6, Closed: 6, HandshakeRTT: stats.Summary{Count: 6, P50: 16e3, P99: 69e3},
		Setup: stats.Summary{Count: 6, P50: 1_163_000, P99: 7_243_350_019}, PerRequest: stats.Summary{Count: 6, P50: 1_345_000, P99: 7_243_529_411}}
	members := []etcdmetric.Member{{ID: 0x614e615a1e5c79e0, Name: "m3", PeerIPs: []netip.Addr{peer}}}
	cmp := etcdmetric.PeerComparison{Peer: peer, Member: "m3", Comparison: etcdmetric.Compare(etcdmetric.Series{Key: etcdmetric.Key{To: "614e615a1e5c79e0"}}, etcdmetric.InputFromLink(l, 25*time.Second))}
	if cmp.Kind != etcdmetric.CompareNoObservations {
		t.Fatalf("comparison kind %v, want no observations", cmp.Kind)
	}
	rep := &etcdmetric.PeersReport{Port: 24380, Links: []peers.LinkStats{l}, Members: members, MetricsURL: "http://127.0.6.1:24381/metrics", Metric: []etcdmetric.PeerComparison{cmp},
		Slow: etcdmetric.SlowPeers([]peers.LinkStats{l}, members, etcdmetric.DefaultTimeouts)}
	var out bytes.Buffer
	Peers(&out, rep)
	lines := strings.Split(out.String(), "\n")
	want := "verdict: m3 (127.0.6.3): connection setup p99 7.243s from etcd[14074], over the election timeout (1s, etcd's default)"
	if !strings.HasPrefix(lines[1], want) {
		t.Errorf("second line %q, want it to start %q:\n%s", lines[1], want, out.String())
	}
	for _, line := range lines {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "614e615a1e5c79e0" {
			if f[len(f)-1] != "n/a" || strings.Contains(line, "not explained") {
				t.Errorf("metric row %q: want VERDICT n/a", line)
			}
		}
	}
}

// TestTableNotAMember: with a member list, a link whose accepting end is
// no member's peer address (another cluster on the same port of this host,
// as a new user's walk saw) is marked and counted; without a member list,
// or with a member whose peer URLs gave no address, nothing is marked.
func TestTableNotAMember(t *testing.T) {
	m1, m2, other := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.9.9.9")
	link := func(to netip.Addr) peers.LinkStats {
		return peers.LinkStats{Link: peers.Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: m1, To: to, Peer: to}, Opened: 1}
	}
	links := []peers.LinkStats{link(m2), link(other)}
	members := []etcdmetric.Member{{ID: 0xa1, Name: "m1", PeerIPs: []netip.Addr{m1}}, {ID: 0xa2, Name: "m2", PeerIPs: []netip.Addr{m2}, Leader: true}}
	table := func(ms []etcdmetric.Member) string {
		var out bytes.Buffer
		rep := etcdmetric.PeersReport{Port: 2380, Links: links, Members: ms}
		rep.FillNotMember()
		Peers(&out, &rep)
		return out.String()
	}
	s := table(members)
	if n := strings.Count(s, "(not a member)"); n != 2 || !strings.Contains(s, "10.9.9.9 (active) (not a member)") ||
		!strings.Contains(s, "1 link marked (not a member) to no member's peer address: another cluster, or another process, on port 2380") {
		t.Errorf("want the link to 10.9.9.9 marked and counted, %d marks:\n%s", n, s)
	}
	unresolved := []etcdmetric.Member{members[0], {ID: 0xa2, Name: "m2"}}
	for name, ms := range map[string][]etcdmetric.Member{"no member list": nil, "a member without a peer address": unresolved} {
		if s := table(ms); strings.Contains(s, "not a member") {
			t.Errorf("%s: a link marked:\n%s", name, s)
		}
	}
}

// TestPeerLinkLabelProcesses: a link of every process of one name that
// is not etcd (peers.Link.FromAnyPID) says the name and how many
// processes it holds, "at least" at peers.MaxProcesses; a pid-keyed link
// and the slow-peer verdict's local end are said as before.
func TestPeerLinkLabelProcesses(t *testing.T) {
	lo, to := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	curl := peers.Link{Direction: event.PeerActive, FromAnyPID: true, FromComm: "curl", From: lo, To: to, Peer: to}
	for _, c := range []struct {
		l    peers.LinkStats
		want string
	}{
		{peers.LinkStats{Link: curl, Processes: 19}, "curl[19 pids] 127.0.0.1 → 127.0.0.2 (active)"},
		{peers.LinkStats{Link: curl, Processes: 1}, "curl[1 pid] 127.0.0.1 → 127.0.0.2 (active)"},
		{peers.LinkStats{Link: curl, Processes: peers.MaxProcesses}, "curl[1024+ pids] 127.0.0.1 → 127.0.0.2 (active)"},
		{peers.LinkStats{Link: peers.Link{Direction: event.PeerPassive, FromPID: 42, From: lo, To: to, ToPID: 7, Peer: lo}}, "[42] 127.0.0.1 → [7] 127.0.0.2 (passive)"},
		{peers.LinkStats{Link: peers.Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: lo, To: to, Peer: to}}, "etcd[7] 127.0.0.1 → 127.0.0.2 (active)"},
	} {
		if got := PeerLinkLabel(&c.l); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
		if got := c.l.Link.String(); c.l.Processes == 0 && got != c.want {
			t.Errorf("Link.String %q, want %q", got, c.want)
		}
	}
	if got := PeerLinkFrom(curl); got != "curl[*]" {
		t.Errorf("PeerLinkFrom %q, want curl[*]", got)
	}
}

// TestTableSaysWhyNoSample: a column with no sample says why in words
// (the new-user walk read "-/- (0)" on a link of probes only as a fault):
// a link with only streams opened before tracing has none opened, one
// of probes only none kept alive.
func TestTableSaysWhyNoSample(t *testing.T) {
	peer := netip.MustParseAddr("10.0.0.2")
	link := peers.Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: netip.MustParseAddr("10.0.0.1"), To: peer, Peer: peer}
	streams := peers.LinkStats{Link: link, KeptAlive: 2, SRTT: stats.Summary{Count: 2, P50: 30_000, Max: 90_000}}
	probes := peers.LinkStats{Link: link, Opened: 5, Closed: 5, HandshakeRTT: stats.Summary{Count: 5, P50: 40_000, P99: 60_000},
		PerRequest: stats.Summary{Count: 5, P50: 500_000, P99: 700_000}}
	probes.Link.FromPID = 8
	var out bytes.Buffer
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, Links: []peers.LinkStats{streams, probes}})
	s := out.String()
	if strings.Contains(s, "(0)") {
		t.Errorf("table shows an empty summary as (0):\n%s", s)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`etcd\[7\] .*\(active\) .* none opened +30µs/90µs \(2\) .* none opened +none `),
		regexp.MustCompile(`etcd\[8\] .*\(active\) .* 40µs/60µs \(5\) +none kept alive .* none measured +500µs/700µs \(5\)`),
	} {
		if !want.MatchString(s) {
			t.Errorf("table lacks %v:\n%s", want, s)
		}
	}
}

// TestTableSaysWhyNoProcess: a row of a link this host opened that names
// no process says why in the row (peers.NoOwner): closed before its
// owner was found, or the owner not found; etcd's rows say nothing of it.
func TestTableSaysWhyNoProcess(t *testing.T) {
	lo, to := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	anon := peers.Link{Direction: event.PeerActive, From: lo, To: to, Peer: to}
	etcd := peers.Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: lo, To: to, Peer: to}
	var out bytes.Buffer
	Peers(&out, &etcdmetric.PeersReport{Port: 2380, Links: []peers.LinkStats{{Link: etcd, KeptAlive: 1}, {Link: anon, NoOwner: peers.NoOwnerClosed, KeptAlive: 1}}})
	want := []string{"etcd[7] 127.0.0.1 → 127.0.0.2 (active) ", "127.0.0.1 → 127.0.0.2 (active; no process: closed before its owner was found) "}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, out.String())
		}
	}
	if got, want := PeerLinkLabel(&peers.LinkStats{Link: anon, NoOwner: peers.NoOwnerNotFound}), "127.0.0.1 → 127.0.0.2 (active; no process: its owner was not found)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if strings.Count(out.String(), "no process") != 1 {
		t.Errorf("a reason on a row that names its process:\n%s", out.String())
	}
}
