package render

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/merge"
	"github.com/etcdscope/etcdscope/event"
)

// TestCommitWords: what a write missed and where the model's quorum wait
// comes from, worded here from analysis/commit's codes, as the commit
// record and the summary's model carried them when analysis wrote them
// (docs/schema.md).
func TestCommitWords(t *testing.T) {
	w := &commit.Write{ID: 1, Missing: []commit.Missing{commit.MissingWAL, commit.MissingApply, commit.MissingQuorum}}
	b, err := json.Marshal(CommitRecord(w, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := `"missing":["wal: no finished WAL Save holds the write's index","apply: no applyAll seen for the write's batch","quorum: fewer follower acks seen than the quorum needs"]`
	if !strings.Contains(string(b), want) {
		t.Errorf("record %s\nwant %s", b, want)
	}
	f := commit.ModelFollower{ID: 2, RTT: commit.Measure{Ns: 1e6, Source: "peers tracer"}, Fsync: commit.Measure{Ns: 2e6, Source: "etcd /metrics of m2"}}
	m := commit.Model(commit.ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: commit.Measure{Ns: 1e6, Source: "fsync tracer"}, Followers: []commit.ModelFollower{f}})
	q, ok := m.Parts[commit.PartQuorumWait]
	if !ok || q.Quorum == nil || q.Source != "" {
		t.Fatalf("model parts %+v: want a quorum wait from the follower's measures", m.Parts)
	}
	const words = "RTT (peers tracer) + fsync (etcd /metrics of m2) of the deciding follower, minus the leader's WAL append"
	if got := MeasureSource(q); got != words {
		t.Errorf("MeasureSource %q, want %q", got, words)
	}
	s := CommitSummary(&CommitRun{Report: commit.NewReport(), Model: &m})
	if got := s.Model.Parts[commit.PartQuorumWait].Source; got != words {
		t.Errorf("summary's quorum_wait source %q, want %q", got, words)
	}
	if m.Parts[commit.PartQuorumWait].Source != "" {
		t.Error("CommitSummary wrote into the run's model")
	}
}

// TestLossUnknown: a report whose loss is not known says why, in the
// table and as the JSON's loss_unknown, from analysis.LossCut; a summary
// read back keeps its own words.
func TestLossUnknown(t *testing.T) {
	for _, c := range []struct {
		r    analysis.Report
		want string
	}{
		{analysis.Report{LossCut: analysis.LossNoSummary}, "unknown: recording has no summary (the run was cut short)"},
		{analysis.Report{LossCut: analysis.LossNoEndLine}, "unknown: the capture has no end line (the run was cut short)"},
		{analysis.Report{LossUnknown: "unknown: as read"}, "unknown: as read"},
		{analysis.Report{}, ""},
	} {
		if got := LossUnknown(&c.r); got != c.want {
			t.Errorf("LossUnknown(%+v) = %q, want %q", c.r.LossCut, got, c.want)
		}
		var js, tbl strings.Builder
		if err := SummaryJSON(&js, &c.r); err != nil {
			t.Fatal(err)
		}
		if err := FsyncReport(&tbl, &c.r); err != nil {
			t.Fatal(err)
		}
		wantJS, _ := json.Marshal(c.want)
		if c.want != "" && (!strings.Contains(js.String(), `"loss_unknown":`+string(wantJS)) || !strings.Contains(js.String(), `"lost_events":null`) || !strings.Contains(tbl.String(), "missed probe runs "+c.want)) {
			t.Errorf("JSON %s\ntable %s\nwant %q", js.String(), tbl.String(), c.want)
		}
		if c.want == "" && strings.Contains(js.String(), "loss_unknown") {
			t.Errorf("JSON %s: loss_unknown on a known loss", js.String())
		}
	}
}

// TestMergeWords: each known-bad pairing merge.Warnings finds, worded
// here, leading with the image; the durability line and the L0 row's
// device from the summary's numbers.
func TestMergeWords(t *testing.T) {
	for _, c := range []struct {
		w    merge.Warning
		want string
	}{
		{merge.Warning{Kind: merge.WarnCacheUnsafe, Image: "/v/a.qcow2"}, "/v/a.qcow2: cache=unsafe (QEMU's command line): durability: none"},
		{merge.Warning{Kind: merge.WarnNeverFlushed, Image: "/v/a.qcow2", Writes: 7}, "/v/a.qcow2: written 7 times and never flushed in this recording: the guest did not flush, or QEMU drops its flushes"},
		{merge.Warning{Kind: merge.WarnIOUringBlockdev, Image: "/dev/dm-0", Dev: "dm-0"}, "/dev/dm-0: aio=io_uring on a block device (dm-0): io_uring over LVM/raw block devices"},
		{merge.Warning{Kind: merge.WarnNativeBuffered, Image: "/v/r.img"}, "/v/r.img: aio=native without O_DIRECT"},
		{merge.Warning{Kind: merge.WarnOpaqueBelow, Image: "/m/vm.img", FS: "fuse.sshfs", Dev: "0:52"}, "/m/vm.img: on fuse.sshfs 0:52: its flushes leave the kernel's block layer"},
		{merge.Warning{Kind: merge.WarnReplicated, Image: "/m/vm.img", FS: "ceph", Dev: "0:60"}, "/m/vm.img: on a replicated storage layer (ceph 0:60) under etcd, which already replicates every write through Raft"},
	} {
		if got := MergeWarning(c.w); !strings.HasPrefix(got, c.want) {
			t.Errorf("MergeWarning(%+v) = %q, want it to start %q", c.w, got, c.want)
		}
	}
	im := merge.Image{Path: "/v/u.qcow2", Format: "qcow2", Cache: "unsafe", AIO: "threads", Dev: "8:1", DevName: "sda1", FS: "ext4", Writes: 3}
	s := merge.Summary{DroppedBy: im.Path, GuestFlushes: 40, Images: []merge.Image{im}, Levels: []merge.Level{{Level: "L0 host", Image: &im}}}
	WordMerge(&s)
	if want := "none: guest flushes are dropped: the host wrote /v/u.qcow2 but never flushed it while the guest issued 40 flushes (cache=unsafe or cache.no-flush=on)"; s.Durability != want {
		t.Errorf("durability %q, want %q", s.Durability, want)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "cache=unsafe") {
		t.Errorf("warnings %q", s.Warnings)
	}
	if want := "/v/u.qcow2 (qcow2, cache=unsafe, aio=threads) on sda1 ext4"; s.Levels[0].Device != want {
		t.Errorf("L0 device %q, want %q", s.Levels[0].Device, want)
	}
}

// TestUnavailableLines: an unavailable probe leads with its name and
// what goes dark, why on an indented line with the kernel's error; an
// older entry (one string) is split at its last parentheses (nested ones
// kept whole), and one without them stays one line.
func TestUnavailableLines(t *testing.T) {
	for _, c := range []struct {
		in   analysis.Unavailable
		want string
	}{
		{analysis.Unavailable{Probe: "fentry|kprobe/jbd2_log_wait_commit", Dark: event.DarkJournalWaitExact, Reason: event.ReasonRefused, Err: "fentry: operation not permitted; kprobe: no kprobe_events (CONFIG_KPROBES off)", Optional: true},
			"unavailable: fentry|kprobe/jbd2_log_wait_commit: optional, journal layer by overlap with jbd2 commits\n  why: could not be attached: fentry: operation not permitted; kprobe: no kprobe_events (CONFIG_KPROBES off)\n"},
		{analysis.Unavailable{Probe: "tp_btf/ext4_sync_file_enter", Dark: event.DarkKthreadFsyncs, Reason: event.ReasonNoModuleBTF, Module: "ext4"},
			"unavailable: tp_btf/ext4_sync_file_enter: fsyncs by kernel threads (loop backing files on ext4) unseen\n  why: ext4 is a module and this kernel has no BTF for modules (/sys/kernel/btf/ext4; CONFIG_DEBUG_INFO_BTF_MODULES, Linux 5.11+)\n"},
		{analysis.Unavailable{Probe: "tp_btf/ext4_sync_file_exit", Reason: event.ReasonModuleNotLoaded, Module: "ext4"},
			"unavailable: tp_btf/ext4_sync_file_exit\n  why: ext4 not loaded: no ext4 tracepoints\n"},
	} {
		var b strings.Builder
		Unavailable(&b, c.in)
		if b.String() != c.want {
			t.Errorf("Unavailable(%+v):\n%q\nwant\n%q", c.in, b.String(), c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"fentry|kprobe/jbd2_log_wait_commit: optional, journal layer by overlap with jbd2 commits (fentry: refused by this kernel (EPERM); kprobe: no kprobe_events in tracefs (CONFIG_KPROBES off))",
			"unavailable: fentry|kprobe/jbd2_log_wait_commit: optional, journal layer by overlap with jbd2 commits\n  why: fentry: refused by this kernel (EPERM); kprobe: no kprobe_events in tracefs (CONFIG_KPROBES off)\n"},
		{"grpc: --grpc=false", "unavailable: grpc: --grpc=false\n"},
		{"tp_btf/xfs_log_force: xfs not loaded", "unavailable: tp_btf/xfs_log_force: xfs not loaded\n"},
		{"uprobes: f(x)", "unavailable: uprobes: f(x)\n"},                         // a call, not a reason
		{"(all of it)", "unavailable: (all of it)\n"},                             // nothing before the reason
		{"probe: dark (unbalanced))", "unavailable: probe: dark (unbalanced))\n"}, // never closes
	} {
		var u analysis.Unavailable
		if err := json.Unmarshal([]byte(strconv.Quote(c.in)), &u); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		Unavailable(&b, u)
		if b.String() != c.want {
			t.Errorf("Unavailable(%q):\n%q\nwant\n%q", c.in, b.String(), c.want)
		}
	}
}
