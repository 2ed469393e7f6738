package commit

import (
	"testing"
	"time"
)

func TestDutyAt(t *testing.T) {
	d := Duty{On: 10 * time.Second, Period: time.Minute}
	base := time.Unix(1_800_000_000, 0) // a multiple of 60 s
	for _, c := range []struct {
		at   time.Duration
		on   bool
		next time.Duration
	}{
		{0, true, 10 * time.Second},
		{9*time.Second + 999*time.Millisecond, true, 10 * time.Second},
		{10 * time.Second, false, time.Minute},
		{59 * time.Second, false, time.Minute},
		{time.Minute, true, 70 * time.Second},
		{-time.Second, false, 0},
	} {
		on, next := d.At(base.Add(c.at))
		if on != c.on || !next.Equal(base.Add(c.next)) {
			t.Errorf("At(base%+v) = %v, base%+v; want %v, base%+v", c.at, on, next.Sub(base), c.on, c.next)
		}
	}
	// Before 1970 the windows stay aligned (rounded down).
	on, next := d.At(time.Unix(-5, 0))
	if on || !next.Equal(time.Unix(0, 0)) {
		t.Errorf("At(-5 s) = %v, %v; want false, the epoch", on, next)
	}
	for _, a := range []Duty{{}, {On: time.Minute, Period: time.Minute}, {On: 2 * time.Minute, Period: time.Minute}} {
		if on, next := a.At(base); !on || !next.IsZero() || !a.Always() || a.Fraction() != 1 {
			t.Errorf("%+v: At = %v, %v; Always %v, Fraction %v: want always attached", a, on, next, a.Always(), a.Fraction())
		}
	}
}

func TestDutyAttachedIn(t *testing.T) {
	d := Duty{On: time.Second, Period: 2 * time.Second}
	base := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		from, to, want time.Duration
	}{
		{0, 10 * time.Second, 5 * time.Second},
		{500 * time.Millisecond, 10*time.Second + 500*time.Millisecond, 5 * time.Second}, // any whole number of periods
		{1500 * time.Millisecond, 2500 * time.Millisecond, 500 * time.Millisecond},
		{1200 * time.Millisecond, 1800 * time.Millisecond, 0},
		{3 * time.Second, 3 * time.Second, 0},
	} {
		if got := d.AttachedIn(base.Add(c.from), base.Add(c.to)); got != c.want {
			t.Errorf("AttachedIn(%v, %v) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if got := (Duty{}).AttachedIn(base, base.Add(time.Hour)); got != time.Hour {
		t.Errorf("always: %v, want 1h", got)
	}
}
