package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/etcdscope/etcdscope/netem"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/tracer"
)

func init() {
	subcommands["check"] = subcommand{
		summary: "say what this node and this process lack before a run: capabilities, BTF, tracefs, uprobes, netem (kprobes optional)",
		run:     runCheck,
	}
}

// checkStdout is where check prints (tests capture it).
var checkStdout io.Writer = os.Stdout

// checkFailed makes check exit 1 when something required is missing; the
// table already said what, the error says which subcommands it stops and
// which can run (a node without sch_netem still traces).
func checkFailed(items []checkItem, asJSON bool) error {
	all := checkedSubcommands
	blocked := map[string]bool{}
	for _, it := range items {
		if it.ok || it.required == "" {
			continue
		}
		for _, w := range strings.Fields(it.required) {
			if slices.Contains(all, w) {
				blocked[w] = true
			}
		}
	}
	var stopped, runs []string
	for _, c := range all {
		if blocked[c] {
			stopped = append(stopped, c)
		} else {
			runs = append(runs, c)
		}
	}
	return errors.New(render.CheckFailed(stopped, runs, asJSON))
}

// checkedSubcommands are the subcommands check judges the node for
// (check SUBCOMMAND... narrows its exit code to them).
var checkedSubcommands = []string{"fsync", "serve", "peers", "commit", "hypervisor", "netem"}

// stops reports whether a missing item stops one of the subcommands in
// only (every subcommand when only is empty).
func (it checkItem) stops(only []string) bool {
	if it.ok || it.required == "" {
		return false
	}
	if len(only) == 0 {
		return true
	}
	return slices.ContainsFunc(strings.Fields(it.required), func(w string) bool { return slices.Contains(only, w) })
}

// checkItem is one line of check's table.
type checkItem struct {
	what     string
	ok       bool
	required string // the subcommands that need it ("" for optional)
	detail   string // what was found, or the fix
	// unknown: this process cannot tell whether the node has it (an
	// unprivileged check cannot probe BPF features): neither MISSING nor
	// absent. unknownFor: the subcommands that would need it.
	unknown    bool
	unknownFor string
}

func runCheck(args []string) error {
	fs := newFlagSet("check")
	output := fs.String("output", "table", "table, or json (one object per item: what, ok, required, detail, unknown)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usagef("%v (see 'etcdscope check --help')", err)
	}
	only := fs.Args()
	for _, a := range only {
		if !slices.Contains(checkedSubcommands, a) {
			return usagef("check %s: give subcommands among %s, or none for all", a, strings.Join(checkedSubcommands, ", "))
		}
	}
	if *output != "table" && *output != "json" {
		return usagef("--output %q: use table or json", *output)
	}
	items := checkNode()
	failed := slices.ContainsFunc(items, func(it checkItem) bool { return it.stops(only) })
	if *output == "json" {
		enc := json.NewEncoder(render.JSONText(checkStdout))
		for _, it := range items {
			if err := enc.Encode(map[string]any{"what": it.what, "ok": it.ok, "required": it.required, "detail": it.detail, "unknown": it.unknown}); err != nil {
				return err
			}
		}
		if failed {
			return checkFailed(items, true)
		}
		return nil
	}
	fmt.Fprintln(checkStdout, render.CheckHeader(os.Geteuid()))
	for _, it := range items {
		fmt.Fprintln(checkStdout, render.CheckLine(render.CheckItem{What: it.what, OK: it.ok, Required: it.required, Detail: it.detail, Unknown: it.unknown, UnknownFor: it.unknownFor}))
	}
	if failed {
		return checkFailed(items, false)
	}
	return nil
}

// checkNode probes what the tracers and netem need, without changing
// anything on the host (no mount, no qdisc; a one-entry map created and
// closed, and without module lists a netem tree in a throwaway network
// namespace).
func checkNode() []checkItem {
	var items []checkItem
	has := tracer.HasCapability
	capItem := func(name string, c int, required, why string) {
		it := checkItem{what: name, ok: has(c) || (c != unix.CAP_NET_ADMIN && c != unix.CAP_SYS_PTRACE && has(unix.CAP_SYS_ADMIN)), required: required}
		if it.ok {
			it.detail = "held"
		} else {
			it.detail = why
		}
		items = append(items, it)
	}
	capItem("CAP_BPF", unix.CAP_BPF, "fsync serve peers commit hypervisor", "maps, programs and BTF: add it (or run as root)")
	capItem("CAP_PERFMON", unix.CAP_PERFMON, "fsync serve peers commit hypervisor", "tracepoints and uprobes: add it (or run as root)")
	capItem("CAP_NET_ADMIN", unix.CAP_NET_ADMIN, "netem", "qdiscs and filters: add it for netem apply/clear")
	capItem("CAP_SYS_PTRACE", unix.CAP_SYS_PTRACE, "commit", "commit: etcd's executable (/proc/PID/exe) for its uprobes; fsync: paths in /proc/PID/fd of more privileged processes (else the captured names)")
	capItem("CAP_SYS_ADMIN", unix.CAP_SYS_ADMIN, "", "only to mount tracefs when the node has not")

	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	items = append(items, checkItem{what: "kernel BTF", ok: err == nil, required: "fsync serve peers commit hypervisor",
		detail: pick(err == nil, "/sys/kernel/btf/vmlinux", "no /sys/kernel/btf/vmlinux: the kernel needs CONFIG_DEBUG_INFO_BTF=y")})

	memOK, memKnown, memDetail := tracer.BPFMemory()
	items = append(items, checkItem{what: "BPF memory", ok: memOK, required: pick(memKnown, "fsync serve peers commit hypervisor", ""), detail: memDetail,
		unknown: !memKnown, unknownFor: "fsync serve peers commit hypervisor"})

	rbOK, rbKnown, rbDetail := tracer.RingBuf()
	items = append(items, checkItem{what: "BPF ring buffer", ok: rbOK, required: pick(rbKnown, "fsync serve peers commit hypervisor", ""), detail: rbDetail,
		unknown: !rbKnown, unknownFor: "fsync serve peers commit hypervisor"})

	tsOK, tsKnown, tsDetail := tracer.TaskStorage()
	items = append(items, checkItem{what: "task storage", ok: tsOK, detail: tsDetail, unknown: !tsKnown})

	bpfErr := tracer.CheckPrerequisites()
	items = append(items, checkItem{what: "BPF map creation", ok: bpfErr == nil, required: "fsync serve peers commit hypervisor",
		detail: pick(bpfErr == nil, "a test map was created", fmt.Sprint(bpfErr))})

	items = append(items, tracefsItem())

	_, err = os.Stat("/sys/bus/event_source/devices/uprobe/type")
	items = append(items, checkItem{what: "uprobes", ok: err == nil, required: "commit peers",
		detail: pick(err == nil, "uprobe PMU present", "no uprobe PMU: the kernel needs CONFIG_UPROBE_EVENTS=y")})

	_, err = os.Stat("/sys/bus/event_source/devices/kprobe/type")
	items = append(items, checkItem{what: "kprobes", ok: err == nil,
		detail: pick(err == nil, "kprobe PMU present", "no kprobe PMU (CONFIG_KPROBES off): the exact jbd2 commit wait needs it or fentry (fsync's probe list says whether fentry attached); without both, "+render.JBD2WaitFallback)})
	if procsNote != "" {
		items = append(items, checkItem{what: "GOMAXPROCS", ok: true, detail: procsNote})
	}

	var uts unix.Utsname
	unix.Uname(&uts)
	rel := unix.ByteSliceToString(uts.Release[:])
	haveNetem, known := netem.ModuleState("sch_netem")
	detail := pick(haveNetem, "loaded, built in or available as a module", "not loaded and no module for "+rel+": the kernel needs CONFIG_NET_SCH_NETEM (modprobe sch_netem)")
	switch {
	case !known && tracer.HasCapability(unix.CAP_SYS_ADMIN) && tracer.HasCapability(unix.CAP_NET_ADMIN):
		// No module lists to read: build the tree where netem apply's own
		// probe does, on the loopback of a throwaway network namespace.
		err := netem.Probe(netem.ClassifierU32)
		haveNetem = err == nil
		detail = pick(haveNetem, "a netem tree was built in a throwaway network namespace", "tried in a throwaway network namespace: "+fmt.Sprint(err))
	case !known:
		detail = "not loaded and no module lists for " + rel + " (/lib/modules): netem apply will try, and roll back if the kernel refuses"
	}
	items = append(items, checkItem{what: "sch_netem", ok: haveNetem, required: "netem", detail: detail})
	return items
}

// tracefsItem reports whether tracefs is mounted and readable here.
func tracefsItem() checkItem {
	it := checkItem{what: "tracefs", required: "fsync serve hypervisor"}
	for _, r := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		_, err := os.Stat(r + "/events")
		if err == nil {
			it.ok, it.detail = true, "readable at "+r
			return it
		}
		if errors.Is(err, os.ErrPermission) {
			var st unix.Stat_t
			unix.Stat(r, &st)
			it.detail = fmt.Sprintf("mounted at %s but mode %04o uid %d: not readable by uid %d (run as uid %d, or mount -o remount,mode=0755 %s)", r, st.Mode&0o7777, st.Uid, os.Geteuid(), st.Uid, r)
			return it
		}
	}
	if tracer.HasCapability(unix.CAP_SYS_ADMIN) {
		it.ok, it.detail = true, "not mounted; etcdscope will mount it (CAP_SYS_ADMIN) and unmount it at exit"
		return it
	}
	it.detail = "not mounted, and mounting needs CAP_SYS_ADMIN: mount -t tracefs nodev /sys/kernel/tracing (or mount it into the container)"
	return it
}

func pick(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return strings.TrimSpace(no)
}
