package etcdmetric

import (
	"math"
	"testing"
	"time"
)

// TestWarmingUp: a window that begins 5 s after etcd started (one probe
// made) is warming up, one that begins at 5m50s (a README walk's second
// run said "still warming up at 6m30s uptime") is not; steady state (no
// uptime) never is.
func TestWarmingUp(t *testing.T) {
	for _, c := range []struct {
		start, end time.Duration
		left       float64
		warming    bool
	}{
		{5 * time.Second, 45 * time.Second, 0.875, true},
		{60 * time.Second, 100 * time.Second, math.Pow(0.875, 15), true},
		{100 * time.Second, 140 * time.Second, math.Pow(0.875, 25), false},
		{350 * time.Second, 390 * time.Second, math.Pow(0.875, 87), false},
		{0, 0, 0, false},
	} {
		in := ModelInput{UptimeStart: c.start, UptimeEnd: c.end}
		if l := in.WarmupLeft(); math.Abs(l-c.left) > 1e-12 || in.WarmingUp() != c.warming {
			t.Errorf("window %v to %v: warm-up left %g, warming %v; want %g, %v", c.start, c.end, l, in.WarmingUp(), c.left, c.warming)
		}
	}
}
