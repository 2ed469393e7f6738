package host

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxCmdlineBytes bounds a command line read from /proc: QEMU's, with
// libvirt's JSON -blockdev options, runs to tens of KiB.
const maxCmdlineBytes = 1 << 20

// Cmdline returns a process's argv (/proc/PID/cmdline, at most 1 MiB read)
// and its working directory (/proc/PID/cwd; "" when that link cannot be
// read, as for another user's process without CAP_SYS_PTRACE). It fails
// when the process is gone or its command line is empty (a kernel thread,
// a zombie).
func Cmdline(pid uint32) (argv []string, cwd string, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCmdlineBytes))
	if err != nil {
		return nil, "", err
	}
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil, "", fmt.Errorf("pid %d has no command line", pid)
	}
	argv = strings.Split(string(b), "\x00")
	cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return argv, cwd, nil
}
