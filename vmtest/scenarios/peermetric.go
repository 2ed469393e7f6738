package scenarios

import (
	"fmt"
	"time"
)

// PeerMetric is what the stretched scenario's check of etcd's peer RTT
// metric reads: etcd's etcd_network_peer_round_trip_time_seconds on m1
// toward the far and the near member, and what `etcdscope peers` measured
// on the wire for the same probes.
type PeerMetric struct {
	// FarMean, NearMean: the metric's mean over the observations between
	// the window's two scrapes; FarObs, NearObs: how many there were.
	FarMean, NearMean time.Duration
	FarObs, NearObs   uint64
	// FarDial, NearDial: the mean lifetime (SYN_SENT → first FIN) of the
	// per-request connections etcd's dialing prober opened toward each
	// member, as `etcdscope peers` traced them (its model input
	// new_conn_probe_ns): connect + request + the member's answer, over
	// etcdscope's run; 0 when it saw none.
	FarDial, NearDial time.Duration
	// RTT: the far link's round trip (the fastest TCP connect to :2380).
	RTT time.Duration
}

// Resolution of the check, written down before the first run that judged
// it (docs/scenarios.md): the network's share of the metric's far − near
// must be 1.0 .. 2.0 × RTT (model 1.5: the dialing prober's probe costs
// 2 RTT, the kept-alive one's 1 RTT, both in one series), from at least
// PeerMetricMinObs observations per member.
const (
	PeerMetricLo, PeerMetricHi = 1.0, 2.0
	PeerMetricMinObs           = 4
)

// AnswerOffset is how much longer the far member's probes took than the
// near member's beyond their network round trips: the dialing prober's
// per-request connections, far − near, minus the 2 RTT the far one's
// connect and request cross. In the emulated guest a probe's answer time
// is tens to hundreds of ms of CPU queueing, and it differs between the
// two members by an amount that holds for a whole run (m1's probes to
// both and the members' own probers and heartbeats tick on fixed grids
// whose phases are set at start-up): runs read the metric's far − near at
// 0.8 RTT in one run and 2.1 RTT in the next, each steady within its run.
func (p PeerMetric) AnswerOffset() time.Duration {
	return p.FarDial - p.NearDial - 2*p.RTT
}

// NetShare is the metric's far − near with AnswerOffset removed: the
// network's share of the difference. Both probers of a member probe at the
// same instants, so the kept-alive prober's probes are taken to carry the
// dialing one's answer offset too.
func (p PeerMetric) NetShare() time.Duration {
	return p.FarMean - p.NearMean - p.AnswerOffset()
}

// Check judges NetShare against [PeerMetricLo, PeerMetricHi] × RTT. It is
// shown, not judged (Info), with fewer than PeerMetricMinObs observations
// toward either member or without a traced per-request connection toward
// both (then the answer offset is unknown and the raw far − near carries
// it). The check is Timing: a starved guest's answer time moves from probe
// to probe by more than the window's half-width.
func (p PeerMetric) Check() Check {
	name := fmt.Sprintf("etcd peer RTT metric m1->m3 minus m1->m2, less the wire's answer offset (%d, %d obs)", p.FarObs, p.NearObs)
	c := RatioWithin(name, p.NetShare(), p.RTT, PeerMetricLo, PeerMetricHi)
	c.Got += fmt.Sprintf(" (far %s - near %s - offset %s: dials far %s, near %s)",
		ms(p.FarMean), ms(p.NearMean), ms(p.AnswerOffset()), ms(p.FarDial), ms(p.NearDial))
	c.Timing = true
	switch {
	case p.FarObs < PeerMetricMinObs || p.NearObs < PeerMetricMinObs:
		// One EWMA snapshot per prober is too little to judge a 1-2x
		// window (CI saw 0.45x with 2 and 2 where other runs read
		// 1.1-1.95x).
		c.Info = true
		c.Name += fmt.Sprintf(": too few observations to judge (< %d)", PeerMetricMinObs)
	case p.FarDial <= 0 || p.NearDial <= 0:
		c.Info = true
		c.Name += ": etcdscope traced no per-request connection toward both members, answer offset unknown"
	}
	return c
}

// MetricVerdictCheck judges `etcdscope peers`' verdict on etcd's peer RTT
// metric toward the far member (got: the verdict in one line): it must
// have found m1's etcd (memberPID > 0: etcd runs in another network
// namespace, issue 14's "member pid 0") and must not call the metric "not
// explained"; "inconclusive" (too few observations to tell) passes. Its
// tolerance is etcdscope's own (etcdmetric.Tolerance, ×/÷1.5 of the model).
// Timing: the model's kept-alive half is etcdscope's own probe (run in
// m1's namespace, so it crosses the delayed link as etcd's prober does),
// whose answer time a starved guest moves apart from etcd's.
func MetricVerdictCheck(name, got string, memberPID int, explained, inconclusive bool) Check {
	return Check{Name: name, Got: got, Want: "member found, explained or inconclusive",
		Pass: memberPID > 0 && (explained || inconclusive), Timing: true}
}

// ShownInCI marks a judged check as shown, not judged, in `make vmtest`
// (CI, where VMTEST_RUN is unset), for checks that the guest's per-run
// answer-time bias between members puts outside their window about one
// run in seven or eight: too often for a gate every change must pass;
// `make scenario(s)` keeps judging them. The answer-offset-corrected far −
// near read 1.38-1.87 RTT in six judged runs and 2.14 in a seventh (run
// 19); the healthy phase's model vote (rig_vm_test.go) failed once in
// about eight (run 21).
func ShownInCI(c Check, ci bool) Check {
	if ci && !c.Info {
		c.Info = true
		c.Name += ": shown in make vmtest (CI), judged by make scenario(s)"
	}
	return c
}
