package host

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ProcessStat is what /proc/PID/stat says of a process's life: its state
// and its start time.
type ProcessStat struct {
	// State is the main thread's state letter: R running, S sleeping, D
	// disk sleep, T stopped (SIGSTOP), t stopped by a debugger, Z zombie,
	// X dead.
	State byte
	// Start is the start time in clock ticks since boot (field 22): a
	// reused pid has another.
	Start uint64
}

// Stopped reports whether the process is stopped (SIGSTOP, SIGTSTP, or a
// debugger): every thread of it then is.
func (s ProcessStat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// Exited reports whether the process has exited (a zombie its parent has
// not reaped yet, or dead).
func (s ProcessStat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// StatProcess reads /proc/PID/stat. The error wraps os.ErrNotExist once
// the process is gone (and reaped). One open, read and close into a
// buffer on the stack: os.ReadFile's fstat, failed netpoller registration
// and fcntls made it ~9 syscalls, and a commit run's target watch reads it
// every 100 ms for as long as serve runs (bench/findings.md 36).
func StatProcess(pid int) (ProcessStat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	var buf [statBufBytes]byte
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ProcessStat{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	switch {
	case err != nil:
		return ProcessStat{}, &os.PathError{Op: "read", Path: path, Err: err}
	case n == len(buf): // longer than any stat line seen: read it whole
		b, err := os.ReadFile(path)
		if err != nil {
			return ProcessStat{}, err
		}
		return parseProcessStat(pid, string(b))
	}
	return parseProcessStat(pid, string(buf[:max(n, 0)]))
}

// statBufBytes holds a /proc/PID/stat line: 52 numbers of at most 20
// digits and a comm of at most 64 bytes (a kthread's) fit in ~1.2 KiB.
const statBufBytes = 2048

func parseProcessStat(pid int, b string) (ProcessStat, error) {
	// The comm in parentheses may hold spaces and parentheses itself.
	i := strings.LastIndexByte(b, ')')
	if i < 0 {
		return ProcessStat{}, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return ProcessStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the comm", pid, len(f))
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return ProcessStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return ProcessStat{State: f[0][0], Start: start}, nil
}
