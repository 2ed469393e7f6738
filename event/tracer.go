package event

// Probe is one attachment point of a tracer and whether it is live: what
// a tracer reports about itself, so that a report can name the layers a
// missing probe leaves dark.
type Probe struct {
	Name     string // "tracepoint/syscalls/sys_enter_fdatasync", "tp_btf/jbd2_start_commit", ...
	Attached bool
	// When not attached: what the run lacks without it (Dark), why it did
	// not attach (Reason, of Module where the reason is a module's) and
	// the kernel's or the loader's own error text (Err; for a probe with
	// variants, each variant's, "fentry: ...; kprobe: ..."). Optional: the
	// layer it would time is measured another way. The sinks word them.
	Dark     Dark
	Reason   Reason
	Module   string
	Err      string
	Optional bool
}

// Dark is what a run lacks when a probe does not attach: a stable code
// (the summary's and the capture's unavailable[].dark), worded by render.
type Dark string

// What goes dark.
const (
	DarkNone Dark = "" // nothing a report shows (a probe of a pair, its twin names it)
	// DarkJBD2Commits: jbd2's commit tracepoints; an ext4 fsync's wait on
	// its journal commit is not seen.
	DarkJBD2Commits Dark = "jbd2_commits"
	// DarkXFSLogForce: xfs_log_force; an xfs fsync's log force is not seen.
	DarkXFSLogForce Dark = "xfs_log_force"
	// DarkKthreadFsyncs: ext4's sync_file tracepoints; fsyncs made by
	// kernel threads (a loop device's backing file on ext4) are not seen.
	DarkKthreadFsyncs Dark = "kthread_fsyncs"
	// DarkJournalWaitExact: jbd2_log_wait_commit; the journal layer is
	// timed by overlap with jbd2 commits instead (Optional).
	DarkJournalWaitExact Dark = "journal_wait_exact"
	// DarkIOUring: QEMU's io_uring requests are not timed.
	DarkIOUring Dark = "io_uring"
	// DarkCommitFunction: an etcd function's uprobe; its part of a write
	// is not timed.
	DarkCommitFunction Dark = "commit_function"
)

// Reason is why a probe did not attach: a stable code (unavailable[].reason),
// worded by render.
type Reason string

// Why a probe did not attach.
const (
	// ReasonModuleNotLoaded: Module's tracepoints are absent (not loaded,
	// or not built).
	ReasonModuleNotLoaded Reason = "module_not_loaded"
	// ReasonNoModuleBTF: Module is a loadable module and this kernel has
	// no BTF for modules (/sys/kernel/btf/MODULE;
	// CONFIG_DEBUG_INFO_BTF_MODULES, Linux 5.11+), which tp_btf needs.
	ReasonNoModuleBTF Reason = "no_module_btf"
	// ReasonNoIOUringTracepoint: no io_uring tracepoint (CONFIG_IO_URING=n
	// or a kernel before 5.19).
	ReasonNoIOUringTracepoint Reason = "no_io_uring_tracepoint"
	// ReasonRefused: every way of attaching it failed; Err says how each did.
	ReasonRefused Reason = "refused"
	// ReasonNoFunction: the binary has no such function (Err: what the
	// search found).
	ReasonNoFunction Reason = "no_function"
	// ReasonConfigured: left unprobed, as the run was configured (commit
	// --grpc=false).
	ReasonConfigured Reason = "configured"
	// ReasonLoadFailed: its programs did not load (Err: the verifier's or
	// the loader's error).
	ReasonLoadFailed Reason = "load_failed"
	// ReasonAttachFailed: loaded, but did not attach (Err: the kernel's
	// error).
	ReasonAttachFailed Reason = "attach_failed"
)

// ProgramStats is what the kernel keeps about one loaded BPF program
// (bpf_prog_info, read with BPF_OBJ_GET_INFO_BY_FD). The exporter turns it
// into etcdscope_bpf_program_* metrics, as cloudflare/ebpf_exporter does.
type ProgramStats struct {
	Name string // the program's ELF section symbol, e.g. "sys_exit_fdatasync"
	// RunTimeNs and RunCount: total time spent in the program and number
	// of runs since load (bpf_prog_info.run_time_ns, run_cnt). The kernel
	// counts them only while kernel.bpf_stats_enabled=1; otherwise they
	// stay 0 (see host.BPFStatsEnabled).
	RunTimeNs uint64
	RunCount  uint64
	// RecursionMisses: runs the kernel skipped because a BPF program was
	// already running on that CPU (Linux 5.12+; always counted).
	RecursionMisses uint64
	// UnseenRuns: runs the kernel skipped without counting them, as the
	// tracer infers them (the fsync tracer's block_rq_complete:
	// tracer.BlockStats.UnseenCompletions); 0 for other programs. A
	// tracer's Missed is the sum of RecursionMisses and UnseenRuns over
	// its programs.
	UnseenRuns uint64
}
