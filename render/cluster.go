package render

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

// ClusterSummary is the last JSON record of `etcdscope cluster --output
// json`, after one record per write (commit.ClusterWrite).
type ClusterSummary struct {
	Type      string                   `json:"type"` // "cluster_summary"
	Leader    commit.MemberID          `json:"leader"`
	Voters    int                      `json:"voters"`
	Writes    int                      `json:"writes"`
	Joined    int                      `json:"joined"`
	NotJoined map[string]int           `json:"not_joined"`
	Deciders  map[string]int           `json:"deciders"` // "local_wal" or member hex -> writes
	PartsNs   map[string]stats.Summary `json:"parts_ns"`
	// FollowerCause: the deciding followers' fdatasyncs by cause, summed
	// over the writes a follower decided (their agents' sync_cause).
	FollowerCause commit.CauseTotals `json:"follower_fdatasync_cause"`
	// LeaderCause: the leader's fdatasyncs by cause over the writes its
	// own WAL append decided.
	LeaderCause commit.CauseTotals `json:"leader_fdatasync_cause"`
	Verdict     string             `json:"verdict,omitempty"` // as the table words it
}

// ClusterWriteRecord is one write of `etcdscope cluster --output json`.
type ClusterWriteRecord struct {
	Type string `json:"type"` // "cluster_write"
	commit.ClusterWrite
}

// clusterParts are the summaries' rows, in order: the deciding
// follower's vote and its split, then the leader's own WAL append.
func clusterParts(j *commit.ClusterJoin) []struct {
	name string
	s    *stats.Series
} {
	return []struct {
		name string
		s    *stats.Series
	}{
		{"vote", &j.VoteNs}, {"network", &j.NetworkNs}, {"follower_queue", &j.QueueNs}, {"follower_wal", &j.WALNs},
		{"of which fdatasync", &j.FdatasyncNs}, {"follower_respond", &j.RespondNs}, {"leader_wal", &j.LeaderWALNs},
	}
}

// notJoinedName is the JSON and table name of a reason.
func notJoinedName(n commit.NotJoined) string {
	b, _ := n.MarshalText()
	return string(b)
}

// deciderName is a deciding vote as the report names it.
func deciderName(id commit.MemberID) string {
	if id == commit.MemberID(commit.LocalVote) {
		return "local_wal"
	}
	return strconv.FormatUint(uint64(id), 16)
}

// ClusterSummaryOf returns j's summary record.
func ClusterSummaryOf(j *commit.ClusterJoin) ClusterSummary {
	s := ClusterSummary{Type: "cluster_summary", Leader: j.Leader, Voters: j.Voters, Writes: len(j.Writes), Joined: j.Joined,
		NotJoined: map[string]int{}, Deciders: map[string]int{}, PartsNs: map[string]stats.Summary{}}
	for why, n := range j.NotByWhy {
		s.NotJoined[notJoinedName(why)] = n
	}
	for id, n := range j.Deciders {
		s.Deciders[deciderName(id)] = n
	}
	for _, p := range clusterParts(j) {
		s.PartsNs[strings.ReplaceAll(p.name, " ", "_")] = p.s.Summary()
	}
	s.FollowerCause, s.LeaderCause = j.FollowerCause, j.LeaderCause
	s.Verdict = clusterVerdict(j.Verdict(), clusterNames(j))
	return s
}

// ClusterTable writes the table of `etcdscope cluster`: the writes the
// leader saved, how many were followed to their deciding vote, who
// decided how often, and p50/p99 of the deciding follower's parts.
func ClusterTable(w io.Writer, j *commit.ClusterJoin) error {
	term := NewTerminal(w)
	clusterTable(term, j)
	return term.Flush()
}

func clusterTable(w io.Writer, j *commit.ClusterJoin) {
	if len(j.Writes) == 0 {
		fmt.Fprintln(w, "etcdscope cluster: no leader's records with followers' acks in the members' windows (is every member's serve --commit-pid running, and was anything written?)")
		return
	}
	names := clusterNames(j)
	fmt.Fprintf(w, "etcdscope cluster: leader %s of %d; %d writes in its window (index %d..%d): %d joined across the members, %d not joined",
		names.Of(uint64(j.Leader)), j.Voters, len(j.Writes), j.Writes[0].Index, j.Writes[len(j.Writes)-1].Index, j.Joined, len(j.Writes)-j.Joined)
	whys := slices.Sorted(func(yield func(commit.NotJoined) bool) {
		for k := range j.NotByWhy {
			if !yield(k) {
				return
			}
		}
	})
	for i, why := range whys {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(w, "%s%s %d", sep, notJoinedName(why), j.NotByWhy[why])
		if i == len(whys)-1 {
			fmt.Fprint(w, ")")
		}
	}
	fmt.Fprintln(w)
	ids := slices.Sorted(func(yield func(commit.MemberID) bool) {
		for k := range j.Deciders {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s %d (%.0f%%)", names.Of(uint64(id)), j.Deciders[id], 100*float64(j.Deciders[id])/float64(max(j.Joined, 1))))
	}
	fmt.Fprintf(w, "deciding vote: %s\n", strings.Join(parts, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "part\tcount\tp50 ms\tp99 ms\tmean ms\t")
	for _, p := range clusterParts(j) {
		s := p.s.Summary()
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t\n", p.name, s.Count, float64(s.P50)/1e6, float64(s.P99)/1e6, s.Mean()/1e6)
	}
	tw.Flush()
	fmt.Fprintln(w, "vote: the leader's send to the deciding follower's ack = network + that follower's queue, WAL append and answer (each on its own clock)")
	for _, c := range []struct {
		who string
		t   *commit.CauseTotals
	}{{"deciding followers'", &j.FollowerCause}, {"leader's (where it decided)", &j.LeaderCause}} {
		if line := causeLine(c.who, c.t); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	verdict := j.Verdict()
	if v := clusterVerdict(verdict, names); v != "" {
		fmt.Fprintf(w, "verdict: %s\n", v)
	}
	if l := voteSharesLine(verdict); l != "" {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

// voteSharesLine is why a follower's verdict names its part: each part's
// share of the deciding votes' summed time ("" for other verdicts).
func voteSharesLine(v commit.ClusterVerdict) string {
	switch v.Kind {
	case commit.ClusterVerdictNetwork, commit.ClusterVerdictFollowerWAL, commit.ClusterVerdictFollowerQueue:
		s := v.Shares
		return fmt.Sprintf("named by the largest share of its votes' summed time: network %.0f%%, WAL append %.0f%%, queueing and answer %.0f%%", s.NetworkPct, s.WALPct, s.QueuePct)
	}
	return ""
}

// clusterNames are the members' names the windows carried.
func clusterNames(j *commit.ClusterJoin) commit.Names {
	names := commit.Names{}
	for id, n := range j.Names {
		names[uint64(id)] = n
	}
	return names
}

// clusterVerdict words the join's verdict (p50s; "" when no write
// joined).
func clusterVerdict(v commit.ClusterVerdict, names commit.Names) string {
	who := strconv.FormatUint(uint64(v.Member), 16)
	if n := names[uint64(v.Member)]; n != "" {
		who = n
	}
	of := fmt.Sprintf("it decided %d of %d joined writes", v.Decided, v.Joined)
	switch v.Kind {
	case commit.ClusterVerdictLeaderWAL:
		if v.Cause != "" {
			return leaderCauseVerdict(v)
		}
		return fmt.Sprintf("writes wait on the leader's own WAL append: p50 %s (it came last in %d of %d joined writes): run `etcdscope commit` on the leader for its fdatasync's cause", commitMs(v.PartNs), v.Decided, v.Joined)
	case commit.ClusterVerdictNetwork:
		return fmt.Sprintf("writes wait on the network to %s: %s of its %s vote (p50; %s): run `etcdscope peers` on the leader", who, commitMs(v.PartNs), commitMs(v.VoteNs), of)
	case commit.ClusterVerdictFollowerWAL:
		if v.Cause != "" {
			return followerCauseVerdict(v, who, of)
		}
		return fmt.Sprintf("writes wait on %s's disk: its WAL append %s (fdatasync %s) of its %s vote (p50; %s): run `etcdscope fsync --comm etcd` there", who, commitMs(v.PartNs), commitMs(v.FdatasyncNs), commitMs(v.VoteNs), of)
	case commit.ClusterVerdictFollowerQueue:
		return fmt.Sprintf("writes wait on %s's Raft loop: queueing and answer %s of its %s vote (p50; %s)", who, commitMs(v.PartNs), commitMs(v.VoteNs), of)
	}
	return ""
}

// followerCauseVerdict words a follower's WAL verdict by the top cause of
// its fdatasyncs: its disk (by the largest layer), a CPU, or another
// wait; the cause's p50 first.
func followerCauseVerdict(v commit.ClusterVerdict, who, of string) string {
	nums := fmt.Sprintf("%s %s of its %s vote (p50; WAL append %s, fdatasync %s; %s, %d split by cause)",
		v.Cause, commitMs(v.CauseNs), commitMs(v.VoteNs), commitMs(v.PartNs), commitMs(v.FdatasyncNs), of, v.CauseJoined)
	switch {
	case v.Cause.Disk():
		return fmt.Sprintf("writes wait on %s's disk: %s", who, nums)
	case v.Cause == commit.CauseCPUWait:
		return fmt.Sprintf("writes wait for a CPU on %s, not its disk: %s", who, nums)
	}
	return fmt.Sprintf("writes wait on %s's WAL append: %s", who, nums)
}

// causeLine is the table's line of whose fdatasyncs by cause: the
// shares of the summed time, largest first (those of 1% or more); ""
// when none was split.
func causeLine(who string, t *commit.CauseTotals) string {
	if t.Joined == 0 {
		return ""
	}
	cs := slices.Clone(commit.CauseOrder)
	slices.SortStableFunc(cs, func(a, b commit.Cause) int { return cmp.Compare(t.Ns[b], t.Ns[a]) })
	var parts []string
	for _, c := range cs {
		if sh := t.Share(c); sh >= 0.01 && len(parts) < 6 {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", c, 100*sh))
		}
	}
	return fmt.Sprintf("%s fdatasync by cause (%d of %d split): %s", who, t.Joined, t.Joined+t.Unjoined, strings.Join(parts, ", "))
}

// leaderCauseVerdict words the leader's WAL verdict by the top cause of
// its fdatasyncs, the cause's p50 first.
func leaderCauseVerdict(v commit.ClusterVerdict) string {
	nums := fmt.Sprintf("%s %s of its %s WAL append (p50; it came last in %d of %d joined writes, %d split by cause)",
		v.Cause, commitMs(v.CauseNs), commitMs(v.PartNs), v.Decided, v.Joined, v.CauseJoined)
	switch {
	case v.Cause.Disk():
		return "writes wait on the leader's own disk: " + nums
	case v.Cause == commit.CauseCPUWait:
		return "writes wait for a CPU on the leader, not its disk: " + nums
	}
	return "writes wait on the leader's own WAL append: " + nums
}
