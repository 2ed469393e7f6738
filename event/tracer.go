package event

// Probe is one attachment point of a tracer and whether it is live: what
// a tracer reports about itself, so that a report can name the layers a
// missing probe leaves dark.
type Probe struct {
	Name     string // "tracepoint/syscalls/sys_enter_fdatasync", "tp_btf/jbd2_start_commit", ...
	Attached bool
	Why      string // when not attached: what this kernel lacks
}

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
}
