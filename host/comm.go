package host

import (
	"bytes"
	"os"
	"slices"
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

// PIDsByComm returns the live processes (thread-group leaders in /proc)
// whose comm (/proc/PID/comm, the kernel's 15-byte name) is comm, in
// ascending order. A zombie (an exited etcd its parent has not reaped
// yet, as while a supervisor restarts it) is no process to trace and is
// left out. A process can start or exit right after.
func PIDsByComm(comm string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() || !HasComm(pid, comm) {
			continue
		}
		if st, err := StatProcess(pid); err == nil && !st.Exited() {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}
