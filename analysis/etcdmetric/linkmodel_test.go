package etcdmetric

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// TestLinkModels: a comparison is put on the link whose local end is the
// scraped member (FromPID) and whose remote end is its Peer, never on
// another member's link to the same peer; without FromPID only on the one
// active link to its Peer. A compared link's model is the comparison's
// prediction; the others' is Predict of their own numbers.
func TestLinkModels(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	b, c := netip.MustParseAddr("127.0.0.12"), netip.MustParseAddr("127.0.0.13")
	link := func(pid uint32, to netip.Addr) peers.LinkStats {
		return peers.LinkStats{Link: peers.Link{Direction: event.PeerActive, FromPID: pid, From: lo, To: to, Peer: to},
			HandshakeRTT: stats.Summary{Count: 10, P50: 20e3}, SRTT: stats.Summary{Count: 1, P50: 200e3},
			PerRequest: stats.Summary{Count: 10, Sum: 10 * 900e3}}
	}
	// a (pid 100) → b, a → c, b (pid 200) → c
	links := []peers.LinkStats{link(100, b), link(100, c), link(200, c)}
	cmp := func(from uint32, peer netip.Addr, model, mean float64) PeerComparison {
		return PeerComparison{Peer: peer, FromPID: from, Comparison: Comparison{Observations: 4, Mean: mean,
			Prediction: Prediction{Mean: model, Observations: 4}}}
	}
	own := func(l peers.LinkStats) float64 { return Predict(InputFromLink(l, time.Minute)).Mean }
	for _, tc := range []struct {
		name      string
		cs        []PeerComparison
		model     []float64 // per link
		measured  []float64 // per link, NaN: none
		unmatched int
	}{
		{"scraped a", []PeerComparison{cmp(100, b, 710e-6, 655e-6), cmp(100, c, 720e-6, 600e-6)},
			[]float64{710e-6, 720e-6, own(links[2])}, []float64{655e-6, 600e-6, math.NaN()}, 0},
		{"scraped b", []PeerComparison{cmp(200, c, 500e-6, 400e-6)},
			[]float64{own(links[0]), own(links[1]), 500e-6}, []float64{math.NaN(), math.NaN(), 400e-6}, 0},
		{"no pid, one link to b", []PeerComparison{cmp(0, b, 710e-6, 655e-6)},
			[]float64{710e-6, own(links[1]), own(links[2])}, []float64{655e-6, math.NaN(), math.NaN()}, 0},
		{"no pid, two links to c", []PeerComparison{cmp(0, c, 710e-6, 655e-6)},
			[]float64{own(links[0]), own(links[1]), own(links[2])}, []float64{math.NaN(), math.NaN(), math.NaN()}, 1},
		{"no peer", []PeerComparison{cmp(100, netip.Addr{}, 710e-6, 655e-6)},
			[]float64{own(links[0]), own(links[1]), own(links[2])}, []float64{math.NaN(), math.NaN(), math.NaN()}, 1},
		{"unknown pid", []PeerComparison{cmp(300, c, 710e-6, 655e-6)},
			[]float64{own(links[0]), own(links[1]), own(links[2])}, []float64{math.NaN(), math.NaN(), math.NaN()}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, unmatched := LinkModels(links, time.Minute, tc.cs)
			if unmatched != tc.unmatched {
				t.Errorf("unmatched %d, want %d", unmatched, tc.unmatched)
			}
			for i, m := range ms {
				if m.Model != tc.model[i] {
					t.Errorf("link %s: model %g, want %g", m.Link.Link, m.Model, tc.model[i])
				}
				if w := tc.measured[i]; !(m.Measured == w || math.IsNaN(w) && math.IsNaN(m.Measured)) {
					t.Errorf("link %s: measured %g, want %g", m.Link.Link, m.Measured, w)
				}
				if m.Compared != !math.IsNaN(tc.measured[i]) {
					t.Errorf("link %s: compared %v", m.Link.Link, m.Compared)
				}
			}
		})
	}
}
