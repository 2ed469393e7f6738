package tracer

import (
	"fmt"
	"sort"

	"github.com/cilium/ebpf"

	"github.com/etcdscope/etcdscope/event"
)

// programStats reads the kernel's statistics of progs (name → program;
// nil programs, not loaded on this kernel, are left out), sorted by name.
func programStats(progs map[string]*ebpf.Program) []event.ProgramStats {
	out := make([]event.ProgramStats, 0, len(progs))
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
		out = append(out, event.ProgramStats{Name: name, RunTimeNs: uint64(st.Runtime.Nanoseconds()),
			RunCount: st.RunCount, RecursionMisses: st.RecursionMisses})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// missed sums bpf_prog_info.recursion_misses over progs (nil ones and
// ones whose stats cannot be read count 0).
func missed(progs ...*ebpf.Program) uint64 {
	var n uint64
	for _, p := range progs {
		if p == nil {
			continue
		}
		if st, err := p.Stats(); err == nil {
			n += st.RecursionMisses
		}
	}
	return n
}

// sumPerCPU returns the sum over CPUs of key 0 of a per-CPU array of
// counters (a lost-events map), named in the error.
func sumPerCPU(m *ebpf.Map, name string) (uint64, error) {
	return sumPerCPUKey(m, 0, name)
}

// sumPerCPUKey returns the sum over CPUs of key of a per-CPU array of
// counters, named in the error.
func sumPerCPUKey(m *ebpf.Map, key uint32, name string) (uint64, error) {
	var perCPU []uint64
	if err := m.Lookup(key, &perCPU); err != nil {
		return 0, fmt.Errorf("reading %s: %w", name, err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}
