package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// TestClusterVerdictWords: every verdict kind is one sentence naming the
// member by name (its id when unnamed) and the part's time; none for no
// joined write.
func TestClusterVerdictWords(t *testing.T) {
	names := commit.Names{0x28d1: "m3"}
	for _, tc := range []struct {
		v    commit.ClusterVerdict
		want []string
	}{
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictLeaderWAL, Decided: 5, Joined: 9, PartNs: 2e6}, []string{"leader's own WAL append", "2.00 ms", "5 of 9"}},
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictNetwork, Member: 0x28d1, Decided: 7, Joined: 9, PartNs: 49.8e6, VoteNs: 51.2e6}, []string{"network and etcd's peer queues to m3", "49.80 ms of its 51.20 ms vote"}},
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictFollowerWAL, Member: 0xabc, Decided: 7, Joined: 9, PartNs: 7.9e6, FdatasyncNs: 7.5e6, VoteNs: 9.1e6}, []string{"abc's disk", "7.90 ms (WAL sync 7.50 ms) of its 9.10 ms"}},
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictFollowerQueue, Member: 0x28d1, Decided: 7, Joined: 9, PartNs: 3e6, VoteNs: 4e6}, []string{"m3's Raft loop", "3.00 ms of its 4.00 ms"}},
	} {
		got := clusterVerdict(tc.v, names)
		for _, w := range tc.want {
			if !strings.Contains(got, w) || strings.Contains(got, "\n") {
				t.Errorf("%+v: %q lacks %q", tc.v, got, w)
			}
		}
	}
	both := commit.ClusterVerdict{Kind: commit.ClusterVerdictNetwork, Member: 0x28d1, Runner: 0xabc, HasRunner: true, Both: true,
		Decided: 31, RunnerDecided: 29, Joined: 60, PartNs: 21.25e6, VoteNs: 21.83e6}
	const wantBoth = "writes wait on the network and etcd's peer queues to m3 and abc: 21.25 ms of their 21.83 ms vote (p50; they decided 31 and 29 of 60 joined writes about equally often)"
	if got := clusterVerdict(both, names); got != wantBoth {
		t.Errorf("two followers: %q, want %q", got, wantBoth)
	}
	if got := clusterVerdict(commit.ClusterVerdict{}, names); got != "" {
		t.Errorf("no joined write: %q", got)
	}
}

// TestClusterNetworkAdvice: the loopback run of the README's walk (a
// traced RTT of ~20 µs, the network part 0.67 ms of a 1.28 ms vote): the
// verdict names the part as the network and etcd's peer queues, and the
// line under it sends the user to compare, not to blame, the wire:
// etcdscope peers' RTT far below the part puts it in etcd's queues. The
// other kinds carry no such line.
func TestClusterNetworkAdvice(t *testing.T) {
	names := commit.Names{0x28d1: "m3"}
	v := commit.ClusterVerdict{Kind: commit.ClusterVerdictNetwork, Member: 0x28d1, Decided: 40, Joined: 100, PartNs: 0.67e6, VoteNs: 1.28e6}
	const want = "writes wait on the network and etcd's peer queues to m3: 0.67 ms of its 1.28 ms vote (p50; it decided 40 of 100 joined writes)"
	if got := clusterVerdict(v, names); got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	const advice = "compare with `etcdscope peers` on the leader: an RTT far below 0.67 ms puts the time in etcd's peer queues on either member, i.e. CPU, not the wire"
	if ev := clusterEvidence(v); len(ev) == 0 || ev[0] != advice {
		t.Errorf("evidence %q, want %q first", ev, advice)
	}
	v.Kind, v.PartNs = commit.ClusterVerdictFollowerQueue, 0.5e6
	if ev := clusterEvidence(v); slices.ContainsFunc(ev, func(l string) bool { return strings.Contains(l, "etcdscope peers") }) {
		t.Errorf("a Raft loop verdict's evidence %q compares with peers", ev)
	}
}

// TestClusterVerdictCause: a follower's WAL verdict with its fdatasyncs
// split leads with the top side's share of the WAL sync, as commit's
// verdict (the disk with its largest layer's share, a CPU, or another
// wait), then the WAL append's p50 against the vote's and the cause's;
// one line of at most 200 characters, as is the table's line of the
// causes' shares.
func TestClusterVerdictCause(t *testing.T) {
	names := commit.Names{0x28d1: "m3"}
	base := commit.ClusterVerdict{Kind: commit.ClusterVerdictFollowerWAL, Member: 0x28d1, Decided: 60, Joined: 62, PartNs: 9.0e6,
		FdatasyncNs: 8.8e6, VoteNs: 9.1e6, CauseNs: 7.9e6, CauseJoined: 60}
	for _, tc := range []struct {
		cause commit.Cause
		want  string
	}{
		{commit.CauseDeviceFlush, "writes wait on m3's disk (87% of WAL sync, most in its device flush: 80%): WAL append p50 9.00 ms of its 9.10 ms vote (device flush 7.90 ms;"},
		{commit.CauseDM, "writes wait on m3's disk (87% of WAL sync, most in its dm: 80%): WAL append p50 9.00 ms of its 9.10 ms vote (dm 7.90 ms;"},
		{commit.CauseCPUWait, "writes wait for a CPU on m3, not its disk (87% of WAL sync): WAL append p50 9.00 ms of its 9.10 ms vote (cpu wait 7.90 ms;"},
		{commit.CauseBlocked, "writes wait on m3's WAL append (87% of WAL sync): WAL append p50 9.00 ms of its 9.10 ms vote (blocked 7.90 ms;"},
	} {
		v := base
		v.Cause, v.CauseLead = tc.cause, commit.CauseLead{Cause: tc.cause, Pct: 87, Runner: commit.CauseJournal, RunnerPct: 9, HasRunner: true, Separated: true}
		if tc.cause.Disk() {
			v.CauseLead.LayerPct = 80
		}
		got := clusterVerdict(v, names)
		if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, "60 split by cause") || len(got) > 200 || strings.Contains(got, "\n") {
			t.Errorf("%s: %q (%d chars): want it to begin %q, at most 200 characters", tc.cause, got, len(got), tc.want)
		}
	}
	lead := commit.ClusterVerdict{Kind: commit.ClusterVerdictLeaderWAL, Decided: 38, Joined: 100, PartNs: 0.82e6, Cause: commit.CauseJournal, CauseNs: 0.41e6, CauseJoined: 38,
		CauseLead: commit.CauseLead{Cause: commit.CauseJournal, Pct: 71, LayerPct: 60, Runner: commit.CauseCPUWait, RunnerPct: 20, HasRunner: true, Separated: true}}
	if got, want := clusterVerdict(lead, names), "writes wait on the leader's own disk (71% of WAL sync, most in its journal: 60%): WAL append p50 0.82 ms (journal 0.41 ms; it came last in 38 of 100 joined writes, 38 split by cause)"; got != want {
		t.Errorf("leader's WAL: %q, want %q", got, want)
	}
	// The user's leader of 2026-12-07: the disk's layers 40% against a
	// CPU wait of 38%, not set apart by the writes' spread: both named,
	// each with the share the cause line prints.
	lead.CauseLead = commit.CauseLead{Cause: commit.CauseDataWriteback, Pct: 40, Runner: commit.CauseCPUWait, RunnerPct: 38, HasRunner: true}
	lead.Cause = commit.CauseDataWriteback
	if got, want := clusterVerdict(lead, names), "writes wait on the leader's own disk (40%) and for a CPU (38%) alike, of its WAL sync: its WAL append 0.82 ms (p50; it came last in 38 of 100"; !strings.HasPrefix(got, want) || len(got) > 200 {
		t.Errorf("leader's WAL, close: %q (%d chars), want it to begin %q", got, len(got), want)
	}
	// The summary's evidence carries the numbers the line leads with.
	if e := clusterEvidenceOf(lead).CauseLead; e == nil || e.Lead != "disk" || e.LeadLayer != commit.CauseDataWriteback || e.LeadSharePct != 40 ||
		e.Next != string(commit.CauseCPUWait) || e.NextSharePct != 38 || e.Separated {
		t.Errorf("leader's WAL, close: evidence's cause_lead %+v, want the disk (data_writeback) 40%% against cpu_wait 38%%, not separated", e)
	}
	v := base
	v.Cause, v.CauseLead = commit.CauseCPUWait, commit.CauseLead{Cause: commit.CauseCPUWait, Pct: 45, Runner: commit.CauseDeviceFlush, RunnerPct: 41, HasRunner: true}
	if got, want := clusterVerdict(v, names), "writes wait for a CPU (45%) and on m3's disk (41%) alike, of its WAL sync: its vote 9.10 ms (p50; WAL append 9.00 ms"; !strings.HasPrefix(got, want) || len(got) > 200 {
		t.Errorf("follower, close: %q (%d chars), want it to begin %q", got, len(got), want)
	}
	tot := commit.CauseTotals{Joined: 60, Unjoined: 2, Ns: map[commit.Cause]int64{commit.CauseDeviceFlush: 474e6, commit.CauseJournal: 36e6,
		commit.CauseCPUWait: 18e6, commit.CauseOutside: 12e6, commit.CauseRunning: 1e3}}
	line := causeLine("deciding followers'", "over the writes they decided", &tot)
	const want = "deciding followers' WAL sync by cause, over the writes they decided (60 of 62 split): disk 94% (device_flush 88%, journal 7%), cpu_wait 3%, outside_syscalls 2%"
	if line != want {
		t.Errorf("cause line %q, want %q", line, want)
	}
	// The user's leader of 2026-12-07: a CPU wait larger than each layer
	// led the line ("cpu_wait 54%") while commit's split of the same
	// member said disk first; the disk's layers are one cause here too.
	tot = commit.CauseTotals{Joined: 38, Ns: map[commit.Cause]int64{commit.CauseDataWriteback: 15e6, commit.CauseJournal: 10e6, commit.CauseDeviceFlush: 8e6,
		commit.CauseBlockQueue: 7e6, commit.CauseCPUWait: 38e6, commit.CauseRunning: 8e6, commit.CauseBlocked: 10e6, commit.CauseOutside: 4e6}}
	line = causeLine("leader's", "only the writes its own WAL decided", &tot)
	const wantLeader = "leader's WAL sync by cause, only the writes its own WAL decided (38 of 38 split): disk 40% (data_writeback 15%, journal 10%, device_flush 8%, block_queue 7%), cpu_wait 38%, blocked 10%, running 8%, outside_syscalls 4%"
	if line != wantLeader {
		t.Errorf("leader's cause line %q, want %q", line, wantLeader)
	}
	if l := causeLine("deciding followers'", "", &commit.CauseTotals{Unjoined: 3}); l != "" {
		t.Errorf("no cause joined: %q", l)
	}
}

// TestClusterEvidence: a follower's verdict, named or not, is followed by
// what to compare the network with when it names it, then its parts' shares of its votes' summed time with their 95% intervals,
// largest first (the p50s in the verdict can order the parts otherwise:
// a network part with a long tail holds the most time at a smaller p50,
// as in run 24.1 of the cluster split scenario: network p50 19.10 ms,
// 51% of the time; WAL append p50 43.56 ms, 49%), and every verdict by
// the docs' link to the method; no line for no verdict.
func TestClusterEvidence(t *testing.T) {
	v := commit.ClusterVerdict{Kind: commit.ClusterVerdictNoSingleCause, Member: 0x28d1, Decided: 30, Joined: 30, VoteNs: 74.64e6,
		Shares: commit.VoteShares{Parts: [3]commit.PartShare{
			{Part: commit.VotePartNetwork, Pct: 50.5, CI: commit.Interval{Lo: 34.4, Hi: 61.9}, P50Ns: 19.1e6},
			{Part: commit.VotePartWAL, Pct: 48.4, CI: commit.Interval{Lo: 37.4, Hi: 64.4}, P50Ns: 43.56e6},
			{Part: commit.VotePartQueue, Pct: 1.1, CI: commit.Interval{Lo: 0.7, Hi: 1.2}, P50Ns: 1e6}},
			GapCI: commit.Interval{Lo: -30.1, Hi: 24.6}, Longer: 4, Compared: 30}}
	want := []string{
		"compare with `etcdscope peers` on the leader: an RTT far below 19.10 ms puts the time in etcd's peer queues on either member, i.e. CPU, not the wire",
		"shares of the deciding votes' summed time, 95% intervals: network 50% (34-62%), WAL append 48% (37-64%), queueing and answer 1% (1-1%); network the longer in 4 of 30 votes",
		"one vote or part is named only when its intervals set it apart from the next: docs/commit.md#how-the-cluster-verdict-decides",
	}
	if got := clusterEvidence(v); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	const verdict = "no single cause: m3's votes wait on the network and etcd's peer queues to it 19.10 ms and its WAL append 43.56 ms alike, of its 74.64 ms vote (p50; it decided 30 of 30 joined writes)"
	if got := clusterVerdict(v, commit.Names{0x28d1: "m3"}); got != verdict {
		t.Errorf("verdict %q, want %q", got, verdict)
	}
	if got := clusterEvidence(commit.ClusterVerdict{Kind: commit.ClusterVerdictLeaderWAL, Decided: 9, Joined: 9}); !slices.Equal(got, want[2:]) {
		t.Errorf("leader's WAL: %q, want only the method's link", got)
	}
	if got := clusterEvidence(commit.ClusterVerdict{}); got != nil {
		t.Errorf("no verdict: %q", got)
	}
}

// TestClusterNoSingleDecider: two votes deciding about equally often are
// both named with their counts and the interval of the first's part; a
// vote that alone decided too few writes is named as too few.
func TestClusterNoSingleDecider(t *testing.T) {
	names := commit.Names{0x28d1: "m2"}
	v := commit.ClusterVerdict{Kind: commit.ClusterVerdictNoSingleDecider, Member: commit.MemberID(commit.LocalVote), Runner: 0x28d1, HasRunner: true,
		Decided: 38, RunnerDecided: 33, Joined: 100, DecidedCI: commit.ClopperPearson(38, 71)}
	const want = "no single deciding vote: the leader's WAL decided 38 and m2 33 of 100 joined writes (95% interval of the leader's WAL's part of those 71: 41-65%)"
	if got := clusterVerdict(v, names); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	few := commit.ClusterVerdict{Kind: commit.ClusterVerdictNoSingleDecider, Member: 0x28d1, Decided: 5, Joined: 5, DecidedCI: commit.ClopperPearson(5, 5)}
	const wantFew = "no single deciding vote yet: only m2 decided, 5 of 5 joined writes, too few to name it (95% interval of its part: 48-100%): run longer"
	if got := clusterVerdict(few, names); got != wantFew {
		t.Errorf("got %q, want %q", got, wantFew)
	}
}

// clusterJoinOf is a join of n writes, each decided by decider(i) (a
// follower, or the leader's WAL) with its vote's parts from parts(i), ns;
// its series filled as commit.JoinCluster fills them.
func clusterJoinOf(n int, decider func(i int) commit.MemberID, parts func(i int) (net, wal, queue int64)) commit.ClusterJoin {
	j := commit.ClusterJoin{Leader: 0x1, Voters: 3, Names: map[commit.MemberID]string{0x1: "m1", 0x2: "m2", 0x3: "m3"},
		Deciders: map[commit.MemberID]int{}, NotByWhy: map[commit.NotJoined]int{}}
	for i := range n {
		w := commit.ClusterWrite{Term: 2, Index: uint64(100 + i), LeaderWALNs: 0.4e6, LeaderFdatasyncNs: 0.35e6, Batch: 1}
		j.LeaderWALNs.Add(w.LeaderWALNs)
		j.Joined++
		if d := decider(i); d == commit.MemberID(commit.LocalVote) {
			w.DeciderLocal = true
			j.Deciders[d]++
		} else {
			net, wal, q := parts(i)
			w.Decider, w.NetworkNs, w.VoteNs = d, net, net+wal+q
			w.Follower = &commit.FollowerSplit{TotalNs: wal + q, QueueNs: q / 2, WALNs: wal, FdatasyncNs: wal * 9 / 10, RespondNs: q - q/2}
			j.Deciders[d]++
			j.VoteNs.Add(w.VoteNs)
			j.NetworkNs.Add(net)
			j.QueueNs.Add(w.Follower.QueueNs)
			j.WALNs.Add(wal)
			j.FdatasyncNs.Add(w.Follower.FdatasyncNs)
			j.RespondNs.Add(w.Follower.RespondNs)
		}
		j.Writes = append(j.Writes, w)
	}
	return j
}

// TestClusterGoldens pins the cluster table's verdict and its evidence
// lines on constructed joins: a clear winner (m3's WAL append 7-9 ms
// against a 1 ms network), run 24.1's shape (the network's long tail
// holds as much time as m3's WAL append: no single cause), and the
// loopback run's deciders (the leader's WAL 38, m2 33, m3 29 of 100: no
// single deciding vote), and two followers behind one delayed path
// (their votes weighed together). The parts vary by a fixed sequence, so the
// bytes do not depend on a generator.
func TestClusterGoldens(t *testing.T) {
	wobble := func(i int, lo, hi float64) int64 { return int64((lo + (hi-lo)*float64((i*37)%29)/28) * 1e6) }
	m3 := func(int) commit.MemberID { return 0x3 }
	for _, tc := range []struct {
		name string
		j    commit.ClusterJoin
	}{
		{"clear", clusterJoinOf(30, m3, func(i int) (int64, int64, int64) { return wobble(i, 0.8, 1.2), wobble(i+5, 7, 9), 0.1e6 })},
		{"no-single-cause", clusterJoinOf(30, m3, func(i int) (int64, int64, int64) {
			net := wobble(i, 15, 25)
			if i%8 == 3 {
				net = 280e6
			}
			return net, wobble(i+11, 45, 61), 1e6
		})},
		{"no-single-decider", clusterJoinOf(100, func(i int) commit.MemberID {
			switch {
			case i < 38:
				return commit.MemberID(commit.LocalVote)
			case i < 71:
				return 0x2
			}
			return 0x3
		}, func(i int) (int64, int64, int64) { return wobble(i, 0.3, 0.5), wobble(i+3, 0.4, 0.7), 0.03e6 })},
		// e2e.TestClusterInjectedDelay's shape: both followers' answers
		// held 20 ms, each deciding about half the writes.
		{"two-followers", clusterJoinOf(60, func(i int) commit.MemberID { return commit.MemberID(2 + i%2) },
			func(i int) (int64, int64, int64) { return wobble(i, 20.3, 22), wobble(i+7, 0.5, 0.8), 0.03e6 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := ClusterTable(&b, &tc.j); err != nil {
				t.Fatal(err)
			}
			renderGolden(t, "cluster/"+tc.name+".txt", []byte(b.String()))
			js, err := json.MarshalIndent(ClusterSummaryOf(&tc.j).Evidence, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			renderGolden(t, "cluster/"+tc.name+".evidence.json", append(js, '\n'))
		})
	}
}

// TestDiskVerdictSameWords: commit's WAL verdict and cluster's, on the
// same fdatasyncs split by cause, lead with the same number and cause,
// worded by one function (causeShare): the disk's share of the WAL sync,
// its layers together, then its largest layer and that layer's share.
// Cluster's verdict quoted the layer's p50 after a share of its own form.
func TestDiskVerdictSameWords(t *testing.T) {
	ns := map[commit.Cause]int64{commit.CauseDeviceFlush: 5e6, commit.CauseJournal: 1.2e6, commit.CauseCPUWait: 0.8e6, commit.CauseRunning: 0.2e6}
	r := commit.NewReport()
	var causes []*commit.SyncCause
	var tot commit.CauseTotals
	for range 20 {
		r.Add(&commit.Write{Role: commit.RoleLeader, StartNs: 1, EndNs: 1 + 8e6, WALSyncNs: 7e6, BatchEntries: 1, Decider: commit.LocalVote, DeciderKnown: true,
			PartsNs: map[string]int64{commit.PartWALAppend: 7.5e6, commit.PartApply: 0.5e6}})
		causes = append(causes, &commit.SyncCause{Ns: ns})
		tot.Add(&commit.SyncCause{Ns: ns})
	}
	r.AddCauses(causes)
	l, ok := tot.Lead()
	if !ok || !l.Separated {
		t.Fatalf("lead %+v: want the disk set apart", l)
	}
	// 6.2 of 7.2 ms on the disk, 5 of them device flush.
	const share = "(86%% of %s, most in its device flush: 69%%)"
	commitLine := CommitVerdicts(r, commit.ClusterState{Voters: 1})[0]
	if want := "writes wait on the local disk " + fmt.Sprintf(share, "(*WAL).sync") + ": WAL append p50 7.50 ms"; !strings.HasPrefix(commitLine, want) {
		t.Errorf("commit: %q, want it to begin %q", commitLine, want)
	}
	v := commit.ClusterVerdict{Kind: commit.ClusterVerdictLeaderWAL, Decided: 20, Joined: 20, PartNs: 7.5e6, Cause: l.Cause, CauseNs: 5e6, CauseJoined: 20, CauseLead: l}
	if got, want := clusterVerdict(v, nil), "writes wait on the leader's own disk "+fmt.Sprintf(share, "WAL sync")+": WAL append p50 7.50 ms (device flush 5.00 ms;"; !strings.HasPrefix(got, want) {
		t.Errorf("cluster: %q, want it to begin %q", got, want)
	}
}
