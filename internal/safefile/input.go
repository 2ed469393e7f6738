package safefile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

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
		return nil, &NotRegularError{Path: path, Kind: kind}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// NotRegularError is OpenInput's refusal of a file that is not a regular
// file. Its Error names Path; a caller that names the path itself (as
// diagnose's report does, before each input's error) words Kind alone.
type NotRegularError struct {
	Path string
	// Kind: what the file is instead, "a directory", "a FIFO or pipe".
	Kind string
}

func (e *NotRegularError) Error() string { return e.Path + " is " + e.Kind + ", not a regular file" }

// ReadInput reads the regular file at path (OpenInput) whole, and fails
// if it holds more than max bytes.
func ReadInput(path string, max int64) ([]byte, error) {
	f, err := OpenInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, path, max)
}

// readBounded reads f whole, and fails if it holds more than max bytes.
func readBounded(f *os.File, path string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d KiB", path, max>>10)
	}
	return b, nil
}

// MaxSecretBytes bounds a file of secrets read from a path the user names
// (serve --otlp-header-file): a few headers of at most 4 KiB each.
const MaxSecretBytes = 64 << 10

// ReadSecret reads a file whose content root will send as a credential
// (a bearer token), checked as ssh checks a private key: ReadInput's
// checks (a regular file, at most max bytes), no symbolic link on its way
// that another user planted or could change, and the file itself owned by
// root or etcdscope's user and writable by no one else, since whoever can
// write it chooses what root sends. The checks are of the opened file
// (fstat), so a file swapped after the check is not read. An error names
// the path and the fix, never the content.
func ReadSecret(path string, max int64) ([]byte, error) {
	f, err := OpenInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Uid != 0 && st.Uid != euid:
		return nil, fmt.Errorf("%s is owned by uid %d, not root: give a file of root's (chown root %s)", path, st.Uid, path)
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("%s is writable by group or others (mode %04o): chmod go-w %s", path, st.Mode&0o7777, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := checkLinks(abs); err != nil {
		return nil, err
	}
	if st.Size > max {
		return nil, fmt.Errorf("%s is larger than %d KiB", path, max>>10)
	}
	return readBounded(f, path, max)
}
