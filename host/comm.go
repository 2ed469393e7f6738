package host

import (
	"os"
	"strconv"
	"strings"
)

// Comm reads /proc/PID/comm: the kernel's task name, at most 15 bytes
// ("" if the process is gone or unreadable).
func Comm(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// PIDsWithComm lists up to max processes (thread-group leaders in /proc)
// whose comm is comm, in /proc's order; nil when none or /proc is
// unreadable. For a start-up hint, not a filter: a process can start or
// exit right after.
func PIDsWithComm(comm string, max int) []uint32 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []uint32
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || !e.IsDir() {
			continue
		}
		if Comm(uint32(pid)) == comm {
			out = append(out, uint32(pid))
			if len(out) >= max {
				break
			}
		}
	}
	return out
}
