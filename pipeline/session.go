package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/safefile"
)

// Stoppable is what a Session needs of a tracer to stop it: the
// tracer.Tracer shape without Read (a loop reads it). A tracer with a
// RingPeakBytes() uint64, Unpartitioned() uint64 or ProgramStats()
// []event.ProgramStats method has it read too.
type Stoppable interface {
	Drain() error
	Lost() (uint64, error)
	Missed() uint64
	Close() error
}

// Stats is what a tracer counted over a run, read by Session.Finish after
// its loops ended and before it is closed.
type Stats struct {
	Lost, Missed  uint64
	RingPeakBytes uint64 // 0 for a tracer that does not measure it
	// Unpartitioned: calls the kernel could not partition, part of Lost
	// (tracer.FsyncTracer.Unpartitioned); 0 for other tracers.
	Unpartitioned uint64
	// MissedPrograms: Missed by program, the most first, for a tracer
	// with a ProgramStats() []event.ProgramStats method (nil when none
	// missed).
	MissedPrograms []analysis.MissedRuns
}

// Session is the one lifecycle of a long-running command (fsync, peers,
// hypervisor, commit, serve):
//
//	start:  NewSession (the context, --duration), Add each tracer once
//	        opened, Ready (the --ready-file), Go each data path's loop;
//	loop:   Wait, until the context ends, --duration passes, Done closes
//	        or a loop ends, calling Tick every Every;
//	finish: Finish drains every tracer, waits for every loop, reads the
//	        counters, closes every tracer and removes the ready file; the
//	        caller then writes its report and returns its exit code.
//
// Close, deferred right after NewSession, is every other path's end: it
// closes each tracer Finish did not and removes the ready file. Each
// tracer Add was given is closed exactly once, on every path.
type Session struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  *safefile.Ready

	tracers []*member
	loops   int
	results chan error // one per loop, as it ends
	pending int        // loops not yet received from results

	// readyAt, finishAt: when Ready and Finish were called (Window).
	readyAt, finishAt time.Time

	closeOnce sync.Once
}

type member struct {
	name  string
	t     Stoppable
	stats Stats
}

// NewSession starts a run under parent (cmd's runContext): its context
// ends with parent or after duration (0: never), and readyFile ("" for
// none) is written by Ready. Defer Close.
func NewSession(parent context.Context, duration time.Duration, readyFile string) *Session {
	s := &Session{ready: safefile.NewReady(readyFile), results: make(chan error, 16)}
	if duration > 0 {
		s.ctx, s.cancel = context.WithTimeout(parent, duration)
	} else {
		s.ctx, s.cancel = context.WithCancel(parent)
	}
	return s
}

// Context ends at a stop signal or at the end of --duration: what a
// workload or helper of the run should stop on.
func (s *Session) Context() context.Context { return s.ctx }

// Limit starts the run's clock now: the context also ends d from now (0:
// no limit). For a run whose window starts after a setup that must not
// eat into it (commit's member list); call it before Go and Wait.
func (s *Session) Limit(d time.Duration) {
	if d <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, d)
	outer := s.cancel
	s.ctx, s.cancel = ctx, func() { cancel(); outer() }
}

// Add hands an opened tracer to the session, which from now on closes it
// (once, on every path). name ("" for a command's only tracer) names its
// ring buffer in a drain error. The returned Stats are filled by Finish.
func (s *Session) Add(name string, t Stoppable) *Stats {
	m := &member{name: name, t: t}
	s.tracers = append(s.tracers, m)
	return &m.stats
}

// Ready writes the ready file (this process's id): every tracer is open
// and attached.
func (s *Session) Ready() error {
	s.readyAt = time.Now()
	if err := s.ready.Put(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		return fmt.Errorf("writing --ready-file: %w", err)
	}
	return nil
}

// Window is the traced time: from Ready (every tracer attached) to
// Finish (the run's end); 0 before both were called. A recording
// carries it (analysis.Report.WindowNs) so that a report states the
// length the user recorded, not the calls' first-to-last span.
func (s *Session) Window() time.Duration {
	if s.readyAt.IsZero() || s.finishAt.IsZero() {
		return 0
	}
	return s.finishAt.Sub(s.readyAt)
}

// RemoveReady removes the ready file now, from any goroutine: for a
// process about to exit without Close (a second signal's exit at once).
func (s *Session) RemoveReady() { s.ready.Remove() }

// Go runs loop, a data path reading one of the tracers until it is
// drained or closed, on its own goroutine.
func (s *Session) Go(loop func() error) {
	if s.loops == cap(s.results) {
		panic("pipeline: too many loops in one session")
	}
	s.loops++
	s.pending++
	go func() { s.results <- loop() }()
}

// WaitOptions are what a loop phase watches besides the context.
type WaitOptions struct {
	// Done, if not nil, ends the loop phase when closed (fsync's
	// workload, which ends on time or on an error).
	Done <-chan struct{}
	// Tick, if Every > 0, is called every Every (the interval lines).
	Every time.Duration
	Tick  func()
}

// Wait is the loop phase: it returns nil when the context ends (a signal,
// --duration), Done closes or a loop ends without an error; a loop's
// error if one fails first.
func (s *Session) Wait(o WaitOptions) error {
	var tick <-chan time.Time
	if o.Every > 0 && o.Tick != nil {
		t := time.NewTicker(o.Every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-o.Done:
			return nil
		case <-tick:
			o.Tick()
		case err := <-s.results:
			s.pending--
			return err
		}
	}
}

// Finish ends a run that Wait left without an error, in the one order
// that neither hangs nor loses an event:
//
//  1. Drain every tracer: a Read in progress, and the ones after it,
//     return what is already in the ring buffer, then ErrDrained. It comes
//     first: a loop blocked in Read on a quiet tracer would never end.
//  2. Wait for every loop: after Drain each ends on its own (a loop's
//     error is the run's), and nothing reads a tracer any more.
//  3. Read every tracer's Lost, Missed, RingPeakBytes and Unpartitioned, then call
//     beforeClose (if not nil) for what else the caller reads of them: the
//     counters live in the maps Close frees.
//  4. Close every tracer (detach), all at once: each detach waits for the
//     kernel's RCU grace periods, and those of two tracers overlap.
//  5. Remove the ready file: nothing is attached any more.
//
// Steps 4 and 5 run on every return. A drain error returns at once (its
// loop may not end; Close ends it). The Stats that Add returned are
// filled in step 3.
func (s *Session) Finish(beforeClose func()) error {
	s.finishAt = time.Now()
	defer s.Close()
	for _, m := range s.tracers {
		if err := m.t.Drain(); err != nil {
			if m.name == "" {
				return fmt.Errorf("draining the ring buffer: %w", err)
			}
			return fmt.Errorf("draining the %s ring buffer: %w", m.name, err)
		}
	}
	var loopErr error
	for ; s.pending > 0; s.pending-- {
		if err := <-s.results; err != nil && loopErr == nil {
			loopErr = err
		}
	}
	if loopErr != nil {
		return loopErr
	}
	for _, m := range s.tracers {
		lost, err := m.t.Lost()
		if err != nil {
			return err
		}
		m.stats = Stats{Lost: lost, Missed: m.t.Missed()}
		if p, ok := m.t.(interface{ RingPeakBytes() uint64 }); ok {
			m.stats.RingPeakBytes = p.RingPeakBytes()
		}
		if p, ok := m.t.(interface{ Unpartitioned() uint64 }); ok {
			m.stats.Unpartitioned = p.Unpartitioned()
		}
		if p, ok := m.t.(interface{ ProgramStats() []event.ProgramStats }); ok {
			var d analysis.MissDelta
			m.stats.MissedPrograms = d.Since(p.ProgramStats())
		}
	}
	if beforeClose != nil {
		beforeClose()
	}
	return nil
}

// Close closes every tracer not closed yet, all at once, removes the
// ready file and ends the context. Safe to call more than once; defer it
// right after NewSession.
func (s *Session) Close() error {
	var err error
	s.closeOnce.Do(func() {
		errs := make([]error, len(s.tracers))
		var wg sync.WaitGroup
		for i, m := range s.tracers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = m.t.Close()
			}()
		}
		wg.Wait()
		s.ready.Remove()
		s.cancel()
		err = errors.Join(errs...)
	})
	return err
}
