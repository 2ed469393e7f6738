package commit

import (
	"time"

	"github.com/etcdscope/etcdscope/analysis"
)

// NoticeKind is what a progress notice of a commit run tells the user
// while the run goes on (Notice); render.CommitNotice words each.
type NoticeKind uint8

// The notices of a commit run (pipeline.RunCommit, and the CLI's before
// it).
const (
	// NoticeModelFallback: etcd's functions cannot be probed (Err): the
	// run uses the kernel-only model from etcd's metrics.
	NoticeModelFallback NoticeKind = iota + 1
	// NoticeUnavailable: a part of a write the attached probes cannot
	// show, and why (Unavailable).
	NoticeUnavailable
	// NoticeNoSyncSplit: the fsync tracer beside the uprobes did not
	// open (Err): the WAL fdatasync is not split into the disk's layers
	// and the thread's CPU waits.
	NoticeNoSyncSplit
	// NoticeLoadStarted: the built-in put load starts (Load).
	NoticeLoadStarted
	// NoticeLoadFailed: the load did not start (Err).
	NoticeLoadFailed
	// NoticeLeaderChanged: the leader changed to Leader; this member is
	// now Role.
	NoticeLeaderChanged
	// NoticeLeaseKept: the traced etcd, the only member asked, is
	// stopped or gone: the load's lease is not revoked (its keys expire
	// with its TTL).
	NoticeLeaseKept
	// NoticeRevokeFailed: revoking the load's lease failed (Err; its
	// keys expire with its TTL).
	NoticeRevokeFailed
	// NoticeClusterWait: etcd's client URLs did not answer (Err: a
	// member still starting, or stopped); the run asks again every
	// Every while the traced process runs (serve: the agent stays up).
	NoticeClusterWait
)

// LoadInfo is what the built-in load writes (workload.Load), for its
// notice.
type LoadInfo struct {
	PerSec     float64       // puts per second
	ValueBytes int           // each put's value
	Prefix     string        // every key's
	Lease      int64         // the lease every key is attached to
	TTL        time.Duration // the lease's
}

// Notice is one progress notice of a commit run: its Kind and the facts
// that kind names (the others zero).
type Notice struct {
	Kind        NoticeKind
	Err         error                // NoticeModelFallback, NoticeNoSyncSplit, NoticeLoadFailed, NoticeRevokeFailed, NoticeClusterWait
	Every       time.Duration        // NoticeClusterWait: how often it asks again
	Unavailable analysis.Unavailable // NoticeUnavailable
	Load        LoadInfo             // NoticeLoadStarted
	Leader      string               // NoticeLeaderChanged: the new leader's name
	Role        Role                 // NoticeLeaderChanged: this member's role now
}
