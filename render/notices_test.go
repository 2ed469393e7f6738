package render

import (
	"errors"
	"testing"
	"time"
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
		{HypervisorStart(HypervisorTarget{PID: 42}, 0), "tracing the image I/O of pid 42; Ctrl-C to stop"},
		{HypervisorStart(HypervisorTarget{Comm: "qemu-system-x86"}, 30*time.Second), `tracing the image I/O of comm "qemu-system-x86" for 30s (Ctrl-C stops sooner)`},
		{HypervisorNoImageIO(HypervisorTarget{PID: 42}), "etcdscope hypervisor: no image I/O or flush from pid 42 in the run: is it the hypervisor (pgrep qemu), and did its guest write?"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
