// Package safefile creates the files etcdscope writes on a node it runs on
// as root (--ready-file, peers --record, report --html, the workload's
// scratch) without following a link another user planted, and without
// leaving a partial file behind; and opens the files it reads from a path
// the user names (OpenInput, ReadInput) only if they are regular files, so
// that a FIFO cannot block it and /dev/zero cannot fill its memory.
//
// The rules, in the order a path meets them:
//
//   - Every symbolic link on the way to the directory must be trusted: owned
//     by root or by us, in a directory nobody else may change (not writable
//     by group or others, or sticky). /var/run -> /run passes; /tmp/x ->
//     /etc planted by a user does not. The checked path is then opened one
//     component at a time with O_NOFOLLOW, so a link swapped in afterwards
//     fails instead of being followed.
//   - The directory itself must not be writable by others without the
//     sticky bit (anyone could rename our file there and put a link in its
//     place).
//   - The file is created under a temporary name with O_CREAT|O_EXCL|
//     O_NOFOLLOW, written, fsynced, and renamed over the final name.
//     rename(2) replaces a link at the final name instead of writing
//     through it, and a failure (a full disk, a signal) leaves at most the
//     temporary file, which Close removes.
//   - The final name, if it exists, must be a regular file, or a link
//     another user planted to one (or dangling), which rename replaces. A
//     link root or we own is refused (/dev/stdout -> /proc/self/fd/1 with
//     stdout redirected to a file: the rename would replace /dev/stdout);
//     and a device node, a FIFO, a socket or a
//     directory there, or a link to one (/dev/null, /dev/stdout ->
//     /proc/self/fd/1 -> a pipe or a tty), is refused with an error naming
//     the fix, in CheckDir, Create and again just before Commit's rename:
//     renaming over /dev/null would leave a regular file in its place, and
//     writing into a device is not what a file flag promises (use a
//     regular file, or leave the flag out). Remove deletes only the regular
//     file Commit placed.
package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// CheckDir reports, as an error naming the fix, why a file could not be
// created safely at path: its directory is missing, is not a directory, is
// reached through an untrusted link, or is writable by others and not
// sticky; or path itself is a directory. Commands call it while validating flags, before touching the
// host.
func CheckDir(path string) error {
	d, err := openDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	var st unix.Stat_t
	if unix.Fstatat(int(d.Fd()), filepath.Base(path), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("%s is a directory: give a file name in it, e.g. %s", path, filepath.Join(path, "etcdscope.out"))
	}
	return checkTarget(int(d.Fd()), filepath.Base(path), path)
}

// checkTarget refuses a final name that holds, or links to, anything but a
// regular file: renaming over it would replace a device node, a FIFO or a
// link to one with a regular file.
func checkTarget(dirfd int, name, path string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil // nothing there yet
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		owner := st.Uid
		var target unix.Stat_t
		dangling := unix.Fstatat(dirfd, name, &target, 0) != nil
		if !dangling {
			if kind := fileKind(target.Mode); kind != "" {
				return fmt.Errorf("%s is %s, not a regular file: give the path of a regular file to write, or leave the flag out", path, kind)
			}
		}
		if owner == 0 || int(owner) == os.Geteuid() {
			// Root's or our own link (/dev/stdout -> /proc/self/fd/1 with
			// stdout redirected to a file, a link in the operator's own
			// directory): renaming over it would replace the link itself.
			to, _ := readlinkat(dirfd, name)
			return fmt.Errorf("%s is a symbolic link (to %s): give the file itself, or remove the link; etcdscope neither replaces nor writes through it", path, to)
		}
		return nil // another user's link, planted: rename replaces it, never writing through
	}
	if kind := fileKind(st.Mode); kind != "" {
		return fmt.Errorf("%s is %s, not a regular file: give the path of a regular file to write, or leave the flag out", path, kind)
	}
	return nil
}

// readlinkat returns the target of the link name in dirfd.
func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// fileKind names a file type other than a regular file ("" for one).
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFIFO:
		return "a FIFO or pipe"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "a file of an unknown type"
}

// File is a file being written under a temporary name next to its final
// path; Commit puts it in place. Not safe for concurrent use.
type File struct {
	dir       *os.File // the directory, opened without following links
	name      string   // final base name
	tmp       string   // temporary base name; "" once renamed or removed
	f         *os.File // the temporary file until Commit
	dev, ino  uint64   // identity of the placed file, for Remove
	ctime     unix.Timespec
	committed bool
}

// Create opens a new temporary file in path's directory (mode perm),
// checked as CheckDir does. Write to it, then Commit; Close without Commit
// removes it.
func Create(path string, perm os.FileMode) (*File, error) {
	name := filepath.Base(path)
	if name == "." || name == "/" || name == ".." {
		return nil, fmt.Errorf("%s: give a file name, not a directory", path)
	}
	dir, err := openDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if err := checkTarget(int(dir.Fd()), name, path); err != nil {
		dir.Close()
		return nil, err
	}
	for i := 0; ; i++ {
		tmp := tempName("."+name+".tmp-", i)
		fd, err := unix.Openat(int(dir.Fd()), tmp,
			unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if errors.Is(err, unix.EEXIST) && i < 100 {
			continue
		}
		if err != nil {
			dir.Close()
			return nil, fmt.Errorf("creating a temporary file in %s: %w", dir.Name(), err)
		}
		// O_CREAT's mode is masked by the umask; the caller asked for perm.
		_ = unix.Fchmod(fd, uint32(perm.Perm()))
		return &File{dir: dir, name: name, tmp: tmp, f: os.NewFile(uintptr(fd), filepath.Join(dir.Name(), tmp))}, nil
	}
}

// tempName is a fresh name starting with prefix, different for each try i.
func tempName(prefix string, i int) string {
	return prefix + strconv.FormatUint(uint64(time.Now().UnixNano())+uint64(i)*7919, 36)
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	if f.f == nil {
		return 0, os.ErrClosed
	}
	return f.f.Write(p)
}

// Commit flushes the temporary file to disk and renames it over the final
// name (replacing a link there, never writing through it).
func (f *File) Commit() error {
	if f.f == nil {
		return os.ErrClosed
	}
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	f.f = nil
	if err == nil {
		err = checkTarget(int(f.dir.Fd()), f.name, f.Path())
	}
	if err == nil {
		err = unix.Renameat(int(f.dir.Fd()), f.tmp, int(f.dir.Fd()), f.name)
	}
	if err != nil {
		_ = unix.Unlinkat(int(f.dir.Fd()), f.tmp, 0)
		f.tmp = ""
		return fmt.Errorf("writing %s: %w", f.Path(), err)
	}
	f.tmp = ""
	// The placed file's identity, with its ctime (rename set it): an inode
	// number alone is reused at once on tmpfs.
	var st unix.Stat_t
	if unix.Fstatat(int(f.dir.Fd()), f.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		f.dev, f.ino, f.ctime, f.committed = st.Dev, st.Ino, st.Ctim, true
	}
	_ = f.dir.Sync() // the rename itself, durable
	return nil
}

// Path is the final path.
func (f *File) Path() string { return filepath.Join(f.dir.Name(), f.name) }

// Remove deletes the committed file if the final name still holds the file
// Commit placed (not one someone put there since).
func (f *File) Remove() error {
	if !f.committed || f.dir == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(f.dir.Fd()), f.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil // gone already
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != f.dev || st.Ino != f.ino || st.Ctim != f.ctime {
		return nil
	}
	f.committed = false
	return unix.Unlinkat(int(f.dir.Fd()), f.name, 0)
}

// Close removes the temporary file if Commit was not called, and releases
// the directory. It is idempotent; a committed file stays.
func (f *File) Close() error {
	if f.f != nil {
		f.f.Close()
		f.f = nil
	}
	if f.dir == nil {
		return nil
	}
	if f.tmp != "" {
		_ = unix.Unlinkat(int(f.dir.Fd()), f.tmp, 0)
		f.tmp = ""
	}
	err := f.dir.Close()
	f.dir = nil
	return err
}

// WriteFile writes data to path as Create, Write and Commit do, and
// returns the committed file: call its Remove to delete it at exit (a
// ready file) and Close to release its directory.
func WriteFile(path string, data []byte, perm os.FileMode) (*File, error) {
	f, err := Create(path, perm)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Ready is a --ready-file: Put writes it once the probes are attached and
// Remove deletes it at exit. A Ready with an empty path does nothing. Its
// methods are safe for concurrent use (a server's ready callback runs on
// another goroutine than its exit path).
type Ready struct {
	path string
	mu   sync.Mutex
	f    *File
}

// NewReady returns the ready file for path ("" for none).
func NewReady(path string) *Ready { return &Ready{path: path} }

// Put writes content to the ready file.
func (r *Ready) Put(content string) error {
	if r == nil || r.path == "" {
		return nil
	}
	f, err := WriteFile(r.path, []byte(content), 0o644)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked()
	r.f = f
	return nil
}

// Remove deletes the ready file if it is still the one Put wrote.
func (r *Ready) Remove() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked()
}

// dropLocked removes the file Put wrote last, if any; r.mu is held.
func (r *Ready) dropLocked() {
	if r.f != nil {
		r.f.Remove()
		r.f.Close()
		r.f = nil
	}
}

// openDir opens dir for *at calls: every link on the way must be trusted
// (see the package comment), then the resolved path is opened component by
// component without following any link, and the directory must not be
// writable by others unless sticky.
func openDir(dir string) (*os.File, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := checkLinks(abs); err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("directory %s does not exist: create it or give another path", dir)
		}
		return nil, fmt.Errorf("directory %s: %w", dir, err)
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for _, c := range strings.Split(strings.TrimPrefix(real, "/"), "/") {
		if c == "" {
			continue
		}
		nfd, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s is not a directory: give a path in an existing directory", dir)
		}
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("directory %s changed into a symbolic link while opening it: give a path only root can change", dir)
		}
		if err != nil {
			return nil, fmt.Errorf("opening directory %s: %w", dir, err)
		}
		fd = nfd
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&0o002 != 0 && st.Mode&unix.S_ISVTX == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("directory %s is writable by every user and not sticky (anyone could swap the file for a link): give a directory only its owner can change", dir)
	}
	return os.NewFile(uintptr(fd), real), nil
}

// checkLinks fails at the first symbolic link on abs's way that another
// user could have planted or could change.
func checkLinks(abs string) error {
	euid := uint32(os.Geteuid())
	p := "/"
	for _, c := range strings.Split(strings.TrimPrefix(abs, "/"), "/") {
		if c == "" {
			continue
		}
		parent := p
		p = filepath.Join(p, c)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("directory %s does not exist: create it or give another path", abs)
			}
			if errors.Is(err, unix.ENOTDIR) {
				return fmt.Errorf("%s is not a directory: give a path in an existing directory", filepath.Dir(p))
			}
			return fmt.Errorf("checking %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			continue
		}
		var pst unix.Stat_t
		if err := unix.Stat(parent, &pst); err != nil {
			return fmt.Errorf("checking %s: %w", parent, err)
		}
		othersMayChange := pst.Mode&0o022 != 0 && pst.Mode&unix.S_ISVTX == 0
		if (st.Uid != 0 && st.Uid != euid) || othersMayChange {
			return fmt.Errorf("%s is a symbolic link owned by uid %d in %s, which others may change: give the real path instead", p, st.Uid, parent)
		}
	}
	return nil
}
