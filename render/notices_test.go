package render

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// TestNetemModulesNote: apply --dry-run names a module the apply will
// need that this kernel lacks (or may lack), and says nothing when all
// are there.
func TestNetemModulesNote(t *testing.T) {
	netemM := KernelModule{Module: "sch_netem", Config: "CONFIG_NET_SCH_NETEM"}
	prio := KernelModule{Module: "sch_prio", Config: "CONFIG_NET_SCH_PRIO", Present: true, Known: true}
	missing := netemM
	missing.Known = true
	for _, c := range []struct {
		ms   []KernelModule
		want string
	}{
		{[]KernelModule{prio}, ""},
		{[]KernelModule{missing, prio}, "# the apply needs sch_netem (CONFIG_NET_SCH_NETEM), not on this kernel: modprobe -a sch_netem"},
		{[]KernelModule{netemM, prio}, "# the apply needs sch_netem (CONFIG_NET_SCH_NETEM): not loaded, and no /lib/modules to tell if this kernel has it"},
	} {
		if got := NetemModulesNote(c.ms); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
	// All three, the longest: still one line a terminal shows whole.
	for _, known := range []bool{true, false} {
		all := []KernelModule{{Module: "sch_netem", Config: "CONFIG_NET_SCH_NETEM"}, {Module: "sch_prio", Config: "CONFIG_NET_SCH_PRIO"}, {Module: "cls_bpf", Config: "CONFIG_NET_CLS_BPF"}}
		for i := range all {
			all[i].Known = known
		}
		if got := NetemModulesNote(all); len(got) > 180 {
			t.Errorf("%d characters: %s", len(got), got)
		}
	}
}

// TestNotices pins the run-time notices as the commands wrote them
// before they moved to render.
func TestNotices(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct{ got, want string }{
		{PeersStartScrapeError("http://h:2381/metrics", boom), "etcdscope peers: --etcd-metrics http://h:2381/metrics: boom (tracing continues; the report will have no metric comparison)"},
		{PeersReadyError(boom), "etcdscope peers: boom"},
		{PeersMetricsError("http://h:2381/metrics", "end scrape: boom"), "etcdscope peers: --etcd-metrics http://h:2381/metrics: end scrape: boom"},
		{PeersMembersError("boom"), "etcdscope peers: --etcd-endpoints: boom"},
		{ServeListening("127.0.0.1:9100"), "etcdscope serve: metrics on http://127.0.0.1:9100/metrics"},
		{ServeReadyError(boom), "etcdscope serve: writing --ready-file: boom"},
		{ServeCommitSyncsError(boom), "etcdscope serve: commit: fsync tracer on etcd: boom: the WAL fdatasyncs in /commit/entries are not split by cause"},
		{ServeCommitNextError(42, boom), "etcdscope serve: commit: pid 42: boom: not followed; waiting for the next etcd"},
		// The new-user walk: "etcd's files" and "the traced etcd" for any
		// --comm; the process as the flags gave it now.
		{ServeFsyncMode(ServeTraced(0, "etcd35"), true, true, nil), "etcdscope serve: fsync: on the syscall tracepoints (every process's syscalls pay for them) until etcd35 holds a WAL and a bbolt file open; then on ext4's tracepoints if those are on ext4"},
		{ServeFsyncOnExt4(ServeTraced(4242, "etcd"), 0), "etcdscope serve: fsync: pid 4242's files are on ext4: traced on ext4's tracepoints now (4 syscall tracepoints off, each call counted once)"},
		// The longest it gets: a 7-digit pid, calls stranded (<= 200
		// characters, cmd/etcdscope's TestOutputLinesConcise).
		{ServeFsyncOnExt4(ServeTraced(4194304, "etcd"), 12345), "etcdscope serve: fsync: pid 4194304's files are on ext4: traced on ext4's tracepoints now (4 syscall tracepoints off, 12345 call(s) in flight elsewhere counted in etcdscope_lost_events_total)"},
		{ServeFsyncStaysOnSyscalls(ServeTraced(0, "etcd"), []string{"xfs"}), "etcdscope serve: fsync: etcd's files are on xfs: its fsyncs stay traced on the syscall tracepoints (only ext4 has tracepoints of its own to trace them on)"},
		{HypervisorStart(HypervisorTarget{PID: 42}, 0), "tracing the image I/O of pid 42; Ctrl-C to stop"},
		{HypervisorStart(HypervisorTarget{Comm: "qemu-system-x86"}, 30*time.Second), `tracing the image I/O of comm "qemu-system-x86" for 30s (Ctrl-C stops sooner)`},
		{HypervisorNoImageIO(HypervisorTarget{PID: 42}), "etcdscope hypervisor: no image I/O or flush from pid 42 in the run: is it the hypervisor (pgrep qemu), and did its guest write?"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}

// TestCommandLines pins the lines cmd/etcdscope wrote itself before they
// moved to render: diagnose's, the command line's errors, the second
// signal, netem's and report's notices.
func TestCommandLines(t *testing.T) {
	cmds := []string{"check", "cluster", "commit", "completion", "diagnose", "fsync", "hypervisor", "merge", "netem", "peers", "report", "serve"}
	for _, c := range []struct{ got, want string }{
		{DiagnoseUnread(diagnose.Unread{Name: "junk.txt", Err: "not etcd /metrics text"}), "etcdscope diagnose: junk.txt not read: not etcd /metrics text"},
		{DiagnoseUnread(diagnose.Unread{Name: "a\x1b[31m", Err: "open a\nb"}), `etcdscope diagnose: a\x1b[31m not read: open a\x0ab`},
		{DiagnoseWaiting(30 * time.Second), "etcdscope diagnose: waiting 30s for the second scrape (Ctrl-C diagnoses the first alone)"},
		{DiagnoseInterrupted(), "etcdscope diagnose: interrupted: the first scrapes are diagnosed alone"},
		{NoCommand(cmds), "etcdscope: give a command (check, cluster, commit, completion, diagnose, fsync, hypervisor, merge, netem, peers, report, serve); run 'etcdscope help' for what each does"},
		{NoArguments("version", "extra"), `etcdscope: version takes no arguments (got "extra")`},
		{UnknownCommand("nosuch"), `etcdscope: unknown command "nosuch"; run 'etcdscope help' for the list`},
		{CommandError("report", "x.jsonl: no such file"), "etcdscope report: x.jsonl: no such file"},
		{CommandError("report", "a\x1b[2Jb"), `etcdscope report: a\x1b[2Jb`},
		{EmptyPID(), "--pid is empty: did the pgrep that gave it match no process? give the process id (pgrep -a etcd lists them)"},
		{SecondSignal("fsync", "SIGTERM"), "etcdscope fsync: second SIGTERM: exiting at once, without the report"},
		{NetemApplied("root prio 1:, netem 10: on band 3"), "applied: root prio 1:, netem 10: on band 3"},
		{NetemWarning("lo is a loopback device"), "etcdscope netem: warning: lo is a loopback device"},
		{NetemVerified("dev lo:\n  root prio 1:\n"), "verified, the kernel holds:\ndev lo:\n  root prio 1:\n"},
		{NetemHolding(90 * time.Second), "holding for 1m30s (SIGINT/SIGTERM clears early)"},
		{NetemCleared("eth0", "kernel default"), "cleared eth0: root is the kernel default again"},
		{NetemCleared("eth0", "tbf 8001:"), "cleared eth0: root is the tbf 8001: again"},
		{NetemNothingToClear("eth0"), "eth0: nothing to clear (no etcdscope state for it)"},
		{ReportNoSummary("run.jsonl"), "etcdscope report: run.jsonl has no summary line (the run was cut short?): lost events and unavailable probes are unknown"},
		{ReportFiltered("run.jsonl", 12, 3400, true), "etcdscope report: run.jsonl holds 12 of the run's 3400 fsyncs (recorded with --min-latency): the page's charts and tables show those 12 only; etcdscope report run.jsonl gives the run's own summary of all of them"},
		{ReportFiltered("run.jsonl", 12, 3400, false), "etcdscope report: run.jsonl holds 12 of the run's 3400 fsyncs (recorded with --min-latency): the report is the run's own summary of all of them"},
		{ReportNoEndLine("cap.jsonl"), "etcdscope report: cap.jsonl has no end line (the run was cut short?): lost events are unknown"},
		// Names the user gave, escaped (they were written raw before).
		{ReportNoEndLine("a\x1b]0;x\a"), `etcdscope report: a\x1b]0;x\x07 has no end line (the run was cut short?): lost events are unknown`},
		{NetemNothingToClear("e\x1bth0"), `e\x1bth0: nothing to clear (no etcdscope state for it)`},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
