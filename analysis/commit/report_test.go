package commit

import (
	"strings"
	"testing"
)

func TestVerdicts(t *testing.T) {
	names := Names{f1: "m1", f2: "m2"}
	mk := func(role Role, parts map[string]int64, decider uint64, known bool, acks ...Ack) Write {
		var total int64
		for _, v := range parts {
			total += v
		}
		return Write{Role: role, StartNs: 1, EndNs: 1 + uint64(total), PartsNs: parts, WALSyncNs: parts[PartWALAppend] * 9 / 10,
			BatchEntries: 1, Decider: decider, DeciderKnown: known, Acks: acks}
	}
	tests := []struct {
		name  string
		write Write
		cs    ClusterState
		want  []string // substrings of the first verdict, then of the others
	}{
		{"local disk", mk(RoleLeader, map[string]int64{PartPropose: 1e4, PartWALAppend: 11e6, PartApply: 2e5, PartReturn: 3e4}, LocalVote, true),
			ClusterState{Voters: 1, Names: names}, []string{"writes wait on the local disk: WAL append p50 11.00 ms", "fdatasync p50 9.90 ms"}},
		{"far follower decides because the near one is down", mk(RoleLeader, map[string]int64{PartPropose: 1e4, PartWALAppend: 1e6, PartQuorumWait: 50e6, PartApply: 2e5}, f2, true, Ack{f2, 52_500_000}),
			ClusterState{Voters: 3, Down: []uint64{f1}, Names: names},
			[]string{"writes wait on the quorum", "deciding vote is m2 (2222) in 1 of 1 writes", "52.50 ms from send to its ack", "because m1 (1111) sent no ack"}},
		{"follower forwards", mk(RoleFollower, map[string]int64{PartForward: 20e6, PartWALAppend: 1e6, PartQuorumWait: 5e6, PartApply: 2e5}, 0, false),
			ClusterState{Voters: 3, Names: names}, []string{"writes wait on forwarding to the leader", "forward p50 20.00 ms", "quorum_wait p50 5.00 ms", "move-leader"}},
		// A far leader (scenario run of 2026-12-02): forward and the
		// follower's quorum_wait are each about one RTT, and quorum_wait
		// was the larger; the verdict named "the quorum" with "the
		// deciding vote is local WAL in 0 of 40 writes", which a follower
		// never sees. Both are the round trip to the leader.
		{"follower of a far leader, quorum_wait the larger", mk(RoleFollower, map[string]int64{PartForward: 40e6, PartWALAppend: 2e6, PartQuorumWait: 48e6, PartApply: 3e6, PartReturn: 1e6}, 0, false),
			ClusterState{Voters: 3, Names: names}, []string{"writes wait on forwarding to the leader (94% of the time", "forward p50 40.00 ms", "quorum_wait p50 48.00 ms"}},
		{"apply", mk(RoleLeader, map[string]int64{PartWALAppend: 1e6, PartApply: 9e6}, LocalVote, true),
			ClusterState{Voters: 1, Names: names}, []string{"writes wait on apply"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReport()
			r.Add(&tc.write)
			v := r.Verdicts(tc.cs)
			if len(v) == 0 {
				t.Fatal("no verdict")
			}
			for _, s := range tc.want {
				if !strings.Contains(v[0], s) {
					t.Errorf("verdict %q lacks %q", v[0], s)
				}
			}
			if tc.write.Role == RoleFollower && strings.Contains(strings.Join(v, " "), "deciding vote") {
				t.Errorf("a follower's verdict names a deciding vote: %q", v)
			}
		})
	}
	if v := NewReport().Verdicts(ClusterState{}); !strings.Contains(v[0], "no write was traced") {
		t.Errorf("empty report: %q", v)
	}
}

func TestModel(t *testing.T) {
	m := func(ms float64) Measure { return Measure{Ns: int64(ms * 1e6), Source: "test"} }
	tests := []struct {
		name        string
		in          ModelInput
		wantMs      float64
		wantDecider uint64
		known       bool
	}{
		{"one member", ModelInput{Voters: 1, LocalIsLeader: true, LeaderWAL: m(2), Apply: m(0.5)}, 2.5, LocalVote, true},
		{"healthy three: the near follower decides", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(2), Apply: m(0.5),
			Followers: []ModelFollower{{ID: f1, RTT: m(1), Fsync: m(2)}, {ID: f2, RTT: m(50), Fsync: m(2)}}}, 3.5, f1, true},
		{"leader's disk slower than the near follower", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(9), Apply: m(0.5),
			Followers: []ModelFollower{{ID: f1, RTT: m(1), Fsync: m(2)}, {ID: f2, RTT: m(50), Fsync: m(2)}}}, 9.5, LocalVote, true},
		{"near follower down: the far one decides", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(2), Apply: m(0.5),
			Followers: []ModelFollower{{ID: f1, RTT: m(1), Fsync: m(2), Down: true}, {ID: f2, RTT: m(50), Fsync: m(2.1)}}}, 52.6, f2, true},
		{"five members: the second follower decides, plus forwarding", ModelInput{Voters: 5, LeaderWAL: m(1), Apply: m(0.5), ForwardRTT: m(10),
			Followers: []ModelFollower{{ID: 1, RTT: m(1), Fsync: m(1)}, {ID: 2, RTT: m(3), Fsync: m(1)}, {ID: 3, RTT: m(30), Fsync: m(1)}, {ID: 4, RTT: m(40), Fsync: m(1)}}}, 14.5, 2, true},
		{"no quorum", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(2), Followers: []ModelFollower{{ID: f1, Down: true}, {ID: f2, Down: true}}}, 2, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Model(tc.in)
			if got := float64(r.ExpectedNs) / 1e6; got < tc.wantMs-1e-6 || got > tc.wantMs+1e-6 {
				t.Errorf("expected %.3f ms, want %.3f", got, tc.wantMs)
			}
			if r.DeciderKnown != tc.known || r.Decider != tc.wantDecider {
				t.Errorf("decider %x known %v, want %x %v", r.Decider, r.DeciderKnown, tc.wantDecider, tc.known)
			}
			var sum int64
			for _, p := range r.Parts {
				sum += p.Ns
			}
			if tc.known && sum != r.ExpectedNs {
				t.Errorf("parts sum %d, expected %d", sum, r.ExpectedNs)
			}
		})
	}
}
