package commit

import (
	"cmp"
	"slices"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// NotJoined says why a write the leader saved could not be followed to
// its deciding follower.
type NotJoined uint8

// Why a write is not joined (NotJoinedNone: it is).
const (
	NotJoinedNone NotJoined = iota
	// NotJoinedNoQuorum: fewer acks than a quorum needs were seen for it
	// (the leader's window ended first, or the acks were lost).
	NotJoinedNoQuorum
	// NotJoinedNoFollowerRecord: the deciding follower's window lacks
	// the entry, or its receive, Save and answer (that member runs no
	// serve --commit-pid, or the entry left its window).
	NotJoinedNoFollowerRecord
	// NotJoinedNoSend: the leader's Send of the entry was not seen (its
	// Save had no Send before it on the Raft goroutine).
	NotJoinedNoSend
)

// MarshalText names the reason in JSON: "no_quorum", "no_follower_record",
// "no_send" ("" when joined).
func (n NotJoined) MarshalText() ([]byte, error) {
	switch n {
	case NotJoinedNoQuorum:
		return []byte("no_quorum"), nil
	case NotJoinedNoFollowerRecord:
		return []byte("no_follower_record"), nil
	case NotJoinedNoSend:
		return []byte("no_send"), nil
	}
	return nil, nil
}

// ClusterWrite is one Raft entry the leader saved, followed across the
// members by (term, index): the leader's own WAL append, the quorum's
// deciding vote and, when a follower decided, that follower's time split
// into its parts and the network remainder. Every duration is a
// difference of one member's own clock, ns.
type ClusterWrite struct {
	Term  uint64 `json:"term"`
	Index uint64 `json:"index"`
	// LeaderWALNs: the leader's WAL Save (of which LeaderFdatasyncNs);
	// Batch: the entries that Save held.
	LeaderWALNs       int64 `json:"leader_wal_ns"`
	LeaderFdatasyncNs int64 `json:"leader_fdatasync_ns"`
	// LeaderCause: the leader's fdatasync by cause, when its agent split
	// the call (its window's sync_cause).
	LeaderCause *SyncCause `json:"leader_fdatasync_cause,omitempty"`
	Batch       int        `json:"batch_entries"`
	// DeciderLocal: the leader's own WAL append came last (no follower
	// is then split); else Decider is the follower whose ack did, VoteNs
	// the leader's Send to that ack.
	DeciderLocal bool     `json:"decider_local"`
	Decider      MemberID `json:"decider,omitempty"`
	VoteNs       int64    `json:"vote_ns,omitempty"`
	// The deciding follower, when joined: Follower its split (receive to
	// answer: queueing, WAL append, answer) and NetworkNs the rest of
	// VoteNs (the round trip, both transports' queues included).
	Follower  *FollowerSplit `json:"follower,omitempty"`
	NetworkNs int64          `json:"network_ns,omitempty"`
	Why       NotJoined      `json:"not_joined,omitempty"` // NotJoinedNone when joined
}

// Joined reports whether the write's deciding vote is known and, for a
// follower's, split.
func (w *ClusterWrite) Joined() bool { return w.Why == NotJoinedNone }

// ClusterJoin is JoinCluster's result: every entry the leader saved in
// its window (Writes, lowest index first), joined or not, and summaries.
type ClusterJoin struct {
	Leader   MemberID
	Voters   int
	Names    map[MemberID]string // from the windows (etcd's member list)
	Writes   []ClusterWrite
	Joined   int
	NotByWhy map[NotJoined]int
	// Deciders: writes per deciding vote (LocalVote for the leader's WAL).
	Deciders map[MemberID]int
	// Per part over the joined writes a follower decided (and the
	// leader's WAL over all): VoteNs, NetworkNs, QueueNs, WALNs,
	// FdatasyncNs, RespondNs; LeaderWALNs.
	VoteNs, NetworkNs, QueueNs, WALNs, FdatasyncNs, RespondNs, LeaderWALNs stats.Series
	// FollowerCause sums the deciding followers' fdatasyncs by cause
	// over the joined writes a follower decided (Unjoined: those whose
	// follower's record carries no cause).
	FollowerCause CauseTotals
	// LeaderCause: the same of the leader's fdatasync over the joined
	// writes its own WAL append decided.
	LeaderCause CauseTotals
}

// JoinCluster joins the members' windows by Raft entry. The leader is the
// member whose records carry sends (its Save's Send before it), the
// others' records of the same (term, index) are the followers', matched
// to the leader's acks by the member id their window names (serve needs
// --etcd-endpoints to know it; an unnamed follower is never joined). The
// quorum is Voters/2+1 of the leader's WAL and the followers' acks; a
// write waits for the leader's Save to return and for the (q-1)-th
// follower ack, and the later of the two is its deciding vote.
func JoinCluster(windows []EntryWindow) ClusterJoin {
	res := ClusterJoin{NotByWhy: map[NotJoined]int{}, Deciders: map[MemberID]int{}, Names: map[MemberID]string{}}
	for i := range windows {
		for id, n := range windows[i].Names {
			res.Names[id] = n
		}
	}
	lead := -1
	for i := range windows {
		n := 0
		for k := range windows[i].Entries {
			if e := &windows[i].Entries[k]; !e.Follower() && e.SendNs != 0 && len(e.Acks) > 0 {
				n++
			}
		}
		if n > 0 && (lead < 0 || n > leaderCount(&windows[lead])) {
			lead = i
		}
	}
	if lead < 0 {
		return res
	}
	leader := &windows[lead]
	res.Leader = leader.Member
	// The followers' records by member and index.
	fol := map[MemberID]map[uint64]*Entry{}
	members := map[MemberID]bool{}
	for i := range windows {
		if i == lead {
			continue
		}
		w := &windows[i]
		members[w.Member] = true
		m := map[uint64]*Entry{}
		for k := range w.Entries {
			if e := &w.Entries[k]; e.Follower() {
				m[e.Index] = e
			}
		}
		fol[w.Member] = m
	}
	for k := range leader.Entries {
		for _, a := range leader.Entries[k].Acks {
			members[a.Member] = true
		}
	}
	delete(members, 0)
	res.Voters = max(len(windows), 1+len(members))
	q := res.Voters/2 + 1
	for k := range leader.Entries {
		e := &leader.Entries[k]
		if e.Follower() || e.SaveStartNs == 0 {
			continue
		}
		w := ClusterWrite{Term: e.Term, Index: e.Index, LeaderWALNs: int64(e.SaveEndNs - e.SaveStartNs),
			Batch: int(e.SaveLast - e.SaveFirst + 1)}
		if e.SyncEndNs > e.SyncStartNs {
			w.LeaderFdatasyncNs, w.LeaderCause = int64(e.SyncEndNs-e.SyncStartNs), e.SyncCause
		}
		res.LeaderWALNs.Add(w.LeaderWALNs)
		joinWrite(&w, e, q, fol)
		if w.Joined() {
			res.Joined++
			if w.DeciderLocal {
				res.Deciders[MemberID(LocalVote)]++
				if w.LeaderFdatasyncNs > 0 {
					res.LeaderCause.Add(w.LeaderCause)
				}
			} else {
				res.Deciders[w.Decider]++
				res.VoteNs.Add(w.VoteNs)
				res.NetworkNs.Add(w.NetworkNs)
				res.QueueNs.Add(w.Follower.QueueNs)
				res.WALNs.Add(w.Follower.WALNs)
				res.FdatasyncNs.Add(w.Follower.FdatasyncNs)
				res.RespondNs.Add(w.Follower.RespondNs)
				res.FollowerCause.Add(w.Follower.Cause)
			}
		} else {
			res.NotByWhy[w.Why]++
		}
		res.Writes = append(res.Writes, w)
	}
	slices.SortFunc(res.Writes, func(a, b ClusterWrite) int { return cmp.Compare(a.Index, b.Index) })
	return res
}

// leaderCount is how many of w's records are a leader's.
func leaderCount(w *EntryWindow) int {
	n := 0
	for k := range w.Entries {
		if e := &w.Entries[k]; !e.Follower() && e.SendNs != 0 && len(e.Acks) > 0 {
			n++
		}
	}
	return n
}

// joinWrite finds w's deciding vote among the leader's Save (e) and the
// acks, and splits a follower's by its own record (fol).
func joinWrite(w *ClusterWrite, e *Entry, q int, fol map[MemberID]map[uint64]*Entry) {
	type vote struct {
		at     uint64
		member MemberID
	}
	// The leader's raft loop takes the next Ready, and applies, only
	// after its own Save returned: a write waits for that and for the
	// (q-1)-th follower ack, whichever comes last (docs/commit.md).
	var acks []vote
	for _, a := range e.Acks {
		acks = append(acks, vote{at: a.AckNs, member: a.Member})
	}
	if len(acks) < q-1 {
		w.Why = NotJoinedNoQuorum
		return
	}
	if q == 1 {
		w.DeciderLocal = true
		return
	}
	slices.SortStableFunc(acks, func(a, b vote) int { return cmp.Compare(a.at, b.at) })
	d := acks[q-2]
	if e.SaveEndNs >= d.at {
		w.DeciderLocal = true
		return
	}
	w.Decider = d.member
	if e.SendNs == 0 || d.at < e.SendNs {
		w.Why = NotJoinedNoSend
		return
	}
	w.VoteNs = int64(d.at - e.SendNs)
	f, ok := fol[d.member][e.Index]
	if !ok || (f.Term != 0 && e.Term != 0 && f.Term != e.Term) {
		w.Why = NotJoinedNoFollowerRecord
		return
	}
	s, ok := f.Split()
	if !ok {
		w.Why = NotJoinedNoFollowerRecord
		return
	}
	w.Follower, w.NetworkNs = &s, w.VoteNs-s.TotalNs
}

// ClusterVerdictKind is what the writes of a cluster wait on most.
type ClusterVerdictKind uint8

// The cluster verdicts. A vote or a part is named only when the evidence
// separates it from the runner-up (docs/commit.md, "How the cluster
// verdict decides"); otherwise the verdict is one of the two "no single"
// kinds, which name both.
const (
	ClusterVerdictNone ClusterVerdictKind = iota // no write joined
	// ClusterVerdictLeaderWAL: the leader's own WAL append decides most
	// writes (PartNs its p50).
	ClusterVerdictLeaderWAL
	// ClusterVerdictNetwork, ClusterVerdictFollowerWAL,
	// ClusterVerdictFollowerQueue: a follower (Member) decides most
	// writes, and of its votes the network, its WAL append, or its Raft
	// loop's queueing (and answer) holds the largest share of their
	// summed time, separated from the others (Shares); PartNs is that
	// part's p50 over its writes, VoteNs its votes' p50.
	ClusterVerdictNetwork
	ClusterVerdictFollowerWAL
	ClusterVerdictFollowerQueue
	// ClusterVerdictNoSingleDecider: two votes (Member and Runner, one
	// of them the leader's WAL, MemberID(LocalVote)) decide about equally
	// often: DecidedCI, the interval of Member's part of the writes the
	// two decided, holds 1/2; or one vote alone decided too few writes
	// to name it (HasRunner false). Two followers deciding about equally
	// often get a follower's verdict with Both set.
	ClusterVerdictNoSingleDecider
	// ClusterVerdictNoSingleCause: a follower (Member) decides most
	// writes, but no part of its votes is separated from the next:
	// Shares.Parts[0] and [1] are the two leading parts, with their
	// intervals; VoteNs is its votes' p50.
	ClusterVerdictNoSingleCause
)

// ClusterVerdict is the join's verdict: who decides most writes and what
// that vote is made of, with the evidence for both.
type ClusterVerdict struct {
	Kind   ClusterVerdictKind
	Member MemberID // the deciding follower (not for LeaderWAL)
	// Decided of Joined writes were decided by that vote.
	Decided, Joined int
	// Runner is the vote deciding the most writes after Member's
	// (RunnerDecided of them; MemberID(LocalVote) for the leader's WAL),
	// HasRunner false when no other vote decided any. DecidedCI is
	// ClopperPearson(Decided, Decided+RunnerDecided): the vote is named
	// only when it lies above 1/2.
	Runner        MemberID
	RunnerDecided int
	HasRunner     bool
	DecidedCI     Interval
	// Both: Member and Runner, two followers, decide about equally
	// often, and the verdict's parts are of their votes together.
	Both   bool
	PartNs int64
	VoteNs int64
	// FdatasyncNs: the follower's fdatasync p50 over its votes, when its
	// WAL append is the verdict's part or one of the two leading parts.
	FdatasyncNs int64
	// ClusterVerdictFollowerWAL (ClusterVerdictLeaderWAL), when the
	// follower's (leader's) agent split its fdatasyncs: Cause, the top
	// cause over its votes (CauseTotals.Top: the disk by its largest layer
	// when its layers hold the most), CauseNs that cause's p50 per vote,
	// over CauseJoined of its Decided votes. ClusterVerdictNoSingleCause
	// carries them too when the WAL append is one of its two parts.
	Cause       Cause
	CauseNs     int64
	CauseJoined int
	// CauseLead: Cause's side's share of those votes' summed WAL sync
	// time (the disk's layers together) against the next side's, and
	// whether the spread sets it apart (CauseTotals.Lead), as commit's
	// verdict weighs it.
	CauseLead CauseLead
	// Shares: for a follower's verdict (and ClusterVerdictNoSingleCause),
	// each part's share of the summed time of its votes, with the
	// evidence that the largest is separated.
	Shares VoteShares
}

// Verdict names the vote that decides most joined writes and, for a
// follower, the largest part of its votes, each only when separated from
// the runner-up at VerdictLevel.
func (j *ClusterJoin) Verdict() ClusterVerdict {
	v := ClusterVerdict{Joined: j.Joined}
	l := LeadDecider(j.Deciders)
	if l.Decided == 0 {
		return v
	}
	top := l.Member
	v.Member, v.Decided, v.Runner, v.RunnerDecided, v.HasRunner, v.DecidedCI = top, l.Decided, l.Runner, l.RunnerDecided, l.HasRunner, l.DecidedCI
	if !l.Separated {
		// Two followers deciding about equally often are weighed
		// together (Both): their votes are the same path's parts.
		if !v.HasRunner || top == MemberID(LocalVote) || v.Runner == MemberID(LocalVote) || v.Decided+v.RunnerDecided < minPooled {
			v.Kind = ClusterVerdictNoSingleDecider
			return v
		}
		v.Both = true
	}
	if top == MemberID(LocalVote) {
		v.Kind, v.PartNs = ClusterVerdictLeaderWAL, j.LeaderWALNs.Summary().P50
		var causes []*SyncCause
		for k := range j.Writes {
			if w := &j.Writes[k]; w.Joined() && w.DeciderLocal && w.LeaderCause != nil {
				causes = append(causes, w.LeaderCause)
			}
		}
		v.Cause, v.CauseNs, v.CauseJoined = topCause(&j.LeaderCause, causes)
		v.CauseLead, _ = j.LeaderCause.Lead()
		return v
	}
	var vote, sync stats.Series
	var votes []voteParts
	var causes CauseTotals
	var withCause []*SyncCause
	for k := range j.Writes {
		w := &j.Writes[k]
		if !w.Joined() || w.DeciderLocal || (w.Decider != top && !(v.Both && w.Decider == v.Runner)) || w.Follower == nil {
			continue
		}
		f := w.Follower
		vote.Add(w.VoteNs)
		sync.Add(f.FdatasyncNs)
		votes = append(votes, voteParts{w.NetworkNs, f.WALNs, f.QueueNs + f.RespondNs})
		if f.FdatasyncNs > 0 {
			causes.Add(f.Cause)
			if f.Cause != nil {
				withCause = append(withCause, f.Cause)
			}
		}
	}
	v.VoteNs = vote.Summary().P50
	v.Kind = ClusterVerdictNoSingleCause
	if len(votes) == 0 {
		return v
	}
	v.Shares = shareEvidence(votes)
	lead := v.Shares.Parts[0]
	if lead.Part == VotePartWAL || v.Shares.Parts[1].Part == VotePartWAL {
		v.FdatasyncNs = sync.Summary().P50
		v.Cause, v.CauseNs, v.CauseJoined = topCause(&causes, withCause)
		v.CauseLead, _ = causes.Lead()
	}
	if !v.Shares.Separated {
		return v
	}
	v.PartNs = lead.P50Ns
	switch lead.Part {
	case VotePartNetwork:
		v.Kind = ClusterVerdictNetwork
	case VotePartWAL:
		v.Kind = ClusterVerdictFollowerWAL
	default:
		v.Kind = ClusterVerdictFollowerQueue
	}
	return v
}

// minPooled is the fewest writes two followers must have decided for
// their votes to be weighed together: as many as one vote needs to be
// named (ClopperPearson(6, 6) is the first n of n above 1/2).
const minPooled = 6

// topCause is the top cause of totals t (CauseTotals.Top), its p50 over
// the writes' causes, and how many writes were split; "" when none.
func topCause(t *CauseTotals, causes []*SyncCause) (Cause, int64, int) {
	c, ok := t.Top()
	if !ok {
		return "", 0, 0
	}
	var per stats.Series
	for _, sc := range causes {
		per.Add(sc.Ns[c])
	}
	return c, per.Summary().P50, t.Joined
}
