//go:build ignore

/* journal.bpf.c: the filesystem journal work an fsync waits for.
 * ext4: each jbd2 commit, start to end, per journal device.
 * XFS: each log force, by the thread that forces it (the force ends when
 * the fsync does; the log write itself is a REQ_PREFLUSH|REQ_FUA request
 * seen by block.bpf.c).
 * btrfs has no commit tracepoint: its tree-log writes are REQ_META requests
 * that block.bpf.c sees in the fsyncing thread. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "journal.h"
#include "events.h"
#include "kpart.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the record type and enum in the object for bpf2go -type. */
const struct journal_event *unused_journal_event __attribute__((unused));
const enum es_journal_source *unused_es_journal_source __attribute__((unused));

struct commit_key {
	__u32 dev;
	__u32 txn;
};

/* commits: (journal device, transaction id) -> start of its commit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct commit_key);
	__type(value, __u64);
} commits SEC(".maps");

/* journal_disk: the whole disk (events.h's busy) under journal's
 * filesystem device, 0 when unknown. */
static __always_inline __u32 journal_disk(journal_t *journal)
{
	struct gendisk *d = BPF_CORE_READ(journal, j_fs_dev, bd_disk);

	if (!d)
		return 0;
	return ((__u32)BPF_CORE_READ(d, major) << 20) | (__u32)BPF_CORE_READ(d, first_minor);
}

SEC("tp_btf/jbd2_start_commit")
int BPF_PROG(jbd2_start_commit, journal_t *journal, transaction_t *txn)
{
	struct commit_key k = {};
	__u64 now = bpf_ktime_get_ns();

	/* Some kernels (Debian's 6.12) type every tp_btf argument as
	 * maybe-NULL and refuse arithmetic on it before a check. */
	if (!journal || !txn)
		return 0;
	k.dev = BPF_CORE_READ(journal, j_fs_dev, bd_dev);
	k.txn = BPF_CORE_READ(txn, t_tid);

	if (bpf_map_update_elem(&commits, &k, &now, BPF_ANY))
		count_lost();
	return 0;
}

SEC("tp_btf/jbd2_end_commit")
int BPF_PROG(jbd2_end_commit, journal_t *journal, transaction_t *txn)
{
	struct commit_key k = {};
	struct journal_event e = {};
	__u64 *start;

	if (!journal || !txn)
		return 0;
	k.dev = BPF_CORE_READ(journal, j_fs_dev, bd_dev);
	k.txn = BPF_CORE_READ(txn, t_tid);
	start = bpf_map_lookup_elem(&commits, &k);
	if (!start)
		return 0;
	e.kind = ES_KIND_JOURNAL;
	e.source = ES_JOURNAL_JBD2_COMMIT;
	e.dev = k.dev;
	e.txn = k.txn;
	e.start_ns = *start;
	e.end_ns = bpf_ktime_get_ns();
	bpf_map_delete_elem(&commits, &k);
	if (kpart)
		kp_each(0, k.dev, false, 0, e.start_ns, e.end_ns, kp_bits(KP_E_JWIN, 0, false));
	if (kpart_one && !busy(journal_disk(journal)))
		return 0; /* no call on its disk reads the raw stream (kpart.h) */
	emit(&e, sizeof(e));
	return 0;
}

SEC("tp_btf/xfs_log_force")
int BPF_PROG(xfs_log_force, struct xfs_mount *mp, xfs_lsn_t lsn, unsigned long caller_ip)
{
	struct journal_event e = {};

	if (!mp)
		return 0;
	e.kind = ES_KIND_JOURNAL;
	e.source = ES_JOURNAL_XFS_LOG_FORCE;
	e.dev = BPF_CORE_READ(mp, m_super, s_dev);
	e.tid = (__u32)bpf_get_current_pid_tgid();
	e.start_ns = bpf_ktime_get_ns();
	emit(&e, sizeof(e));
	return 0;
}
