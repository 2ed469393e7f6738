package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/golden"
	"github.com/etcdscope/etcdscope/pipeline"
	"github.com/etcdscope/etcdscope/render"
	"github.com/etcdscope/etcdscope/workload"
)

var updateCommit = flag.Bool("update-commit", false, "rewrite testdata/render/commit from the commit table and summary (only when a change of output is intended)")

// commitGolden compares got with testdata/render/commit/name.
func commitGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.File(t, filepath.Join("../../testdata/render/commit", name), got, *updateCommit)
}

const (
	goldenLeader = 0x28d1
	goldenF1     = 0x1111
	goldenF2     = 0x2222
)

// goldenWrite is a write of the given parts (ns), its WAL fdatasync 9/10
// of its WAL append.
func goldenWrite(role commit.Role, parts map[string]int64, decider uint64, known bool, acks ...commit.Ack) *commit.Write {
	var total int64
	for _, v := range parts {
		total += v
	}
	return &commit.Write{Role: role, StartNs: 1, EndNs: 1 + uint64(total), PartsNs: parts, WALSyncNs: parts[commit.PartWALAppend] * 9 / 10,
		BatchEntries: 1, Decider: decider, DeciderKnown: known, Acks: acks}
}

// goldenReport adds ws (each n times, with its part values scaled by
// 1+i/10 for the i-th copy, so that p50 and p99 differ) and causes.
func goldenReport(n int, causes []*commit.SyncCause, ws ...*commit.Write) *commit.Report {
	r := commit.NewReport()
	for _, w := range ws {
		for i := range n {
			c := *w
			c.PartsNs = map[string]int64{}
			var total int64
			for p, v := range w.PartsNs {
				c.PartsNs[p] = v + v*int64(i)/10
				total += c.PartsNs[p]
			}
			c.EndNs = c.StartNs + uint64(total)
			c.WALSyncNs = c.PartsNs[commit.PartWALAppend] * 9 / 10
			c.Acks = slices.Clone(w.Acks)
			for j := range c.Acks {
				c.Acks[j].AfterSendNs += int64(i) * 1e5
			}
			r.Add(&c)
		}
	}
	r.AddCauses(causes)
	return r
}

var goldenNames = commit.Names{goldenLeader: "m0", goldenF1: "m1", goldenF2: "m2"}

// commitCases are the runs whose table and JSON summary are pinned in
// testdata/render/commit: a leader of three waiting on its quorum with a
// member down, the fsync tracer's split, a load, sampling, a stop and the
// model; a follower; the model alone; a run with no write.
func commitCases() []struct {
	name string
	pid  int
	res  *pipeline.CommitResult
} {
	leaderWrite := goldenWrite(commit.RoleLeader, map[string]int64{commit.PartGRPC: 4e4, commit.PartPropose: 1e4, commit.PartWALAppend: 2e6,
		commit.PartQuorumWait: 50e6, commit.PartCommitToApply: 3e4, commit.PartApply: 2e5, commit.PartReturn: 3e4}, goldenF2, true,
		commit.Ack{Member: goldenF2, AfterSendNs: 52_500_000})
	batched := *leaderWrite
	batched.BatchEntries = 3
	incomplete := goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 2e6, commit.PartApply: 2e5}, commit.LocalVote, true)
	incomplete.Missing = []commit.Missing{commit.MissingQuorum}
	leaderRep := goldenReport(5, []*commit.SyncCause{
		{CallNs: 2.0e6, Ns: map[commit.Cause]int64{commit.CauseCPUWait: 30e6, commit.CauseDeviceFlush: 5e6, commit.CauseJournal: 3e6}},
		{CallNs: 1.9e6, Ns: map[commit.Cause]int64{commit.CauseCPUWait: 20e6, commit.CauseOutside: 1e6}}, nil,
	}, leaderWrite, &batched, incomplete)
	leaderRep.ClientPutNs.Add(60e6)
	leader := &pipeline.CommitResult{Source: commit.SourceUprobes, Report: leaderRep, Role: commit.RoleLeader, LocalID: goldenLeader, LeaderID: goldenLeader,
		Cluster:     commit.ClusterState{Voters: 3, Down: []uint64{goldenF1}, Names: goldenNames},
		Unavailable: []analysis.Unavailable{{Part: "grpc", Probe: "uprobe/google.golang.org/grpc.(*Server).processUnaryRPC", Reason: event.ReasonConfigured}}, Lost: 3, Missed: 2, Dropped: 1, WritesSeen: 60, WritesSampled: 15, SampleEvery: 4,
		SyncCalls: 40, SyncLost: 1, SyncMissed: 5,
		Model: &commit.ModelResult{ExpectedNs: 52_700_000, Decider: goldenF2, DeciderKnown: true, Parts: map[string]commit.Measure{
			commit.PartWALAppend: {Ns: 2e6, Source: "leader's WAL"}, commit.PartQuorumWait: {Ns: 50_500_000, Source: "RTT + fsync of m2"}, commit.PartApply: {Ns: 2e5, Source: "backend"}}},
		Target: commit.Target{PID: 4242, Stops: []commit.Stop{{AfterNs: 3e9, Ns: 15e8}, {AfterNs: 9e9, Ns: 1e9, Ongoing: true}}},
		Load:   &workload.Load{Prefix: "/etcdscope/commit-load/h-1-ab/", Puts: 15, Errors: 1},
	}
	for i := range 15 {
		leader.Load.ClientNs.Add(int64(55e6 + i*1e6))
		leader.Load.TransportNs.Add(int64(3e5 + i*1e4))
		leader.Load.IdleTransportNs.Add(int64(9e5 + i*1e4))
		leader.ClientOutsideNs.Add(int64(4e5 + i*1e4))
		leader.WALSyncs.Add(int64(18e5 + i*1e4))
	}

	followerRep := goldenReport(4, nil, goldenWrite(commit.RoleFollower, map[string]int64{commit.PartForward: 20e6, commit.PartPropose: 1e4,
		commit.PartWALAppend: 1e6, commit.PartQuorumWait: 25e6, commit.PartApply: 2e5, commit.PartReturn: 1e4}, 0, false))
	follower := &pipeline.CommitResult{Source: commit.SourceUprobes, Report: followerRep, Role: commit.RoleFollower, LocalID: goldenF1, LeaderID: goldenLeader,
		Cluster: commit.ClusterState{Voters: 3, Names: goldenNames}, SampleEvery: 1, WritesSeen: 4, WritesSampled: 4,
		ModelErr: errors.New("no WAL fsync observed by the leader m0 (28d1) during the run"),
		Load:     &workload.Load{Prefix: "/etcdscope/commit-load/h-2-cd/", Puts: 4}}
	follower.Load.ClientNs.Add(47e6)
	follower.Load.TransportNs.Add(3e5)
	follower.Load.IdleTransportNs.Add(8e5)
	follower.ClientOutsideNs.Add(5e5)

	model := &pipeline.CommitResult{
		Source: commit.SourceModel, ProbeErr: errors.New("etcd v3.4: its write function cannot be probed: finding RET instructions on EM_AARCH64: unsupported operation"),
		EtcdVersion: "3.4.23", Report: commit.NewReport(), Role: commit.RoleLeader, LocalID: 0x28d1, LeaderID: 0x28d1,
		Cluster:     commit.ClusterState{Voters: 1, Names: commit.Names{0x28d1: "default"}},
		Unavailable: []analysis.Unavailable{{Part: "uprobes", Reason: event.ReasonRefused, Err: "processInternalRaftRequestOnce: not found"}},
		Model: &commit.ModelResult{ExpectedNs: 2e6, Decider: commit.LocalVote, DeciderKnown: true,
			Parts: map[string]commit.Measure{commit.PartWALAppend: {Ns: 19e5, Source: "leader's etcd_disk_wal_fsync_duration_seconds mean over the run"}}},
		Load: &workload.Load{Prefix: "/etcdscope/commit-load/x/", Puts: 20},
	}
	model.Load.ClientNs.Add(21e5)
	model.Load.TransportNs.Add(2e5)
	model.Load.IdleTransportNs.Add(7e5)

	// `commit --load 20/s` cut by SIGTERM after ~1 s: one put paired with
	// its write, its warm get timed, no get from idle yet (half an
	// interval after the put): unknown, never 0.
	shortRep := goldenReport(1, nil, goldenWrite(commit.RoleLeader, map[string]int64{commit.PartPropose: 1e4, commit.PartWALAppend: 2e6, commit.PartApply: 2e5}, commit.LocalVote, true))
	short := &pipeline.CommitResult{Source: commit.SourceUprobes, Report: shortRep, Role: commit.RoleLeader, LocalID: goldenLeader, LeaderID: goldenLeader,
		Cluster: commit.ClusterState{Voters: 1, Names: goldenNames}, SampleEvery: 1, WritesSeen: 1, WritesSampled: 1,
		Load: &workload.Load{Prefix: "/etcdscope/commit-load/h-3-ef/", Puts: 1}}
	short.Load.ClientNs.Add(27e5)
	short.Load.TransportNs.Add(501e3)
	short.ClientOutsideNs.Add(5e5)

	empty := &pipeline.CommitResult{Source: commit.SourceUprobes, Report: commit.NewReport(), SampleEvery: 1,
		Target: commit.Target{PID: 3010, Exited: true, ExitedAfterNs: 2500e6}}

	return []struct {
		name string
		pid  int
		res  *pipeline.CommitResult
	}{{"leader", 4242, leader}, {"follower", 4343, follower}, {"model", 4444, model}, {"short", 4545, short}, {"empty", 3010, empty}}
}

// commitCase returns the result of the commitCases of that name.
func commitCase(t *testing.T, name string) *pipeline.CommitResult {
	for _, c := range commitCases() {
		if c.name == name {
			return c.res
		}
	}
	t.Fatalf("no commit case %q", name)
	return nil
}

// TestCommitGoldens pins the bytes of `etcdscope commit`'s table and its
// JSON summary record for each of commitCases.
func TestCommitGoldens(t *testing.T) {
	for _, c := range commitCases() {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render.CommitTable(&b, commitRun(c.res, c.pid)); err != nil {
				t.Fatal(err)
			}
			commitGolden(t, c.name+".txt", b.Bytes())
			var j bytes.Buffer
			enc := json.NewEncoder(&j)
			enc.SetIndent("", "  ")
			if err := enc.Encode(render.CommitSummary(commitRun(c.res, c.pid))); err != nil {
				t.Fatal(err)
			}
			commitGolden(t, c.name+".json", j.Bytes())
		})
	}
}

// verdictCases are reports that reach every verdict: each names the
// part the writes waited on, and the lines that may follow.
func verdictCases() []struct {
	name string
	rep  *commit.Report
	cs   commit.ClusterState
} {
	one := commit.ClusterState{Voters: 1, Names: goldenNames}
	three := commit.ClusterState{Voters: 3, Names: goldenNames}
	wal := goldenWrite(commit.RoleLeader, map[string]int64{commit.PartPropose: 1e5, commit.PartWALAppend: 639e6, commit.PartApply: 5e5, commit.PartReturn: 4e5}, commit.LocalVote, true)
	walCause := func(ns map[commit.Cause]int64) []*commit.SyncCause { return []*commit.SyncCause{{Ns: ns}} }
	apply := goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 2e6, commit.PartApply: 98e6}, commit.LocalVote, true)
	quorum := goldenWrite(commit.RoleLeader, map[string]int64{commit.PartPropose: 1e4, commit.PartWALAppend: 1e6, commit.PartQuorumWait: 50e6, commit.PartApply: 2e5}, goldenF2, true,
		commit.Ack{Member: goldenF2, AfterSendNs: 52_500_000})
	batched := *wal
	batched.BatchEntries = 2
	incomplete := *wal
	incomplete.Missing = []commit.Missing{commit.MissingApply}
	walDecidedByF1 := goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 9e6, commit.PartQuorumWait: 1e6, commit.PartApply: 1e6}, goldenF1, true,
		commit.Ack{Member: goldenF1, AfterSendNs: 9_500_000})
	return []struct {
		name string
		rep  *commit.Report
		cs   commit.ClusterState
	}{
		{"no write", commit.NewReport(), commit.ClusterState{}},
		{"local disk, no fsync tracer", goldenReport(3, nil, wal), one},
		{"local disk, device flush", goldenReport(3, walCause(map[commit.Cause]int64{commit.CauseDeviceFlush: 500e6, commit.CauseJournal: 100e6, commit.CauseCPUWait: 38e6}), wal), one},
		{"CPU", goldenReport(3, walCause(map[commit.Cause]int64{commit.CauseCPUWait: 630e6, commit.CauseDeviceFlush: 5e6, commit.CauseJournal: 3e6}), wal), one},
		{"running", goldenReport(1, walCause(map[commit.Cause]int64{commit.CauseRunning: 630e6, commit.CauseDeviceFlush: 5e6}), wal), one},
		{"blocked", goldenReport(1, walCause(map[commit.Cause]int64{commit.CauseBlocked: 630e6, commit.CauseDeviceFlush: 5e6}), wal), one},
		{"outside", goldenReport(1, walCause(map[commit.Cause]int64{commit.CauseOutside: 630e6, commit.CauseDeviceFlush: 5e6}), wal), one},
		{"other", goldenReport(1, walCause(map[commit.Cause]int64{commit.CauseOther: 630e6, commit.CauseDeviceFlush: 5e6}), wal), one},
		{"quorum, one down", goldenReport(3, nil, quorum), commit.ClusterState{Voters: 3, Down: []uint64{goldenF1}, Names: goldenNames}},
		{"quorum, two down, no names", goldenReport(2, nil, quorum), commit.ClusterState{Voters: 5, Down: []uint64{goldenF1, 0x3333}}},
		{"quorum, no ack", goldenReport(2, nil, goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 1e6, commit.PartQuorumWait: 50e6}, goldenF2, true)), three},
		{"follower", goldenReport(3, nil, goldenWrite(commit.RoleFollower, map[string]int64{commit.PartForward: 40e6, commit.PartWALAppend: 2e6, commit.PartQuorumWait: 48e6, commit.PartApply: 3e6, commit.PartReturn: 1e6}, 0, false)), three},
		{"follower, no quorum_wait", goldenReport(1, nil, goldenWrite(commit.RoleFollower, map[string]int64{commit.PartForward: 40e6, commit.PartWALAppend: 2e6}, 0, false)), three},
		{"follower, no forward", goldenReport(1, nil, goldenWrite(commit.RoleFollower, map[string]int64{commit.PartWALAppend: 30e6, commit.PartQuorumWait: 20e6, commit.PartApply: 15e6}, 0, false)), three},
		{"forward, role unknown", goldenReport(2, nil, goldenWrite("", map[string]int64{commit.PartForward: 40e6, commit.PartWALAppend: 2e6}, 0, false)), three},
		{"apply, the fdatasyncs starved", goldenReport(2, walCause(map[commit.Cause]int64{commit.CauseCPUWait: 9e5, commit.CauseDeviceFlush: 1e5}), apply), one},
		{"commit_to_apply", goldenReport(1, nil, goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 2e6, commit.PartCommitToApply: 9e6}, commit.LocalVote, true)), one},
		{"propose", goldenReport(1, nil, goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 2e6, commit.PartPropose: 9e6}, commit.LocalVote, true)), one},
		{"return", goldenReport(1, nil, goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 2e6, commit.PartReturn: 9e6}, commit.LocalVote, true)), one},
		{"grpc", goldenReport(1, nil, goldenWrite(commit.RoleLeader, map[string]int64{commit.PartWALAppend: 2e6, commit.PartGRPC: 9e6}, commit.LocalVote, true)), one},
		{"disk, a follower decides some", goldenReport(2, nil, walDecidedByF1, wal), three},
		{"batched and incomplete", goldenReport(2, nil, wal, &batched, &incomplete), one},
	}
}

// TestCommitVerdictGoldens pins every verdict's words, as the table and
// the JSON summary print them.
func TestCommitVerdictGoldens(t *testing.T) {
	var b strings.Builder
	for _, c := range verdictCases() {
		fmt.Fprintf(&b, "== %s\n", c.name)
		for _, v := range render.CommitVerdictBlocks(c.rep, c.cs) {
			fmt.Fprintf(&b, "%s\n", v)
		}
	}
	commitGolden(t, "verdicts.txt", []byte(b.String()))
}
