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
