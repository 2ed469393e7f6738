package render

import (
	"fmt"
	"time"
)

// FsyncFilter is what `etcdscope fsync` traces, for its start line
// (FsyncStart): each field is "" or 0 when not filtered on.
type FsyncFilter struct {
	PID     int
	PIDComm string // the comm of PID now ("" when gone): a wrong pid shows
	Comm    string
	Cgroup  string
	Dev     string
	// Ext4Only: no syscall tracepoint is attached (every filesystem
	// traced is ext4, on its own tracepoints).
	Ext4Only bool
	// KernelPartition: --kernel-partition was given; KernelPartitionOn:
	// and this run has it (ext4's tracepoints, a kernel that loads it).
	KernelPartition, KernelPartitionOn bool
	Duration                           time.Duration // 0: until Ctrl-C
}

// FsyncStart is fsync's start line on stderr: what is traced, on which
// hooks, and how the run ends.
func FsyncStart(f FsyncFilter) string {
	s := "tracing fsync/fdatasync"
	if f.PID != 0 {
		s += fmt.Sprintf(" of pid %d", f.PID)
		if f.PIDComm != "" {
			s += fmt.Sprintf(" (%s)", f.PIDComm)
		}
	}
	if f.Comm != "" {
		s += fmt.Sprintf(" of comm %q", f.Comm)
	}
	if f.Cgroup != "" {
		s += " in cgroup " + f.Cgroup
	}
	if f.Dev != "" {
		s += " on " + f.Dev
	}
	if f.Ext4Only {
		s += " (on ext4's own tracepoints: no syscall tracepoint enabled)"
	}
	switch {
	case f.KernelPartitionOn:
		s += ", one kernel record per call on a plain disk"
	case f.KernelPartition:
		s += ", per-request records (--kernel-partition needs ext4's tracepoints and BPF spin locks)"
	}
	return s + " " + StopHow(f.Duration)
}

// StopHow says how a run of duration d (0: until stopped) ends.
func StopHow(d time.Duration) string {
	if d > 0 {
		return fmt.Sprintf("for %v (Ctrl-C stops sooner)", d)
	}
	return "Ctrl-C to stop"
}

// NoProcessNamed says at start that --comm names no running process: its
// calls are traced once one starts (a run that ends with 0 calls then has
// its reason on screen).
func NoProcessNamed(comm string) string {
	return fmt.Sprintf("no process named %q is running now: its calls are traced once one starts (check the name: the kernel's comm, e.g. from ps -o comm)", comm)
}

// FsyncNoCalls says at the end of a filtered run that saw no call what
// to check: whom the filter named (f; gone: the pid had exited by the
// end) and that a process syncs only when it writes.
func FsyncNoCalls(f FsyncFilter, window time.Duration, gone bool) string {
	var who string
	switch {
	case f.PID != 0 && gone:
		return fmt.Sprintf("no fsync/fdatasync from pid %d in the %v traced, and it has exited: give the pid of the running etcd (pgrep -x etcd), or --comm etcd, which follows restarts", f.PID, window.Round(time.Second))
	case f.PID != 0:
		who = fmt.Sprintf("pid %d", f.PID)
		if f.PIDComm != "" {
			who += " (" + f.PIDComm + ")"
		}
	case f.Comm != "":
		who = fmt.Sprintf("comm %q", f.Comm)
	case f.Cgroup != "":
		who = "cgroup " + f.Cgroup
	default:
		return ""
	}
	return fmt.Sprintf("no fsync/fdatasync from %s in the %v traced: check it is etcd (pgrep -x etcd), and that it was written to (an idle etcd syncs only on writes: etcdctl put k v)", who, window.Round(time.Second))
}

// WALWorkloadStart is `fsync --workload wal`'s start line: what it writes
// and where.
func WALWorkloadStart(dir string) string {
	return fmt.Sprintf("workload wal: 2300-byte appends + fdatasync into preallocated 64 MiB segments under %s/member/wal", dir)
}

// WALWorkloadStale says a scratch directory a killed workload run left
// was removed.
func WALWorkloadStale(dir string) string {
	return fmt.Sprintf("removed %s, left by a workload run that was killed", dir)
}

// WALWorkloadEnd is the workload's own view, after the report: its
// appends and segments, and its fdatasyncs as timed in userspace.
func WALWorkloadEnd(appends int64, segments int, p50, p99 int64) string {
	return fmt.Sprintf("workload: %d appends in %d segment(s); fdatasync as timed in userspace: p50 %s ms, p99 %s ms", appends, segments, Ms(p50), Ms(p99))
}
