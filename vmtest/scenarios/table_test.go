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
	}}
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

// TestStarvedGuestMakesLatencyInconclusive: a baseline whose serializable
// reads are slower than StarvedReadP50 turns failed latency verdicts and
// failed Timing checks into "inconclusive"; other checks still fail.
func TestStarvedGuestMakesLatencyInconclusive(t *testing.T) {
	r := &Report{Scenario: "degraded", Phases: []Phase{
		{Name: "baseline", Lat: map[Op][]time.Duration{Write: msd(30, 300), ReadSerial: msd(12, 80, 900)}},
		{Name: "slow", Lat: map[Op][]time.Duration{Write: msd(10, 200), ReadSerial: msd(5, 60)},
			Expect: map[Op]Expect{Write: {Delta: 50 * time.Millisecond, Lo: 35 * time.Millisecond, Hi: 80 * time.Millisecond}}},
	}, Checks: []Check{
		{Name: "peer metric far-near", Got: "300ms", Want: "50..100ms", Timing: true},
		{Name: "leader changes", Got: "1", Want: "0"},
	}}
	if s, why := r.Starved(); !s || !strings.Contains(why, "p50 80.0ms > 10.0ms") {
		t.Fatalf("Starved() = %v %q", s, why)
	}
	f := r.Failures()
	if len(f) != 1 || !strings.HasPrefix(f[0], "leader changes") {
		t.Errorf("failures %q, want only the leader changes", f)
	}
	out := r.String()
	for _, want := range []string{"the guest was starved", "inconclusive", "RESULT degraded: FAIL (1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	r.Phases[0].Lat[ReadSerial] = msd(2, 3, 4)
	if s, _ := r.Starved(); s || len(r.Failures()) != 3 {
		t.Errorf("quiet baseline: starved %v, failures %q; want judged: 3 failures", s, r.Failures())
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
