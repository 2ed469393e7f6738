package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
)

// The one-line notices the long-running commands write on stderr while
// they run: what failed on the side (the run goes on) and what to check.
// Each names the flag that fixes it.

// PeersStartScrapeError: peers' start scrape of --etcd-metrics url
// failed; the tracing goes on without the metric comparison.
func PeersStartScrapeError(url string, err error) string {
	return fmt.Sprintf("etcdscope peers: --etcd-metrics %s: %v (tracing continues; the report will have no metric comparison)", url, err)
}

// PeersReadyError: peers could not write its ready file (the run goes
// on).
func PeersReadyError(err error) string {
	return fmt.Sprintf("etcdscope peers: %v", err)
}

// PeersMetricsError: peers' end scrape of --etcd-metrics url failed
// (msg, as the report's metrics_error holds it).
func PeersMetricsError(url, msg string) string {
	return fmt.Sprintf("etcdscope peers: --etcd-metrics %s: %s", url, msg)
}

// PeersMembersError: peers could not read the member list from
// --etcd-endpoints (msg, as the report's members_error holds it).
func PeersMembersError(msg string) string {
	return "etcdscope peers: --etcd-endpoints: " + msg
}

// ServeListening is serve's start line: where its /metrics answers.
func ServeListening(addr string) string {
	return fmt.Sprintf("etcdscope serve: metrics on http://%s/metrics", addr)
}

// ServeReadyError: serve could not write its ready file (it serves on).
func ServeReadyError(err error) string {
	return fmt.Sprintf("etcdscope serve: writing --ready-file: %v", err)
}

// ServeCommitSyncsError: serve's fsync tracer on etcd (for the commit
// part) did not start: /commit/entries goes on without the WAL
// fdatasyncs' split.
func ServeCommitSyncsError(err error) string {
	return fmt.Sprintf("etcdscope serve: commit: fsync tracer on etcd: %v: the WAL fdatasyncs in /commit/entries are not split by cause", err)
}

// ServeTraced names the processes serve's fsync tracer follows, as the
// flags gave them: "pid 4242" (--pid), or the --comm value ("etcd").
func ServeTraced(pid int, comm string) string {
	if pid != 0 {
		return fmt.Sprintf("pid %d", pid)
	}
	return comm
}

// ServeFsyncOnExt4: serve, started before etcd, found the files of who
// (ServeTraced) on ext4 and moved its fsync tracer's calls to ext4's
// tracepoints; stranded calls (on another filesystem, hung past the
// handover's wait) were counted as lost.
func ServeFsyncOnExt4(who string, stranded uint64) string {
	how := "each call counted once"
	if stranded > 0 {
		how = fmt.Sprintf("%d call(s) in flight elsewhere counted in etcdscope_lost_events_total", stranded)
	}
	return fmt.Sprintf("etcdscope serve: fsync: %s's files are on ext4: traced on ext4's tracepoints now (4 syscall tracepoints off, %s)", who, how)
}

// ServeFsyncMode says, once at serve's start, where its fsync tracer
// traces the calls: on the syscall tracepoints until the files of who
// (ServeTraced) are known (waiting), on ext4's tracepoints (the traced
// files on ext4: no syscall tracepoint), or on the syscall tracepoints
// (they see every call; fstypes: the traced files' filesystems, nil when
// not known).
func ServeFsyncMode(who string, waiting, onSyscalls bool, fstypes []string) string {
	switch {
	case waiting:
		return fmt.Sprintf("etcdscope serve: fsync: on the syscall tracepoints (every process's syscalls pay for them) until %s holds a WAL and a bbolt file open; then on ext4's tracepoints if those are on ext4", who)
	case !onSyscalls:
		return "etcdscope serve: fsync: on ext4's tracepoints (the traced files are on ext4; no syscall tracepoint): an fsync on another filesystem is not seen (give --data-dir for each data and WAL directory)"
	case len(fstypes) > 0:
		return fmt.Sprintf("etcdscope serve: fsync: on the syscall tracepoints (the traced files are on %s; they see every call)", strings.Join(fstypes, ", "))
	}
	return "etcdscope serve: fsync: on the syscall tracepoints (the traced files' filesystem not known; they see every call)"
}

// ServeFsyncStaysOnSyscalls: serve, started before etcd, found the files
// of who (ServeTraced) on a filesystem ext4's tracepoints do not cover.
func ServeFsyncStaysOnSyscalls(who string, fstypes []string) string {
	return fmt.Sprintf("etcdscope serve: fsync: %s's files are on %s: its fsyncs stay traced on the syscall tracepoints (only ext4 has tracepoints of its own to trace them on)", who, strings.Join(fstypes, ", "))
}

// ServeFsyncSwitchError: the move to ext4's tracepoints failed; the
// syscall tracepoints stay (those still attached see every call).
func ServeFsyncSwitchError(err error) string {
	return fmt.Sprintf("etcdscope serve: fsync: moving to ext4's tracepoints: %v: the syscall tracepoints stay", err)
}

// ServeCommitNextError: serve --commit-comm found a new process of the
// comm after etcd exited, but could not probe it; it waits for another.
func ServeCommitNextError(pid int, err error) string {
	return fmt.Sprintf("etcdscope serve: commit: pid %d: %v: not followed; waiting for the next etcd", pid, err)
}

// HypervisorTarget is the hypervisor process `etcdscope hypervisor`
// traces: by --pid, else by --comm.
type HypervisorTarget struct {
	PID  int
	Comm string
}

// String words the target: "pid 42" or `comm "qemu-system-x86"`.
func (t HypervisorTarget) String() string {
	if t.PID != 0 {
		return fmt.Sprintf("pid %d", t.PID)
	}
	return fmt.Sprintf("comm %q", t.Comm)
}

// HypervisorStart is hypervisor's start line: what it traces and how the
// run of duration d (0: until stopped) ends.
func HypervisorStart(t HypervisorTarget, d time.Duration) string {
	sep := "; " // "; Ctrl-C to stop", " for 30s (Ctrl-C stops sooner)"
	if d > 0 {
		sep = " "
	}
	return "tracing the image I/O of " + t.String() + sep + StopHow(d)
}

// HypervisorNoImageIO: the run saw no image I/O or flush from t. An empty
// table reads as "no I/O"; the likelier cause is a target that is not
// the hypervisor.
func HypervisorNoImageIO(t HypervisorTarget) string {
	return fmt.Sprintf("etcdscope hypervisor: no image I/O or flush from %s in the run: is it the hypervisor (pgrep qemu), and did its guest write?", t)
}

// KernelModule is a module a netem apply needs, as netem.NeededModule
// finds it on this kernel.
type KernelModule struct {
	Module string // e.g. sch_netem
	Config string // its kernel option, e.g. CONFIG_NET_SCH_NETEM
	// Present: loaded, built in or loadable; Known: the kernel's module
	// lists tell whether it has it (when not Present).
	Present, Known bool
}

// NetemModulesNote is apply --dry-run's last line when the kernel lacks a
// module the apply needs, or may lack one (not loaded, and no module
// lists to tell): "" when every one is loaded, built in or loadable.
func NetemModulesNote(ms []KernelModule) string {
	var missing, missingCfg, unsure, unsureCfg []string
	for _, m := range ms {
		switch {
		case m.Present:
		case m.Known:
			missing, missingCfg = append(missing, m.Module), append(missingCfg, m.Config)
		default:
			unsure, unsureCfg = append(unsure, m.Module), append(unsureCfg, m.Config)
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("# the apply needs %s (%s), not on this kernel: modprobe -a %s",
			strings.Join(missing, ", "), strings.Join(missingCfg, ", "), strings.Join(missing, " "))
	case len(unsure) > 0:
		them := "them"
		if len(unsure) == 1 {
			them = "it"
		}
		return fmt.Sprintf("# the apply needs %s (%s): not loaded, and no /lib/modules to tell if this kernel has %s",
			strings.Join(unsure, ", "), strings.Join(unsureCfg, ", "), them)
	}
	return ""
}

// DiagnoseUnread: diagnose could not read input u (the report lists it
// too); its name and error, which quote what the user gave, escaped.
func DiagnoseUnread(u diagnose.Unread) string {
	return fmt.Sprintf("etcdscope diagnose: %s not read: %s", EscapeLine(u.Name), EscapeLine(u.Err))
}

// DiagnoseWaiting: diagnose scraped once and waits window for the second
// scrape (counters need two).
func DiagnoseWaiting(window time.Duration) string {
	return fmt.Sprintf("etcdscope diagnose: waiting %s for the second scrape (Ctrl-C diagnoses the first alone)", window)
}

// DiagnoseInterrupted: a signal ended diagnose's wait for the second
// scrape; the first scrapes are diagnosed alone.
func DiagnoseInterrupted() string {
	return "etcdscope diagnose: interrupted: the first scrapes are diagnosed alone"
}

// NoCommand is etcdscope's line when run without a command: the commands
// (help prints what each does).
func NoCommand(commands []string) string {
	return fmt.Sprintf("etcdscope: give a command (%s); run 'etcdscope help' for what each does", strings.Join(commands, ", "))
}

// NoArguments: command (version) takes no arguments but was given arg.
func NoArguments(command, arg string) string {
	return fmt.Sprintf("etcdscope: %s takes no arguments (got %q)", command, arg)
}

// UnknownCommand: etcdscope has no command named command.
func UnknownCommand(command string) string {
	return fmt.Sprintf("etcdscope: unknown command %q; run 'etcdscope help' for the list", command)
}

// CommandError is the line etcdscope ends command with on an error: msg,
// which names files, comms and what a recording holds (any user may have
// written them), escaped.
func CommandError(command, msg string) string {
	return "etcdscope " + command + ": " + EscapeLine(msg)
}

// EmptyPID is the usage error for --pid given empty: --pid $(pgrep -x
// etcd) with no etcd running.
func EmptyPID() string {
	return "--pid is empty: did the pgrep that gave it match no process? give the process id (pgrep -a etcd lists them)"
}

// SecondSignal: a second signal (its name, e.g. SIGINT) during command's
// shutdown ends the process at once, without the report.
func SecondSignal(command, signal string) string {
	return fmt.Sprintf("etcdscope %s: second %s: exiting at once, without the report", command, signal)
}

// NetemApplied is one change netem apply made (or "nothing: ..."), on
// stdout.
func NetemApplied(action string) string {
	return "applied: " + action
}

// NetemWarning is one warning of netem apply (on stderr).
func NetemWarning(w string) string {
	return "etcdscope netem: warning: " + w
}

// NetemVerified is netem apply's read-back of the qdisc tree the kernel
// holds (tree as netem prints it, ending in a newline): several lines.
func NetemVerified(tree string) string {
	return "verified, the kernel holds:\n" + tree
}

// NetemHolding: netem apply --hold d keeps the tree for d, then clears it.
func NetemHolding(d time.Duration) string {
	return fmt.Sprintf("holding for %s (SIGINT/SIGTERM clears early)", d)
}

// NetemCleared: netem cleared dev; its root qdisc is restored ("kernel
// default" or the root it had, e.g. "tbf 8001:").
func NetemCleared(dev, restored string) string {
	return fmt.Sprintf("cleared %s: root is the %s again", dev, restored)
}

// NetemNothingToClear: netem clear found no state of its own for dev (as
// the user gave it: escaped).
func NetemNothingToClear(dev string) string {
	return fmt.Sprintf("%s: nothing to clear (no etcdscope state for it)", EscapeLine(dev))
}

// ReportNoSummary: the recording name ends without its summary line, so
// its lost events and unavailable probes are unknown. Each Report* line
// escapes name, which the user gave.
func ReportNoSummary(name string) string {
	return fmt.Sprintf("etcdscope report: %s has no summary line (the run was cut short?): lost events and unavailable probes are unknown", EscapeLine(name))
}

// ReportFiltered: the recording name holds count of the run's total
// fsyncs (it was recorded with --min-latency). The table is the run's own
// summary of all of them; with html, the page's charts show the count
// held only.
func ReportFiltered(name string, count, total int64, html bool) string {
	name = EscapeLine(name)
	if html {
		return fmt.Sprintf("etcdscope report: %s holds %d of the run's %d fsyncs (recorded with --min-latency): the page's charts and tables show those %d only; etcdscope report %s gives the run's own summary of all of them", name, count, total, count, name)
	}
	return fmt.Sprintf("etcdscope report: %s holds %d of the run's %d fsyncs (recorded with --min-latency): the report is the run's own summary of all of them", name, count, total)
}

// ReportNoEndLine: the capture name ends without its end line, so its
// lost events are unknown.
func ReportNoEndLine(name string) string {
	return fmt.Sprintf("etcdscope report: %s has no end line (the run was cut short?): lost events are unknown", EscapeLine(name))
}
