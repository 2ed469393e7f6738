package host

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// TracefsRoots are where tracefs is looked for, in order: its own mount
// point, then the one under debugfs that older systems use.
var TracefsRoots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// Tracefs makes sure tracefs is mounted (cilium/ebpf reads tracepoint ids
// from it; syscall tracepoints have no BTF twin). If it had to mount it, the
// returned undo unmounts it again; otherwise undo does nothing.
func Tracefs() (undo func(), err error) {
	for _, r := range TracefsRoots {
		if _, err := os.Stat(r + "/events"); err == nil {
			return func() {}, nil
		}
	}
	if err := unix.Mount("nodev", TracefsRoots[0], "tracefs", 0, ""); err != nil {
		return nil, fmt.Errorf("mounting tracefs at %s (mount -t tracefs nodev %s): %w", TracefsRoots[0], TracefsRoots[0], err)
	}
	return func() { _ = unix.Unmount(TracefsRoots[0], unix.MNT_DETACH) }, nil
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
