package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/event"
)

const (
	f1 = 0x1111
	f2 = 0x2222
)

// TestCommitVerdicts: the words of the first verdict for each part a
// write can wait on (the typed verdicts: analysis/commit's TestVerdicts;
// every verdict's bytes: testdata/render/commit/verdicts.txt).
func TestCommitVerdicts(t *testing.T) {
	names := commit.Names{f1: "m1", f2: "m2"}
	mk := func(role commit.Role, parts map[string]int64, decider uint64, known bool, acks ...commit.Ack) commit.Write {
		var total int64
		for _, v := range parts {
			total += v
		}
		return commit.Write{Role: role, StartNs: 1, EndNs: 1 + uint64(total), PartsNs: parts, WALSyncNs: parts[commit.PartWALAppend] * 9 / 10,
			BatchEntries: 1, Decider: decider, DeciderKnown: known, Acks: acks}
	}
	tests := []struct {
		name  string
		write commit.Write
		cs    commit.ClusterState
		want  []string // substrings of the first verdict, then of the others
	}{
		{"local disk", mk(commit.RoleLeader, map[string]int64{commit.PartPropose: 1e4, commit.PartWALAppend: 11e6, commit.PartApply: 2e5, commit.PartReturn: 3e4}, commit.LocalVote, true),
			commit.ClusterState{Voters: 1, Names: names}, []string{"writes wait on the local disk: WAL append p50 11.00 ms", "WAL sync p50 9.90 ms"}},
		{"far follower decides because the near one is down", mk(commit.RoleLeader, map[string]int64{commit.PartPropose: 1e4, commit.PartWALAppend: 1e6, commit.PartQuorumWait: 50e6, commit.PartApply: 2e5}, f2, true, commit.Ack{Member: f2, AfterSendNs: 52_500_000}),
			commit.ClusterState{Voters: 3, Down: []uint64{f1}, Names: names},
			[]string{"writes wait on the quorum", "deciding vote is m2 (2222) in 1 of 1 writes", "52.50 ms from send to its ack", "; m1 (1111) sent no ack"}},
		{"follower forwards", mk(commit.RoleFollower, map[string]int64{commit.PartForward: 20e6, commit.PartWALAppend: 1e6, commit.PartQuorumWait: 5e6, commit.PartApply: 2e5}, 0, false),
			commit.ClusterState{Voters: 3, Names: names}, []string{"writes wait on forwarding to the leader", "forward p50 20.00 ms", "quorum_wait p50 5.00 ms", "move-leader"}},
		// A far leader (scenario run of 2026-12-02): forward and the
		// follower's quorum_wait are each about one RTT, and quorum_wait
		// was the larger; the verdict named "the quorum" with "the
		// deciding vote is local WAL in 0 of 40 writes", which a follower
		// never sees. Both are the round trip to the leader.
		{"follower of a far leader, quorum_wait the larger", mk(commit.RoleFollower, map[string]int64{commit.PartForward: 40e6, commit.PartWALAppend: 2e6, commit.PartQuorumWait: 48e6, commit.PartApply: 3e6, commit.PartReturn: 1e6}, 0, false),
			commit.ClusterState{Voters: 3, Names: names}, []string{"writes wait on forwarding to the leader (forward 42.6% + quorum_wait 51.1% of the time)", "forward p50 40.00 ms", "quorum_wait p50 48.00 ms"}},
		{"apply", mk(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 1e6, commit.PartApply: 9e6}, commit.LocalVote, true),
			commit.ClusterState{Voters: 1, Names: names}, []string{"writes wait on apply"}},
		// gRPC the largest part had no verdict at all: the first line
		// named the deciding vote.
		{"grpc", mk(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 1e6, commit.PartGRPC: 9e6}, commit.LocalVote, true),
			commit.ClusterState{Voters: 1, Names: names}, []string{"writes wait in gRPC around the write (grpc, 90% of the time): request decode, the auth and quota interceptors, response encode",
				"\n  check the requests' size, auth"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := commit.NewReport()
			r.Add(&tc.write)
			v := CommitVerdictBlocks(r, tc.cs)
			if len(v) == 0 {
				t.Fatal("no verdict")
			}
			for _, s := range tc.want {
				if !strings.Contains(v[0], s) {
					t.Errorf("verdict %q lacks %q", v[0], s)
				}
			}
			if tc.write.Role == commit.RoleFollower && strings.Contains(strings.Join(v, " "), "deciding vote") {
				t.Errorf("a follower's verdict names a deciding vote: %q", v)
			}
		})
	}
	if v := CommitVerdicts(commit.NewReport(), commit.ClusterState{}); !strings.Contains(v[0], "no write was traced") {
		t.Errorf("empty report: %q", v)
	}
}

// TestCommitCauseVerdicts: the WAL append's verdict names what its fdatasync
// calls waited on: the CPU when a thread was runnable most of the time
// (issue 28: a one-member etcd held to 3% of a CPU), the disk when its
// layers together hold more than any other cause, and without the fsync
// tracer the disk, pointing at `etcdscope fsync`.
func TestCommitCauseVerdicts(t *testing.T) {
	wal := commit.Write{Role: commit.RoleLeader, StartNs: 1, EndNs: 1 + 640e6, WALSyncNs: 638e6,
		PartsNs: map[string]int64{commit.PartPropose: 1e5, commit.PartWALAppend: 639e6, commit.PartApply: 5e5, commit.PartReturn: 4e5}}
	apply := commit.Write{Role: commit.RoleLeader, StartNs: 1, EndNs: 1 + 100e6, WALSyncNs: 1e6,
		PartsNs: map[string]int64{commit.PartWALAppend: 2e6, commit.PartApply: 98e6}}
	tests := []struct {
		name   string
		w      commit.Write
		causes []*commit.SyncCause
		want   []string // substrings of the first verdict
		not    string   // in no verdict
		extra  string   // in a later verdict
	}{
		{"throttled: the CPU, not the disk", wal,
			[]*commit.SyncCause{{Ns: map[commit.Cause]int64{commit.CauseCPUWait: 630e6, commit.CauseDeviceFlush: 5e6, commit.CauseJournal: 3e6}}},
			[]string{"writes wait for a CPU, not the disk", "WAL append p50 639.00 ms", "waiting for a CPU 99%", "CPU throttling"}, "local disk", ""},
		{"the device's flush", wal,
			[]*commit.SyncCause{{Ns: map[commit.Cause]int64{commit.CauseDeviceFlush: 500e6, commit.CauseJournal: 100e6, commit.CauseCPUWait: 38e6}}},
			[]string{"writes wait on the local disk (94% of (*WAL).sync, most in its device flush: 78%)", "disk 94% (device flush 78%"}, "wait for a CPU", ""},
		{"disk layers together outweigh a CPU wait larger than each", wal,
			[]*commit.SyncCause{{Ns: map[commit.Cause]int64{commit.CauseDataWriteback: 30e6, commit.CauseJournal: 11e6, commit.CauseDeviceFlush: 8e6, commit.CauseBlockQueue: 10e6, commit.CauseCPUWait: 25e6, commit.CauseRunning: 14e6}}},
			[]string{"writes wait on the local disk (60% of (*WAL).sync, most in its data writeback: 31%)", "disk 60%"}, "wait for a CPU", ""},
		{"no fsync tracer", wal, nil,
			[]string{"writes wait on the local disk: WAL append p50 639.00 ms", "run `etcdscope fsync --comm etcd`"}, "CPU", ""},
		{"apply dominates, the fdatasyncs still show the starving", apply,
			[]*commit.SyncCause{{Ns: map[commit.Cause]int64{commit.CauseCPUWait: 9e5, commit.CauseDeviceFlush: 1e5}}},
			[]string{"writes wait on apply"}, "", "etcd waits for a CPU: its WAL fdatasync calls (1 split"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := commit.NewReport()
			r.Add(&tc.w)
			r.AddCauses(tc.causes)
			v := CommitVerdictBlocks(r, commit.ClusterState{Voters: 1})
			for _, s := range tc.want {
				if !strings.Contains(v[0], s) {
					t.Errorf("verdict %q lacks %q", v[0], s)
				}
			}
			all := strings.Join(v, "\n")
			if tc.not != "" && strings.Contains(all, tc.not) {
				t.Errorf("verdicts %q name %q", v, tc.not)
			}
			if tc.extra != "" && !strings.Contains(strings.Join(v[1:], "\n"), tc.extra) {
				t.Errorf("verdicts %q lack %q", v, tc.extra)
			}
		})
	}
}

// TestCommitPartVerdictClose: the user's follower run of 2026-12-07:
// wal_append 44.5% against forward + quorum_wait 43.6%, the writes split
// both ways. The verdict named the WAL append alone ("writes wait on the
// local disk"); it now leads with both parts' shares as the table prints
// them and says why it names both. The same means with every write alike
// keep the one-part verdict.
func TestCommitPartVerdictClose(t *testing.T) {
	mk := func(wal, fwd, quorum int64) *commit.Write {
		return &commit.Write{Role: commit.RoleFollower, StartNs: 1, EndNs: 1 + uint64(wal+fwd+quorum+110e3), WALSyncNs: wal * 9 / 10, BatchEntries: 1,
			PartsNs: map[string]int64{commit.PartGRPC: 50e3, commit.PartForward: fwd, commit.PartWALAppend: wal, commit.PartQuorumWait: quorum, commit.PartApply: 60e3}}
	}
	close, apart := commit.NewReport(), commit.NewReport()
	for i := range 200 {
		if i%2 == 0 {
			close.Add(mk(1_500_000, 250e3, 250e3))
		} else {
			close.Add(mk(280e3, 700e3, 500e3))
		}
		apart.Add(mk(890e3, 475e3, 375e3))
	}
	// Of 1850 µs of parts, 890 µs is 48.1% and 850 µs 45.9%.
	v := CommitVerdictBlocks(close, commit.ClusterState{Voters: 3})[0]
	for _, s := range []string{"writes wait on the WAL append (wal_append 48.1%) and on forwarding to the leader (forward + quorum_wait 45.9%) alike, of the time",
		"not set apart by this run's spread", "wal_append the longer in 100 of 200 writes", partMethod, "the first alone: writes wait on the local disk: WAL append p50"} {
		if !strings.Contains(v, s) {
			t.Errorf("close: verdict %q lacks %q", v, s)
		}
	}
	if v := CommitVerdictBlocks(apart, commit.ClusterState{Voters: 3})[0]; strings.Contains(v, "alike") || !strings.HasPrefix(v, "writes wait on the local disk: WAL append p50 0.89 ms") {
		t.Errorf("apart: verdict %q, want the WAL append alone", v)
	}
}

// closeCauseReport is TestCommitCauseVerdictClose's report: disk 40%
// against waiting for a CPU 38% of (*WAL).sync, the writes split both
// ways.
func closeCauseReport() *commit.Report {
	r := commit.NewReport()
	var causes []*commit.SyncCause
	for i := range 100 {
		w := commit.Write{Role: commit.RoleLeader, StartNs: 1, EndNs: 1 + 2e6, WALSyncNs: 1e6,
			PartsNs: map[string]int64{commit.PartWALAppend: 15e5, commit.PartApply: 5e5}}
		r.Add(&w)
		ns := map[commit.Cause]int64{commit.CauseDataWriteback: 250e3, commit.CauseJournal: 150e3, commit.CauseDeviceFlush: 120e3, commit.CauseBlockQueue: 80e3,
			commit.CauseCPUWait: 180e3, commit.CauseRunning: 80e3, commit.CauseBlocked: 100e3, commit.CauseOutside: 40e3}
		if i%2 == 1 {
			ns = map[commit.Cause]int64{commit.CauseDataWriteback: 50e3, commit.CauseJournal: 50e3, commit.CauseDeviceFlush: 40e3, commit.CauseBlockQueue: 60e3,
				commit.CauseCPUWait: 580e3, commit.CauseRunning: 80e3, commit.CauseBlocked: 100e3, commit.CauseOutside: 40e3}
		}
		causes = append(causes, &commit.SyncCause{Ns: ns})
	}
	r.AddCauses(causes)
	return r
}

// TestCommitVerdictEvidence: the summary's JSON gives each verdict line
// its numbers (verdict_evidence, one per line): the WAL verdict's part
// against the next and its cause against the next, each side's share,
// the gap's interval and whether they are set apart, the same numbers
// the line and its details print (one source: commit.Verdict), and read
// back by commit.ReadRecords.
func TestCommitVerdictEvidence(t *testing.T) {
	run := &CommitRun{Source: commit.SourceUprobes, Report: closeCauseReport(), Cluster: commit.ClusterState{Voters: 1}}
	b, err := json.Marshal(CommitSummary(run))
	if err != nil {
		t.Fatal(err)
	}
	_, sum, err := commit.ReadRecords(bytes.NewReader(b))
	if err != nil || sum == nil {
		t.Fatalf("read back: %v", err)
	}
	if len(sum.VerdictEvidence) != len(sum.Verdicts) || len(sum.Verdicts) == 0 {
		t.Fatalf("%d evidence records for %d verdicts:\n%s", len(sum.VerdictEvidence), len(sum.Verdicts), b)
	}
	e := sum.VerdictEvidence[0]
	c, p := e.CauseLead, e.PartLead
	if e.Kind != commit.VerdictWAL || c == nil || p == nil {
		t.Fatalf("first verdict's evidence %+v, want a WAL verdict with its part and cause leads:\n%s", e, b)
	}
	if c.Lead != "disk" || c.LeadLayer != commit.CauseDataWriteback || c.Next != string(commit.CauseCPUWait) || c.NextLayer != "" || c.Separated ||
		c.GapCILowPctPoints == nil || *c.GapCILowPctPoints > 0 || *c.GapCIHighPctPoints < 0 || c.Compared != 100 {
		t.Errorf("cause lead %+v: want the disk (data_writeback) against cpu_wait, not separated, over 100 writes", *c)
	}
	if p.Lead != commit.PartWALAppend || p.Next != commit.PartApply || !p.Separated || p.LeadSharePct != 75 || p.NextSharePct != 25 {
		t.Errorf("part lead %+v: want wal_append 75%% against apply 25%%, separated", *p)
	}
	// The line and its details print these numbers, rounded.
	text := CommitVerdictBlocks(run.Report, run.Cluster)[0]
	for _, s := range []string{
		fmt.Sprintf("on the local disk (%.0f%%) and for a CPU (%.0f%%) alike", c.LeadSharePct, c.NextSharePct),
		fmt.Sprintf("the gap's 95%% interval %.0f to %.0f points, the disk the longer in %d of %d writes", *c.GapCILowPctPoints, *c.GapCIHighPctPoints, c.Longer, c.Compared),
	} {
		if !strings.Contains(text, s) {
			t.Errorf("verdict %q lacks the JSON's %q", text, s)
		}
	}
}

// TestCommitCauseVerdictClose: the user's run of 2026-12-07 (a leader of
// three, ~20 puts/s): disk 40% (data writeback 15%) against waiting for
// a CPU 38%, the writes split both ways. The verdict quoted "most on its
// data writeback (15% of (*WAL).sync)", a layer's share, and named the
// disk alone; it now leads with both sides' shares as the split prints
// them and says why it names both.
func TestCommitCauseVerdictClose(t *testing.T) {
	r := closeCauseReport()
	v := CommitVerdictBlocks(r, commit.ClusterState{Voters: 1})[0]
	for _, s := range []string{"writes wait on the local disk (40%) and for a CPU (38%) alike, of (*WAL).sync's time", "split per call: disk 40% (",
		"waiting for a CPU 38%", "not set apart by this run's spread", "the disk the longer in 50 of 100 writes", cpuCheck} {
		if !strings.Contains(v, s) {
			t.Errorf("verdict %q lacks %q", v, s)
		}
	}
	if line, _, _ := strings.Cut(v, "\n"); strings.Contains(line, "15%") {
		t.Errorf("verdict %q quotes a layer's share as the cause's", v)
	}
}

// TestCommitAckLinesSorted: the table has one ack line a follower, by the
// name it prints (then by id); they came in map order, a different
// order from one run to the next.
func TestCommitAckLinesSorted(t *testing.T) {
	names := commit.Names{0x40: "a", 0x30: "b", 0x20: "c", 0x10: "c"} // ids against names; two members named c
	r := commit.NewReport()
	for _, id := range []uint64{0x10, 0x20, 0x30, 0x40, 0x50, 0x60} {
		r.Add(&commit.Write{Role: commit.RoleLeader, StartNs: 1, EndNs: 2e6, PartsNs: map[string]int64{commit.PartWALAppend: 2e6},
			Decider: id, DeciderKnown: true, Acks: []commit.Ack{{Member: id, AfterSendNs: int64(id) * 1e3}}})
	}
	run := &CommitRun{PID: 1, Source: commit.SourceUprobes, Report: r, Cluster: commit.ClusterState{Voters: 7, Names: names}}
	want := []string{"50", "60", "a (40)", "b (30)", "c (10)", "c (20)"} // names.Of: hex ids sort before names
	for i := range 20 {
		var b strings.Builder
		if err := CommitTable(&b, run); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(b.String(), "\n") {
			if m, ok := strings.CutPrefix(l, "ack of "); ok {
				got = append(got, m[:strings.Index(m, " after send")])
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("render %d: ack lines of %q, want %q", i, got, want)
		}
	}
}

// TestCommitModelScrapes: a member the end scrape of /metrics missed is
// named in the table, with the scrape from during the run its numbers end
// on (or that it has none), and the summary carries model_scrapes; a
// member the end scrape answered adds no line.
func TestCommitModelScrapes(t *testing.T) {
	names := commit.Names{1: "m1", 2: "m2", 3: "m3"}
	used := []commit.ModelScrape{
		{Member: "1", Scrape: commit.ScrapeEnd, WindowNs: 30e9},
		{Member: "2", Scrape: commit.ScrapeDuring, WindowNs: 27e9, ShortNs: 3e9, EndErr: "context deadline exceeded"},
		{Member: "3", Scrape: commit.ScrapeNone, EndErr: "connection refused"},
	}
	run := &CommitRun{PID: 1, Source: commit.SourceUprobes, Report: commit.NewReport(), Cluster: commit.ClusterState{Voters: 3, Names: names},
		Model: &commit.ModelResult{ExpectedNs: 2e6, Parts: map[string]commit.Measure{}}, ModelScrapes: used}
	var b strings.Builder
	if err := CommitTable(&b, run); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"/metrics of m2 (2): the end scrape missed it (context deadline exceeded); its numbers end on its scrape from during the run, 3.0 s before the end (over 27.0 s)",
		"/metrics of m3 (3): neither the end scrape (connection refused) nor any during the run answered",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "/metrics of m1") {
		t.Errorf("a line for m1, which answered at the end:\n%s", out)
	}
	if s := CommitSummary(run); len(s.ModelScrapes) != 3 || s.ModelScrapes[1].Scrape != commit.ScrapeDuring {
		t.Errorf("summary's model_scrapes %+v", s.ModelScrapes)
	}
}

// TestCommitNotice: every progress notice of a commit run is worded from
// its kind and facts, and an unavailable part reads as words, not as the
// reason's code (it was "part grpc unavailable: no_function ...").
func TestCommitNotice(t *testing.T) {
	err := errors.New("boom")
	for _, c := range []struct {
		n    commit.Notice
		want string
	}{
		{commit.Notice{Kind: commit.NoticeModelFallback, Err: err}, "etcd's functions cannot be probed (boom): using the kernel-only model from etcd's metrics"},
		{commit.Notice{Kind: commit.NoticeUnavailable, Unavailable: analysis.Unavailable{Part: "grpc", Probe: "uprobe/grpc", Dark: event.DarkCommitFunction, Reason: event.ReasonNoFunction}},
			"unavailable: grpc (uprobe/grpc): its part of each write not timed (not found in the binary)"},
		{commit.Notice{Kind: commit.NoticeUnavailable, Unavailable: analysis.Unavailable{Part: "uprobes", Reason: event.ReasonRefused, Err: "boom"}}, "unavailable: uprobes (could not be attached: boom)"},
		{commit.Notice{Kind: commit.NoticeNoSyncSplit, Err: err}, "fsync tracer: boom: the WAL fdatasync is not split into the disk's layers and CPU waits"},
		{commit.Notice{Kind: commit.NoticeLoadStarted, Load: commit.LoadInfo{PerSec: 20, ValueBytes: 256, Prefix: "/p/", Lease: 0x1f, TTL: 2 * time.Minute}},
			"load: 20 puts/s of 256-byte values under /p/, lease 1f (TTL 2m0s; revoked at exit, else the keys expire)"},
		{commit.Notice{Kind: commit.NoticeLoadFailed, Err: err}, "load not started: boom"},
		{commit.Notice{Kind: commit.NoticeLeaderChanged, Leader: "m2", Role: commit.RoleFollower}, "leader changed to m2: this member is now follower"},
		{commit.Notice{Kind: commit.NoticeLeaseKept}, "the traced etcd is stopped or gone: the load's lease is not revoked (its keys expire with its TTL)"},
		{commit.Notice{Kind: commit.NoticeRevokeFailed, Err: err}, "revoking the load's lease: boom (its keys expire with its TTL)"},
		{commit.Notice{Kind: commit.NoticeClusterWait, Err: err, Every: 5 * time.Second}, "boom; asked again every 5s while etcd runs (writes not split until it answers)"},
	} {
		if got := CommitNotice(c.n); got != c.want {
			t.Errorf("kind %d:\n got %s\nwant %s", c.n.Kind, got, c.want)
		}
	}
	if got, want := CommitNoticeLine(commit.Notice{Kind: commit.NoticeLoadFailed, Err: err}), "etcdscope commit: load not started: boom"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for k := commit.NoticeModelFallback; k <= commit.NoticeClusterWait; k++ {
		if got := CommitNotice(commit.Notice{Kind: k, Err: err}); strings.HasPrefix(got, "notice ") {
			t.Errorf("kind %d not worded: %s", k, got)
		}
	}
}

// TestMeasureSource: a model number's source is worded from where the
// pipeline read it (commit.MetricSource), as the pipeline's own words
// were before it handed a typed source.
func TestMeasureSource(t *testing.T) {
	rtt := commit.MetricSource{Series: `etcd_network_peer_round_trip_time_seconds{To="2"}`, Window: commit.WindowSinceStart, Member: "m1", Prober: true}
	for _, c := range []struct {
		m    commit.Measure
		want string
	}{
		{commit.Measure{From: &commit.MetricSource{Series: "etcd_disk_wal_fsync_duration_seconds", Window: commit.WindowRun, Member: "m1", OfLeader: true}},
			"leader's etcd_disk_wal_fsync_duration_seconds mean over the run, /metrics of m1"},
		{commit.Measure{From: &rtt},
			`etcd_network_peer_round_trip_time_seconds{To="2"} mean since etcd started (none observed during the run), /metrics of m1 (etcd's prober: up to 2x the network RTT)`},
		{commit.Measure{Source: "fsync tracer"}, "fsync tracer"},
		{commit.Measure{Quorum: &commit.ModelFollower{RTT: commit.Measure{From: &rtt}, Fsync: commit.Measure{Source: "x"}}},
			`RTT (etcd_network_peer_round_trip_time_seconds{To="2"} mean since etcd started (none observed during the run), /metrics of m1 (etcd's prober: up to 2x the network RTT)) + fsync (x) of the deciding follower, minus the leader's WAL append`},
	} {
		if got := MeasureSource(c.m); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// TestModelSinceStart: the split run's model line says when a part rests
// on etcd's mean since it started (a run shorter than the prober's 30 s:
// a walk found that only in the JSON).
func TestModelSinceStart(t *testing.T) {
	run := commit.MetricSource{Series: "etcd_network_peer_round_trip_time_seconds", Window: commit.WindowRun}
	since := run
	since.Window = commit.WindowSinceStart
	q := func(rtt commit.MetricSource) *commit.ModelResult {
		return &commit.ModelResult{Parts: map[string]commit.Measure{
			commit.PartWALAppend:  {Ns: 1, From: &run},
			commit.PartQuorumWait: {Ns: 2, Quorum: &commit.ModelFollower{RTT: commit.Measure{Ns: 1, From: &rtt}, Fsync: commit.Measure{Ns: 1, From: &run}}},
		}}
	}
	if modelSinceStart(q(run)) || !modelSinceStart(q(since)) {
		t.Errorf("over the run: %v, since start: %v; want false, true", modelSinceStart(q(run)), modelSinceStart(q(since)))
	}
}

// TestDeciderVerdictAsCluster: over the walk's writes of 2026-12-07 (m3
// decided 183 of 496, m2 161, the leader's WAL 152) `etcdscope commit`
// said "quorum's deciding vote: m3 in 183 of 496 writes" while
// `etcdscope cluster` named neither; both now name m3 and m2 in the same
// words (noSingleDecider), and m3 alone once the run sets it apart.
func TestDeciderVerdictAsCluster(t *testing.T) {
	const m2, m3 = 0x2222, 0x3333
	names := commit.Names{m2: "m2", m3: "m3"}
	for _, c := range []struct {
		deciders map[uint64]int
		want     string
	}{
		{map[uint64]int{m3: 183, m2: 161, commit.LocalVote: 152},
			"no single deciding vote: m3 (3333) decided 183 and m2 (2222) 161 of 496 writes (95% interval of m3 (3333)'s part of those 344: 48-59%)"},
		{map[uint64]int{m3: 300, m2: 120, commit.LocalVote: 76}, "quorum's deciding vote: m3 (3333) in 300 of 496 writes"},
	} {
		r := commit.NewReport()
		j := commit.ClusterJoin{Deciders: map[commit.MemberID]int{}, Names: map[commit.MemberID]string{m2: "m2", m3: "m3"}}
		for id, n := range c.deciders {
			for range n {
				r.Add(&commit.Write{Role: commit.RoleLeader, StartNs: 1, EndNs: 1e6 + 1, PartsNs: map[string]int64{commit.PartWALAppend: 1e6}, BatchEntries: 1, Decider: id, DeciderKnown: true})
			}
			j.Deciders[commit.MemberID(id)], j.Joined = n, j.Joined+n
		}
		got := CommitVerdicts(r, commit.ClusterState{Voters: 3, Names: names})
		if !slices.Contains(got, c.want) {
			t.Errorf("commit's verdicts %q lack %q", got, c.want)
		}
		// cluster over the same writes names m2 beside m3 (two followers
		// deciding about equally often are weighed together) exactly
		// when commit does.
		cl := clusterVerdict(j.Verdict(), clusterNames(&j))
		if strings.Contains(c.want, "m2") != strings.Contains(cl, "m2") {
			t.Errorf("cluster's verdict %q, commit's %q: one question, two answers", cl, c.want)
		}
	}
}
