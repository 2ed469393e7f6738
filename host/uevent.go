package host

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// BlockUevents receives the kernel's uevents (its NETLINK_KOBJECT_UEVENT
// multicast group, the one udev listens to) and reports those of block
// devices: a disk added (a device-mapper or md device made), changed (a
// dm table resumed, an md array started) or removed. A watcher waits on
// it instead of scanning /sys/block on a timer. Any user may join the
// group; a network namespace owned by the initial user namespace (a
// pod's) receives the kernel's uevents as the host's does (Linux 4.18+).
type BlockUevents struct {
	f   *os.File // the socket, in Go's netpoller
	buf []byte
}

// ueventBufBytes: one uevent is at most 2048 bytes of environment
// (UEVENT_BUFFER_SIZE) plus its header.
const ueventBufBytes = 8192

// OpenBlockUevents joins the kernel's uevent group.
func OpenBlockUevents() (*BlockUevents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("opening the uevent socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("joining the kernel's uevent group: %w", err)
	}
	return &BlockUevents{f: os.NewFile(uintptr(fd), "uevent"), buf: make([]byte, ueventBufBytes)}, nil
}

// Next blocks until the next uevent of a block device and returns nil.
// It returns nil too when the socket's buffer overflowed (ENOBUFS): some
// uevents were lost, and the caller looks again as for one. After Close
// it returns an error wrapping os.ErrClosed.
func (u *BlockUevents) Next() error {
	for {
		n, err := u.f.Read(u.buf)
		switch {
		case errors.Is(err, unix.ENOBUFS):
			return nil
		case err != nil:
			return err
		case isBlockUevent(u.buf[:n]):
			return nil
		}
	}
}

// Close leaves the group and ends a Next in progress. Safe to call more
// than once.
func (u *BlockUevents) Close() error {
	if err := u.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// isBlockUevent says whether msg, a kernel uevent ("ACTION@DEVPATH" then
// NUL-separated KEY=VALUE pairs), is one of the block subsystem's.
func isBlockUevent(msg []byte) bool {
	for f := range bytes.SplitSeq(msg, []byte{0}) {
		if bytes.Equal(f, []byte("SUBSYSTEM=block")) {
			return true
		}
	}
	return false
}
