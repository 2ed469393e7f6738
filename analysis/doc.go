// Package analysis turns decoded kernel events (package event) into
// etcdscope's numbers. It is pure Go: no root, no kernel, no I/O except
// reading recorded JSON Lines, so every rule here is tested on synthetic
// event streams.
//
// # The fsync layer partition
//
// For one fsync or fdatasync call F by thread T on a file whose filesystem
// lives on device D (its s_dev, or the device itself for a block device
// node), with wall time [s, e] from syscall entry to exit:
//
// Which block requests count. A request r counts for F when it is on one of
// the whole disks under D (a partition's disk; a btrfs volume's device;
// never paired by sector, since flushes have none), it completed inside
// [s, e] (F waited for it; one that completes after e was not waited for),
// and it has one of these roles:
//   - flush: REQ_OP_FLUSH, or any request with REQ_PREFLUSH or REQ_FUA,
//     whoever issued it (jbd2, the XFS log worker, the flush state machine);
//   - journal: a write with REQ_META (jbd2 descriptor and commit blocks,
//     XFS iclogs, btrfs tree-log blocks), whoever issued it, or any write
//     issued by a jbd2 thread (ordered-mode data the commit writes);
//   - data: a write without REQ_META submitted by T itself (the fsync's own
//     writeback; insert or issue context is the submitter's).
//
// Reads, discards, and other threads' data writes never count.
//
// Which journal work counts. An ext4 jbd2 commit on D that ends inside
// [s, e] (the fsync waits for its own transaction's commit, and for the
// one committing before it); an XFS log force made by T inside [s, e],
// counted from the force to e; and, where the optional fentry/kprobe on
// jbd2_log_wait_commit attaches, the exact wait of T for its transaction's
// commit. btrfs has no commit tracepoint: its tree-log writes count as
// journal requests.
//
// The partition. Every instant of [s, e] is given to exactly one layer, the
// first in this order whose interval covers it:
//  1. device_flush: issue → complete of a flush-role request (for a flush
//     the flush state machine completed without issuing it, because it
//     joined a flush already in flight: from its bio's queueing on);
//  2. block_queue: insert → issue of any counted request (for one on a
//     disk beneath a dm disk, from the remap that queued its bio there);
//     a flush request
//     made by the flush state machine (block/blk-flush.c) is issued from
//     kblockd with no insert event, so its queue time runs from the latest
//     flush bio (REQ_OP_FLUSH or REQ_PREFLUSH) that got its request
//     (tracepoint block_getrq) on the disk inside [s, issue] that no
//     other request claimed;
//  3. data_writeback: issue → complete of a data-role request;
//  4. journal: issue → complete of a journal-role request;
//  5. dm: queue → complete of a bio on a device-mapper disk (below);
//  6. journal: a journal commit/log-force window;
//  7. other: nothing of the above (syscall entry, page-cache walk, locks,
//     scheduling, waiting on another task's work that left no trace).
//
// Because each instant has one owner, the layers sum exactly to e − s and
// nothing is counted twice when requests overlap. The order reads "the
// deepest thing the device was doing for F at that instant".
//
// Stacked devices. When D's disk is a loop device, each of its flushes
// reaches the loop driver, which fsyncs the backing file on the host
// filesystem from a kernel thread (seen through ext4's sync_file
// tracepoints as event.KernelFsync). Such a host fsync is attributed by the
// same rule, one level down (its thread, its file's disk), and nested under
// the guest flush request it ran inside: same backing file (device and
// inode), and its window inside the flush's issue → complete. The guest
// partition is unchanged (the host work is inside its device_flush time);
// BuildLevels tabulates the levels, with the share of the guest's device
// flush time that the host fsyncs account for.
//
// Device-mapper. A dm disk makes no requests: its bios are sent on
// (block_bio_remap) to the disks beneath, whose requests count for F as if
// they were on D's disks (found through the remaps seen). A dm bio F waited
// on (completed inside [s, e], the request roles' rule) counts from its
// queueing to its completion on the dm disk in a sixth layer, dm, ranked
// below every request (so a clone's requests beneath own their time) and
// above the journal windows: what is left of it is the target's hold, before
// the remap (dm-delay's delay) and after the clone's completion. A request
// beneath waits from the remap that queued its bio there (block_queue).
// FsyncRecord.DM splits the call into the filesystem's, the dm target's and
// the lower disks' levels, which sum to e − s.
//
// Where it is exact and where it is not. With one fsyncing thread per
// filesystem the partition is exact to the tracepoints' resolution. When
// several threads fsync on one device, a flush or commit that serves all of
// them is counted in each of their partitions (each did wait through it),
// but a flush issued for another thread's fsync is counted in F's too if it
// completes inside F's window, although F may not have needed it: sums over
// many fsyncs can then exceed the device's busy time. Data writeback done by
// the flusher kworker before F began, which F then waits on, lands in
// "other" (it is not F's submission), as does time a request spends in a
// stacked driver below D that emits no request of its own (loop, dm; see
// the stacked-device issue), and time a bio is held by the cgroup block
// throttle (io.max, blkio.throttle.*) before it is queued: it has no
// request yet. e2e's TestFsyncFailOverBudgetSlowDisk, ext4 on a loop
// device held to 20 writes/s, reads 95% other, p99 ~110 ms.
//
// # Floor or contention
//
// A group of at least DiskVerdictMinCalls calls gets a disk verdict
// (Group.Disk) from its layer shares: floor when device_flush holds at
// least FloorMinFlushShare of its time, more than any other layer, and
// block_queue less than FloorMaxQueueShare (a fixed price per flush,
// which less load does not lower); contention when block_queue holds at
// least ContentionMinQueueShare and no less than device_flush (the calls'
// requests wait behind other I/O on the disk). A flush-role request is
// counted as a flush (REQ_OP_FLUSH, REQ_PREFLUSH) or, a write with REQ_FUA
// only, as a FUA write (FsyncRecord.Flushes, FUAWrites). A group with no
// verdict but device_flush or block_queue within DiskWhyMargin of its
// threshold says which condition it missed, with exact shares
// (Group.DiskWhy): the table rounds a 39.98% share to 40.0%.
package analysis
