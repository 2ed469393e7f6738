package etcdmetric

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
)

// series is a delta of n observations all in the bucket of v seconds.
func series(n, v float64) Series {
	s := Series{Key: Key{To: "abc"}, HasCount: true, HasSum: true, Count: n, Sum: n * v}
	for _, b := range etcdBounds() {
		c := 0.0
		if v <= b {
			c = n
		}
		s.Buckets = append(s.Buckets, Bucket{UpperBound: b, Count: c})
	}
	return s
}

// TestPeerDownVerdict: a link whose connects all failed is "peer down /
// unreachable", with no RTT, no model and no inflation (issue 14: the
// table showed the model 4292 s and inflation 0.0x for a dead peer).
func TestPeerDownVerdict(t *testing.T) {
	l := peers.LinkStats{Failed: 1811, Closed: 1811}
	in := InputFromLink(l, time.Minute)
	if !in.PeerDown || in.FailedConnects != 1811 || in.RTT != 0 {
		t.Fatalf("input %+v, want peer down, 1811 failed, no RTT", in)
	}
	c := Compare(series(2, 0), in)
	if !strings.HasPrefix(c.Verdict, "peer down / unreachable: 1811 connects failed") {
		t.Errorf("verdict %q", c.Verdict)
	}
	if c.Inflation != 0 || c.ModelInflation != 0 || c.Explained || c.Prediction.Mean > 1 {
		t.Errorf("a dead peer got a model: inflation %v model inflation %v explained %v model mean %v", c.Inflation, c.ModelInflation, c.Explained, c.Prediction.Mean)
	}
}

// TestProbeErrorShownWithTheEstimate: when etcdscope's kept-alive probe
// failed, the verdict says so where it falls back to the kernel srtt
// (issue 14: "Get .../raft/probing: EOF" reconnecting every 4 s, and the
// table said only "estimated from kernel srtt").
func TestProbeErrorShownWithTheEstimate(t *testing.T) {
	in := ModelInput{RTT: 50 * time.Millisecond, ReusedProbe: 52 * time.Millisecond, NewConnProbe: 101 * time.Millisecond,
		NewConnPerMinute: 15, ProbeError: "Get \"http://10.77.3.1:2380/raft/probing\": EOF"}
	c := Compare(series(4, 0.08), in)
	if !strings.Contains(c.Verdict, "estimated from kernel srtt: etcdscope's kept-alive probe failed: Get \"http://10.77.3.1:2380/raft/probing\": EOF") {
		t.Errorf("verdict does not carry the probe error: %s", c.Verdict)
	}
	in.ProbeError, in.ReusedMeasured = "", true
	if c := Compare(series(4, 0.08), in); strings.Contains(c.Verdict, "probe failed") || !strings.Contains(c.Verdict, "timed by etcdscope's own kept-alive probe") {
		t.Errorf("measured probe: %s", c.Verdict)
	}
}
