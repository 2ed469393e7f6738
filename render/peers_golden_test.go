package render

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// metricSeries: a delta of etcd's peer RTT histogram holding vals, on
// etcd's bucket ladder (0.0001·2^i, +Inf).
func metricSeries(to string, vals ...float64) etcdmetric.Series {
	s := etcdmetric.Series{Key: etcdmetric.Key{To: to}, HasCount: true, HasSum: true, Count: float64(len(vals))}
	for i := 0; i <= 16; i++ {
		ub := math.Inf(1)
		if i < 16 {
			ub = etcdmetric.FirstBound * math.Pow(2, float64(i))
		}
		n := 0.0
		for _, v := range vals {
			if v <= ub {
				n++
			}
		}
		s.Buckets = append(s.Buckets, etcdmetric.Bucket{UpperBound: ub, Count: n})
	}
	for _, v := range vals {
		s.Sum += v
	}
	return s
}

// TestPeersVerdictGoldens pins the words of every verdict of
// etcdmetric.Compare, in the table and in the JSON (its "verdict"
// field), on the cases etcdmetric's tests decide.
func TestPeersVerdictGoldens(t *testing.T) {
	us := time.Microsecond
	ci := etcdmetric.ModelInput{RTT: 22 * us, ReusedProbe: 610 * us, NewConnProbe: 914 * us, NewConnPerMinute: 15, UptimeEnd: 61 * time.Second}
	floor := etcdmetric.ModelInput{RTT: 44 * us, ReusedProbe: 781 * us, NewConnProbe: 2330 * us, NewConnPerMinute: 15, UptimeEnd: 63 * time.Second}
	fast := etcdmetric.ModelInput{RTT: 50 * time.Millisecond, ReusedProbe: 140 * time.Millisecond, NewConnProbe: 52 * time.Millisecond, NewConnPerMinute: 15}
	dial := etcdmetric.ModelInput{RTT: 20 * time.Millisecond, ReusedProbe: 21 * time.Millisecond, ReusedMeasured: true, NewConnProbe: 61 * time.Millisecond, NewConnPerMinute: 15}
	failed := dial
	failed.ReusedMeasured, failed.ProbeError = false, "connection refused"
	vals := func(n int, v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	// p50 above the highest finite bucket; in the first bucket of a
	// ladder that starts high; without +Inf and _count
	beyond := etcdmetric.Series{Key: etcdmetric.Key{To: "beyond-ladder"}, HasCount: true, HasSum: true, Count: 8, Sum: 0.4,
		Buckets: []etcdmetric.Bucket{{UpperBound: 0.0001, Count: 0}, {UpperBound: 0.0002, Count: 1}, {UpperBound: math.Inf(1), Count: 8}}}
	firstShown := etcdmetric.Series{Key: etcdmetric.Key{To: "first-shown"}, HasCount: true, HasSum: true, Count: 8, Sum: 0.3,
		Buckets: []etcdmetric.Bucket{{UpperBound: 0.0512, Count: 8}, {UpperBound: 0.1024, Count: 8}, {UpperBound: math.Inf(1), Count: 8}}}
	noTotal := etcdmetric.Series{Key: etcdmetric.Key{To: "no-total"},
		Buckets: []etcdmetric.Bucket{{UpperBound: 0.0001, Count: 0}, {UpperBound: 0.0002, Count: 3}, {UpperBound: 0.0004, Count: 8}}}
	cases := []struct {
		s  etcdmetric.Series
		in etcdmetric.ModelInput
	}{
		{metricSeries("inconclusive-se", 0.00015, 0.00018, 0.0003, 0.0013), ci},
		{metricSeries("inconclusive-spread", 0.0001, 0.0001, 0.0001, 0.008), ci},
		{metricSeries("not-explained-more", 0.45, 0.48, 0.5, 0.52), ci},
		{metricSeries("inconclusive-floor", 0.0011, 0.0011, 0.0012, 0.0011), floor},
		{metricSeries("not-explained-far", 0.0028, 0.003, 0.0029, 0.0031), floor},
		{metricSeries("adds-nothing", vals(8, 0.1)...), fast},
		{metricSeries("explained", vals(8, 0.0405)...), dial},
		{metricSeries("probe-failed", vals(8, 0.0405)...), failed},
		{metricSeries("less", vals(40, 0.0001)...), dial},
		{metricSeries("no-kernel", vals(8, 0.01)...), etcdmetric.ModelInput{}},
		{etcdmetric.Series{Key: etcdmetric.Key{To: "no-observations"}}, dial},
		{beyond, dial},
		{firstShown, dial},
		{noTotal, dial},
		{metricSeries("down", vals(3, 0.002)...), etcdmetric.ModelInput{PeerDown: true, FailedConnects: 1811}},
		{metricSeries("down-empty"), etcdmetric.ModelInput{PeerDown: true, FailedConnects: 3}},
	}
	rep := etcdmetric.PeersReport{Port: 2380, WindowSeconds: 60, MetricsURL: "http://127.0.0.1:2381/metrics", MemberPID: 1}
	for _, c := range cases {
		rep.Metric = append(rep.Metric, etcdmetric.PeerComparison{Comparison: etcdmetric.Compare(c.s, c.in)})
	}
	var tb, jb bytes.Buffer
	Peers(&tb, &rep)
	renderGolden(t, "peers-verdicts.txt", tb.Bytes())
	if err := PeersJSON(&jb, &rep); err != nil {
		t.Fatal(err)
	}
	renderGolden(t, "peers-verdicts.json", jb.Bytes())
	var back etcdmetric.PeersReport
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil || len(back.Metric) != len(cases) {
		t.Fatalf("JSON read back: %v", err)
	}
	for _, m := range back.Metric {
		if m.Verdict == "" {
			t.Errorf("%s: no verdict in the JSON", m.Key.To)
		}
		// The verdict and its deciding number lead, the real RTT before
		// the metric's numbers (a new user's walk, 2026-12-07, read
		// "metric mean 651µs, model 528µs (1.23x): EXPLAINED..." with the
		// RTT last).
		if strings.Contains(m.Verdict, "metric mean") {
			word, _, _ := strings.Cut(m.Verdict, ":")
			word, _, _ = strings.Cut(word, " (")
			if word != "EXPLAINED" && word != "NOT EXPLAINED" && word != "INCONCLUSIVE" && !strings.HasPrefix(word, "peer down") {
				t.Errorf("%s: the verdict does not lead: %s", m.Key.To, m.Verdict)
			}
			if r, mm := strings.Index(m.Verdict, "; RTT "), strings.Index(m.Verdict, "metric mean"); !strings.HasPrefix(word, "peer down") && (r < 0 || r > mm) {
				t.Errorf("%s: the RTT does not come before the metric: %s", m.Key.To, m.Verdict)
			}
		}
		// A README walk read "EXPLAINED by new-connection probes" over
		// "dialling adds nothing": the two must not contradict.
		if strings.Contains(m.Model, "dialling adds nothing") && strings.Contains(m.Verdict, "new-connection probes") {
			t.Errorf("%s: the verdict names the dials the model says add nothing:\n%s\n%s", m.Key.To, m.Verdict, m.Model)
		}
	}
}

// TestPeersLeaderWarningGolden pins the words of the warning that the
// leader is the farthest member, in the table and the JSON.
func TestPeersLeaderWarningGolden(t *testing.T) {
	var ms []etcdmetric.Member
	for i, ip := range []string{"10.0.0.1", "10.0.0.2", "10.1.0.3"} {
		ms = append(ms, etcdmetric.Member{ID: uint64(0xa0 + i), Name: "m" + ip[len(ip)-1:], PeerIPs: []netip.Addr{netip.MustParseAddr(ip)}, Leader: ip == "10.1.0.3"})
	}
	var links []peers.LinkStats
	for _, l := range []struct {
		to  string
		rtt time.Duration
	}{{"10.0.0.2", 300 * time.Microsecond}, {"10.1.0.3", 50 * time.Millisecond}} {
		a := netip.MustParseAddr(l.to)
		links = append(links, peers.LinkStats{Link: peers.Link{Direction: event.PeerActive, FromPID: 42, From: netip.MustParseAddr("10.0.0.1"), To: a, Peer: a},
			HandshakeRTT: stats.Summary{Count: 10, P50: int64(l.rtt)}})
	}
	rep := etcdmetric.PeersReport{Port: 2380, WindowSeconds: 60, Members: ms}
	rep.FarLeader = etcdmetric.FindFarLeader(ms, links)
	var tb, jb bytes.Buffer
	Peers(&tb, &rep)
	if err := PeersJSON(&jb, &rep); err != nil {
		t.Fatal(err)
	}
	renderGolden(t, "peers-leader.txt", tb.Bytes())
	renderGolden(t, "peers-leader.json", jb.Bytes())
}
