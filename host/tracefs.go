package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/internal/safefile"
)

// TracefsRoots are where tracefs is looked for, in order: its own mount
// point, then the one under debugfs that older systems use.
var TracefsRoots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// tracefsStateFile marks a tracefs mount etcdscope made, so a run after a
// SIGKILL finds and removes it instead of taking it for the host's.
var tracefsStateFile = "/run/etcdscope/tracefs.mount"

// ErrTracefsPermission is wrapped by Tracefs when tracefs is mounted but
// this process may not read it (mode 0700 and another uid).
var ErrTracefsPermission = errors.New("tracefs is mounted but not readable")

// ErrTracefsNotMounted is wrapped by Tracefs when tracefs is not mounted
// and this process lacks CAP_SYS_ADMIN to mount it.
var ErrTracefsNotMounted = errors.New("tracefs is not mounted and mounting it needs CAP_SYS_ADMIN")

// Tracefs makes sure tracefs is mounted (cilium/ebpf reads tracepoint ids
// from it; syscall tracepoints have no BTF twin). If it had to mount it, the
// returned undo unmounts it again; otherwise undo does nothing. A mount it
// makes is recorded in /run/etcdscope/tracefs.mount (written safely) and a
// recorded mount whose process is gone is unmounted first. Tracefs mounted
// but unreadable is ErrTracefsPermission, not "not mounted"; unmounted
// without the capability to mount it is ErrTracefsNotMounted.
func Tracefs() (undo func(), err error) {
	removeStaleTracefs()
	for _, r := range TracefsRoots {
		_, err := os.Stat(r + "/events")
		if err == nil {
			return func() {}, nil
		}
		if errors.Is(err, os.ErrPermission) {
			var st unix.Stat_t
			unix.Stat(r, &st)
			return nil, fmt.Errorf("%w: %s is mode %04o owned by uid %d and this is uid %d: run as uid %d with CAP_BPF and CAP_PERFMON, or let this uid read it (mount -o remount,mode=0755 %s)",
				ErrTracefsPermission, r, st.Mode&0o7777, st.Uid, os.Geteuid(), st.Uid, r)
		}
	}
	root := TracefsRoots[0]
	if err := unix.Mount("nodev", root, "tracefs", 0, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: mount it first (mount -t tracefs nodev %s) or mount it into the container", ErrTracefsNotMounted, root)
		}
		return nil, fmt.Errorf("mounting tracefs at %s (mount -t tracefs nodev %s): %w", root, root, err)
	}
	id := mountID(root, "tracefs")
	recorded := writeTracefsState(id) == nil
	return func() {
		_ = unix.Unmount(root, unix.MNT_DETACH)
		if recorded {
			os.Remove(tracefsStateFile)
		}
	}, nil
}

// mountID returns the id (/proc/self/mountinfo's first field) of the
// newest mount of fstype at point, or -1.
func mountID(point, fstype string) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return -1
	}
	id := -1
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 10 || f[4] != point {
			continue
		}
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == fstype {
				if n, err := strconv.Atoi(f[0]); err == nil && n > id {
					id = n
				}
			}
		}
	}
	return id
}

// processStart returns pid's start time (clock ticks since boot, field 22
// of /proc/PID/stat), telling a live process from a reused pid.
func processStart(pid int) (uint64, bool) {
	st, err := StatProcess(pid)
	return st.Start, err == nil
}

// writeTracefsState records this process's tracefs mount.
func writeTracefsState(id int) error {
	if err := os.MkdirAll(filepath.Dir(tracefsStateFile), 0o755); err != nil {
		return err
	}
	start, _ := processStart(os.Getpid())
	f, err := safefile.WriteFile(tracefsStateFile, fmt.Appendf(nil, "%d %d %d\n", os.Getpid(), start, id), 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// removeStaleTracefs unmounts a tracefs mount a killed etcdscope recorded:
// its process is gone (or the pid was reused) and the mount with the
// recorded id is still there.
func removeStaleTracefs() {
	b, err := os.ReadFile(tracefsStateFile)
	if err != nil {
		return
	}
	var pid, id int
	var start uint64
	if _, err := fmt.Sscanf(string(b), "%d %d %d", &pid, &start, &id); err != nil {
		return
	}
	if s, alive := processStart(pid); alive && s == start {
		return // that run is still going; its mount is in use
	}
	if id >= 0 && mountID(TracefsRoots[0], "tracefs") == id {
		_ = unix.Unmount(TracefsRoots[0], unix.MNT_DETACH)
	}
	os.Remove(tracefsStateFile)
}

// TracepointExists reports whether tracefs (mounted: see Tracefs) lists
// the tracepoint system/name, e.g. ("jbd2", "jbd2_start_commit"). A
// tracepoint of a module that is not loaded does not exist yet.
func TracepointExists(system, name string) bool {
	for _, r := range TracefsRoots {
		if _, err := os.Stat(r + "/events/" + system + "/" + name); err == nil {
			return true
		}
	}
	return false
}
