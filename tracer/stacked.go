package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 stacked ../bpf/stacked.bpf.c

import (
	"fmt"
	"maps"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/event"
)

// attachStacked loads stacked.bpf.c, the programs on ext4's sync_file
// tracepoints that see fsyncs made by kernel threads (the loop driver's
// vfs_fsync of a backing file: the host level under a stacked device),
// where this kernel has them; with callers (fsCallers), the traced
// processes' fsync and fdatasync calls too, sharing the fsync object's
// call state and file cache, and filtered as it filters.
//
// able loads them able to take the calls (callers, a const the verifier
// prunes on when false); on makes them do so from the start, else
// SwitchToExt4 does at run time (callers_on).
func (t *FsyncTracer) attachStacked(shared ebpf.CollectionOptions, cfg FsyncConfig, able, on bool) error {
	if !tracepointHasBTF("ext4_sync_file_enter") || !tracepointHasBTF("ext4_sync_file_exit") {
		reason := event.ReasonModuleNotLoaded
		if !tracepointModuleHasBTF("ext4") {
			reason = event.ReasonNoModuleBTF
		}
		t.probes = append(t.probes,
			event.Probe{Name: "tp_btf/ext4_sync_file_enter", Dark: event.DarkKthreadFsyncs, Reason: reason, Module: "ext4"},
			event.Probe{Name: "tp_btf/ext4_sync_file_exit", Reason: reason, Module: "ext4"})
		return nil
	}
	spec, err := loadStacked()
	if err != nil {
		return fmt.Errorf("reading stacked object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	vars := filterVariables(cfg)
	vars["callers"] = able
	vars["callers_on"] = on
	vars["handover"] = able && !on
	vars["kpart"] = t.kpart
	vars["kpart_one"] = t.kpartOne
	if err := setVariables(spec, vars); err != nil {
		return err
	}
	if err := applyCompat(spec); err != nil {
		return err
	}
	// One of the two exits: ext4_sync_file_exit_kpart with the calls'
	// kernel slots, under the probe's own name.
	if t.kpart {
		spec.Programs["ext4_sync_file_exit"] = spec.Programs["ext4_sync_file_exit_kpart"]
	}
	delete(spec.Programs, "ext4_sync_file_exit_kpart")
	opts := shared
	opts.MapReplacements = maps.Clone(shared.MapReplacements)
	opts.MapReplacements["inflight"] = t.fsync.Inflight
	opts.MapReplacements["files"] = t.fsync.Files
	opts.MapReplacements["sys_calls"] = t.fsync.SysCalls
	coll, err := ebpf.NewCollectionWithOptions(spec, opts)
	if err != nil {
		return explainLoad("stacked-device programs", err)
	}
	t.stacked = coll
	for _, name := range []string{"ext4_sync_file_enter", "ext4_sync_file_exit"} {
		l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[name]})
		if err != nil {
			return fmt.Errorf("attaching tp_btf/%s: %w", name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tp_btf/" + name, Attached: true})
	}
	return nil
}
