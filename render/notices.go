package render

import (
	"fmt"
	"strings"
	"time"
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
