package tracer

import (
	"testing"
	"time"
)

// TestQuietRingPollBacksOff: each poll that found the ring empty doubles
// the next one up to idlePoll, and one that found a record puts it back
// to pollInterval.
func TestQuietRingPollBacksOff(t *testing.T) {
	if idlePoll != 4*pollInterval {
		t.Fatalf("idlePoll is %v: the polls below assume 4 × pollInterval (%v)", idlePoll, pollInterval)
	}
	q := &quietRing{poll: pollInterval}
	var got []time.Duration
	for i := range 6 {
		q.found = i == 4 // a record read before the fifth wait
		got = append(got, q.nextPoll())
	}
	want := []time.Duration{2 * pollInterval, idlePoll, idlePoll, idlePoll, pollInterval, 2 * pollInterval}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("polls %v, want %v", got, want)
		}
	}
}
