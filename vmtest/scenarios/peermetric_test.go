package scenarios

import (
	"strings"
	"testing"
	"time"
)

// run17 is the stretched measurement run 17 (docs/scenarios.md): etcd's
// peer RTT metric on m1 over the 64 s window, the per-request connection
// lifetimes etcdscope peers traced toward each member, the fastest connect.
var run17 = PeerMetric{
	FarMean: 608600 * time.Microsecond, NearMean: 488000 * time.Microsecond, FarObs: 4, NearObs: 4,
	FarDial: 525776 * time.Microsecond, NearDial: 365360 * time.Microsecond, RTT: 64700 * time.Microsecond,
}

// TestPeerMetricNetShare: the metric's far − near less the answer offset
// the wire measured is judged in 1.0..2.0 × RTT; a metric that does not
// carry the network's 1.5 RTT beyond that offset fails, however large the
// near member's answer time (the old check's reason to show it as info).
func TestPeerMetricNetShare(t *testing.T) {
	rtt := run17.RTT
	for _, c := range []struct {
		name       string
		p          PeerMetric
		pass, info bool
	}{
		// offset 160.4 - 129.4 = 31.0 ms; net 120.6 - 31.0 = 89.6 ms = 1.38 RTT
		{"run 17", run17, true, false},
		{"the model's own: dial 2 RTT more, far 1.5 RTT more", PeerMetric{FarMean: 400*time.Millisecond + 3*rtt/2, NearMean: 400 * time.Millisecond,
			FarDial: 300*time.Millisecond + 2*rtt, NearDial: 300 * time.Millisecond, RTT: rtt, FarObs: 4, NearObs: 4}, true, false},
		{"metric carries only the answer offset, no network", func() PeerMetric {
			p := run17
			p.FarMean = p.NearMean + p.AnswerOffset()
			return p
		}(), false, false},
		{"metric carries the kept-alive RTT only (0.5 x RTT: two probers, one series)", func() PeerMetric {
			p := run17
			p.FarMean = p.NearMean + p.AnswerOffset() + rtt/2
			return p
		}(), false, false},
		{"metric carries 3 RTT", func() PeerMetric {
			p := run17
			p.FarMean = p.NearMean + p.AnswerOffset() + 3*rtt
			return p
		}(), false, false},
		{"no per-request connection traced toward the near member", func() PeerMetric {
			p := run17
			p.NearDial = 0
			return p
		}(), false, true},
		{"three observations toward the far member", func() PeerMetric {
			p := run17
			p.FarObs = 3
			return p
		}(), false, true},
	} {
		got := c.p.Check()
		if got.Info != c.info || (!c.info && got.Pass != c.pass) || !got.Timing {
			t.Errorf("%s: %+v, want pass %v info %v timing", c.name, got, c.pass, c.info)
		}
	}
	if got, want := run17.NetShare(), 89600*time.Microsecond; (got - want).Abs() > 100*time.Microsecond {
		t.Errorf("run 17 net share %v, want %v", got, want)
	}
	if g := run17.Check().Got; !strings.Contains(g, "offset 31.0ms") || !strings.Contains(g, "1.38 x 64.7ms") {
		t.Errorf("run 17 check reads %q", g)
	}
}

// TestMetricVerdictCheck: etcdscope's verdict toward the far member passes
// when it found m1's etcd and called the metric explained or inconclusive;
// "member pid 0" (issue 14's defect) or "not explained" fails.
func TestMetricVerdictCheck(t *testing.T) {
	for _, c := range []struct {
		pid                     int
		explained, inconclusive bool
		pass                    bool
	}{
		{162, true, false, true},
		{162, false, true, true},
		{162, false, false, false},
		{0, true, false, false},
	} {
		got := MetricVerdictCheck("etcdscope peers: metric check toward m3", "v", c.pid, c.explained, c.inconclusive)
		if got.Pass != c.pass || got.Info || !got.Timing {
			t.Errorf("pid %d explained %v inconclusive %v: %+v, want pass %v", c.pid, c.explained, c.inconclusive, got, c.pass)
		}
	}
}

// TestShownInCI: in make vmtest a judged far − near check is shown, not
// judged, and says where it is judged; under make scenario(s), and for a
// check already shown for its own reason, nothing changes.
func TestShownInCI(t *testing.T) {
	judged := Check{Name: "far-near", Got: "2.14x", Pass: false, Timing: true}
	if c := ShownInCI(judged, true); !c.Info || !strings.Contains(c.Name, "judged by make scenario(s)") {
		t.Errorf("CI: %+v", c)
	}
	if c := ShownInCI(judged, false); c.Info || c.Name != judged.Name {
		t.Errorf("make scenario: %+v", c)
	}
	info := Check{Name: "far-near: too few observations", Info: true}
	if c := ShownInCI(info, true); c.Name != info.Name {
		t.Errorf("already shown: %+v", c)
	}
}
