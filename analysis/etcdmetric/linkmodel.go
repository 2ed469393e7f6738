package etcdmetric

import (
	"math"
	"net/netip"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// LinkModel is, for one traced link, the mean etcd's peer RTT metric
// should read under the model and, when etcd's own metric was scraped
// for it, what it measured. The live table (render.Peers, per
// comparison) and the HTML page (per link) read these same numbers.
type LinkModel struct {
	Link peers.LinkStats
	// Model: the mean the model predicts, seconds. On a link with
	// comparisons (Compared) it is theirs, Prediction.Mean, the MODEL MEAN
	// the live run printed (the scrape window, etcdscope's kept-alive
	// probe, the EWMA replayed from the traced dials); on any other link,
	// Predict of the link's own traced numbers over the recording's
	// window (InputFromLink).
	Model    float64
	Compared bool
	// Measured: etcd's own metric mean over the comparisons' observations
	// (NaN when the link has no comparison or none observed); Series: how
	// many comparisons are the link's.
	Measured float64
	Series   int
}

// LinkModels returns the model of each link, in order. A comparison
// belongs to the link whose local end is the scraped member
// (PeerComparison.FromPID) and whose remote end is its Peer: the metric
// is scraped from one member and says nothing of the other members'
// links to the same peer. A comparison without FromPID (a recording made
// before it, or a member not found) belongs to the one active link to its
// Peer when there is exactly one, else to none. unmatched counts the
// comparisons put on no link.
//
// Several comparisons of one link (builds that label the series per
// prober) give it the mean of their models weighted by the observations
// each expects, and of their measured means weighted by the observations
// each had.
func LinkModels(links []peers.LinkStats, window time.Duration, cs []PeerComparison) (out []LinkModel, unmatched int) {
	out = make([]LinkModel, len(links))
	type end struct {
		pid  uint32
		peer netip.Addr
	}
	active := map[end]int{}          // local pid and peer → index
	toPeer := map[netip.Addr][]int{} // peer → indices of its active links
	for i, l := range links {
		out[i] = LinkModel{Link: l, Measured: math.NaN()}
		if l.Link.Direction != event.PeerActive {
			continue
		}
		p := l.Link.To.Unmap()
		active[end{l.Link.FromPID, p}] = i
		toPeer[p] = append(toPeer[p], i)
	}
	type sums struct{ model, modelW, meas, measW float64 }
	acc := make([]sums, len(links))
	for _, c := range cs {
		p := c.Peer.Unmap()
		i, ok := -1, false
		switch {
		case !c.Peer.IsValid():
		case c.FromPID != 0:
			i, ok = active[end{c.FromPID, p}]
		case len(toPeer[p]) == 1:
			i, ok = toPeer[p][0], true
		}
		if !ok {
			unmatched++
			continue
		}
		out[i].Series++
		if c.Prediction.Mean > 0 {
			w := math.Max(c.Prediction.Observations, 1)
			acc[i].model += c.Prediction.Mean * w
			acc[i].modelW += w
		}
		if c.Observations > 0 && !math.IsNaN(c.Mean) {
			acc[i].meas += c.Mean * c.Observations
			acc[i].measW += c.Observations
		}
	}
	for i := range out {
		if acc[i].modelW > 0 {
			out[i].Model, out[i].Compared = acc[i].model/acc[i].modelW, true
		} else {
			out[i].Model = Predict(InputFromLink(out[i].Link, window)).Mean
		}
		if acc[i].measW > 0 {
			out[i].Measured = acc[i].meas / acc[i].measW
		}
	}
	return out, unmatched
}
