package tracer

import (
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestTracepointArgs: the argument counts compat.go reads from the
// kernel's BTF for the tracepoints whose prototypes choose a fallback
// (bpf/compat.h's users: the block groups, sched_switch) against bpftool's
// raw dump of the same BTF (btf_trace_<name> -> PTR -> FUNC_PROTO vlen,
// less the probe's data pointer), and blockQueueArgs agreeing with them.
func TestTracepointArgs(t *testing.T) {
	bpftool := testenv.LookPath(t, "bpftool", "bpftool")
	out, err := exec.Command(bpftool, "btf", "dump", "file", btfPath).Output()
	if err != nil {
		t.Fatalf("bpftool btf dump: %v", err)
	}
	// [id] KIND 'name' type_id=N ... vlen=N
	line := regexp.MustCompile(`(?m)^\[(\d+)\] (\w+) '([^']*)'(?: type_id=(\d+))?.*?(?: vlen=(\d+))?$`)
	type entry struct {
		kind, name string
		typeID     string
		vlen       int
	}
	byID := map[string]entry{}
	typedefs := map[string]string{} // name -> id
	for _, m := range line.FindAllStringSubmatch(string(out), -1) {
		vlen, _ := strconv.Atoi(m[5])
		byID[m[1]] = entry{kind: m[2], name: m[3], typeID: m[4], vlen: vlen}
		if m[2] == "TYPEDEF" {
			typedefs[m[3]] = m[1]
		}
	}
	oracle := func(name string) int {
		td, ok := byID[typedefs["btf_trace_"+name]]
		if !ok {
			t.Fatalf("bpftool's dump has no btf_trace_%s", name)
		}
		ptr := byID[td.typeID]
		proto := byID[ptr.typeID]
		if ptr.kind != "PTR" || proto.kind != "FUNC_PROTO" {
			t.Fatalf("btf_trace_%s: %s -> %s, want PTR -> FUNC_PROTO", name, ptr.kind, proto.kind)
		}
		return proto.vlen - 1
	}
	cache := btf.NewCache()
	names := []string{"sched_switch", "block_getrq"}
	for _, group := range blockTracepoints {
		for name := range group {
			names = append(names, name)
		}
	}
	for _, name := range names {
		got, ok := tracepointArgs(cache, name)
		if want := oracle(name); !ok || got != want {
			t.Errorf("%s: %d arguments (found %v), bpftool says %d", name, got, ok, want)
		}
	}
	vars, err := blockQueueArgs(cache)
	if err != nil {
		t.Fatal(err)
	}
	for v, group := range blockTracepoints {
		for name, without := range group {
			if want := oracle(name) == without+1; vars[v] != want {
				t.Errorf("%s = %v, but bpftool gives %s %d arguments (%d without the queue)", v, vars[v], name, oracle(name), without)
			}
		}
	}
	if want := oracle("block_getrq") == 3; vars["getrq_q_arg"] != want {
		t.Errorf("getrq_q_arg = %v, but bpftool gives block_getrq %d arguments", vars["getrq_q_arg"], oracle("block_getrq"))
	}
	t.Logf("this kernel: %v; sched_switch %d arguments", vars, oracle("sched_switch"))
}
