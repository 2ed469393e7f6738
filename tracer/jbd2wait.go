package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 jbd2wait ../bpf/jbd2wait.bpf.c

import (
	"errors"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/event"
)

// attachJBD2Wait tries the optional function probes of jbd2wait.bpf.c on
// jbd2_log_wait_commit (where an ext4 fsync waits for its transaction's
// commit): the fentry/fexit pair first, then kprobe/kretprobe. Neither is required;
// when both fail the probes say why and the report lists the journal wait
// as unavailable (the jbd2 commit tracepoints still give the journal layer
// by overlap).
func (t *FsyncTracer) attachJBD2Wait(shared ebpf.CollectionOptions, cfg FsyncConfig) {
	const fn = "jbd2_log_wait_commit"
	variants := []struct {
		kind       string
		enter, out string
		attach     func(c *ebpf.Collection) ([]link.Link, error)
	}{
		{"fentry", "jbd2_wait_fentry", "jbd2_wait_fexit", func(c *ebpf.Collection) ([]link.Link, error) {
			var ls []link.Link
			for _, n := range []string{"jbd2_wait_fentry", "jbd2_wait_fexit"} {
				l, err := link.AttachTracing(link.TracingOptions{Program: c.Programs[n]})
				if err != nil {
					return ls, err
				}
				ls = append(ls, l)
			}
			return ls, nil
		}},
		{"kprobe", "jbd2_wait_kprobe", "jbd2_wait_kretprobe", func(c *ebpf.Collection) ([]link.Link, error) {
			var ls []link.Link
			l, err := link.Kprobe(fn, c.Programs["jbd2_wait_kprobe"], nil)
			if err != nil {
				return ls, err
			}
			ls = append(ls, l)
			l, err = link.Kretprobe(fn, c.Programs["jbd2_wait_kretprobe"], nil)
			if err != nil {
				return ls, err
			}
			return append(ls, l), nil
		}},
	}
	var why []string
	if cfg.JBD2Wait == "none" {
		return
	}
	for _, v := range variants {
		if cfg.JBD2Wait != "" && cfg.JBD2Wait != v.kind {
			continue
		}
		spec, err := loadJbd2wait()
		if err != nil {
			why = append(why, v.kind+": "+err.Error())
			continue
		}
		for name := range spec.Programs {
			if name != v.enter && name != v.out {
				delete(spec.Programs, name)
			}
		}
		if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
			why = append(why, v.kind+": "+err.Error())
			continue
		}
		if err := setVariables(spec, map[string]any{"targ_tgid": cfg.PID, "targ_cgroup_id": cfg.CgroupID}); err != nil {
			why = append(why, v.kind+": "+err.Error())
			continue
		}
		coll, err := ebpf.NewCollectionWithOptions(spec, shared)
		if err != nil {
			why = append(why, v.kind+" load: "+shortErr(err))
			if errors.Is(err, unix.EPERM) {
				why[len(why)-1] = v.kind + ": EPERM from this kernel"
			}
			continue
		}
		ls, err := v.attach(coll)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			coll.Close()
			why = append(why, v.kind+" attach: "+shortErr(err))
			if errors.Is(err, os.ErrNotExist) && v.kind == "kprobe" {
				why[len(why)-1] = "kprobe: no kprobe_events (CONFIG_KPROBES off)"
			}
			continue
		}
		t.jbd2wait = coll
		t.links = append(t.links, ls...)
		t.probes = append(t.probes, event.Probe{Name: v.kind + "/" + fn, Attached: true})
		return
	}
	t.probes = append(t.probes, event.Probe{Name: "fentry|kprobe/" + fn, Dark: event.DarkJournalWaitExact,
		Reason: event.ReasonRefused, Err: strings.Join(why, "; "), Optional: true})
}
