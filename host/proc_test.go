package host

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestStatProcess follows a child through its life: running or
// sleeping, stopped by SIGSTOP, a zombie once killed and not yet reaped,
// gone once reaped; and a process whose comm holds ") (" parses.
func TestStatProcess(t *testing.T) {
	self, err := StatProcess(os.Getpid())
	if err != nil || self.Start == 0 || self.Stopped() || self.Exited() {
		t.Fatalf("self: %+v, %v", self, err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	waitFor := func(what string, ok func(ProcessStat, error) bool) ProcessStat {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			st, err := StatProcess(pid)
			if ok(st, err) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("child never %s: %+v, %v", what, st, err)
			}
		}
	}
	first := waitFor("sleeping", func(st ProcessStat, err error) bool { return err == nil && st.State == 'S' })
	cmd.Process.Signal(syscall.SIGSTOP)
	if st := waitFor("stopped", func(st ProcessStat, err error) bool { return err == nil && st.Stopped() }); st.Start != first.Start {
		t.Errorf("start time changed: %d then %d", first.Start, st.Start)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	waitFor("a zombie", func(st ProcessStat, err error) bool { return err == nil && st.Exited() })
	cmd.Wait()
	waitFor("gone", func(_ ProcessStat, err error) bool { return errors.Is(err, os.ErrNotExist) })

}

// TestParseProcessStat: the comm may hold spaces and parentheses.
func TestParseProcessStat(t *testing.T) {
	line := "4242 (a) (b c) T 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 12 0 987654 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseProcessStat(4242, line)
	if err != nil || st.State != 'T' || st.Start != 987654 || !st.Stopped() {
		t.Errorf("got %+v, %v", st, err)
	}
	if _, err := parseProcessStat(1, "1 (x) S 0"); err == nil {
		t.Error("a short line parsed")
	}
}
