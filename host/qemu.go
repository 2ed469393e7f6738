package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// QEMUIdentity is what names a process as QEMU or not: the basename of
// its executable (/proc/PID/exe; "" when the link cannot be read), its
// comm (/proc/PID/comm, which QEMU's -name process= can change) and the
// basename of its argv[0] (/proc/PID/cmdline).
type QEMUIdentity struct {
	Exe, Comm, Argv0 string
}

// IsQEMU: one of the names has "qemu" in it (qemu-system-x86_64,
// qemu-kvm, a comm renamed by -name process= still has the exe's).
func (q QEMUIdentity) IsQEMU() bool {
	for _, n := range []string{q.Exe, q.Comm, q.Argv0} {
		if strings.Contains(strings.ToLower(n), "qemu") {
			return true
		}
	}
	return false
}

// QEMUOf reads pid's QEMUIdentity.
func QEMUOf(pid uint32) QEMUIdentity {
	var q QEMUIdentity
	if exe, err := os.Readlink("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/exe"); err == nil {
		q.Exe = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	q.Comm = Comm(pid)
	if argv, _, err := Cmdline(pid); err == nil && len(argv) > 0 {
		q.Argv0 = filepath.Base(argv[0])
	}
	return q
}
