package analysis

import "time"

// Span is a recording's time window: its first and last event on
// CLOCK_MONOTONIC (ns), and CLOCK_REALTIME − CLOCK_MONOTONIC when the
// recording kept it (0: not kept).
type Span struct {
	StartNs, EndNs uint64
	MonoToWallNs   int64
}

// Apart is how two recordings' spans lie: Gap, the time from the end of
// the earlier to the start of the later (0: they overlap). Wall: compared
// on the wall clock, which both kept; else on CLOCK_MONOTONIC, which only
// one boot of one host shares. Known false: a span is empty.
type Apart struct {
	Gap   time.Duration
	Wall  bool
	Known bool
}

// SpansApart compares a and b (Apart).
func SpansApart(a, b Span) Apart {
	if a.EndNs == 0 || b.EndNs == 0 {
		return Apart{}
	}
	out := Apart{Known: true}
	as, ae, bs, be := int64(a.StartNs), int64(a.EndNs), int64(b.StartNs), int64(b.EndNs)
	if a.MonoToWallNs != 0 && b.MonoToWallNs != 0 {
		as, ae, bs, be, out.Wall = as+a.MonoToWallNs, ae+a.MonoToWallNs, bs+b.MonoToWallNs, be+b.MonoToWallNs, true
	}
	switch {
	case ae < bs:
		out.Gap = time.Duration(bs - ae)
	case be < as:
		out.Gap = time.Duration(as - be)
	}
	return out
}
