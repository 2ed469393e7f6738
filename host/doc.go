// Package host reads facts about the machine that events refer to, from
// /proc, /sys and tracefs: which disks serve a filesystem and which file
// backs a loop device (DeviceResolver), which path an fsync's fd named
// (PathResolver), which process holds a socket (ListenerPID,
// SocketOwners), network namespaces (NetnsInode), the clock of every event
// timestamp (MonotonicNs), whether the kernel counts BPF run time
// (BPFStatsEnabled) and tracefs itself (Tracefs, TracepointExists).
//
// It loads no BPF and needs no BPF privilege, so packages that only name
// things (etcdinfo, exporter, analysis' callers) use it without importing
// package tracer.
package host
