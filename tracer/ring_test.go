package tracer

import (
	"testing"
	"time"
)

// TestQuietRingPollBacksOff: each poll that found the ring empty doubles
// the next one up to the ring's idle poll, and one that found a record
// puts it back to pollInterval; a ring opened without a longer idle poll
// stays at pollInterval.
func TestQuietRingPollBacksOff(t *testing.T) {
	if idlePoll != 4*pollInterval {
		t.Fatalf("idlePoll is %v: the polls below assume 4 × pollInterval (%v)", idlePoll, pollInterval)
	}
	q := &quietRing{poll: pollInterval, idlePoll: idlePoll}
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
	flat := &quietRing{poll: pollInterval, idlePoll: pollInterval}
	for range 3 {
		if d := flat.nextPoll(); d != pollInterval {
			t.Fatalf("ring without an idle poll: next poll %v, want %v", d, pollInterval)
		}
	}
}
