package tracer

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// A per-CPU scratch slot (a PERCPU_ARRAY the programs write and read back
// within one run) is safe only while no other run that uses it can start
// on the same CPU between the write and the read. The kernel gives two
// guarantees (kernel/trace/bpf_trace.c):
//
//   - classic tracepoint programs (SEC("tracepoint/...")) run through
//     trace_call_bpf, which starts none while any other such program (or a
//     kprobe's) runs on that CPU (bpf_prog_active): they never nest on one
//     another, whatever the context;
//   - a tp_btf or raw_tp program never nests on itself (its per-CPU
//     prog->active: the nested run is skipped and counted in
//     recursion_misses), but any other tp_btf program can interrupt it from
//     hardirq or softirq context, and a tp_btf program can interrupt a
//     classic one. Older kernels (5.10) have no prog->active there: the
//     single programs below are on ext4_sync_file_enter/exit, which fire
//     only in a task's fsync, never in an interrupt, so they cannot
//     interrupt themselves there either.
//
// Preemption is off in both on these kernels (the syscall probes too:
// since syscall tracepoints may fault, perf_syscall_enter/exit turn it off
// themselves), so only an interrupt nests; where a kernel lets tracepoint
// programs be preempted (migration off only), both guards are per CPU and
// held across the preemption, so the rules below still hold. A slot is
// therefore safe if only classic tracepoint programs use it, or only one
// program; anything else needs what block.bpf.c's addr_hash does (write,
// read back, check).

// scratchChecked: the scratch maps the rules above do not cover, each
// with why its users may share it all the same.
var scratchChecked = map[string]string{
	// written and read back in two instructions by addr_hash, which
	// checks the value and retries: block_rq_complete and
	// block_bio_complete interrupt the insert, issue and queue programs
	"block/addr_scratch": "addr_hash checks what it read back",
	// the exit and its twin with the kernel-made partition: Go loads one
	// of them (tracer/stacked.go), which never nests on itself
	"stacked/info_scratch": "ext4_sync_file_exit or ext4_sync_file_exit_kpart, never both loaded",
}

// scratchMaps is every per-CPU scratch map of the objects: adding one
// fails here until it is listed, so that its users are checked.
var scratchMaps = []string{
	"block/addr_scratch", "fsync/info_scratch", "hypervisor/hv_scratch",
	"stacked/info_scratch", "stacked/kp_scratch", "stacked/kscratch", "write/info_scratch",
}

// TestScratchNotNested checks, on the committed objects, that every
// per-CPU scratch map is used only by programs the kernel never nests on
// one another on a CPU (or is in scratchChecked with its reason). A
// scratch slot another program can overwrite between a store and a load
// records one request's times under another's address: block.bpf.c's
// addr_scratch did, until d49f8ff (false "unseen" completions).
func TestScratchNotNested(t *testing.T) {
	var found []string
	for _, o := range []struct {
		name string
		load func() (*ebpf.CollectionSpec, error)
	}{
		{"block", loadBlock}, {"commit", loadCommit}, {"fsync", loadFsync}, {"hypervisor", loadHypervisor},
		{"jbd2wait", loadJbd2wait}, {"journal", loadJournal}, {"peers", loadPeers}, {"sched", loadSched},
		{"stacked", loadStacked}, {"write", loadWrite},
	} {
		spec, err := o.load()
		if err != nil {
			t.Fatal(err)
		}
		for mname, m := range spec.Maps {
			if m.Type != ebpf.PerCPUArray || !strings.Contains(mname, "scratch") {
				continue
			}
			key := o.name + "/" + mname
			found = append(found, key)
			users := scratchUsers(spec, mname)
			if len(users) == 0 {
				t.Errorf("%s: no program uses it", key)
				continue
			}
			if why, ok := scratchChecked[key]; ok {
				t.Logf("%s: %v: %s", key, names(users), why)
				continue
			}
			if len(users) == 1 {
				t.Logf("%s: one program (%s): never nested on itself", key, users[0].Name)
				continue
			}
			for _, p := range users {
				if p.Type != ebpf.TracePoint {
					t.Errorf("%s: %s (%s %s) shares it with %v and is no classic tracepoint program: "+
						"another user can interrupt it between a store and a load (check the value read back, or give it its own map)",
						key, p.Name, p.Type, p.SectionName, names(users))
				}
			}
			t.Logf("%s: %v: classic tracepoint programs only (bpf_prog_active)", key, names(users))
		}
	}
	sort.Strings(found)
	if !slices.Equal(found, scratchMaps) {
		t.Errorf("scratch maps %v, want %v: list a new one in scratchMaps", found, scratchMaps)
	}
}

// scratchUsers returns the programs of spec whose instructions load map
// mname's address.
func scratchUsers(spec *ebpf.CollectionSpec, mname string) []*ebpf.ProgramSpec {
	var users []*ebpf.ProgramSpec
	for _, p := range spec.Programs {
		for _, ins := range p.Instructions {
			if ins.IsLoadFromMap() && ins.Reference() == mname {
				users = append(users, p)
				break
			}
		}
	}
	sort.Slice(users, func(i, j int) bool { return users[i].Name < users[j].Name })
	return users
}

func names(ps []*ebpf.ProgramSpec) []string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	return n
}
