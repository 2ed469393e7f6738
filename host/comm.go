package host

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Comm reads /proc/PID/comm: the kernel's task name, at most 15 bytes
// ("" if the process is gone or unreadable).
func Comm(pid uint32) string {
	var buf [commBufBytes]byte
	return string(readComm(strconv.FormatUint(uint64(pid), 10), &buf))
}

// HasComm says whether process pid runs now under the name comm
// (/proc/PID/comm).
func HasComm(pid int, comm string) bool {
	var buf [commBufBytes]byte
	return string(readComm(strconv.Itoa(pid), &buf)) == comm
}

// commBufBytes holds a comm (15 bytes) and its newline.
const commBufBytes = 32

// readComm reads /proc/PID/comm into buf with one open, read and close
// and returns the name without its newline (empty if the process is gone
// or unreadable). os.ReadFile's fstat and attempt at the netpoller made
// it six syscalls, and serve without etcd yet reads every process's each
// look (watchFSTypes, bench/findings.md 31).
func readComm(pid string, buf *[commBufBytes]byte) []byte {
	fd, err := unix.Open("/proc/"+pid+"/comm", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return nil
	}
	return bytes.TrimSpace(buf[:n])
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
