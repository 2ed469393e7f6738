package etcdmetric

import (
	"errors"
	"math"
	"time"
)

// How etcd produces the metric (etcdserver/api/rafthttp/probing_status.go
// and github.com/xiang90/probing, as vendored by etcd 3.4 to 3.6):
//   - each peer has two probers sending GET /raft/probing every
//     ProbeInterval: ROUND_TRIPPER_SNAPSHOT over the pipeline transport,
//     which keeps its connection alive, and ROUND_TRIPPER_RAFT_MESSAGE over
//     the stream transport, which has read/write timeouts and so sets
//     MaxIdleConnsPerHost = -1: a new TCP (and TLS) connection per probe;
//   - a probe's time is time.Now() before RoundTrip to the decoded answer:
//     dial + TLS handshake + request + the peer's answer;
//   - each prober keeps srtt = (1-α)·srtt + α·rtt with α = 0.125 from 0
//     (a failed probe resets it to 0);
//   - every ObserveInterval (the first after FirstObservation) each prober
//     observes its srtt into the one series labelled To: upstream, both
//     probers share it, so its histogram has two humps.
const (
	ProbeInterval    = 4 * time.Second  // proberInterval = ConnReadTimeout (5 s) − 1 s
	ObserveInterval  = 30 * time.Second // statusMonitoringInterval
	FirstObservation = 5 * time.Second  // statusErrorInterval: first wait, and the wait while unhealthy
	Alpha            = 0.125            // probing.status α
	ProbersPerPeer   = 2
)

// ModelInput is what the kernel measured for one peer, plus the window.
type ModelInput struct {
	// RTT: the network round trip, the kernel's handshake RTT (p50).
	RTT time.Duration `json:"rtt_ns"`
	// ReusedProbe: what a probe on a kept-alive connection takes, one RTT
	// plus the peer's answer. Measured as the kernel srtt of the kept-alive
	// connections (on a request/response connection each RTT sample spans
	// request → response, so it includes the answer); never below RTT.
	ReusedProbe time.Duration `json:"reused_probe_ns"`
	// ReusedMeasured: ReusedProbe was timed by a real probe on a kept-alive
	// connection (from this host) rather than estimated from kernel srtt,
	// which misses the client's TLS and scheduling time.
	ReusedMeasured bool `json:"reused_measured"`
	// NewConnProbe: a probe on a new connection, measured as the mean time
	// in use of per-request connections (SYN_SENT → first FIN): TCP
	// handshake + TLS handshake (etcd re-reads its certificate files for
	// each) + request + answer.
	NewConnProbe time.Duration `json:"new_conn_probe_ns"`
	// NewConnPerMinute: per-request connections opened per minute to the
	// peer (one prober dialing every 4 s makes 15).
	NewConnPerMinute float64 `json:"new_conn_per_minute"`
	// UptimeStart, UptimeEnd: time since the probers started (process
	// start) at the two scrapes. Zero UptimeEnd means steady state: the
	// EWMA has converged.
	UptimeStart time.Duration `json:"uptime_start_ns"`
	UptimeEnd   time.Duration `json:"uptime_end_ns"`
	// Probers writing into the series: 2 upstream, 1 when the series is
	// labelled per prober (then NewConnPerMinute decides which one it is).
	Probers int `json:"probers"`
	// NewConnSeries: the per-request connections the kernel saw, by
	// uptime. When set (with UptimeEnd), the dialing prober's EWMA is
	// replayed from them probe by probe instead of assuming a constant
	// NewConnProbe; probe slots with no traced connection (before tracing
	// began) take NewConnProbe. Near start-up this matters: the first
	// probes of a starting cluster are slow and weigh heavily in an EWMA
	// that starts at 0.
	NewConnSeries []UptimeSample `json:"-"`
	// ProberStart: uptime at which etcd added the peer to its probers
	// (after bootstrap, ~1-2 s); 0 means: infer it from NewConnSeries.
	ProberStart time.Duration `json:"prober_start_ns,omitempty"`
	// FailedConnects: connects to the peer that never reached ESTABLISHED
	// in the window; PeerDown: all of them failed (peers.LinkStats.Down).
	FailedConnects int  `json:"failed_connects,omitempty"`
	PeerDown       bool `json:"peer_down,omitempty"`
	// ProbeError: why etcdscope's kept-alive probe could not time the
	// peer (ReusedMeasured false), e.g. "Get .../raft/probing: EOF".
	ProbeError string `json:"probe_error,omitempty"`
}

// UptimeSample is one probe duration at an uptime.
type UptimeSample struct {
	Uptime, Value time.Duration
}

// Prediction is what the metric should read under the model.
type Prediction struct {
	// NewConnProbers: how many of the series' probers dial per probe,
	// NewConnPerMinute / (1 min / ProbeInterval) rounded, at most Probers.
	NewConnProbers float64 `json:"new_conn_probers"`
	// Observations expected in the window (Probers per ObserveInterval).
	Observations float64 `json:"observations"`
	// Mean, P50, P99: of the observations in the window, seconds; P50/P99
	// interpolated in etcd's buckets as the metric's own are.
	Mean float64 `json:"mean_seconds"`
	P50  float64 `json:"p50_seconds"`
	P99  float64 `json:"p99_seconds"`
	// SteadyMean: Mean once the EWMA has converged.
	SteadyMean float64 `json:"steady_mean_seconds"`
	// NewConnShare: the part of SteadyMean that new-connection probes add
	// over a metric that only reused connections fed.
	NewConnShare float64 `json:"new_conn_share_seconds"`
}

// Predict simulates the probers over the window and returns what the
// histogram should show.
func Predict(in ModelInput) Prediction {
	probers := in.Probers
	if probers <= 0 {
		probers = ProbersPerPeer
	}
	reused := in.ReusedProbe
	if reused < in.RTT {
		reused = in.RTT
	}
	perProber := float64(time.Minute / ProbeInterval)
	// A prober dials for every probe or never: round the measured rate
	// (slots cut at the window's edges make it 14 or 16, not 15).
	f := math.Round(in.NewConnPerMinute / perProber)
	f = math.Max(math.Min(f, float64(probers)), 0)
	// weights of the two kinds of prober in the series
	wNew, wReused := f, float64(probers)-f
	rNew, rReused := in.NewConnProbe.Seconds(), reused.Seconds()

	p := Prediction{NewConnProbers: f}
	p.SteadyMean = (wNew*rNew + wReused*rReused) / float64(probers)
	// A new connection's probe can read faster than a kept-alive one (the
	// kept-alive time measured by an HTTP client, the new one by the
	// kernel): then new connections add nothing, not a negative time.
	p.NewConnShare = max(p.SteadyMean-rReused, 0)

	// Observation instants: FirstObservation after the probers start,
	// then every ObserveInterval; the EWMA has seen one probe per
	// ProbeInterval since the start, warming up as 1 − (1−α)^n from 0.
	start := in.ProberStart
	if start == 0 && len(in.NewConnSeries) > 0 {
		// Go tickers do not drift: probes sit on a 4 s grid from the
		// prober's start, which is within the first seconds of uptime.
		// The last sample is taken: early connections include bootstrap
		// requests that are not probes.
		start = in.NewConnSeries[len(in.NewConnSeries)-1].Uptime % ProbeInterval
	}
	var times []time.Duration
	if in.UptimeEnd > 0 {
		for t := start + FirstObservation; t <= in.UptimeEnd; t += ObserveInterval {
			if t > in.UptimeStart {
				times = append(times, t)
			}
		}
	} else {
		times = []time.Duration{-1} // steady state: factor 1
	}
	h := Series{HasCount: true, HasSum: true}
	bounds := etcdBounds()
	counts := make([]float64, len(bounds))
	add := func(v, w float64) {
		if w <= 0 {
			return
		}
		h.Count += w
		h.Sum += v * w
		for i, b := range bounds {
			if v <= b {
				counts[i] += w
			}
		}
	}
	for _, t := range times {
		newSRTT := rNew
		if t >= 0 {
			n := float64((t - start) / ProbeInterval)
			newSRTT = rNew * (1 - math.Pow(1-Alpha, n))
			if len(in.NewConnSeries) > 0 {
				newSRTT = replay(in.NewConnSeries, start, t, rNew)
			}
		}
		reusedSRTT := rReused
		if t >= 0 {
			reusedSRTT = warmReused(int((t-start)/ProbeInterval), rNew, rReused)
		}
		add(newSRTT, wNew)
		add(reusedSRTT, wReused)
	}
	for i, b := range bounds {
		h.Buckets = append(h.Buckets, Bucket{UpperBound: b, Count: counts[i]})
	}
	if in.UptimeEnd > 0 {
		p.Observations = h.Count
	}
	p.Mean, _ = h.Mean()
	p.P50, _ = h.Quantile(0.5)
	p.P99, _ = h.Quantile(0.99)
	return p
}

// warmReused is the kept-alive prober's srtt after n probes: its first
// probe has no connection yet and dials (costing a new-connection probe,
// rNew), the rest reuse it (rReused).
func warmReused(n int, rNew, rReused float64) float64 {
	srtt := 0.0
	for k := 1; k <= n; k++ {
		v := rReused
		if k == 1 && rNew > 0 {
			v = rNew
		}
		srtt = (1-Alpha)*srtt + Alpha*v
	}
	return srtt
}

// replay runs the prober EWMA over the probe slots up to uptime t (one per
// ProbeInterval from start) and returns srtt in seconds.
// A slot takes the traced connection that opened within half an interval
// of it, else fill.
func replay(series []UptimeSample, start, t time.Duration, fill float64) float64 {
	srtt := 0.0
	j := 0
	for slot := start + ProbeInterval; slot <= t; slot += ProbeInterval {
		v := fill
		for j < len(series) && series[j].Uptime < slot-ProbeInterval/2 {
			j++
		}
		if j < len(series) && series[j].Uptime <= slot+ProbeInterval/2 {
			v = series[j].Value.Seconds()
			j++
		}
		srtt = (1-Alpha)*srtt + Alpha*v
	}
	return srtt
}

// etcdBounds are etcd 3.4+'s bucket bounds, 0.0001·2^i for i < 16, +Inf.
func etcdBounds() []float64 {
	b := make([]float64, 0, 17)
	for i := 0; i < 16; i++ {
		b = append(b, FirstBound*math.Pow(2, float64(i)))
	}
	return append(b, math.Inf(1))
}

// Tolerance: the metric's mean is explained when it is within this factor
// of the prediction. Few observations of a heavy-tailed dial time go
// through an EWMA, so a tighter bound would flag noise; a slow DNS or TLS
// step (etcd #11781) adds far more.
const Tolerance = 1.5

// NoiseSE: a mean outside Tolerance but closer to the model than this
// many standard errors is noise, not evidence. With etcd's 4 observations
// a minute on loopback the metric's sub-millisecond values spread over
// several buckets: CI saw 1.54x the model from 4 observations whose
// standard error was half the mean.
const NoiseSE = 2

// NoiseFloorSeconds: a mean outside Tolerance but less than this far from
// the model is noise too, whatever the buckets say. The model's inputs and
// etcd's probes are timed by two probers at different moments, and on a
// busy node their answer times differ by scheduling noise of this size:
// CI's TestPeersEtcdPlain read 1.13 ms against a 723 µs model on loopback
// (1.56x) from 4 observations bunched in two buckets. What the NOT
// EXPLAINED verdict exists for, a DNS lookup or a slow TLS step before each
// dial (etcd #11781), adds tens of milliseconds to seconds.
const NoiseFloorSeconds = 0.001

// Comparison sets the metric beside the kernel's measurement for one
// series.
type Comparison struct {
	Key Key `json:"key"`
	// Observations, Mean, P50, P99: of the metric's delta between the two
	// scrapes, seconds. P50/P99 are absent (QuantileError says why) when
	// the ladder is incomplete.
	Observations  float64 `json:"observations"`
	Mean          float64 `json:"mean_seconds"`
	P50           float64 `json:"p50_seconds,omitempty"`
	P99           float64 `json:"p99_seconds,omitempty"`
	QuantileError string  `json:"quantile_error,omitempty"`
	// QuantileEstimate: when the p50 is a bound, not a value, the
	// estimate that says why (render adds its words to QuantileError).
	QuantileEstimate *Estimate  `json:"-"`
	Input            ModelInput `json:"input"`
	Prediction       Prediction `json:"prediction"`
	// Inflation: Mean / measured RTT; ModelInflation: Prediction.Mean /
	// measured RTT.
	Inflation      float64 `json:"inflation"`
	ModelInflation float64 `json:"model_inflation"`
	Explained      bool    `json:"explained"`
	// Inconclusive: the mean is outside Tolerance of the model but within
	// NoiseSE standard errors of it (StandardErrorSeconds), or less than
	// NoiseFloorSeconds from it: too few observations, or too small a
	// difference, to call it either way. Explained is false then.
	Inconclusive         bool    `json:"inconclusive,omitempty"`
	StandardErrorSeconds float64 `json:"standard_error_seconds,omitempty"`
	// Verdict: the verdict in words, empty here: render words it from
	// Kind and the numbers (render.PeersJSON, render.Peers).
	Verdict string `json:"verdict"`
	// Model: the model's terms behind Verdict in words, empty here:
	// render fills it (render.ComparisonModel).
	Model string `json:"model,omitempty"`
	// Kind: which verdict; Ratio: Mean / Prediction.Mean (set from
	// CompareExplained on); NewConnAddsNothing: a new connection's probe
	// is not slower than a kept-alive one, so dialling probers add
	// nothing to the steady-state mean. Not in the JSON, whose "verdict"
	// says them in words.
	Kind               CompareKind `json:"-"`
	Ratio              float64     `json:"-"`
	NewConnAddsNothing bool        `json:"-"`
}

// CompareKind is what Compare concluded of a series.
type CompareKind uint8

// The verdicts of Compare.
const (
	// CompareNone: not compared (the zero value).
	CompareNone CompareKind = iota
	// ComparePeerDown: every connect to the peer failed; the metric says
	// nothing about the network.
	ComparePeerDown
	// CompareNoObservations: none between the scrapes.
	CompareNoObservations
	// CompareNoModel: no kernel measurement for the peer.
	CompareNoModel
	// CompareExplained: the mean is within Tolerance of the model.
	CompareExplained
	// CompareInconclusiveFloor: outside Tolerance but less than
	// NoiseFloorSeconds from the model.
	CompareInconclusiveFloor
	// CompareInconclusiveSpread: outside Tolerance but within NoiseSE
	// standard errors of the model.
	CompareInconclusiveSpread
	// CompareAbove: above the model, beyond tolerance and noise.
	CompareAbove
	// CompareBelow: below the model, beyond tolerance.
	CompareBelow
)

// Compare checks a series' delta against the model.
func Compare(delta Series, in ModelInput) Comparison {
	c := Comparison{Key: delta.Key, Observations: delta.Count, Input: in}
	if in.Probers == 0 {
		c.Input.Probers = ProbersPerPeer
		if delta.Key.Prober != "" {
			c.Input.Probers = 1
		}
	}
	c.Prediction = Predict(c.Input)
	if q, err := delta.Quantile(0.5); err == nil {
		c.P50 = q
		c.P99, _ = delta.Quantile(0.99)
	} else {
		c.QuantileError = err.Error()
		if ee := (*EstimateError)(nil); errors.As(err, &ee) {
			c.QuantileEstimate = &ee.Estimate
		}
	}
	mean, ok := delta.Mean()
	if in.PeerDown {
		// No RTT exists to model: the sentinel of a socket without an RTT
		// sample (4294.967295 s) must not become one.
		c.Mean = mean
		c.Kind = ComparePeerDown
		return c
	}
	if !ok {
		c.Kind = CompareNoObservations
		return c
	}
	c.Mean = mean
	if rtt := in.RTT.Seconds(); rtt > 0 {
		c.Inflation = mean / rtt
		c.ModelInflation = c.Prediction.Mean / rtt
	}
	pm := c.Prediction.Mean
	if pm <= 0 {
		c.Kind = CompareNoModel
		return c
	}
	c.Ratio = mean / pm
	se, seOK := delta.StandardError()
	c.StandardErrorSeconds = se
	c.NewConnAddsNothing = c.Prediction.NewConnProbers > 0 && in.NewConnProbe < max(in.ReusedProbe, in.RTT)
	outside := c.Ratio > Tolerance || c.Ratio < 1/Tolerance
	switch {
	case outside && math.Abs(mean-pm) < NoiseFloorSeconds:
		c.Inconclusive, c.Kind = true, CompareInconclusiveFloor
	case outside && seOK && math.Abs(mean-pm) <= NoiseSE*se:
		c.Inconclusive, c.Kind = true, CompareInconclusiveSpread
	case c.Ratio > Tolerance:
		c.Kind = CompareAbove
	case c.Ratio < 1/Tolerance:
		c.Kind = CompareBelow
	default:
		c.Explained, c.Kind = true, CompareExplained
	}
	return c
}
