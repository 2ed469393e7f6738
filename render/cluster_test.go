package render

import (
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
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictNetwork, Member: 0x28d1, Decided: 7, Joined: 9, PartNs: 49.8e6, VoteNs: 51.2e6}, []string{"network to m3", "49.80 ms of its 51.20 ms vote"}},
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictFollowerWAL, Member: 0xabc, Decided: 7, Joined: 9, PartNs: 7.9e6, FdatasyncNs: 7.5e6, VoteNs: 9.1e6}, []string{"abc's disk", "7.90 ms (fdatasync 7.50 ms) of its 9.10 ms"}},
		{commit.ClusterVerdict{Kind: commit.ClusterVerdictFollowerQueue, Member: 0x28d1, Decided: 7, Joined: 9, PartNs: 3e6, VoteNs: 4e6}, []string{"m3's Raft loop", "3.00 ms of its 4.00 ms"}},
	} {
		got := clusterVerdict(tc.v, names)
		for _, w := range tc.want {
			if !strings.Contains(got, w) || strings.Contains(got, "\n") {
				t.Errorf("%+v: %q lacks %q", tc.v, got, w)
			}
		}
	}
	if got := clusterVerdict(commit.ClusterVerdict{}, names); got != "" {
		t.Errorf("no joined write: %q", got)
	}
}

// TestClusterVerdictCause: a follower's WAL verdict with its fdatasyncs
// split names the top cause first, with its p50 against the vote's: the
// disk's layer, a CPU, or another wait; one line of at most 200
// characters, as is the table's line of the causes' shares.
func TestClusterVerdictCause(t *testing.T) {
	names := commit.Names{0x28d1: "m3"}
	base := commit.ClusterVerdict{Kind: commit.ClusterVerdictFollowerWAL, Member: 0x28d1, Decided: 60, Joined: 62, PartNs: 9.0e6,
		FdatasyncNs: 8.8e6, VoteNs: 9.1e6, CauseNs: 7.9e6, CauseJoined: 60}
	for _, tc := range []struct {
		cause commit.Cause
		want  string
	}{
		{commit.CauseDeviceFlush, "writes wait on m3's disk: device_flush 7.90 ms of its 9.10 ms vote (p50;"},
		{commit.CauseDM, "writes wait on m3's disk: dm 7.90 ms of its 9.10 ms vote"},
		{commit.CauseCPUWait, "writes wait for a CPU on m3, not its disk: cpu_wait 7.90 ms of its 9.10 ms vote"},
		{commit.CauseBlocked, "writes wait on m3's WAL append: blocked 7.90 ms of its 9.10 ms vote"},
	} {
		v := base
		v.Cause = tc.cause
		got := clusterVerdict(v, names)
		if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, "60 split by cause") || len(got) > 200 || strings.Contains(got, "\n") {
			t.Errorf("%s: %q (%d chars): want it to begin %q, at most 200 characters", tc.cause, got, len(got), tc.want)
		}
	}
	lead := commit.ClusterVerdict{Kind: commit.ClusterVerdictLeaderWAL, Decided: 38, Joined: 100, PartNs: 0.82e6, Cause: commit.CauseJournal, CauseNs: 0.41e6, CauseJoined: 38}
	if got, want := clusterVerdict(lead, names), "writes wait on the leader's own disk: journal 0.41 ms of its 0.82 ms WAL append (p50; it came last in 38 of 100 joined writes, 38 split by cause)"; got != want {
		t.Errorf("leader's WAL: %q, want %q", got, want)
	}
	tot := commit.CauseTotals{Joined: 60, Unjoined: 2, Ns: map[commit.Cause]int64{commit.CauseDeviceFlush: 474e6, commit.CauseJournal: 36e6,
		commit.CauseCPUWait: 18e6, commit.CauseOutside: 12e6, commit.CauseRunning: 1e3}}
	line := causeLine("deciding followers'", &tot)
	const want = "deciding followers' fdatasync by cause (60 of 62 split): device_flush 88%, journal 7%, cpu_wait 3%, outside_syscalls 2%"
	if line != want {
		t.Errorf("cause line %q, want %q", line, want)
	}
	if l := causeLine("deciding followers'", &commit.CauseTotals{Unjoined: 3}); l != "" {
		t.Errorf("no cause joined: %q", l)
	}
}

// TestVoteSharesLine: a follower's verdict is followed by the parts'
// shares of its votes' summed time, which named it (the p50s in the
// verdict can order the parts otherwise: a network part with a long tail
// holds the most time at a smaller p50, as in a loaded VM run of the
// cluster split scenario: network p50 19.10 ms, 51% of the time; WAL
// append p50 43.56 ms, 49%); no line for the leader's own WAL.
func TestVoteSharesLine(t *testing.T) {
	v := commit.ClusterVerdict{Kind: commit.ClusterVerdictNetwork, Member: 0x28d1, Decided: 30, Joined: 30, PartNs: 19.1e6, VoteNs: 74.64e6,
		Shares: commit.VoteShares{NetworkPct: 50.5, WALPct: 48.4, QueuePct: 1.1}}
	want := "named by the largest share of its votes' summed time: network 50%, WAL append 48%, queueing and answer 1%"
	if got := voteSharesLine(v); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := voteSharesLine(commit.ClusterVerdict{Kind: commit.ClusterVerdictLeaderWAL, Decided: 3, Joined: 3}); got != "" {
		t.Errorf("leader's WAL: %q, want none", got)
	}
}
