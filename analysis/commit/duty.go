package commit

import "time"

// Duty is serve's duty cycle for the commit tracer (--commit-duty
// ON/PERIOD): its probes are attached for the first On of every Period
// and detached for the rest. The windows are aligned to multiples of
// Period in Unix time, so that every member's agent (clocks kept by NTP)
// follows the same windows and a write's parts on all members fall in
// one. The zero Duty, and On >= Period, is always attached.
type Duty struct {
	On, Period time.Duration
}

// Always reports whether d never detaches.
func (d Duty) Always() bool { return d.Period <= 0 || d.On >= d.Period }

// Fraction is the share of time attached (1 when Always).
func (d Duty) Fraction() float64 {
	if d.Always() {
		return 1
	}
	return float64(d.On) / float64(d.Period)
}

// At returns whether t falls inside a window (attached) and when the
// phase next changes: the window's end when inside, else the next
// window's start. Always: attached, and no change (the zero time).
func (d Duty) At(t time.Time) (on bool, next time.Time) {
	if d.Always() {
		return true, time.Time{}
	}
	ns := t.UnixNano()
	p := d.Period.Nanoseconds()
	start := ns - ns%p
	if ns%p < 0 { // before 1970: round down, not toward zero
		start -= p
	}
	if ns < start+d.On.Nanoseconds() {
		return true, time.Unix(0, start+d.On.Nanoseconds())
	}
	return false, time.Unix(0, start+p)
}

// AttachedIn returns how long d is attached within [from, to): the
// expected attached time of a run over that interval.
func (d Duty) AttachedIn(from, to time.Time) time.Duration {
	if !to.After(from) {
		return 0
	}
	if d.Always() {
		return to.Sub(from)
	}
	var sum time.Duration
	for t := from; t.Before(to); {
		on, next := d.At(t)
		end := next
		if end.After(to) {
			end = to
		}
		if on {
			sum += end.Sub(t)
		}
		t = end
	}
	return sum
}
