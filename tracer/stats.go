package tracer

import (
	"os"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
)

// ProgramStats is what the kernel keeps about one loaded BPF program
// (bpf_prog_info, read with BPF_OBJ_GET_INFO_BY_FD). The exporter turns it
// into etcdscope_bpf_program_* metrics, as cloudflare/ebpf_exporter does.
type ProgramStats struct {
	Name string // the program's ELF section symbol, e.g. "sys_exit_fdatasync"
	// RunTimeNs and RunCount: total time spent in the program and number
	// of runs since load (bpf_prog_info.run_time_ns, run_cnt). The kernel
	// counts them only while kernel.bpf_stats_enabled=1; otherwise they
	// stay 0 (see BPFStatsEnabled).
	RunTimeNs uint64
	RunCount  uint64
	// RecursionMisses: runs the kernel skipped because a BPF program was
	// already running on that CPU (Linux 5.12+; always counted).
	RecursionMisses uint64
}

// BPFStatsEnabled reports whether the kernel is counting BPF run time and
// run counts (sysctl kernel.bpf_stats_enabled, /proc/sys/kernel/bpf_stats_enabled).
// An error reading it counts as off.
func BPFStatsEnabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) != "0"
}

// ProgramStats returns the statistics of every loaded program of the fsync
// tracer (syscall, block and journal programs), sorted by name. Programs
// that were not loaded (a kernel without jbd2 or XFS) are left out.
func (t *FsyncTracer) ProgramStats() []ProgramStats {
	progs := map[string]*ebpf.Program{
		"sys_enter_fsync":     t.fsync.SysEnterFsync,
		"sys_exit_fsync":      t.fsync.SysExitFsync,
		"sys_enter_fdatasync": t.fsync.SysEnterFdatasync,
		"sys_exit_fdatasync":  t.fsync.SysExitFdatasync,
		"block_rq_insert":     t.block.BlockRqInsert,
		"block_rq_issue":      t.block.BlockRqIssue,
		"block_rq_complete":   t.block.BlockRqComplete,
		"block_bio_queue":     t.block.BlockBioQueue,
	}
	if t.journal != nil {
		for name, p := range t.journal.Programs {
			progs[name] = p
		}
	}
	return programStats(progs)
}

// ProgramStats returns the statistics of the peers tracer's programs
// (inet_sock_set_state, tcp_probe, tcp_retransmit_skb), sorted by name.
func (p *Peers) ProgramStats() []ProgramStats {
	return programStats(map[string]*ebpf.Program{
		"inet_sock_set_state": p.objs.InetSockSetState,
		"tcp_probe":           p.objs.TcpProbe,
		"tcp_retransmit_skb":  p.objs.TcpRetransmitSkb,
	})
}

// Attached returns how many of the peers programs are attached to their
// tracepoints (all three once NewPeers has returned without error).
func (p *Peers) Attached() int {
	return len(p.links)
}

// Missed returns how many times the kernel skipped one of the peers
// programs because another BPF program was running on that CPU
// (bpf_prog_info.recursion_misses summed; each is an event lost).
func (p *Peers) Missed() uint64 {
	var n uint64
	for _, s := range p.ProgramStats() {
		n += s.RecursionMisses
	}
	return n
}

func programStats(progs map[string]*ebpf.Program) []ProgramStats {
	out := make([]ProgramStats, 0, len(progs))
	for name, p := range progs {
		if p == nil {
			continue
		}
		st, err := p.Stats()
		if err != nil {
			// A closed program or a kernel without BPF_OBJ_GET_INFO_BY_FD
			// run stats: nothing to report for it.
			continue
		}
		out = append(out, ProgramStats{Name: name, RunTimeNs: uint64(st.Runtime.Nanoseconds()),
			RunCount: st.RunCount, RecursionMisses: st.RecursionMisses})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
