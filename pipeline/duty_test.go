package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// fakeSwitch records each Attach and Detach at the fake clock's time.
type fakeSwitch struct {
	now       *time.Time
	calls     []string
	at        []time.Time
	failFirst bool
}

func (f *fakeSwitch) Attach() error {
	f.calls, f.at = append(f.calls, "attach"), append(f.at, *f.now)
	if f.failFirst {
		f.failFirst = false
		return errors.New("no such process")
	}
	return nil
}

func (f *fakeSwitch) Detach() error {
	f.calls, f.at = append(f.calls, "detach"), append(f.at, *f.now)
	return nil
}

// TestRunDuty runs a 1s/4s duty on a fake clock (each wait moves it on
// by the wait, plus 3 ms of lateness) from inside a window's off phase
// and checks the switches land on the windows' edges and the attached
// time is the windows' (less the lateness at each attach).
func TestRunDuty(t *testing.T) {
	base := time.Unix(1_800_000_000, 0) // a multiple of 4 s
	now := base.Add(2 * time.Second)    // off: the tracer, built attached, is detached at once
	const late = 3 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sw := &fakeSwitch{now: &now}
	st := NewDutyState(true, func() time.Time { return now })
	var errs []bool
	RunDuty(ctx, sw, DutyOptions{Duty: commit.Duty{On: time.Second, Period: 4 * time.Second}, State: st,
		OnError: func(attach bool, err error) { errs = append(errs, attach) },
		Now:     func() time.Time { return now },
		After: func(d time.Duration) <-chan time.Time {
			now = now.Add(d + late)
			if now.After(base.Add(17500 * time.Millisecond)) {
				cancel()
				return nil // only ctx.Done is ready
			}
			ch := make(chan time.Time, 1)
			ch <- now
			return ch
		}})
	want := []string{"detach", "attach", "detach", "attach", "detach", "attach", "detach", "attach", "detach"}
	if len(sw.calls) != len(want) {
		t.Fatalf("calls %v, want %v", sw.calls, want)
	}
	for i, c := range sw.calls {
		if c != want[i] {
			t.Fatalf("calls %v, want %v", sw.calls, want)
		}
	}
	// Each attach at a multiple of 4 s (+ lateness), each detach 1 s later.
	for i := 1; i+1 < len(sw.at); i += 2 {
		k := time.Duration(i/2+1) * 4 * time.Second
		if !sw.at[i].Equal(base.Add(k+late)) || !sw.at[i+1].Equal(base.Add(k+time.Second+late)) {
			t.Errorf("switch %d at base+%v, +%v; want +%v, +%v", i, sw.at[i].Sub(base), sw.at[i+1].Sub(base), k+late, k+time.Second+late)
		}
	}
	on, total := st.Attached()
	if on || total != 4*time.Second {
		t.Errorf("attached %v, %v in all; want false, 4 s (four 1 s windows)", on, total)
	}
	if len(errs) != 0 {
		t.Errorf("errors %v, want none", errs)
	}
}

// TestRunDutyAttachFails: a failed attach leaves the state detached,
// is reported once, and the next window attaches again.
func TestRunDutyAttachFails(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	now := base
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sw := &fakeSwitch{now: &now, failFirst: true}
	st := NewDutyState(false, func() time.Time { return now })
	var errs []bool
	RunDuty(ctx, sw, DutyOptions{Duty: commit.Duty{On: time.Second, Period: 2 * time.Second}, State: st,
		OnError: func(attach bool, err error) { errs = append(errs, attach) },
		Now:     func() time.Time { return now },
		After: func(d time.Duration) <-chan time.Time {
			now = now.Add(d)
			if !now.Before(base.Add(3 * time.Second)) {
				cancel()
				return nil
			}
			ch := make(chan time.Time, 1)
			ch <- now
			return ch
		}})
	// At 0: attach fails; wait to 1 s (the window's end: detached
	// already, nothing to do); at 2 s: attach; 3 s: end.
	if len(errs) != 1 || !errs[0] {
		t.Errorf("errors %v, want one failed attach", errs)
	}
	if want := []string{"attach", "attach"}; len(sw.calls) != 2 || sw.calls[0] != want[0] || sw.calls[1] != want[1] {
		t.Errorf("calls %v, want %v", sw.calls, want)
	}
	if on, total := st.Attached(); !on || total != time.Second {
		t.Errorf("attached %v, %v; want true, 1 s (from 2 s to 3 s)", on, total)
	}
}

func TestRunDutyAlways(t *testing.T) {
	sw := &fakeSwitch{now: new(time.Time)}
	RunDuty(context.Background(), sw, DutyOptions{State: NewDutyState(true, nil)})
	if len(sw.calls) != 0 {
		t.Errorf("always on: calls %v, want none", sw.calls)
	}
}

// orderSwitch appends its name and the call to a shared log.
type orderSwitch struct {
	name string
	log  *[]string
	fail bool
}

func (s orderSwitch) Attach() error {
	*s.log = append(*s.log, s.name+" attach")
	if s.fail {
		return errors.New(s.name + " refused")
	}
	return nil
}

func (s orderSwitch) Detach() error {
	*s.log = append(*s.log, s.name+" detach")
	return nil
}

// TestNested: the inner probes go on before the outer and off after
// them; an outer that fails to attach takes the inner off again.
func TestNested(t *testing.T) {
	var log []string
	n := Nested(orderSwitch{"commit", &log, false}, orderSwitch{"threads", &log, false})
	if err := n.Attach(); err != nil {
		t.Fatal(err)
	}
	if err := n.Detach(); err != nil {
		t.Fatal(err)
	}
	if want := "threads attach,commit attach,commit detach,threads detach"; strings.Join(log, ",") != want {
		t.Errorf("calls %v, want %s", log, want)
	}
	log = nil
	n = Nested(orderSwitch{"commit", &log, true}, orderSwitch{"threads", &log, false})
	if err := n.Attach(); err == nil {
		t.Error("the outer's refusal was not returned")
	}
	if want := "threads attach,commit attach,threads detach"; strings.Join(log, ",") != want {
		t.Errorf("calls %v, want %s", log, want)
	}
}
