package pipeline

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestWatchTarget follows a child: a stop of ~300 ms is one period, a
// stop still going when the run ends is ongoing, and its death ends the
// watch at once (within targetPoll) through exited.
func TestWatchTarget(t *testing.T) {
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}

	cmd := start()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	result := watchTarget(ctx, cmd.Process.Pid, func() { close(exited) })
	time.Sleep(150 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(250 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(250 * time.Millisecond)
	cancel()
	tg := result()
	if tg.Exited || len(tg.Stops) != 2 {
		t.Fatalf("target %+v: want two stops, no exit", tg)
	}
	if s := tg.Stops[0]; s.Ongoing || s.Ns < 150e6 || s.Ns > 500e6 || s.AfterNs < 100e6 || s.AfterNs > 350e6 {
		t.Errorf("first stop %+v: want ~300 ms from ~150 ms", s)
	}
	if s := tg.Stops[1]; !s.Ongoing || s.Ns < 100e6 || s.Ns > 450e6 {
		t.Errorf("second stop %+v: want ~250 ms, ongoing", s)
	}
	select {
	case <-exited:
		t.Error("exited called for a process that lives")
	default:
	}

	cmd = start()
	exited = make(chan struct{})
	result = watchTarget(context.Background(), cmd.Process.Pid, func() { close(exited) })
	time.Sleep(150 * time.Millisecond)
	killed := time.Now()
	cmd.Process.Kill() // a zombie until waited for: that is exit too
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		t.Fatal("exited not called within 2 s of the kill")
	}
	if d := time.Since(killed); d > 2*targetPoll+100*time.Millisecond {
		t.Errorf("death seen %v after the kill (polling every %v)", d, targetPoll)
	}
	if tg := result(); !tg.Exited || tg.ExitedAfterNs < 100e6 || tg.ExitedAfterNs > 500e6 {
		t.Errorf("target %+v: want exited ~150 ms in", tg)
	}
}
