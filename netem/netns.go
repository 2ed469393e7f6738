package netem

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsDir is where iproute2 (`ip netns add NAME`) and vishvananda/netns
// keep named network namespaces; `--netns NAME` is NetnsDir/NAME.
const NetnsDir = "/var/run/netns"

// NetnsPath is the file --netns arg names: arg itself when it has a
// slash, else NetnsDir/arg.
func NetnsPath(arg string) string {
	if strings.Contains(arg, "/") {
		return arg
	}
	return NetnsDir + "/" + arg
}

// OpenNetns opens the network namespace named by arg for Options.NetNS: a
// name (`ip netns add NAME`, looked up in NetnsDir) or a path with a slash
// in it (/proc/PID/ns/net of a container's process, a bind mount). It
// returns an fd the caller closes. A name that is not there, or a file
// that is not a network namespace, is a *UsageError: nothing was changed.
// The file is only opened for reading (O_RDONLY|O_CLOEXEC); a namespace
// file cannot be written through. The open does not block (O_NONBLOCK): a
// FIFO given as --netns blocked it forever; it is then refused as not a
// namespace file.
func OpenNetns(arg string) (int, error) {
	if arg == "" || arg == "." || arg == ".." {
		return -1, usagef("--netns %q: give a name from `ip netns list` or a path such as /proc/PID/ns/net", arg)
	}
	path := NetnsPath(arg)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, usagef("--netns %s: no such network namespace (%s; see `ip netns list`, or give /proc/PID/ns/net)", arg, path)
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			// /proc/PID/ns/net of a process with more privilege than this
			// one needs ptrace access to it.
			return -1, usagef("--netns %s: opening %s: %v: another process's namespace needs root or CAP_SYS_PTRACE (or give a name from `ip netns list`); nothing was changed", arg, path, err)
		}
		return -1, usagef("--netns %s: opening %s: %v", arg, path, err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		unix.Close(fd)
		return -1, usagef("--netns %s: %s is not a namespace file (want `ip netns list` names or /proc/PID/ns/net)", arg, path)
	}
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("--netns %s: asking the kernel for the namespace type: %w", arg, err)
	}
	if typ != unix.CLONE_NEWNET {
		unix.Close(fd)
		return -1, usagef("--netns %s: %s is a namespace, but not a network namespace (want /proc/PID/ns/net, not ns/mnt or ns/pid)", arg, path)
	}
	return fd, nil
}
