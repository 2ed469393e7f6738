package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type sched_event -type es_sched_state sched ../bpf/sched.bpf.c

import (
	"fmt"
	"maps"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/event"
)

// loadSched loads the sched object (bpf/sched.bpf.c: sched_switch and
// sched_wakeup of threads inside a traced call) over the shared ring and
// the fsync object's in-flight map (bpf/inflight.h), and attaches it
// (required once asked for: FsyncConfig.Sched).
func (t *FsyncTracer) loadSched(shared ebpf.CollectionOptions) error {
	spec, err := loadSched()
	if err != nil {
		return fmt.Errorf("reading sched object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	if err := applyCompat(spec); err != nil {
		return err
	}
	// sched_switch's fourth argument, prev_state, is 5.18+.
	n, _ := tracepointArgs(shared.Cache, "sched_switch")
	if err := setVariables(spec, map[string]any{"prev_state_arg": n >= 4}); err != nil {
		return err
	}
	opts := shared
	opts.MapReplacements = maps.Clone(shared.MapReplacements)
	opts.MapReplacements["inflight"] = t.fsync.Inflight
	if err := spec.LoadAndAssign(&t.sched, &opts); err != nil {
		return explainLoad("sched programs", err)
	}
	for _, p := range []*ebpf.Program{t.sched.SchedSwitch, t.sched.SchedWakeup} {
		if err := t.addThreadProbe(func() (link.Link, error) {
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				return nil, fmt.Errorf("attaching tp_btf program %s (--sched needs it): %w", p, err)
			}
			return l, nil
		}); err != nil {
			return err
		}
	}
	t.probes = append(t.probes, event.Probe{Name: "tp_btf/sched_switch", Attached: true},
		event.Probe{Name: "tp_btf/sched_wakeup", Attached: true})
	return nil
}

// decodeSched decodes struct sched_event (bpf/sched.h).
func decodeSched(s *event.Sched, e *schedSchedEvent) {
	*s = event.Sched{TID: e.Tid, State: event.SchedState(e.State), Ns: e.Ns}
}
