package main

import (
	"syscall"
	"testing"
	"time"
)

// TestRepeatedSignalIsOneRequest: a SIGTERM and a SIGINT sent back to
// back (two signals the kernel cannot merge, as timeout's two SIGTERMs
// sometimes arrive: to the child, then to its group) cancel the run once
// and do not exit the process at once: the test binary would die with
// 143 or 130 if they did. A signal later than repeatGap is a second
// request (e2e's TestSecondSignalExitsAtOnce and TestCommitExitsPromptly
// judge that exit, in a process of their own).
func TestRepeatedSignalIsOneRequest(t *testing.T) {
	ctx, stop := runContext("test", func() { t.Error("exit at once") })
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the first signal did not cancel the run")
	}
	// Past the gap: the process is still here to say so.
	time.Sleep(3 * repeatGap)
}
