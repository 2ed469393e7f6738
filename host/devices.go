package host

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
)

// DeviceInfo names the device of an fsync's filesystem and the whole disks
// whose block requests count for it.
type DeviceInfo struct {
	Dev   event.Dev   // as the fsync event reports it (s_dev or i_rdev)
	Name  string      // kernel name: "vda1", "loop0"; "" when not a block device
	Disks []event.Dev // whole disks (gendisk) whose requests serve this filesystem
	// DiskNames holds the kernel names of Disks, in the same order.
	DiskNames []string
}

// DeviceResolver maps filesystem devices to disks through sysfs and
// /proc/self/mountinfo, caching the answers. btrfs and other filesystems
// with an anonymous s_dev (major 0) are resolved through the mount's source
// device. Not safe for concurrent use.
type DeviceResolver struct {
	cache   map[event.Dev]DeviceInfo
	backing map[event.Dev]*BackingFile
	// SysRoot and ProcRoot default to /sys and /proc; tests may point them
	// at fixtures.
	SysRoot, ProcRoot string
}

// NewDeviceResolver returns a resolver reading the live /sys and /proc.
func NewDeviceResolver() *DeviceResolver {
	return &DeviceResolver{cache: map[event.Dev]DeviceInfo{}, SysRoot: "/sys", ProcRoot: "/proc"}
}

// Resolve returns what is known of d; unknown devices (tmpfs, overlay)
// come back with no disks.
func (r *DeviceResolver) Resolve(d event.Dev) DeviceInfo {
	if info, ok := r.cache[d]; ok {
		return info
	}
	info := r.resolve(d, 0)
	r.cache[d] = info
	return info
}

func (r *DeviceResolver) resolve(d event.Dev, depth int) DeviceInfo {
	info := DeviceInfo{Dev: d}
	sys := filepath.Join(r.SysRoot, "dev/block", d.String())
	real, err := filepath.EvalSymlinks(sys)
	if err == nil {
		info.Name = filepath.Base(real)
		disk, diskName := d, info.Name
		if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
			if pd, err := readDev(filepath.Join(filepath.Dir(real), "dev")); err == nil {
				disk, diskName = pd, filepath.Base(filepath.Dir(real))
			}
		}
		info.Disks = []event.Dev{disk}
		info.DiskNames = []string{diskName}
		return info
	}
	if depth > 0 {
		return info
	}
	// Anonymous device (btrfs, or a filesystem on a device we cannot see):
	// find its mount and resolve the mount source instead.
	src, _ := r.mount(d)
	if !strings.HasPrefix(src, "/dev/") {
		return info
	}
	var st unix.Stat_t
	if err := unix.Stat(src, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return info
	}
	under := r.resolve(event.DevFromUnix(st.Rdev), depth+1)
	info.Name = under.Name
	info.Disks, info.DiskNames = under.Disks, under.DiskNames
	return info
}

func readDev(path string) (event.Dev, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var maj, min uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &maj, &min); err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return event.MkDev(maj, min), nil
}

// mount returns the source and filesystem type of the first mount of
// device d in /proc/self/mountinfo (proc(5): field 3 is major:minor; the
// fstype and the source follow the " - " separator).
func (r *DeviceResolver) mount(d event.Dev) (source, fstype string) {
	f, err := os.Open(filepath.Join(r.ProcRoot, "self/mountinfo"))
	if err != nil {
		return "", ""
	}
	defer f.Close()
	want := d.String()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[2] != want {
			continue
		}
		for i, fld := range fields {
			if fld == "-" && i+2 < len(fields) {
				return fields[i+2], fields[i+1]
			}
		}
	}
	return "", ""
}

// StackedDisks returns the names of the whole disks under sysRoot/block
// (sysRoot: "/sys") that a driver stacks on other disks, sorting their
// bios onto them: device-mapper (a dm/ directory) and md, or any disk
// with a non-empty slaves/ directory. Unreadable entries are skipped.
func StackedDisks(sysRoot string) []string {
	ents, err := os.ReadDir(filepath.Join(sysRoot, "block"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		dir := filepath.Join(sysRoot, "block", e.Name())
		if _, err := os.Stat(filepath.Join(dir, "dm")); err == nil {
			out = append(out, e.Name())
			continue
		}
		if s, err := os.ReadDir(filepath.Join(dir, "slaves")); err == nil && len(s) > 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// DiskByName returns the dev of a whole disk or partition named like the
// kernel names it ("vda", "loop3", "/dev/vda1"), or an error naming lsblk
// when /sys/class/block has no such device.
func DiskByName(name string) (event.Dev, error) {
	name = strings.TrimPrefix(name, "/dev/")
	if name == "" || strings.Contains(name, "/") {
		return 0, fmt.Errorf("device %q is not a kernel block device name (see lsblk)", name)
	}
	d, err := readDev(filepath.Join("/sys/class/block", name, "dev"))
	if err != nil {
		return 0, fmt.Errorf("no block device %q (see lsblk for the names this machine has)", name)
	}
	return d, nil
}

// PathResolver names the file an fsync was for. It reads the fd's link
// in /proc at event time and trusts it only if the inode and device still
// match the event (the fd may have been closed or reused); otherwise it
// rebuilds the path from the d_name components the BPF program captured.
type PathResolver struct {
	cache map[pathKey]string
}

type pathKey struct {
	pid uint32
	fd  int32
	dev event.Dev
	ino uint64
}

// NewPathResolver returns an empty resolver.
func NewPathResolver() *PathResolver { return &PathResolver{cache: map[pathKey]string{}} }

// Path returns the absolute path of the event's file, or a path of its
// last components prefixed with ".../" when /proc no longer has it and
// they do not reach the root. Components that stop one short of the root
// (a WAL directory /tmp/d/member/wal, fsync'd through an fd closed since:
// "wal", "member", "d", "tmp") are tried as an absolute path in the
// process's root, and kept so if that names the event's inode.
func (p *PathResolver) Path(e *event.Fsync) string {
	k := pathKey{e.PID, e.FD, e.Dev, e.Ino}
	if s, ok := p.cache[k]; ok {
		return s
	}
	link := "/proc/" + strconv.Itoa(int(e.PID)) + "/fd/" + strconv.Itoa(int(e.FD))
	var st unix.Stat_t
	if target, err := os.Readlink(link); err == nil && unix.Stat(link, &st) == nil &&
		st.Ino == e.Ino && (e.IsBlockdev || event.DevFromUnix(st.Dev) == e.Dev) {
		if len(p.cache) > 65536 {
			clear(p.cache)
		}
		p.cache[k] = target
		return target
	}
	path := ComponentsPath(e.Names)
	if rest, ok := strings.CutPrefix(path, ".../"); ok && !e.IsBlockdev {
		abs := "/" + rest
		if unix.Stat("/proc/"+strconv.Itoa(int(e.PID))+"/root"+abs, &st) == nil && st.Ino == e.Ino && event.DevFromUnix(st.Dev) == e.Dev {
			path = abs
		}
	}
	return path
}

// ComponentsPath joins d_name components (innermost first) into a path:
// absolute when the walk reached the root ("/"), ".../a/b" otherwise.
func ComponentsPath(names []string) string {
	if len(names) == 0 {
		return ""
	}
	var parts []string
	rooted := false
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] == "/" {
			rooted = true
			continue
		}
		parts = append(parts, names[i])
	}
	if rooted {
		return "/" + strings.Join(parts, "/")
	}
	return ".../" + strings.Join(parts, "/")
}

// BackingFile is the file under a loop device, as the loop driver
// reports it in /sys/block/loopN/loop/backing_file.
type BackingFile struct {
	Path string
	Dev  event.Dev // the file's filesystem (st_dev)
	Ino  uint64
	// FS is that filesystem's type as mountinfo names it (ext4, xfs,
	// fuse.sshfs, nfs4, ...), "" when no mount of Dev is visible here.
	FS string
}

// Backing returns the backing file of disk if it is a loop device with
// one, ok=false otherwise. Answers are cached like Resolve's: a loop device
// re-bound to another file while tracing keeps its first answer.
func (r *DeviceResolver) Backing(disk event.Dev) (BackingFile, bool) {
	if r.backing == nil {
		r.backing = map[event.Dev]*BackingFile{}
	}
	if b, ok := r.backing[disk]; ok {
		if b == nil {
			return BackingFile{}, false
		}
		return *b, true
	}
	var out *BackingFile
	p, err := os.ReadFile(filepath.Join(r.SysRoot, "dev/block", disk.String(), "loop/backing_file"))
	if err == nil {
		path := strings.TrimSpace(string(p))
		var st unix.Stat_t
		if unix.Stat(path, &st) == nil {
			out = &BackingFile{Path: path, Dev: event.DevFromUnix(st.Dev), Ino: st.Ino}
			_, out.FS = r.mount(out.Dev)
		}
	}
	r.backing[disk] = out
	if out == nil {
		return BackingFile{}, false
	}
	return *out, true
}

// DiskCache is a whole disk's write cache as its queue reports it.
type DiskCache struct {
	Name string // kernel name, "nvme0n1"
	// WriteCache is queue/write_cache: "write back" (a volatile cache
	// the kernel flushes) or "write through" (none: the block layer
	// drops flushes and FUA).
	WriteCache string
	FUA        bool // queue/fua: the disk takes writes with FUA itself
}

// WriteCache reads disk's write cache mode, FUA support and name from
// sysfs (SysRoot/dev/block/MAJ:MIN).
func (r *DeviceResolver) WriteCache(disk event.Dev) (DiskCache, error) {
	dir := filepath.Join(r.SysRoot, "dev", "block", fmt.Sprintf("%d:%d", disk.Major(), disk.Minor()))
	var c DiskCache
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return c, err
	}
	c.Name = filepath.Base(real)
	b, err := os.ReadFile(filepath.Join(dir, "queue", "write_cache"))
	if err != nil {
		return c, err
	}
	c.WriteCache = strings.TrimSpace(string(b))
	b, err = os.ReadFile(filepath.Join(dir, "queue", "fua"))
	if err != nil {
		return c, err
	}
	c.FUA = strings.TrimSpace(string(b)) == "1"
	return c, nil
}

// JBD2Journals returns the devices that hold a mounted jbd2 journal, by
// kernel name ("vda1", "dm-0"): jbd2 lists each journal in /proc/fs/jbd2
// as NAME-INODE (ext4's internal journal is inode 8). An ext4 mounted
// without a journal (mkfs.ext4 -O ^has_journal) has no entry. No
// /proc/fs/jbd2 under a readable /proc/fs: no journal is mounted (jbd2
// is not loaded). Another error: not known.
func (r *DeviceResolver) JBD2Journals() (map[string]bool, error) {
	root := r.ProcRoot
	entries, err := os.ReadDir(filepath.Join(root, "fs", "jbd2"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(filepath.Join(root, "fs")); serr == nil {
			return map[string]bool{}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		if i := strings.LastIndexByte(e.Name(), '-'); i > 0 {
			names[e.Name()[:i]] = true
		}
	}
	return names, nil
}
