package diagnose

import (
	"testing"
	"time"
)

// TestLogTimeouts: the stall thresholds take a log's start-up values
// (a fresh user saw the log's 200 ms heartbeat used by one finding and
// etcd's default 100 ms by the metric's stall finding in the same run);
// two logs that disagree give neither.
func TestLogTimeouts(t *testing.T) {
	cfg := func(hb, el time.Duration) LogRead {
		return LogRead{Events: []LogEvent{{Kind: EvConfig, Interval: hb, Election: el}}}
	}
	for _, c := range []struct {
		logs []LogRead
		want Timeouts
	}{
		{nil, Timeouts{}},
		{[]LogRead{cfg(200*time.Millisecond, 0)}, Timeouts{Heartbeat: 200 * time.Millisecond}},
		{[]LogRead{cfg(200*time.Millisecond, 2*time.Second), cfg(200*time.Millisecond, 0)}, Timeouts{200 * time.Millisecond, 2 * time.Second}},
		{[]LogRead{cfg(200*time.Millisecond, time.Second), cfg(100*time.Millisecond, time.Second)}, Timeouts{Election: time.Second}},
	} {
		if got := logTimeouts(c.logs); got != c.want {
			t.Errorf("%+v: %+v, want %+v", c.logs, got, c.want)
		}
	}
}
