package render

import (
	"cmp"
	"fmt"
	"io"
	"math"
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
	// Evidence: the numbers the verdict was decided from (absent when no
	// write joined).
	Evidence *ClusterEvidence `json:"verdict_evidence,omitempty"`
}

// ClusterEvidence is the summary's record of how the verdict was decided
// (docs/commit.md, "How the cluster verdict decides"): the vote that
// decided most writes against the runner-up, and for a follower's votes
// each part's share of their summed time. Intervals are 95%, [lo, hi].
type ClusterEvidence struct {
	// Kind: leader_wal, network, follower_wal, follower_queue,
	// no_single_decider or no_single_cause.
	Kind string `json:"kind"`
	// Decider decided Decided writes, Runner (absent when none other
	// did) RunnerDecided; DecidedCI: the interval of Decided of the two's
	// writes, as a fraction.
	Decider       string     `json:"decider"`
	Decided       int        `json:"decided"`
	Runner        string     `json:"runner,omitempty"`
	RunnerDecided int        `json:"runner_decided,omitempty"`
	DecidedCI     [2]float64 `json:"decided_ci"`
	// Parts: the decider's parts (a follower's), largest share first.
	Parts []ClusterPartShare `json:"parts,omitempty"`
	// GapCIPct: the interval of the first part's share minus the
	// second's (percentage points); Longer of Compared votes had the
	// first part longer than the second; Separated: the first part is
	// set apart from every other (the verdict names it).
	GapCIPct  *[2]float64 `json:"gap_ci_pct,omitempty"`
	Longer    int         `json:"longer,omitempty"`
	Compared  int         `json:"compared,omitempty"`
	Separated bool        `json:"separated"`
	// CauseLead: for a verdict on a WAL append whose member's agent
	// split its fdatasyncs, the top cause of its WAL sync against the
	// next, as commit's summary writes it (commit.CauseLead.Record): the
	// shares the verdict leads with and whether it names both.
	CauseLead *commit.LeadRecord `json:"cause_lead,omitempty"`
}

// ClusterPartShare is one part of the deciding follower's votes in
// ClusterEvidence.
type ClusterPartShare struct {
	Part  string     `json:"part"` // network, wal_append, queue_and_answer
	Pct   float64    `json:"pct"`  // of the votes' summed time
	CIPct [2]float64 `json:"ci_pct"`
	P50Ns int64      `json:"p50_ns"`
}

// clusterKindNames are ClusterEvidence's kinds.
var clusterKindNames = map[commit.ClusterVerdictKind]string{
	commit.ClusterVerdictLeaderWAL: "leader_wal", commit.ClusterVerdictNetwork: "network", commit.ClusterVerdictFollowerWAL: "follower_wal",
	commit.ClusterVerdictFollowerQueue: "follower_queue", commit.ClusterVerdictNoSingleDecider: "no_single_decider",
	commit.ClusterVerdictNoSingleCause: "no_single_cause",
}

// partJSON names a part in ClusterPartShare.
var partJSON = map[commit.VotePart]string{commit.VotePartNetwork: "network", commit.VotePartWAL: "wal_append", commit.VotePartQueue: "queue_and_answer"}

// round is x to d decimals: the evidence's numbers carry no more digits
// than their intervals warrant.
func round(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}

// clusterEvidenceOf is v's evidence record (nil for no verdict).
func clusterEvidenceOf(v commit.ClusterVerdict) *ClusterEvidence {
	if v.Kind == commit.ClusterVerdictNone {
		return nil
	}
	e := &ClusterEvidence{Kind: clusterKindNames[v.Kind], Decider: deciderName(v.Member), Decided: v.Decided,
		DecidedCI: [2]float64{round(v.DecidedCI.Lo, 4), round(v.DecidedCI.Hi, 4)}, Separated: v.Shares.Separated}
	if v.HasRunner {
		e.Runner, e.RunnerDecided = deciderName(v.Runner), v.RunnerDecided
	}
	if v.Shares.Parts[0].Part != commit.VotePartNone {
		for _, p := range v.Shares.Parts {
			e.Parts = append(e.Parts, ClusterPartShare{Part: partJSON[p.Part], Pct: round(p.Pct, 2), CIPct: [2]float64{round(p.CI.Lo, 2), round(p.CI.Hi, 2)}, P50Ns: p.P50Ns})
		}
		e.GapCIPct = &[2]float64{round(v.Shares.GapCI.Lo, 2), round(v.Shares.GapCI.Hi, 2)}
		e.Longer, e.Compared = v.Shares.Longer, v.Shares.Compared
	}
	if v.CauseLead.Cause != "" {
		r := v.CauseLead.Record()
		e.CauseLead = &r
	}
	return e
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
		{syncRow, &j.FdatasyncNs}, {"follower_respond", &j.RespondNs}, {"leader_wal", &j.LeaderWALNs},
	}
}

// syncRow is the table's row of the follower's WAL sync, etcd's
// (*WAL).sync: the encoder's write(2), then the fdatasync. The summary's key for it stays
// of_which_fdatasync (clusterPartKey).
const syncRow = "of which write+fdatasync"

// clusterPartKey is a row's key in the summary's parts_ns.
func clusterPartKey(name string) string {
	if name == syncRow {
		return "of_which_fdatasync"
	}
	return name
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
		s.PartsNs[clusterPartKey(p.name)] = p.s.Summary()
	}
	s.FollowerCause, s.LeaderCause = j.FollowerCause, j.LeaderCause
	v := j.Verdict()
	s.Verdict, s.Evidence = clusterVerdict(v, clusterNames(j)), clusterEvidenceOf(v)
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
	fmt.Fprintln(w, "vote: the leader's send to the deciding follower's ack = network (the rest: the wire and both members' peer queues) + that follower's queue, WAL append and answer (each on its own clock)")
	// The leader's line is over the writes its own WAL append decided,
	// the Saves that came after the quorum's acks: `etcdscope commit` on
	// the leader splits every write's, a different set of writes.
	for _, c := range []struct {
		who, of string
		t       *commit.CauseTotals
	}{{"deciding followers'", "over the writes they decided", &j.FollowerCause},
		{"leader's", "only the writes its own WAL decided", &j.LeaderCause}} {
		if line := causeLine(c.who, c.of, c.t); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	verdict := j.Verdict()
	if v := clusterVerdict(verdict, names); v != "" {
		fmt.Fprintf(w, "verdict: %s\n", v)
		for _, l := range clusterEvidence(verdict) {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// clusterMethod is where the docs say how the cluster verdict weighs its
// evidence.
const clusterMethod = "docs/commit.md#how-the-cluster-verdict-decides"

// partName is a part of a follower's vote as the verdict names it.
func partName(p commit.VotePart) string {
	switch p {
	case commit.VotePartNetwork:
		return "network"
	case commit.VotePartWAL:
		return "WAL append"
	case commit.VotePartQueue:
		return "queueing and answer"
	}
	return ""
}

// clusterEvidence is the lines under the verdict: when it names the
// network, what to compare it with (networkAdvice); for a follower's votes,
// each part's share of their summed time with its 95% interval and how
// often the first part was the longer; then where the method is written.
func clusterEvidence(v commit.ClusterVerdict) []string {
	var lines []string
	if ns, ok := networkNamed(v); ok {
		lines = append(lines, networkAdvice(ns))
	}
	switch v.Kind {
	case commit.ClusterVerdictNetwork, commit.ClusterVerdictFollowerWAL, commit.ClusterVerdictFollowerQueue, commit.ClusterVerdictNoSingleCause:
		s := v.Shares
		if s.Parts[0].Part == commit.VotePartNone {
			break
		}
		var parts []string
		for _, p := range s.Parts {
			parts = append(parts, fmt.Sprintf("%s %.0f%% (%.0f-%.0f%%)", partName(p.Part), p.Pct, p.CI.Lo, p.CI.Hi))
		}
		lines = append(lines, fmt.Sprintf("shares of the deciding votes' summed time, 95%% intervals: %s; %s the longer in %d of %d votes", strings.Join(parts, ", "),
			partName(s.Parts[0].Part), s.Longer, s.Compared))
	case commit.ClusterVerdictNone:
		return nil
	}
	return append(lines, "one vote or part is named only when its intervals set it apart from the next: "+clusterMethod)
}

// networkNamed returns the network part's p50 when v names it: a
// network verdict, or a no-single-cause one with the network as one of
// its two leading parts.
func networkNamed(v commit.ClusterVerdict) (int64, bool) {
	switch v.Kind {
	case commit.ClusterVerdictNetwork:
		return v.PartNs, true
	case commit.ClusterVerdictNoSingleCause:
		for _, p := range v.Shares.Parts[:2] {
			if p.Part == commit.VotePartNetwork {
				return p.P50Ns, true
			}
		}
	}
	return 0, false
}

// networkAdvice is the line under a network verdict: the part is the
// vote's remainder, the wire and both members' rafthttp queues and
// etcd's send and receive goroutines, which only the peers tracer's RTT
// (the wire alone) tells apart.
func networkAdvice(partNs int64) string {
	return fmt.Sprintf("compare with `etcdscope peers` on the leader: an RTT far below %s puts the time in etcd's peer queues on either member, i.e. CPU, not the wire", commitMs(partNs))
}

// clusterNames are the members' names the windows carried.
func clusterNames(j *commit.ClusterJoin) commit.Names {
	names := commit.Names{}
	for id, n := range j.Names {
		names[uint64(id)] = n
	}
	return names
}

// voteName is a deciding vote as a verdict names it: the member's name
// (its id when unnamed), or the leader's WAL.
func voteName(id commit.MemberID, names commit.Names) string {
	if id == commit.MemberID(commit.LocalVote) {
		return "the leader's WAL"
	}
	if n := names[uint64(id)]; n != "" {
		return n
	}
	return strconv.FormatUint(uint64(id), 16)
}

// clusterVerdict words the join's verdict (p50s; "" when no write
// joined).
func clusterVerdict(v commit.ClusterVerdict, names commit.Names) string {
	f := followerWordsOf(v, names)
	who, of := f.who, f.of
	switch v.Kind {
	case commit.ClusterVerdictNoSingleDecider:
		l := commit.DeciderLead{Member: v.Member, Decided: v.Decided, Runner: v.Runner, RunnerDecided: v.RunnerDecided, HasRunner: v.HasRunner, DecidedCI: v.DecidedCI}
		return noSingleDecider(l, who, voteName(v.Runner, names), counted(v.Joined, "joined write"))
	case commit.ClusterVerdictNoSingleCause:
		if v.Shares.Parts[0].Part == commit.VotePartNone {
			return fmt.Sprintf("no single cause: %s votes were not split (%s)", f.poss, of)
		}
		a, b := noCausePart(v, v.Shares.Parts[0], f), noCausePart(v, v.Shares.Parts[1], f)
		return fmt.Sprintf("no single cause: %s votes wait on %s and %s alike, of %s %s vote (p50; %s)", f.poss, a, b, f.its, commitMs(v.VoteNs), of)
	case commit.ClusterVerdictLeaderWAL:
		if v.Cause != "" {
			return leaderCauseVerdict(v)
		}
		return fmt.Sprintf("writes wait on the leader's own WAL append: p50 %s (it came last in %d of %d joined writes): run `etcdscope commit` on the leader for its fdatasync's cause", commitMs(v.PartNs), v.Decided, v.Joined)
	case commit.ClusterVerdictNetwork:
		return fmt.Sprintf("writes wait on the network and etcd's peer queues to %s: %s of %s %s vote (p50; %s)", who, commitMs(v.PartNs), f.its, commitMs(v.VoteNs), of)
	case commit.ClusterVerdictFollowerWAL:
		if v.Cause != "" {
			return followerCauseVerdict(v, f)
		}
		return fmt.Sprintf("writes wait on %s disk%s: %s WAL append %s (WAL sync %s) of %s %s vote (p50; %s): run `etcdscope fsync --comm etcd` there",
			f.poss, f.s, f.its, commitMs(v.PartNs), commitMs(v.FdatasyncNs), f.its, commitMs(v.VoteNs), of)
	case commit.ClusterVerdictFollowerQueue:
		return fmt.Sprintf("writes wait on %s Raft loop%s: queueing and answer %s of %s %s vote (p50; %s)", f.poss, f.s, commitMs(v.PartNs), f.its, commitMs(v.VoteNs), of)
	}
	return ""
}

// noSingleDecider words a deciding vote the run did not set apart
// (commit.DeciderLead, not Separated), for `etcdscope cluster` and
// `etcdscope commit` alike: who and runner are the two votes' names,
// writes the writes counted ("496 joined writes").
func noSingleDecider(l commit.DeciderLead, who, runner, writes string) string {
	ci := fmt.Sprintf("%.0f-%.0f%%", 100*l.DecidedCI.Lo, 100*l.DecidedCI.Hi)
	if !l.HasRunner {
		return fmt.Sprintf("no single deciding vote yet: only %s decided, %d of %s, too few to name it (95%% interval of its part: %s): run longer",
			who, l.Decided, writes, ci)
	}
	return fmt.Sprintf("no single deciding vote: %s decided %d and %s %d of %s (95%% interval of %s's part of those %d: %s)",
		who, l.Decided, runner, l.RunnerDecided, writes, who, l.Decided+l.RunnerDecided, ci)
}

// followerWords are the words a follower's verdict names its voters by:
// one follower, or two deciding about equally often (ClusterVerdict.Both).
type followerWords struct {
	who  string // m3; m2 and m3
	poss string // m3's; m2's and m3's
	its  string // its; their
	them string // it; them
	s    string // a plural's s: "", "s"
	of   string // how many writes they decided
}

// followerWordsOf returns v's followerWords.
func followerWordsOf(v commit.ClusterVerdict, names commit.Names) followerWords {
	who := voteName(v.Member, names)
	if !v.Both {
		return followerWords{who: who, poss: who + "'s", its: "its", them: "it", of: fmt.Sprintf("it decided %d of %d joined writes", v.Decided, v.Joined)}
	}
	run := voteName(v.Runner, names)
	return followerWords{who: who + " and " + run, poss: who + "'s and " + run + "'s", its: "their", them: "them", s: "s",
		of: fmt.Sprintf("they decided %d and %d of %d joined writes about equally often", v.Decided, v.RunnerDecided, v.Joined)}
}

// noCausePart words one of the two leading parts of a no-single-cause
// verdict with its p50 (the WAL append's with its fdatasync's top cause,
// when split).
func noCausePart(v commit.ClusterVerdict, p commit.PartShare, f followerWords) string {
	switch p.Part {
	case commit.VotePartNetwork:
		return fmt.Sprintf("the network and etcd's peer queues to %s %s", f.them, commitMs(p.P50Ns))
	case commit.VotePartWAL:
		if v.Cause != "" {
			return fmt.Sprintf("%s WAL append %s (%s %s)", f.its, commitMs(p.P50Ns), v.Cause, commitMs(v.CauseNs))
		}
		return fmt.Sprintf("%s WAL append %s", f.its, commitMs(p.P50Ns))
	}
	return fmt.Sprintf("%s queueing and answer %s", f.its, commitMs(p.P50Ns))
}

// followerCauseVerdict words a follower's WAL verdict by the top cause of
// its fdatasyncs: its disk (its layers together, then its largest), a
// CPU, or another wait, led by that side's share of the WAL sync time in
// the words commit's verdict uses (causeShare, causesAlike: both sides
// when they are close), then the p50s.
func followerCauseVerdict(v commit.ClusterVerdict, f followerWords) string {
	if l := v.CauseLead; l.HasRunner && !l.Separated {
		// No one cause's p50 to lead with: the vote's.
		return fmt.Sprintf("%s: %s vote %s (p50; WAL append %s, WAL sync %s; %s, %d split by cause)",
			causesAlike(l, f.poss+" disk"+f.s, f.its+" WAL sync"), f.its, commitMs(v.VoteNs), commitMs(v.PartNs), commitMs(v.FdatasyncNs), f.of, v.CauseJoined)
	}
	nums := fmt.Sprintf("WAL append p50 %s of %s %s vote (%s %s; %s, %d split by cause)",
		commitMs(v.PartNs), f.its, commitMs(v.VoteNs), sideName(v.Cause), commitMs(v.CauseNs), f.of, v.CauseJoined)
	share := clusterShare(v.CauseLead)
	switch {
	case v.Cause.Disk():
		return fmt.Sprintf("writes wait on %s disk%s%s: %s", f.poss, f.s, share, nums)
	case v.Cause == commit.CauseCPUWait:
		return fmt.Sprintf("writes wait for a CPU on %s, not %s disk%s%s: %s", f.who, f.its, f.s, share, nums)
	}
	return fmt.Sprintf("writes wait on %s WAL append%s: %s", f.poss, share, nums)
}

// clusterShare is a cluster verdict's top side's share of the WAL sync
// time, " (40% of WAL sync)" (causeShare); "" when unknown.
func clusterShare(l commit.CauseLead) string {
	if l.Cause == "" {
		return ""
	}
	return " " + causeShare(l, "WAL sync")
}

// causeLine is the table's line of whose fdatasyncs by cause: the
// shares of the summed time, largest first (those of 1% or more), the
// disk's layers together as one cause, its layers after it, as commit's
// split line counts them (a CPU wait larger than each layer is not
// larger than the disk); "" when none was split. of says over which
// writes.
func causeLine(who, of string, t *commit.CauseTotals) string {
	if t.Joined == 0 {
		return ""
	}
	byShare := func(cs []commit.Cause) []commit.Cause {
		cs = slices.Clone(cs)
		slices.SortStableFunc(cs, func(a, b commit.Cause) int { return cmp.Compare(t.Ns[b], t.Ns[a]) })
		return cs
	}
	var layers []string
	var others []commit.Cause
	for _, c := range byShare(commit.CauseOrder) {
		if !c.Disk() {
			others = append(others, c)
		} else if sh := t.Share(c); sh >= 0.01 {
			layers = append(layers, fmt.Sprintf("%s %.0f%%", c, 100*sh))
		}
	}
	type side struct {
		share float64
		text  string
	}
	var sides []side
	if d := t.DiskShare(); d >= 0.01 {
		sides = append(sides, side{d, fmt.Sprintf("disk %.0f%% (%s)", 100*d, strings.Join(layers, ", "))})
	}
	for _, c := range others {
		if sh := t.Share(c); sh >= 0.01 {
			sides = append(sides, side{sh, fmt.Sprintf("%s %.0f%%", c, 100*sh)})
		}
	}
	slices.SortStableFunc(sides, func(a, b side) int { return cmp.Compare(b.share, a.share) })
	var parts []string
	for _, s := range sides[:min(len(sides), 5)] {
		parts = append(parts, s.text)
	}
	return fmt.Sprintf("%s WAL sync by cause, %s (%d of %d split): %s", who, of, t.Joined, t.Joined+t.Unjoined, strings.Join(parts, ", "))
}

// leaderCauseVerdict words the leader's WAL verdict by the top cause of
// its fdatasyncs, as followerCauseVerdict a follower's: that side's share
// of the WAL sync time first (both sides when they are close), then the
// p50s.
func leaderCauseVerdict(v commit.ClusterVerdict) string {
	of := fmt.Sprintf("it came last in %d of %d joined writes, %d split by cause", v.Decided, v.Joined, v.CauseJoined)
	if l := v.CauseLead; l.HasRunner && !l.Separated {
		return fmt.Sprintf("%s: its WAL append %s (p50; %s)", causesAlike(l, "the leader's own disk", "its WAL sync"), commitMs(v.PartNs), of)
	}
	nums := fmt.Sprintf("WAL append p50 %s (%s %s; %s)", commitMs(v.PartNs), sideName(v.Cause), commitMs(v.CauseNs), of)
	share := clusterShare(v.CauseLead)
	switch {
	case v.Cause.Disk():
		return "writes wait on the leader's own disk" + share + ": " + nums
	case v.Cause == commit.CauseCPUWait:
		return "writes wait for a CPU on the leader, not its disk" + share + ": " + nums
	}
	return "writes wait on the leader's own WAL append" + share + ": " + nums
}
