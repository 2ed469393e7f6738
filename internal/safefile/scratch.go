package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Scratch is a private directory (mode 0700, a fresh name, created with
// mkdirat(2) in the checked parent so it cannot already exist as a link)
// for one run's temporary files. It holds an exclusive flock(2) on itself
// while the run lives, so the next run can tell a killed run's scratch (no
// lock) from a live one's.
//
// Files go through Root, not Path: the owner of the parent can rename the
// scratch away and put a look-alike (with links inside) at Path, but Root
// is the directory that was made and checked, wherever it is moved.
type Scratch struct {
	// Path is the directory's path when it was made: for messages only.
	Path string
	// Root is the directory itself, opened by descriptor and checked
	// (ours, 0700): open every file through it.
	Root   *os.Root
	lock   *os.File // the directory, held flocked
	parent *os.File // the checked parent, for removing the directory
	name   string
}

// NewScratch removes stale scratch directories named prefix* in parent
// (left by a run that was killed), then creates a new one. parent is
// checked as CheckDir checks a file's directory.
func NewScratch(parent, prefix string) (*Scratch, []string, error) {
	d, err := openDir(parent)
	if err != nil {
		return nil, nil, err
	}
	removed := RemoveStale(d.Name(), prefix)
	s, err := makeScratch(d, prefix)
	if err != nil {
		d.Close()
		return nil, removed, err
	}
	return s, removed, nil
}

// makeScratch makes, opens, checks and locks a fresh directory in d.
func makeScratch(d *os.File, prefix string) (*Scratch, error) {
	var name string
	var err error
	for i := 0; ; i++ {
		name = tempName(prefix, i)
		err = unix.Mkdirat(int(d.Fd()), name, 0o700)
		if !errors.Is(err, unix.EEXIST) || i >= 100 {
			break
		}
	}
	path := filepath.Join(d.Name(), name)
	if err != nil {
		return nil, fmt.Errorf("creating a private directory in %s: %w", d.Name(), err)
	}
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	lock := os.NewFile(uintptr(fd), path)
	s := &Scratch{Path: path, lock: lock, parent: d, name: name}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Uid != uint32(os.Geteuid()) || st.Mode&0o077 != 0 {
		lock.Close()
		return nil, fmt.Errorf("%s was replaced while it was made: give a --dir only root can change", path)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		s.Remove()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// os.Root opens by name; it is believed only if it is the directory
	// held open above.
	root, err := os.OpenRoot(path)
	if err == nil {
		held, _ := lock.Stat()
		if opened, serr := root.Stat("."); serr != nil || held == nil || !os.SameFile(held, opened) {
			root.Close()
			err = fmt.Errorf("%s was replaced while it was opened: give a --dir only root can change", path)
		}
	}
	if err != nil {
		s.Remove()
		return nil, err
	}
	s.Root = root
	return s, nil
}

// Remove empties the directory through Root, deletes it if its name
// still holds it (not a look-alike put there since), and releases the
// lock. Idempotent.
func (s *Scratch) Remove() error {
	if s == nil || s.lock == nil {
		return nil
	}
	var err error
	if s.Root != nil {
		ents, _ := fs.ReadDir(s.Root.FS(), ".")
		for _, e := range ents {
			if rerr := s.Root.RemoveAll(e.Name()); err == nil {
				err = rerr
			}
		}
		s.Root.Close()
		s.Root = nil
	}
	var held, named unix.Stat_t
	if unix.Fstat(int(s.lock.Fd()), &held) == nil &&
		unix.Fstatat(int(s.parent.Fd()), s.name, &named, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		held.Dev == named.Dev && held.Ino == named.Ino {
		if uerr := unix.Unlinkat(int(s.parent.Fd()), s.name, unix.AT_REMOVEDIR); err == nil {
			err = uerr
		}
	}
	s.lock.Close()
	s.lock = nil
	s.parent.Close()
	return err
}

// RemoveStale deletes every directory named prefix* directly in parent that
// this user owns, that is not a link, and that no live run holds locked
// (see Scratch), and returns their paths.
func RemoveStale(parent, prefix string) []string {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	euid := uint32(os.Geteuid())
	var removed []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.IsDir() { // IsDir is false for a link
			continue
		}
		p := filepath.Join(parent, e.Name())
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Uid != euid || st.Mode&0o077 != 0 {
			unix.Close(fd)
			continue
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) || err != nil {
			unix.Close(fd) // a live run's
			continue
		}
		if os.RemoveAll(p) == nil {
			removed = append(removed, p)
		}
		unix.Close(fd)
	}
	return removed
}
