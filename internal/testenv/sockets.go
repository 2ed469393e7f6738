package testenv

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// HoldSockets starts procs `sleep` processes holding perProc sockets each
// (fresh AF_UNIX datagram sockets passed as ExtraFiles and closed in the
// caller), the open files of a busy node that a /proc/*/fd scan walks
// (host.SocketOwners: ~6 µs per fd). They are killed at the end of the
// test.
func HoldSockets(tb testing.TB, procs, perProc int) {
	tb.Helper()
	sleep := LookPath(tb, "sleep", "coreutils")
	for range procs {
		files := make([]*os.File, perProc)
		for i := range files {
			fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				tb.Fatal(err)
			}
			files[i] = os.NewFile(uintptr(fd), "socket")
		}
		cmd := exec.Command(sleep, "3600")
		cmd.ExtraFiles = files
		err := cmd.Start()
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// OwnSocket opens an AF_UNIX datagram socket in this process, closed at
// the end of the test, and returns its inode: a socket whose owner is
// known (this pid) for the socket-owner look-ups' tests.
func OwnSocket(tb testing.TB) uint64 {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Ino
}
