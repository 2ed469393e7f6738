package tracer

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
)

// What older kernels lack and the programs do without (bpf/compat.h). Each
// is probed on the running kernel (a helper probe, the kernel's BTF), never
// inferred from its version. The VM rig tests each branch on Debian's 5.10,
// 6.1 and 6.12 (docs/vmtest.md).

// inflightLegacyEntries bounds bpf/inflight.h's map where it is an LRU
// hash keyed by thread id (no task storage): threads in a traced call at
// once. A thread's slot stays after it exits until the LRU evicts it, so
// the bound also covers the recently traced threads whose slots wait for
// eviction; 16384 slots of 64 bytes are 1 MiB.
const inflightLegacyEntries = 16384

// haveTaskBTF reports whether tracing programs may call
// bpf_task_storage_get and bpf_get_current_task_btf (Linux 5.12+): the
// helper probe of cilium/ebpf's features package, run once.
var haveTaskBTF = sync.OnceValue(func() bool { return probeTaskBTF() == nil })

// probeTaskBTF is haveTaskBTF's probe: nil, an error wrapping
// ebpf.ErrNotSupported, or another error when it could not tell (no
// CAP_BPF).
var probeTaskBTF = sync.OnceValue(func() error {
	return features.HaveProgramHelper(ebpf.TracePoint, asm.FnTaskStorageGet)
})

// haveSpinLock reports whether tracing programs may call bpf_spin_lock
// (bpf/block.bpf.c's es_spin_lock; not on Linux 5.10): the helper probe,
// run once. Without it block.bpf.c claims its request slots without a
// lock.
var haveSpinLock = sync.OnceValue(func() bool {
	return features.HaveProgramHelper(ebpf.TracePoint, asm.FnSpinLock) == nil
})

// haveRingBuf returns an error when the kernel has no BPF ring buffer
// (Linux 5.8+), which every tracer writes its events to; nil when it has
// one or the probe could not tell (probeRingBuf).
func haveRingBuf() error {
	if errors.Is(probeRingBuf(), ebpf.ErrNotSupported) {
		return fmt.Errorf("this kernel has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF, Linux 5.8+): etcdscope cannot trace here")
	}
	return nil
}

// probeRingBuf is cilium/ebpf's map type probe for ring buffers, run once.
var probeRingBuf = sync.OnceValue(func() error { return features.HaveMapType(ebpf.RingBuf) })

// tracepointArgs returns how many arguments this kernel's tracepoint name
// passes to a tp_btf program: its btf_trace_<name> typedef in the kernel's
// BTF is a pointer to a prototype whose first parameter is the probe's
// data pointer. ok is false when the kernel's BTF lacks it.
func tracepointArgs(cache *btf.Cache, name string) (n int, ok bool) {
	spec, err := cache.Kernel()
	if err != nil {
		return 0, false
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return 0, false
	}
	ptr, isPtr := td.Type.(*btf.Pointer)
	if !isPtr {
		return 0, false
	}
	proto, isProto := ptr.Target.(*btf.FuncProto)
	if !isProto || len(proto.Params) == 0 {
		return 0, false
	}
	return len(proto.Params) - 1, true
}

// applyCompat sets bpf/compat.h's constants in spec (those it declares)
// for this kernel and, without task storage, turns bpf/inflight.h's map
// into an LRU hash keyed by thread id. Every object sharing the inflight
// map goes through it, so their specs agree on its type.
func applyCompat(spec *ebpf.CollectionSpec) error {
	if _, ok := spec.Variables["es_task_btf"]; ok {
		if err := setVariables(spec, map[string]any{"es_task_btf": haveTaskBTF()}); err != nil {
			return err
		}
	}
	if _, ok := spec.Variables["es_spin_lock"]; ok {
		if err := setVariables(spec, map[string]any{"es_spin_lock": haveSpinLock()}); err != nil {
			return err
		}
	}
	if m, ok := spec.Maps["inflight"]; ok && !haveTaskBTF() {
		m.Type = ebpf.LRUHash
		m.Flags = 0 // an LRU hash is always preallocated
		m.MaxEntries = inflightLegacyEntries
	}
	return nil
}

// TaskStorage says, for `etcdscope check`, whether tracing programs may use
// task storage here (Linux 5.12+); without it the syscall programs keep
// each thread's call in an LRU hash keyed by thread id instead, which costs
// a hash lookup per call. known is false when the probe could not tell
// (no CAP_BPF).
func TaskStorage() (ok, known bool, detail string) {
	err := probeTaskBTF()
	switch {
	case err == nil:
		return true, true, "tracing programs may use task storage and bpf_get_current_task_btf"
	case !errors.Is(err, ebpf.ErrNotSupported):
		return false, false, "cannot tell: " + shortErr(err)
	}
	return false, true, fmt.Sprintf("no task storage for tracing programs (Linux 5.12+): calls in flight are kept in a hash keyed by thread id (%d slots) and the current task read through probe reads, a little slower per call", inflightLegacyEntries)
}

// RingBuf says, for `etcdscope check`, whether this kernel has BPF ring
// buffers (Linux 5.8+), without which no tracer runs. known is false when
// the probe could not tell (no CAP_BPF).
func RingBuf() (ok, known bool, detail string) {
	err := probeRingBuf()
	switch {
	case err == nil:
		return true, true, "BPF_MAP_TYPE_RINGBUF present"
	case errors.Is(err, ebpf.ErrNotSupported):
		return false, true, haveRingBuf().Error()
	}
	return false, false, "cannot tell: " + shortErr(err)
}

// blockTracepoints are the block tracepoints that took the request queue
// as their first argument on older kernels, in the groups bpf/block.bpf.c
// reads alike (rq_q_arg: dropped in Linux 5.10; bio_q_arg: 5.11), with
// the number of arguments each takes without it.
var blockTracepoints = map[string]map[string]int{
	"rq_q_arg":  {"block_rq_insert": 1, "block_rq_issue": 1, "block_rq_requeue": 1},
	"bio_q_arg": {"block_bio_queue": 1, "block_bio_remap": 3},
}

// blockQueueArgs returns bpf/block.bpf.c's rq_q_arg, bio_q_arg and getrq_q_arg for this
// kernel: whether each group of block tracepoints takes the request queue
// first, from their prototypes in the kernel's BTF. A group must agree:
// a program reading a queue as a request would read garbage the verifier
// cannot tell from data.
func blockQueueArgs(cache *btf.Cache) (map[string]any, error) {
	vars := map[string]any{}
	for v, group := range blockTracepoints {
		var withQ, without []string
		for name, want := range group {
			n, ok := tracepointArgs(cache, name)
			switch {
			case !ok:
				return nil, fmt.Errorf("the kernel's BTF has no prototype for tracepoint %s (btf_trace_%s)", name, name)
			case n == want+1:
				withQ = append(withQ, name)
			case n == want:
				without = append(without, name)
			default:
				return nil, fmt.Errorf("tracepoint %s takes %d arguments here, not %d or %d: block.bpf.c does not know this kernel", name, n, want, want+1)
			}
		}
		if len(withQ) > 0 && len(without) > 0 {
			return nil, fmt.Errorf("block tracepoints %v take the request queue first but %v do not: block.bpf.c does not know this kernel", withQ, without)
		}
		vars[v] = len(withQ) > 0
	}
	// block_getrq lost two arguments at once in 5.11: (queue, bio, rw)
	// became (bio).
	switch n, ok := tracepointArgs(cache, "block_getrq"); {
	case !ok:
		return nil, fmt.Errorf("the kernel's BTF has no prototype for tracepoint block_getrq (btf_trace_block_getrq)")
	case n == 1 || n == 3:
		vars["getrq_q_arg"] = n == 3
	default:
		return nil, fmt.Errorf("tracepoint block_getrq takes %d arguments here, not 1 or 3: block.bpf.c does not know this kernel", n)
	}
	return vars, nil
}
