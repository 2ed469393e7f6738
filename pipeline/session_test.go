package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTracer is a Stoppable that writes each call to a shared log; its
// loop (run) blocks, as a Read on a quiet ring buffer does, until Drain
// or Close.
type fakeTracer struct {
	name      string
	log       *callLog
	drainErr  error
	lostErr   error
	loopErr   error // what run returns once it ends
	stopped   chan struct{}
	stopOnce  sync.Once
	mu        sync.Mutex
	closes    int
	lostAfter bool // Lost was called after Close
}

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func newFake(name string, log *callLog) *fakeTracer {
	return &fakeTracer{name: name, log: log, stopped: make(chan struct{})}
}

func (f *fakeTracer) stop() { f.stopOnce.Do(func() { close(f.stopped) }) }

func (f *fakeTracer) Drain() error {
	f.log.add(f.name + " drain")
	if f.drainErr != nil {
		return f.drainErr
	}
	f.stop()
	return nil
}

func (f *fakeTracer) Lost() (uint64, error) {
	f.log.add(f.name + " lost")
	f.mu.Lock()
	if f.closes > 0 {
		f.lostAfter = true
	}
	f.mu.Unlock()
	return 7, f.lostErr
}

func (f *fakeTracer) Missed() uint64 { f.log.add(f.name + " missed"); return 3 }

func (f *fakeTracer) RingPeakBytes() uint64 { return 4096 }

func (f *fakeTracer) Close() error {
	f.log.add(f.name + " close")
	f.mu.Lock()
	f.closes++
	f.mu.Unlock()
	f.stop() // a Read in progress returns ErrClosed
	return nil
}

// run is the tracer's data path: it ends when the tracer is drained or
// closed.
func (f *fakeTracer) run() error {
	<-f.stopped
	f.log.add(f.name + " loop end")
	return f.loopErr
}

func (f *fakeTracer) closeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closes
}

// index returns where call is in calls (-1: absent).
func index(calls []string, call string) int { return slices.Index(calls, call) }

// checkEnd checks what every path must leave: each tracer closed exactly
// once, Lost never read after Close, the ready file gone.
func checkEnd(t *testing.T, ready string, trs ...*fakeTracer) {
	t.Helper()
	for _, tr := range trs {
		if n := tr.closeCount(); n != 1 {
			t.Errorf("%s closed %d times, want 1", tr.name, n)
		}
		if tr.lostAfter {
			t.Errorf("%s: Lost read after Close", tr.name)
		}
	}
	if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file left behind (%v)", err)
	}
}

func TestSessionShutdownOrder(t *testing.T) {
	log := &callLog{}
	a, b := newFake("a", log), newFake("b", log)
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	s := NewSession(ctx, 0, ready)
	sa, sb := s.Add("a", a), s.Add("b", b)
	if err := s.Ready(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ready); err != nil {
		t.Fatalf("no ready file after Ready: %v", err)
	}
	s.Go(a.run)
	s.Go(b.run)
	cancel() // the stop signal
	if err := s.Wait(WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	var closedBefore int
	if err := s.Finish(func() { closedBefore = a.closeCount() + b.closeCount() }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // the deferred Close after Finish
		t.Fatal(err)
	}
	calls := log.get()
	for _, tr := range []string{"a", "b"} {
		drain, loop, lost, cl := index(calls, tr+" drain"), index(calls, tr+" loop end"), index(calls, tr+" lost"), index(calls, tr+" close")
		if drain < 0 || loop < 0 || lost < 0 || cl < 0 || !(drain < loop && loop < lost && lost < cl) {
			t.Errorf("%s: calls %q, want drain, loop end, lost, close in that order", tr, calls)
		}
	}
	// Every tracer is drained before the counters of any are read.
	if index(calls, "b drain") > index(calls, "a lost") {
		t.Errorf("calls %q: b drained after a's counters were read", calls)
	}
	if closedBefore != 0 {
		t.Errorf("beforeClose ran after %d Close calls, want before any", closedBefore)
	}
	want := Stats{Lost: 7, Missed: 3, RingPeakBytes: 4096}
	if !reflect.DeepEqual(*sa, want) || !reflect.DeepEqual(*sb, want) {
		t.Errorf("stats %+v, %+v, want %+v", *sa, *sb, want)
	}
	checkEnd(t, ready, a, b)
}

// TestSessionDrainsBeforeWaiting: a loop that only Drain ends (a quiet
// ring buffer) does not hang Finish.
func TestSessionDrainsBeforeWaiting(t *testing.T) {
	log := &callLog{}
	a := newFake("a", log)
	s := NewSession(context.Background(), 10*time.Millisecond, "") // --duration
	defer s.Close()
	s.Add("", a)
	s.Go(a.run)
	done := make(chan error, 1)
	go func() {
		if err := s.Wait(WaitOptions{}); err != nil {
			done <- err
			return
		}
		done <- s.Finish(nil)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Finish hangs; calls %q", log.get())
	}
	if calls := log.get(); index(calls, "a drain") > index(calls, "a loop end") {
		t.Errorf("calls %q: the loop ended before the drain", calls)
	}
}

// TestSessionEveryPathClosesOnce: each way a run can end, from a failing
// start to a failing finish, closes every opened tracer exactly once and
// removes the ready file.
func TestSessionEveryPathClosesOnce(t *testing.T) {
	errBoom := errors.New("boom")
	cases := []struct {
		name  string
		setup func(a, b *fakeTracer)
		// run is the command's body between NewSession (with a deferred
		// Close) and its return; it returns the run's error.
		run     func(s *Session, a, b *fakeTracer) error
		wantErr string
	}{
		{name: "second tracer fails to open", run: func(s *Session, a, b *fakeTracer) error {
			s.Add("a", a)
			return errBoom // tracer.NewX(b) failed: b closed itself, never added
		}, wantErr: "boom"},
		{name: "setup fails after ready", run: func(s *Session, a, b *fakeTracer) error {
			s.Add("a", a)
			s.Add("b", b)
			if err := s.Ready(); err != nil {
				return err
			}
			return errBoom // e.g. --capture could not be created
		}, wantErr: "boom"},
		{name: "a loop fails", setup: func(a, b *fakeTracer) { a.loopErr = errBoom; a.stop() }, run: runBoth, wantErr: "boom"},
		{name: "a drain fails", setup: func(a, b *fakeTracer) { b.drainErr = errBoom }, run: runBoth, wantErr: "draining the b ring buffer: boom"},
		{name: "lost fails", setup: func(a, b *fakeTracer) { a.lostErr = errBoom }, run: runBoth, wantErr: "boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := &callLog{}
			a, b := newFake("a", log), newFake("b", log)
			if c.setup != nil {
				c.setup(a, b)
			}
			ready := filepath.Join(t.TempDir(), "ready")
			err := func() error {
				s := NewSession(context.Background(), 0, ready)
				defer s.Close()
				return c.run(s, a, b)
			}()
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("err %v, want %q", err, c.wantErr)
			}
			opened := []*fakeTracer{a}
			if c.name != "second tracer fails to open" {
				opened = append(opened, b)
			} else if b.closeCount() != 0 {
				t.Errorf("a tracer never added was closed")
			}
			checkEnd(t, ready, opened...)
		})
	}
}

// runBoth is a whole run of a and b, stopped at once (Done closed): the
// start, the loop phase and the finish.
func runBoth(s *Session, a, b *fakeTracer) error {
	s.Add("a", a)
	s.Add("b", b)
	if err := s.Ready(); err != nil {
		return err
	}
	s.Go(a.run)
	s.Go(b.run)
	done := make(chan struct{})
	close(done)
	if err := s.Wait(WaitOptions{Done: done}); err != nil {
		return err
	}
	return s.Finish(nil)
}

// TestSessionTicks: Tick runs every Every during the loop phase.
func TestSessionTicks(t *testing.T) {
	s := NewSession(context.Background(), 50*time.Millisecond, "")
	defer s.Close()
	n := 0
	if err := s.Wait(WaitOptions{Every: 5 * time.Millisecond, Tick: func() { n++ }}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("no tick in 50 ms at 5 ms")
	}
}

// TestSessionLimit: Limit starts the run's clock when it is called (a
// setup before it does not count), and the parent's end still ends it.
func TestSessionLimit(t *testing.T) {
	s := NewSession(context.Background(), 0, "")
	defer s.Close()
	time.Sleep(60 * time.Millisecond) // a setup longer than the limit
	start := time.Now()
	s.Limit(40 * time.Millisecond)
	if err := s.Wait(WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > time.Second {
		t.Errorf("the loop phase lasted %v after Limit(40ms)", d)
	}

	parent, cancel := context.WithCancel(context.Background())
	s2 := NewSession(parent, 0, "")
	defer s2.Close()
	s2.Limit(time.Hour)
	cancel()
	select {
	case <-s2.Context().Done():
	case <-time.After(time.Second):
		t.Error("the parent's end did not end a limited session")
	}
}

// TestSessionRemoveReady: RemoveReady removes the ready file at once (a
// second signal's exit without Close), and Close after it is harmless.
func TestSessionRemoveReady(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	s := NewSession(context.Background(), 0, ready)
	if err := s.Ready(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ready); err != nil {
		t.Fatalf("no ready file after Ready: %v", err)
	}
	s.RemoveReady()
	if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file after RemoveReady: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// TestSessionWindow: the window is Ready to Finish (the traced time a
// recording carries, analysis.Report.WindowNs), 0 before both.
func TestSessionWindow(t *testing.T) {
	log := &callLog{}
	a := newFake("a", log)
	s := NewSession(context.Background(), 0, "")
	s.Add("a", a)
	if w := s.Window(); w != 0 {
		t.Errorf("window %v before Ready", w)
	}
	time.Sleep(20 * time.Millisecond) // before Ready: not traced
	start := time.Now()
	if err := s.Ready(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	s.Go(a.run)
	if err := s.Finish(nil); err != nil {
		t.Fatal(err)
	}
	w, outer := s.Window(), time.Since(start)
	t.Logf("window %v, before Ready to after Finish %v", w, outer)
	// Exact bounds, no margin: the window holds the 30 ms slept between
	// Ready and Finish and lies inside the span measured around both.
	if w < 30*time.Millisecond || w > outer {
		t.Errorf("window %v: want at least the 30 ms slept after Ready and at most %v", w, outer)
	}
}
