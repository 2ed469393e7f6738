package host

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
)

// Mount is one line of /proc/self/mountinfo (proc(5)).
type Mount struct {
	Dev    event.Dev // field 3, major:minor (st_dev of the mount's files)
	Point  string    // mount point, unescaped
	FSType string    // after the " - " separator
	Source string    // after FSType: the device mounted (/dev/loop0), or what the filesystem names its source
}

// Mounts reads /proc/self/mountinfo.
func Mounts() ([]Mount, error) { return MountsIn("/proc/self/mountinfo") }

// MountsIn reads a file in mountinfo's format (proc(5)).
func MountsIn(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := parseMountinfo(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// Cgroup2Mount returns where mounts have the cgroup v2 hierarchy mounted
// (the first cgroup2 mount: /sys/fs/cgroup on a unified host,
// /sys/fs/cgroup/unified on a hybrid one), or false on a host with cgroup
// v1 only.
func Cgroup2Mount(mounts []Mount) (string, bool) {
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.Point, true
		}
	}
	return "", false
}

// parseMountinfo reads one mountinfo line: "id parent maj:min root point
// options [optional...] - fstype source superoptions".
func parseMountinfo(line string) (Mount, bool) {
	f := strings.Fields(line)
	sep := slices.Index(f, "-")
	if len(f) < 5 || sep < 5 || sep+2 >= len(f) {
		return Mount{}, false
	}
	var maj, min uint32
	if _, err := fmt.Sscanf(f[2], "%d:%d", &maj, &min); err != nil {
		return Mount{}, false
	}
	return Mount{Dev: event.MkDev(maj, min), Point: unescapeOctal(f[4]), FSType: f[sep+1], Source: unescapeOctal(f[sep+2])}, true
}

// unescapeOctal undoes the kernel's \ooo escapes of space, tab, newline
// and backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FSTypeOf returns the type of the filesystem that path (resolved through
// symlinks) is on: that of the mount with the longest mount point
// containing it, the last one mounted there if several are.
func FSTypeOf(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", err
	}
	mounts, err := Mounts()
	if err != nil {
		return "", err
	}
	best, fstype := -1, ""
	for _, m := range mounts {
		if len(m.Point) >= best && within(real, m.Point) {
			best, fstype = len(m.Point), m.FSType
		}
	}
	if best < 0 {
		return "", fmt.Errorf("%s is on no mount in /proc/self/mountinfo", path)
	}
	return fstype, nil
}

// within says whether path is dir or below it.
func within(path, dir string) bool {
	return dir == "/" || path == dir || strings.HasPrefix(path, dir+"/")
}

// DiskFSTypes returns the types of the filesystems mounted on disk (a
// whole disk's dev), directly, on a partition of it or through devices
// stacked on it (what r resolves to include it), sorted and without
// repeats; none when nothing on it is mounted.
func DiskFSTypes(r *DeviceResolver, disk event.Dev) ([]string, error) {
	mounts, err := Mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		// (btrfs' anonymous devs resolve through the mount's source.)
		if slices.Contains(r.Resolve(m.Dev).Disks, disk) && !slices.Contains(out, m.FSType) {
			out = append(out, m.FSType)
		}
	}
	slices.Sort(out)
	return out, nil
}

// maxOpenFilesScanned bounds how many of a process's open files
// OpenFileFSTypes looks at (etcd holds a socket per client and peer
// connection; its data files come first, opened at start).
const maxOpenFilesScanned = 65536

// OpenFileFSTypes returns the types of the filesystems that hold the
// regular files pid has open whose path keep accepts (nil: every one):
// each file's st_dev (stat through /proc/PID/fd, so the file the process
// holds, whatever its mount namespace) matched against the mounts pid
// sees (/proc/PID/mountinfo); the path (readlink, as pid names it) only
// chooses. For etcd, keep picks its WAL segments and bbolt file: the
// files it fsyncs. It fails when no file is kept, or a kept one is on a
// device no mount of pid shows (btrfs subvolumes and overlayfs report
// devices of their own): the caller cannot tell then.
func OpenFileFSTypes(pid int, keep func(path string) bool) ([]string, error) {
	mounts, err := MountsIn(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil, err
	}
	byDev := map[event.Dev]string{}
	for _, m := range mounts {
		byDev[m.Dev] = m.FSType
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(maxOpenFilesScanned)
	d.Close()
	if err != nil && len(names) == 0 {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []string
	files := 0
	for _, n := range names {
		fd := dir + "/" + n
		if keep != nil {
			path, err := os.Readlink(fd)
			if err != nil || !keep(path) {
				continue
			}
		}
		st, err := os.Stat(fd)
		if err != nil || !st.Mode().IsRegular() {
			continue // closed meanwhile, or a socket, pipe, device
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		dev := event.MkDev(unix.Major(sys.Dev), unix.Minor(sys.Dev))
		t, ok := byDev[dev]
		if !ok {
			return nil, fmt.Errorf("pid %d: %s is on device %s, which no mount in /proc/%d/mountinfo shows", pid, fd, dev, pid)
		}
		files++
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if files == 0 {
		return nil, fmt.Errorf("pid %d has no such regular file open", pid)
	}
	return out, nil
}
