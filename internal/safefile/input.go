package safefile

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxPEMBytes bounds a certificate, key or CA bundle read from a path the
// user names: a CA bundle of every public root is about 200 KiB.
const MaxPEMBytes = 1 << 20

// OpenInput opens path, a file the user named for etcdscope to read, and
// fails unless it is a regular file: a FIFO would block the read forever
// and a device such as /dev/zero never ends. The open itself is
// non-blocking (a FIFO with no writer would block it), then the file is
// checked and set back to blocking reads.
func OpenInput(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if kind := fileKind(st.Mode); kind != "" {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is %s, not a regular file", path, kind)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ReadInput reads the regular file at path (OpenInput) whole, and fails
// if it holds more than max bytes.
func ReadInput(path string, max int64) ([]byte, error) {
	f, err := OpenInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d KiB", path, max>>10)
	}
	return b, nil
}
