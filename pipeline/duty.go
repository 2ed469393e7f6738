package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// Switchable is a tracer whose probes can be taken off and put back with
// its programs and maps kept loaded (tracer.CommitTracer).
type Switchable interface {
	Attach() error
	Detach() error
}

// Nested returns the Switchable of outer nested in inner: Attach puts
// inner on, then outer (and takes inner off again if outer fails);
// Detach takes outer off, then inner. serve --commit-duty nests the
// commit probes in the fsync tracer's thread probes on the same etcd, so
// that every write the commit probes see ran wholly with both on.
func Nested(outer, inner Switchable) Switchable { return nested{outer, inner} }

type nested struct{ outer, inner Switchable }

func (n nested) Attach() error {
	if err := n.inner.Attach(); err != nil {
		return err
	}
	if err := n.outer.Attach(); err != nil {
		return errors.Join(err, n.inner.Detach())
	}
	return nil
}

func (n nested) Detach() error { return errors.Join(n.outer.Detach(), n.inner.Detach()) }

// DutyState is what a duty cycle has done so far: whether the probes are
// attached now, and for how long they have been in all (from each
// attach's return to the next detach's call: the time they were surely
// on). Safe for concurrent use.
type DutyState struct {
	mu       sync.Mutex
	now      func() time.Time
	attached bool
	since    time.Time     // when the current attached stretch began
	total    time.Duration // the attached stretches before it
}

// NewDutyState starts the account at now, attached or not (a tracer is
// attached once built).
func NewDutyState(attached bool, now func() time.Time) *DutyState {
	if now == nil {
		now = time.Now
	}
	return &DutyState{now: now, attached: attached, since: now()}
}

// Attached returns whether the probes are on now and the time they have
// been on in all, the current stretch included.
func (s *DutyState) Attached() (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := s.total
	if s.attached {
		total += s.now().Sub(s.since)
	}
	return s.attached, total
}

// SetAttached records that the probes are now attached (on) or not,
// outside a duty cycle's own switching: a new tracer comes attached, and
// between two tracers (etcd restarting) none is.
func (s *DutyState) SetAttached(on bool) { s.set(on) }

func (s *DutyState) set(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on == s.attached {
		return
	}
	now := s.now()
	if s.attached {
		s.total += now.Sub(s.since)
	}
	s.attached, s.since = on, now
}

// DutyOptions configures RunDuty.
type DutyOptions struct {
	Duty  commit.Duty
	State *DutyState
	// OnError receives an attach (attach true) or detach that failed;
	// the cycle goes on at the next edge. May be nil.
	OnError func(attach bool, err error)
	// Now and After stand in for time.Now and time.After (tests).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// maxDutySleep bounds one wait for the next edge, so that a step of the
// wall clock (an NTP correction) moves the cycle within this long.
const maxDutySleep = 10 * time.Second

// RunDuty attaches src inside opt.Duty's windows and detaches it outside
// them until ctx ends, recording each change in opt.State; src is in the
// phase of the present moment at once (a tracer built outside a window
// is detached now). It returns at once when the duty is always on. The
// caller closes src afterwards (a close detaches, whatever the phase).
func RunDuty(ctx context.Context, src Switchable, opt DutyOptions) {
	if opt.Duty.Always() {
		return
	}
	now, after := opt.Now, opt.After
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = time.After
	}
	for {
		on, next := opt.Duty.At(now())
		if attached, _ := opt.State.Attached(); attached != on {
			if on {
				err := src.Attach()
				if err == nil {
					opt.State.set(true)
				} else if opt.OnError != nil && ctx.Err() == nil {
					opt.OnError(true, err)
				}
			} else {
				opt.State.set(false)
				if err := src.Detach(); err != nil && opt.OnError != nil && ctx.Err() == nil {
					opt.OnError(false, err)
				}
			}
		}
		wait := min(next.Sub(now()), maxDutySleep)
		select {
		case <-ctx.Done():
			return
		case <-after(max(wait, 0)):
		}
	}
}
