package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestPIDsByCommSkipsZombies: a process of the comm is found while it
// runs, and not once it has exited unreaped (a zombie, as an etcd is
// while its supervisor restarts it).
func TestPIDsByCommSkipsZombies(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	const comm = "pidsbycommzomb" // 14 bytes: the kernel keeps 15
	bin := filepath.Join(t.TempDir(), comm)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	if pids, err := PIDsByComm("no-such-comm-x"); err != nil || len(pids) != 0 {
		t.Errorf("PIDsByComm of an unused comm: %v, %v", pids, err)
	}
	if pids, err := PIDsByComm(comm); err != nil || !slices.Equal(pids, []int{pid}) {
		t.Fatalf("running: PIDsByComm(%q) = %v, %v; want [%d]", comm, pids, err, pid)
	}
	// SIGKILL, not reaped: the child stays a zombie until cmd.Wait.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := StatProcess(pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Exited() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not a zombie 5 s after SIGKILL (state %c)", pid, st.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pids, err := PIDsByComm(comm); err != nil || len(pids) != 0 {
		t.Errorf("zombie: PIDsByComm(%q) = %v, %v; want none", comm, pids, err)
	}
}
