package scenarios

import (
	"strings"
	"testing"
	"time"
)

func msd(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x * 1e6)
	}
	return out
}

// TestVerdictsAgainstOwnBaseline: the fastest request's Δ against the
// baseline's fastest of the same op is judged against [Lo, Hi], and the
// phase's p50 minus the baseline's fastest against Lo; an op without an Expect is shown but not judged; an empty
// phase fails rather than passes.
func TestVerdictsAgainstOwnBaseline(t *testing.T) {
	rtt := 50 * time.Millisecond
	r := &Report{Scenario: "stretched", Phases: []Phase{
		{Name: "baseline", Lat: map[Op][]time.Duration{Write: msd(10, 11, 12, 13, 90), ReadSerial: msd(2, 2, 3)}},
		{Name: "m3 leader", Lat: map[Op][]time.Duration{Write: msd(110, 111, 112, 113, 300), ReadSerial: msd(2, 3, 3), ReadLinear: msd(60)},
			Expect: map[Op]Expect{Write: {Delta: 2 * rtt, Lo: 75 * time.Millisecond, Hi: 150 * time.Millisecond, Why: "2 RTT"},
				ReadSerial: {Lo: -10 * time.Millisecond, Hi: 10 * time.Millisecond}}},
		{Name: "m2 down", Lat: map[Op][]time.Duration{Write: msd(12, 12, 13)},
			Expect: map[Op]Expect{Write: {Delta: rtt, Lo: 35 * time.Millisecond, Hi: 80 * time.Millisecond},
				ReadLinear: {Lo: 0, Hi: time.Second}}},
	}, Delay: rtt / 2}
	r.Again = Phase{Name: "baseline again", Lat: r.Phases[0].Lat} // identical to the baseline: judged
	v := r.Verdicts()
	if len(v) != 4 {
		t.Fatalf("%d verdicts, want 4: %+v", len(v), v)
	}
	want := []struct {
		phase string
		op    Op
		delta time.Duration
		pass  bool
	}{
		{"m3 leader", Write, 100 * time.Millisecond, true}, // fastest 110 - 10, p50 112 - 10
		{"m3 leader", ReadSerial, 0, true},
		{"m2 down", Write, 2 * time.Millisecond, false}, // fastest 12 - 10: the model wanted +RTT
		{"m2 down", ReadLinear, 0, false},               // no samples on either side: never a pass
	}
	for i, w := range want {
		if v[i].Phase != w.phase || v[i].Op != w.op || v[i].Delta != w.delta || v[i].Pass != w.pass {
			t.Errorf("verdict %d = %s/%s Δ %v pass %v, want %s/%s Δ %v pass %v", i, v[i].Phase, v[i].Op, v[i].Delta, v[i].Pass, w.phase, w.op, w.delta, w.pass)
		}
	}
	r.Checks = []Check{
		Within("connect m1->m3:2380 fastest", 51*time.Millisecond, 45*time.Millisecond, 60*time.Millisecond),
		RatioWithin("peer RTT metric toward m3", 40*time.Millisecond, rtt, 1.2, 2.2),
		{Name: "etcdscope explanation", Got: "not explained", Info: true},
	}
	f := r.Failures()
	if len(f) != 3 || !strings.Contains(f[0], "m2 down: write Δfastest +2.0ms, p50 - baseline fastest +2.0ms, want Δfastest in 35.0ms..80.0ms and p50 - baseline fastest >= 35.0ms") || !strings.Contains(f[2], "0.80 x 50.0ms") {
		t.Errorf("failures: %q", f)
	}
	out := r.String()
	for _, s := range []string{"baseline", "m3 leader", "+100.0ms", "10.0ms/12.0ms/90.0ms", "+100.0ms [75.0ms..150.0ms]", "FAIL", "(not judged)", "info", "RESULT stretched: FAIL (3)"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	t.Log("\n" + out)
}

// TestQuantilesNearestRank pins the method (fio's nearest rank).
func TestQuantilesNearestRank(t *testing.T) {
	p50, p99 := Quantiles(msd(5, 1, 4, 2, 3))
	if p50 != 3*time.Millisecond || p99 != 5*time.Millisecond {
		t.Errorf("p50 %v p99 %v, want 3ms 5ms", p50, p99)
	}
	if p50, p99 := Quantiles(nil); p50 != 0 || p99 != 0 {
		t.Errorf("empty: %v %v", p50, p99)
	}
}

// shaped returns 40 samples (a phase's count per op) whose fastest, p50
// and p99 by nearest rank are the given ms: how the recorded runs'
// tables printed each op.
func shaped(fastest, p50, p99 float64) []time.Duration {
	v := make([]float64, 40)
	v[0], v[19], v[39] = fastest, p50, p99
	for i := 1; i < 19; i++ {
		v[i] = fastest + (p50-fastest)*float64(i)/19
	}
	for i := 20; i < 39; i++ {
		v[i] = p50 + (p99-p50)*float64(i-19)/20
	}
	return msd(v...)
}

// row is one recorded phase: fastest/p50/p99 in ms of write, serializable
// read, linearizable read.
func row(name string, w, s, l [3]float64) Phase {
	return Phase{Name: name, Lat: map[Op][]time.Duration{
		Write: shaped(w[0], w[1], w[2]), ReadSerial: shaped(s[0], s[1], s[2]), ReadLinear: shaped(l[0], l[1], l[2])}}
}

// TestGateOnRecordedRuns: the starvation gate on the rig's recorded runs.
// The calibration pass is new, so each run's stand-in for it is its first
// phase whose model is "unchanged" (stretched, healthy; m3 stopped):
// recorded rows, and where a closing note recorded only one op's numbers
// the other ops repeat the baseline's (Δ 0), so that the recorded number
// alone decides.
func TestGateOnRecordedRuns(t *testing.T) {
	const oneWay = 25 * time.Millisecond
	for _, c := range []struct {
		name        string
		base, again Phase
		starved     bool
		why         string
	}{
		// Idle host (load 0.07, console of 2026-12-02 07:58): the old
		// absolute gate (read p50 16.5 > 10 ms) called it starved, with
		// every verdict inside its window.
		{"idle host, stretched",
			row("baseline", [3]float64{32.7, 74.1, 203.8}, [3]float64{5.8, 16.5, 105.4}, [3]float64{17.5, 43.5, 226.2}),
			row("stretched, healthy", [3]float64{29.5, 90.2, 236.6}, [3]float64{5.1, 8.9, 36.6}, [3]float64{16.2, 49.6, 361.8}),
			false, "write -3.2ms, read serializable -0.7ms, read linearizable -1.3ms"},
		// Run 4, stretched (load 20 -> 7), docs/scenarios.md: judged, passed.
		{"run 4 stretched",
			row("baseline", [3]float64{15.9, 38.8, 802.2}, [3]float64{3.1, 3.5, 11.8}, [3]float64{9.3, 11.1, 22.6}),
			row("stretched, healthy", [3]float64{14.3, 38.9, 3482.1}, [3]float64{3.6, 6.8, 430.7}, [3]float64{9.1, 14.2, 79.1}),
			false, "p50 - fastest 3.2ms"},
		// Run 8, stretched (load 6 -> 3): the baseline's fastest write
		// 29.3 ms, the flat phase's Δfastest -10.3 ms.
		{"run 8 stretched",
			row("baseline", [3]float64{29.3, 60, 200}, [3]float64{5, 13.1, 40}, [3]float64{15, 40, 200}),
			row("stretched, healthy", [3]float64{19.0, 60, 200}, [3]float64{5, 13.1, 40}, [3]float64{15, 40, 200}),
			true, "the baseline is unstable (write outside the window)"},
		// Run 6, degraded (load ~10): Δfastest of writes -25.0 ms with m3
		// stopped, serializable reads -2.4 ms; read p50 20.0 ms.
		{"run 6 degraded",
			row("baseline", [3]float64{45, 80, 300}, [3]float64{8, 20.0, 80}, [3]float64{20, 50, 200}),
			row("m3 stopped", [3]float64{20, 80, 300}, [3]float64{5.6, 20.0, 80}, [3]float64{20, 50, 200}),
			true, "the baseline is unstable (write outside the window)"},
		// Run 4, degraded (load ~20): serializable read p50 82.9 ms, writes
		// p50 358 ms / p99 1.98 s, the fastest write -23 ms between two
		// phases with the same model.
		{"run 4 degraded",
			row("baseline", [3]float64{53, 358, 1980}, [3]float64{4, 82.9, 400}, [3]float64{20, 100, 500}),
			row("m3 stopped", [3]float64{30, 358, 1980}, [3]float64{4, 82.9, 400}, [3]float64{20, 100, 500}),
			true, "write outside the window"},
		// The same queueing with a stable fastest: the second criterion.
		{"run 4 degraded, fastest stable",
			row("baseline", [3]float64{53, 358, 1980}, [3]float64{4, 82.9, 400}, [3]float64{20, 100, 500}),
			row("m3 stopped", [3]float64{53, 358, 1980}, [3]float64{4, 82.9, 400}, [3]float64{20, 100, 500}),
			true, "serializable read p50 - fastest 78.9ms against the smallest injected delay 25.0ms: the guest's CPU queueing reaches the injected delay"},
	} {
		r := &Report{Phases: []Phase{c.base}, Again: c.again, Delay: oneWay}
		s, why := r.Starved()
		if s != c.starved || !strings.Contains(why, c.why) {
			t.Errorf("%s: Starved() = %v, %q; want %v and %q", c.name, s, why, c.starved, c.why)
		}
	}
	// Without a calibration pass nothing says how noisy the guest is.
	r := &Report{Phases: []Phase{row("baseline", [3]float64{10, 11, 12}, [3]float64{2, 2, 2}, [3]float64{5, 5, 5})}, Delay: oneWay}
	if s, why := r.Starved(); !s || !strings.Contains(why, "no calibration pass") {
		t.Errorf("no calibration: %v %q", s, why)
	}
}

// TestIdleRunJudged: the idle host's stretched run, as recorded, is judged
// under the gate (not "inconclusive") and passes every latency verdict;
// the calibration row is printed under the baseline.
func TestIdleRunJudged(t *testing.T) {
	const rtt = 50 * time.Millisecond
	flatAll := map[Op]Expect{Write: {Lo: FlatLo, Hi: FlatHi}, ReadSerial: {Lo: FlatLo, Hi: FlatHi}, ReadLinear: {Lo: FlatLo, Hi: FlatHi}}
	healthy := row("stretched, healthy", [3]float64{29.5, 90.2, 236.6}, [3]float64{5.1, 8.9, 36.6}, [3]float64{16.2, 49.6, 361.8})
	healthy.Expect = flatAll
	leads := row("m3 leads (MoveLeader)", [3]float64{156.1, 197.1, 514.8}, [3]float64{10.4, 22.6, 63.8}, [3]float64{127.5, 163.4, 454.5})
	leads.Expect = map[Op]Expect{Write: {Delta: 2 * rtt, Lo: 75 * time.Millisecond, Hi: 150 * time.Millisecond},
		ReadSerial: {Lo: FlatLo, Hi: FlatHi}, ReadLinear: {Delta: 2 * rtt, Lo: 50 * time.Millisecond, Hi: 150 * time.Millisecond}}
	down := row("m2 down", [3]float64{79.2, 133.0, 230.2}, [3]float64{8.0, 36.6, 75.7}, [3]float64{71.8, 107.5, 235.8})
	fsync := 170 * time.Microsecond
	down.Expect = map[Op]Expect{Write: {Delta: rtt + fsync, Lo: 35*time.Millisecond + fsync, Hi: 80*time.Millisecond + fsync},
		ReadSerial: {Lo: FlatLo, Hi: FlatHi}, ReadLinear: {Delta: rtt, Lo: 35 * time.Millisecond, Hi: 80 * time.Millisecond}}
	base := row("baseline", [3]float64{32.7, 74.1, 203.8}, [3]float64{5.8, 16.5, 105.4}, [3]float64{17.5, 43.5, 226.2})
	r := &Report{Scenario: "stretched", Phases: []Phase{base, healthy, leads, down}, Delay: rtt / 2}
	r.Again = healthy
	r.Again.Name, r.Again.Expect = "baseline again", nil
	if s, why := r.Starved(); s {
		t.Fatalf("starved: %s", why)
	}
	if f := r.Failures(); len(f) != 0 {
		t.Errorf("failures: %q", f)
	}
	out := r.String()
	for _, want := range []string{"gate: calibration pass Δfastest write -3.2ms", ": judged", "baseline again", "gate [-10.0ms..15.0ms]", "stable", "RESULT stretched: pass\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	t.Log("\n" + out)
}

// TestStarvedGuestSkipsLatency: an unstable calibration pass leaves every
// latency verdict and Timing check unjudged (SKIPPED, passing or not);
// other checks still fail; with a stable one they count.
func TestStarvedGuestSkipsLatency(t *testing.T) {
	r := &Report{Scenario: "degraded", Phases: []Phase{
		{Name: "baseline", Lat: map[Op][]time.Duration{Write: msd(30, 300), ReadSerial: msd(2, 3, 4)}},
		{Name: "slow", Lat: map[Op][]time.Duration{Write: msd(10, 200), ReadSerial: msd(5, 60)},
			Expect: map[Op]Expect{Write: {Delta: 50 * time.Millisecond, Lo: 35 * time.Millisecond, Hi: 80 * time.Millisecond}}},
	}, Checks: []Check{
		{Name: "peer metric far-near", Got: "300ms", Want: "50..100ms", Timing: true},
		{Name: "leader changes", Got: "1", Want: "0"},
	}, Delay: 25 * time.Millisecond}
	r.Again = Phase{Name: "baseline again", Lat: map[Op][]time.Duration{Write: msd(12, 200), ReadSerial: msd(2, 3, 4)}}
	if s, why := r.Starved(); !s || !strings.Contains(why, "write -18.0ms") || !strings.Contains(why, "the baseline is unstable") {
		t.Fatalf("Starved() = %v %q", s, why)
	}
	f := r.Failures()
	if len(f) != 1 || !strings.HasPrefix(f[0], "leader changes") {
		t.Errorf("failures %q, want only the leader changes", f)
	}
	out := r.String()
	for _, want := range []string{"the guest was starved", "SKIPPED", "UNSTABLE", "RESULT degraded: FAIL (1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := r.Unjudged(); n != 2 {
		t.Errorf("Unjudged() = %d, want 2 (the write verdict and the peer metric check)", n)
	}
	r.Checks = r.Checks[:1] // without the leader change: nothing judged failed
	if out := r.String(); !strings.Contains(out, "RESULT degraded: SKIPPED (2 latency verdicts and timing checks not judged: starved guest)") || strings.Contains(out, ": pass") {
		t.Errorf("a starved run with no judged failure must say SKIPPED, never pass:\n%s", out)
	}
	r.Checks = append(r.Checks, Check{Name: "leader changes", Got: "1", Want: "0"})
	r.Again.Lat[Write] = msd(28, 250)
	if s, _ := r.Starved(); s || len(r.Failures()) != 3 || r.Unjudged() != 0 {
		t.Errorf("stable calibration: starved %v, failures %q; want judged: 3 failures", s, r.Failures())
	}
}

// TestMedianAgainstBaselineFastest pins why the median is not compared
// with the baseline's median (run 5): a baseline whose median was
// inflated by host load must not fail a phase whose requests show the
// model's delay, nor pass one whose median does not show it.
func TestMedianAgainstBaselineFastest(t *testing.T) {
	e := Expect{Delta: 50 * time.Millisecond, Lo: 35 * time.Millisecond, Hi: 80 * time.Millisecond}
	for _, c := range []struct {
		name  string
		phase []time.Duration
		pass  bool
	}{
		{"delay seen, baseline median inflated", msd(62, 80, 87, 90, 270), true},
		{"fastest delayed, median not", msd(62, 20, 20, 20, 20), false},
	} {
		r := &Report{Phases: []Phase{
			{Name: "baseline", Lat: map[Op][]time.Duration{Write: msd(16, 100, 112, 120, 550)}},
			{Name: "slow", Lat: map[Op][]time.Duration{Write: c.phase}, Expect: map[Op]Expect{Write: e}},
		}}
		if v := r.Verdicts(); len(v) != 1 || v[0].Pass != c.pass {
			t.Errorf("%s: %+v, want pass %v", c.name, v, c.pass)
		}
	}
}
