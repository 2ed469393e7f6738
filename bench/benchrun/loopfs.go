package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/etcdscope/etcdscope/host"
)

// starvedScratchPrefix names the starved fsync run's scratch directory
// under /var/tmp; benchrun's pid and a dash follow it, so that a later
// run tells a killed run's leftovers (its pid gone) from a live run's.
const starvedScratchPrefix = "etcdscope-bench-starved-"

// loopFS is a filesystem on a loop device over an image file in a scratch
// directory, mounted there: the starved fsync run's stacked device. What
// it set up on the host is undone once by close, whether the run returns
// or SIGINT/SIGTERM cuts it short (killChildren); one a SIGKILL left
// behind is undone by removeStaleLoops at the next run's start.
type loopFS struct {
	dir, img, mnt string
	close         func() // remove, once, and forget it (onInterrupt)

	mu      sync.Mutex // held through set-up: an interrupt undoes finished steps
	dev     string     // the loop device, "" once detached
	mounted bool
}

// newLoopFS makes a size-byte image in dir, attaches it to a free loop
// device, makes a filesystem of type fstype on it and mounts it at
// dir/mnt; the caller defers close. On an error what was set up is
// removed.
func newLoopFS(dir string, size int64, fstype string) (l *loopFS, err error) {
	l = &loopFS{dir: dir, img: filepath.Join(dir, "disk.img"), mnt: filepath.Join(dir, "mnt")}
	l.close = onInterrupt(func() {
		if err := l.remove(); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
		}
	})
	l.mu.Lock()
	defer func() {
		l.mu.Unlock()
		if err != nil {
			l.close()
		}
	}()
	if err := os.WriteFile(l.img, nil, 0o600); err != nil {
		return l, err
	}
	if err := os.Truncate(l.img, size); err != nil {
		return l, err
	}
	out, err := exec.Command("losetup", "--find", "--show", l.img).Output()
	if err != nil {
		return l, fmt.Errorf("losetup: %w", err)
	}
	l.dev = strings.TrimSpace(string(out))
	if out, err := exec.Command("mkfs."+fstype, "-q", "-F", l.dev).CombinedOutput(); err != nil {
		return l, fmt.Errorf("mkfs.%s: %w: %s", fstype, err, out)
	}
	if err := os.Mkdir(l.mnt, 0o700); err != nil {
		return l, err
	}
	if out, err := exec.Command("mount", l.dev, l.mnt).CombinedOutput(); err != nil {
		return l, fmt.Errorf("mount: %w: %s", err, out)
	}
	l.mounted = true
	return l, nil
}

// remove unmounts the filesystem and then detaches the loop device (not
// while still mounted); what is undone stays undone. The scratch directory
// is its creator's (dropScratch).
func (l *loopFS) remove() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mounted {
		if out, err := exec.Command("umount", l.mnt).CombinedOutput(); err != nil {
			return fmt.Errorf("umount %s: %w: %s", l.mnt, err, out)
		}
		l.mounted = false
	}
	if l.dev != "" {
		if out, err := exec.Command("losetup", "-d", l.dev).CombinedOutput(); err != nil {
			return fmt.Errorf("losetup -d %s: %w: %s", l.dev, err, out)
		}
		l.dev = ""
	}
	return nil
}

// staleLoop is a loop device a killed run left: the device, its backing
// file, and where it is mounted.
type staleLoop struct {
	dev, backing string
	mounts       []string
}

// findStaleLoops returns the loop devices under sysBlock (/sys/block) whose
// backing file is in a starved run's scratch directory under parent
// (parent/starvedScratchPrefix<pid>-*) whose benchrun is no longer
// running (alive(pid) false), each with its mount points from mountinfo
// (/proc/self/mountinfo's format).
func findStaleLoops(sysBlock, mountinfo, parent string, alive func(pid int) bool) ([]staleLoop, error) {
	backings, err := filepath.Glob(filepath.Join(sysBlock, "loop*", "loop", "backing_file"))
	if err != nil {
		return nil, err
	}
	var stale []staleLoop
	for _, b := range backings {
		raw, err := os.ReadFile(b)
		if err != nil {
			continue // detached meanwhile
		}
		file := strings.TrimSuffix(strings.TrimSpace(string(raw)), " (deleted)")
		pid, ok := starvedPID(file, parent)
		if !ok || alive(pid) {
			continue
		}
		stale = append(stale, staleLoop{dev: "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(b))), backing: file})
	}
	if len(stale) == 0 {
		return nil, nil
	}
	mounts, err := host.MountsIn(mountinfo)
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		for i := range stale {
			if m.Source == stale[i].dev {
				stale[i].mounts = append(stale[i].mounts, m.Point)
			}
		}
	}
	return stale, nil
}

// starvedPID returns the benchrun pid in the name of the starved scratch
// directory under parent that file is in, if it is in one.
func starvedPID(file, parent string) (int, bool) {
	rel, err := filepath.Rel(parent, file)
	if err != nil || strings.HasPrefix(rel, "..") {
		return 0, false
	}
	top, _, _ := strings.Cut(rel, string(filepath.Separator))
	rest, ok := strings.CutPrefix(top, starvedScratchPrefix)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(num)
	return pid, ok && err == nil && pid > 0
}

// pidAlive reports whether a process pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// removeStaleLoops undoes what a killed starved run left under parent:
// its mounts, its loop devices and its scratch directory (the project's
// rule: what a run installs is removed at the next start after a kill).
// It returns what it removed, for the log.
func removeStaleLoops(sysBlock, mountinfo, parent string, alive func(pid int) bool) ([]string, error) {
	stale, err := findStaleLoops(sysBlock, mountinfo, parent, alive)
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, s := range stale {
		ok := true
		for _, m := range s.mounts {
			if out, err := exec.Command("umount", m).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("umount %s: %w: %s", m, err, out))
				ok = false
			}
		}
		if !ok {
			continue
		}
		if out, err := exec.Command("losetup", "-d", s.dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("losetup -d %s: %w: %s", s.dev, err, out))
			continue
		}
		done = append(done, s.dev+" ("+s.backing+")")
	}
	// The scratch directories of runs no longer running, loop or not.
	dirs, _ := filepath.Glob(filepath.Join(parent, starvedScratchPrefix+"*"))
	for _, d := range dirs {
		if pid, ok := starvedPID(filepath.Join(d, "x"), parent); ok && !alive(pid) && len(errs) == 0 {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, d)
		}
	}
	return done, errors.Join(errs...)
}

// starvedCgroupPrefix names the starved runs' cgroups (starvedCgroup):
// benchrun's pid follows it.
const starvedCgroupPrefix = "etcdscope-bench-starved-"

// removeStaleCgroups removes the starved runs' cgroups under roots (where
// cpulimit.Make puts them) whose benchrun is no longer running: a
// SIGKILLed run leaves its cgroup, empty once its tracer died with it. It
// returns the directories it removed.
func removeStaleCgroups(roots []string, alive func(pid int) bool) ([]string, error) {
	var done []string
	var errs []error
	for _, root := range roots {
		dirs, _ := filepath.Glob(filepath.Join(root, starvedCgroupPrefix+"*"))
		for _, d := range dirs {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), starvedCgroupPrefix))
			if err != nil || pid <= 0 || alive(pid) {
				continue
			}
			if err := os.Remove(d); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, d)
		}
	}
	return done, errors.Join(errs...)
}
