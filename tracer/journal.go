package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type journal_event -type es_journal_source journal ../bpf/journal.bpf.c

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// attachJournal loads each journal program whose tracepoint this kernel
// has (jbd2 and xfs may be modules, not loaded, or absent) and records the
// others as unavailable instead of failing.
func (t *FsyncTracer) attachJournal(shared ebpf.CollectionOptions) error {
	spec, err := loadJournal()
	if err != nil {
		return fmt.Errorf("reading journal object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	want := map[string]event.Dark{
		"jbd2_start_commit": event.DarkJBD2Commits,
		"jbd2_end_commit":   event.DarkJBD2Commits,
		"xfs_log_force":     event.DarkXFSLogForce,
	}
	var missing []event.Probe
	for name, dark := range want {
		sys := tracepointSystem(name)
		reason := event.ReasonModuleNotLoaded
		if host.TracepointExists(sys, name) && !tracepointModuleHasBTF(sys) {
			reason = event.ReasonNoModuleBTF
		}
		if !tracepointHasBTF(name) {
			delete(spec.Programs, name)
			missing = append(missing, event.Probe{Name: "tp_btf/" + name, Dark: dark, Reason: reason, Module: sys})
		}
	}
	// jbd2 start and end only make sense together.
	if _, ok := spec.Programs["jbd2_start_commit"]; !ok {
		delete(spec.Programs, "jbd2_end_commit")
	} else if _, ok := spec.Programs["jbd2_end_commit"]; !ok {
		delete(spec.Programs, "jbd2_start_commit")
	}
	if err := setVariables(spec, map[string]any{"kpart": t.kpart, "kpart_one": t.kpartOne}); err != nil {
		return err
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, shared)
	if err != nil {
		return explainLoad("journal programs", err)
	}
	t.journal = coll
	for _, name := range []string{"jbd2_start_commit", "jbd2_end_commit", "xfs_log_force"} {
		p, ok := coll.Programs[name]
		if !ok {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attaching tp_btf/%s: %w", name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tp_btf/" + name, Attached: true})
	}
	t.probes = append(t.probes, missing...)
	return nil
}

// decodeJournal decodes struct journal_event (bpf/journal.h), which
// journal.bpf.c writes for a jbd2 commit or an XFS log force and
// jbd2wait.bpf.c for a jbd2 commit wait.
func decodeJournal(j *event.Journal, e *journalJournalEvent) {
	*j = event.Journal{Source: event.JournalSource(e.Source), Dev: event.Dev(e.Dev),
		TID: e.Tid, Txn: e.Txn, StartNs: e.StartNs, EndNs: e.EndNs}
}
