package event

import (
	"fmt"
	"testing"
)

// String keeps the "major:minor" of /proc/self/mountinfo that it printed
// through fmt before it was written with strconv.
func TestDevString(t *testing.T) {
	for _, d := range []Dev{0, MkDev(0, 27), MkDev(253, 1), MkDev(8, 16), MkDev(259, 1<<20-1), MkDev(1<<12-1, 0), Dev(^uint32(0))} {
		want := fmt.Sprintf("%d:%d", d.Major(), d.Minor())
		if got := d.String(); got != want {
			t.Errorf("Dev(%#x).String() = %q, want %q", uint32(d), got, want)
		}
		if got := string(d.Append([]byte("x"))); got != "x"+want {
			t.Errorf("Dev(%#x).Append = %q, want %q", uint32(d), got, "x"+want)
		}
	}
}

// TestProbeCodesPinned: Dark and Reason are the summary's and the
// capture's unavailable[].dark and .reason (docs/schema.md), which
// recordings hold: a change is a new summary and capture version.
func TestProbeCodesPinned(t *testing.T) {
	for got, want := range map[string]string{
		string(DarkJBD2Commits): "jbd2_commits", string(DarkXFSLogForce): "xfs_log_force", string(DarkKthreadFsyncs): "kthread_fsyncs",
		string(DarkJournalWaitExact): "journal_wait_exact", string(DarkIOUring): "io_uring", string(DarkCommitFunction): "commit_function",
		string(ReasonModuleNotLoaded): "module_not_loaded", string(ReasonNoModuleBTF): "no_module_btf",
		string(ReasonNoIOUringTracepoint): "no_io_uring_tracepoint", string(ReasonRefused): "refused", string(ReasonNoFunction): "no_function",
		string(ReasonConfigured): "configured", string(ReasonLoadFailed): "load_failed", string(ReasonAttachFailed): "attach_failed",
	} {
		if got != want {
			t.Errorf("code %q, want %q", got, want)
		}
	}
}
