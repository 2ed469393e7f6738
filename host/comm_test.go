package host

import (
	"os"
	"slices"
	"testing"
)

// TestPIDsWithComm: this test process is found by its own comm (read back
// through Comm), and a comm no process has finds none.
func TestPIDsWithComm(t *testing.T) {
	self := uint32(os.Getpid())
	comm := Comm(self)
	if comm == "" {
		t.Fatal("Comm of this process is empty")
	}
	if pids := PIDsWithComm(comm, 1<<20); !slices.Contains(pids, self) {
		t.Errorf("PIDsWithComm(%q) = %v, lacks this process %d", comm, pids, self)
	}
	if pids := PIDsWithComm("no-such-comm-x", 10); len(pids) != 0 {
		t.Errorf("PIDsWithComm of an unused comm: %v", pids)
	}
	if pids := PIDsWithComm(comm, 1); len(pids) > 1 {
		t.Errorf("max 1 gave %v", pids)
	}
}
