package commit

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestClopperPearson: the exact interval against the beta quantiles
// that define it, computed apart with mpmath's regularized incomplete
// beta (30 digits, bisection): 5 of 10 [0.187086, 0.812914], 38 of 71
// [0.412872, 0.654521]; n of n from (0.025)^(1/n), so 6 of 6 is the
// fewest all-one-way trials above 1/2 and 5 of 5 is not; none of 10
// [0, 0.3085]; no trial [0, 1]. The bound, 1e-5, is the printed digits'.
func TestClopperPearson(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{5, 10, 0.187086, 0.812914},
		{6, 6, math.Pow(0.025, 1.0/6), 1},
		{5, 5, math.Pow(0.025, 1.0/5), 1},
		{0, 10, 0, 1 - math.Pow(0.025, 1.0/10)},
		{38, 71, 0.412872, 0.654521},
		{0, 0, 0, 1},
	} {
		got := ClopperPearson(tc.k, tc.n)
		if math.Abs(got.Lo-tc.lo) > 1e-5 || math.Abs(got.Hi-tc.hi) > 1e-5 {
			t.Errorf("ClopperPearson(%d, %d) = %+v, want [%.6f, %.6f]", tc.k, tc.n, got, tc.lo, tc.hi)
		}
	}
	if ClopperPearson(6, 6).Lo <= 0.5 || ClopperPearson(5, 5).Lo > 0.5 {
		t.Error("6 of 6 must lie above 1/2 and 5 of 5 not")
	}
}

// oneFollower is a join whose every write follower 2 decided, its vote's
// parts (network, WAL append, queueing) from parts(i), ns.
func oneFollower(n int, parts func(i int) (net, wal, queue int64)) ClusterJoin {
	j := ClusterJoin{Joined: n, Deciders: map[MemberID]int{2: n}}
	for i := range n {
		net, wal, q := parts(i)
		j.Writes = append(j.Writes, ClusterWrite{Index: uint64(i + 1), Decider: 2, VoteNs: net + wal + q, NetworkNs: net,
			Follower: &FollowerSplit{TotalNs: wal + q, QueueNs: q, WALNs: wal, FdatasyncNs: wal * 9 / 10}})
	}
	return j
}

// uniform returns a draw in [lo, hi) ms as ns from rng.
func uniform(rng *rand.Rand, lo, hi float64) int64 { return int64((lo + (hi-lo)*rng.Float64()) * 1e6) }

// TestClusterVerdictEvidence: a part is named only when it stands apart
// from the next by both its share of the summed time and how many votes
// it is longer in; otherwise the verdict names the two leading parts.
func TestClusterVerdictEvidence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// A clear winner: the WAL append 7-9 ms, the network 0.8-1.2 ms.
	clear := oneFollower(30, func(int) (int64, int64, int64) { return uniform(rng, 0.8, 1.2), uniform(rng, 7, 9), 1e5 })
	v := clear.Verdict()
	if v.Kind != ClusterVerdictFollowerWAL || !v.Shares.Separated || v.Shares.Parts[0].Part != VotePartWAL || v.Shares.Parts[1].Part != VotePartNetwork ||
		v.Shares.Longer != 30 || v.Shares.Compared != 30 || v.Shares.GapCI.Lo <= 0 {
		t.Errorf("clear winner: %+v: want the WAL append, separated from the network", v)
	}
	t.Logf("clear winner: %+v", v.Shares.Parts[0])
	// Measured: 87.9% [87.4, 88.4], 1.0 point wide; the bound, 5
	// points, fails an interval that stopped narrowing with 30 votes.
	if p := v.Shares.Parts[0]; p.CI.Excludes(p.Pct) || p.CI.Hi-p.CI.Lo > 5 {
		t.Errorf("clear winner: WAL share %+v: want a narrow interval around its share", p)
	}

	// Run 24.1's shape (docs/scenarios.md): the network holds a little
	// more of the summed time through a long tail (4 of 30 votes at
	// 280 ms), the WAL append is longer in the other 26.
	tail := oneFollower(30, func(i int) (int64, int64, int64) {
		net := uniform(rng, 15, 25)
		if i%8 == 3 {
			net = 280e6
		}
		return net, uniform(rng, 45, 61), 1e6
	})
	v = tail.Verdict()
	s := v.Shares
	t.Logf("long tail: %+v", s)
	if v.Kind != ClusterVerdictNoSingleCause || s.Separated || s.Parts[0].Part != VotePartNetwork || s.Parts[1].Part != VotePartWAL ||
		s.Longer != 4 || s.Compared != 30 || !s.GapCI.Excludes(-100) || s.GapCI.Lo > 0 || v.FdatasyncNs == 0 {
		t.Errorf("long tail: %+v: want no single cause, the network then the WAL append, the network longer in 4 of 30", v)
	}

	// Run 24.2's shares (network 46%, WAL append 52%) with votes that
	// vary as widely as the loaded rig's: a near tie.
	near := oneFollower(29, func(int) (int64, int64, int64) { return uniform(rng, 5, 60), uniform(rng, 10, 60), 1.3e6 })
	v = near.Verdict()
	t.Logf("near tie: %+v", v.Shares)
	if v.Kind != ClusterVerdictNoSingleCause || v.Shares.Parts[0].Part != VotePartWAL || v.Shares.GapCI.Lo > 0 {
		t.Errorf("near tie: %+v: want no single cause, the WAL append first", v)
	}

	// An exact tie: the network and the WAL append 5 ms in every vote.
	tie := oneFollower(30, func(int) (int64, int64, int64) { return 5e6, 5e6, 1e5 })
	v = tie.Verdict()
	if v.Kind != ClusterVerdictNoSingleCause || v.Shares.Parts[0].Part != VotePartNetwork || v.Shares.Parts[1].Part != VotePartWAL ||
		v.Shares.GapCI != (Interval{}) || v.Shares.Compared != 0 || v.Shares.Parts[0].Pct != v.Shares.Parts[1].Pct {
		t.Errorf("exact tie: %+v: want no single cause, the network and the WAL append at equal shares", v)
	}

	// Few writes: five votes, each the WAL append's by far, separate by
	// their summed time but not by count (5 of 5 is no evidence at 95%).
	var five []voteParts
	for range 5 {
		five = append(five, voteParts{1e6, 8e6, 1e5})
	}
	if ev := shareEvidence(five); ev.Separated || ev.GapCI.Lo <= 0 || ev.Longer != 5 {
		t.Errorf("five votes: %+v: want the gap above 0 but not separated", ev)
	}
	few := oneFollower(5, func(int) (int64, int64, int64) { return 1e6, 8e6, 1e5 })
	if v := few.Verdict(); v.Kind != ClusterVerdictNoSingleDecider || v.HasRunner || v.Decided != 5 {
		t.Errorf("five writes: %+v: want no single decider, follower 2 alone", v)
	}

	// The same join gives the same verdict (a fixed seed).
	if a, b := tail.Verdict(), tail.Verdict(); a != b {
		t.Errorf("two verdicts of one join differ: %+v, %+v", a, b)
	}
}

// TestClusterVerdictDeciders: one vote is named only when it decided
// clearly more of the writes than the runner-up; two followers deciding
// about equally often are weighed together.
func TestClusterVerdictDeciders(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deciders map[MemberID]int
		want     ClusterVerdictKind
		top, run MemberID
		both     bool
	}{
		// e2e.TestClusterJoin's loopback run (docs/commit.md): the
		// leader's WAL 38, the followers 33 and 29 of 100.
		{"loopback", map[MemberID]int{MemberID(LocalVote): 38, 2: 33, 3: 29}, ClusterVerdictNoSingleDecider, MemberID(LocalVote), 2, false},
		// Two followers nearly equally often (as behind one delayed
		// path, e2e.TestClusterInjectedDelay): their votes together.
		{"two followers", map[MemberID]int{2: 16, 3: 14}, ClusterVerdictFollowerWAL, 2, 3, true},
		// An exact tie: the lower id first.
		{"exact tie", map[MemberID]int{3: 15, 2: 15}, ClusterVerdictFollowerWAL, 2, 3, true},
		// Two followers, too few writes to weigh.
		{"few", map[MemberID]int{3: 3, 2: 2}, ClusterVerdictNoSingleDecider, 3, 2, false},
		// Run 24.2: m3 decided 29 of 30.
		{"clear", map[MemberID]int{3: 29, 2: 1}, ClusterVerdictFollowerWAL, 3, 2, false},
	} {
		j := ClusterJoin{Deciders: tc.deciders}
		for id, n := range tc.deciders {
			j.Joined += n
			for range n {
				w := ClusterWrite{Index: uint64(len(j.Writes) + 1), DeciderLocal: id == MemberID(LocalVote), Decider: id}
				if id != MemberID(LocalVote) {
					w.VoteNs, w.NetworkNs, w.Follower = 9e6, 1e6, &FollowerSplit{TotalNs: 8e6, WALNs: 8e6}
				}
				j.Writes = append(j.Writes, w)
			}
		}
		v := j.Verdict()
		if v.Kind != tc.want || v.Member != tc.top || v.Runner != tc.run || !v.HasRunner || v.Both != tc.both || v.Decided+v.RunnerDecided > j.Joined {
			t.Errorf("%s: %+v: want kind %d, %v ahead of %v, both %v", tc.name, v, tc.want, tc.top, tc.run, tc.both)
		}
		if n := v.Decided + v.RunnerDecided; v.Both && v.Shares.Longer != n {
			t.Errorf("%s: %+v: want the parts of both followers' %d votes", tc.name, v.Shares, n)
		}
	}
}

// TestClusterVerdictNullRate: when the network and the WAL append come
// from one distribution (heavy-tailed: lognormal, σ 1), a verdict that
// names one of them is an error; over 400 joins of 30 votes it named one
// in 9 (2.25%; measured 2026-12-07, seed 7, 7): each of the two tests
// alone errs in about 5% of such joins, and naming only when both agree
// keeps the error at or under that. The bound, 5% (20 joins), is the
// level docs/commit.md states.
func TestClusterVerdictNullRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	named := 0
	const joins = 400
	for range joins {
		j := oneFollower(30, func(int) (int64, int64, int64) {
			return int64(5e6 * math.Exp(rng.NormFloat64())), int64(5e6 * math.Exp(rng.NormFloat64())), 1e5
		})
		if v := j.Verdict(); v.Kind != ClusterVerdictNoSingleCause {
			named++
		}
	}
	t.Logf("%d of %d joins named a single part", named, joins)
	if named > joins/20 {
		t.Errorf("%d of %d joins of one distribution named a single part: want at most 5%%", named, joins)
	}
}
