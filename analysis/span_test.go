package analysis

import (
	"testing"
	"time"
)

// TestSpansApart: two recordings a minute apart are a minute apart on
// either clock; overlapping ones are not apart; the wall clock is used
// only when both kept it (the new-user walk of 2026-12-07 combined an
// fsync recording and a peers recording from different runs unwarned).
func TestSpansApart(t *testing.T) {
	const s = uint64(time.Second)
	for _, tc := range []struct {
		name string
		a, b Span
		want Apart
	}{
		{"overlap", Span{StartNs: 10 * s, EndNs: 30 * s}, Span{StartNs: 20 * s, EndNs: 40 * s}, Apart{Known: true}},
		{"b a minute after", Span{StartNs: 10 * s, EndNs: 30 * s}, Span{StartNs: 90 * s, EndNs: 100 * s}, Apart{Gap: time.Minute, Known: true}},
		{"b before", Span{StartNs: 100 * s, EndNs: 130 * s}, Span{StartNs: 10 * s, EndNs: 40 * s}, Apart{Gap: time.Minute, Known: true}},
		// The same instants on two hosts' monotonic clocks: the wall clock decides.
		{"wall overlap", Span{StartNs: 10 * s, EndNs: 30 * s, MonoToWallNs: int64(1000 * s)}, Span{StartNs: 510 * s, EndNs: 530 * s, MonoToWallNs: int64(500 * s)}, Apart{Wall: true, Known: true}},
		{"empty", Span{}, Span{StartNs: 1, EndNs: 2}, Apart{}},
	} {
		if got := SpansApart(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
