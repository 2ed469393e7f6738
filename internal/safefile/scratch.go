package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Scratch is a private directory (mode 0700, a fresh name, created with
// mkdir(2) so it cannot already exist as a link) for one run's temporary
// files. It holds an exclusive flock(2) on itself while the run lives, so
// the next run can tell a killed run's scratch (no lock) from a live one's.
type Scratch struct {
	// Path is the directory's path.
	Path string
	lock *os.File
}

// NewScratch removes stale scratch directories named prefix* in parent
// (left by a run that was killed), then creates a new one. parent is
// checked as CheckDir checks a file's directory.
func NewScratch(parent, prefix string) (*Scratch, []string, error) {
	d, err := openDir(parent)
	if err != nil {
		return nil, nil, err
	}
	real := d.Name()
	d.Close()
	removed := RemoveStale(real, prefix)
	dir, err := os.MkdirTemp(real, prefix)
	if err != nil {
		return nil, removed, fmt.Errorf("creating a private directory in %s: %w", parent, err)
	}
	lock, err := os.Open(dir)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(dir)
		return nil, removed, fmt.Errorf("locking %s: %w", dir, err)
	}
	return &Scratch{Path: dir, lock: lock}, removed, nil
}

// Remove deletes the directory and everything in it, and releases the
// lock. Idempotent.
func (s *Scratch) Remove() error {
	if s == nil || s.lock == nil {
		return nil
	}
	err := os.RemoveAll(s.Path)
	s.lock.Close()
	s.lock = nil
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
