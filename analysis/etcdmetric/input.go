package etcdmetric

import (
	"math"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
)

// InputFromLink builds the model's input from the kernel's statistics of
// the link from the scraped member to the peer (peers.Analyze), traced
// over window: RTT = handshake RTT p50 (min RTT p50 when no connection was
// opened), ReusedProbe = srtt p50 of its kept-alive connections,
// NewConnProbe = mean time in use of its per-request connections (a mean,
// because the EWMA averages), NewConnPerMinute = their count per minute.
func InputFromLink(l peers.LinkStats, window time.Duration) ModelInput {
	in := ModelInput{
		RTT:         time.Duration(l.HandshakeRTT.P50),
		ReusedProbe: time.Duration(l.SRTT.P50),
	}
	if in.RTT == 0 {
		in.RTT = time.Duration(l.MinRTT.P50)
	}
	in.FailedConnects = l.Failed
	in.PeerDown = l.Down()
	if l.PerRequest.Count > 0 {
		in.NewConnProbe = time.Duration(l.PerRequest.Mean())
		if window > 0 {
			in.NewConnPerMinute = float64(l.PerRequest.Count) / window.Minutes()
		}
	}
	return in
}

// WithUptime sets the window's uptime from the scraped process start.
func (in ModelInput) WithUptime(processStart, scrapeStart, scrapeEnd time.Time) ModelInput {
	if processStart.IsZero() {
		return in
	}
	in.UptimeStart = scrapeStart.Sub(processStart)
	in.UptimeEnd = scrapeEnd.Sub(processStart)
	return in
}

// WarmupNegligible is the share of its starting 0 that etcd's EWMA may
// still hold at the window's start for the window to count as steady:
// past it the warm-up changes the mean by less than the buckets' own
// resolution.
const WarmupNegligible = 0.05

// WarmupLeft is the weight etcd's EWMA (α from 0, one probe per
// ProbeInterval) still gives its starting 0 at the window's start:
// (1−α)^n after the n probes made by then; 0 in steady state (UptimeEnd
// 0, no process start known).
func (in ModelInput) WarmupLeft() float64 {
	if in.UptimeEnd <= 0 {
		return 0
	}
	n := float64(max(in.UptimeStart-in.ProberStart, 0) / ProbeInterval)
	return math.Pow(1-Alpha, n)
}

// WarmingUp: the EWMA had not converged when the window began
// (WarmupLeft above WarmupNegligible), so the window's observations read
// below the steady mean.
func (in ModelInput) WarmingUp() bool { return in.WarmupLeft() > WarmupNegligible }
