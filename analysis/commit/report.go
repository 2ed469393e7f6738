package commit

import (
	"slices"
	"strconv"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// Report aggregates Writes: p50/p99 of the total and of each part, the
// quorum's deciding vote and how often, and the followers' ack times.
// The zero value is not ready: use NewReport.
type Report struct {
	Writes     int
	Incomplete int // writes with something Missing (counted in the parts they have)
	Batched    int // writes whose WAL Save held more than one entry
	Roles      map[Role]int
	Total      stats.Series
	Parts      map[string]*stats.Series
	// WALSync: the WAL sync inside the WAL append, etcd's (*WAL).sync:
	// the encoder's flush (write(2)) and then the fdatasync. etcd's
	// etcd_disk_wal_fsync_duration_seconds times the fdatasync alone.
	WALSync stats.Series
	// WALFdatasync: the fdatasync syscall alone of the writes whose
	// (*WAL).sync the fsync tracer joined to its call (SyncCause.CallNs,
	// AddCauses): what etcd's metric times; empty when that tracer did
	// not run.
	WALFdatasync stats.Series
	// WALCause: what the writes' WAL syncs waited on, from the fsync
	// tracer's split of each call (JoinSyncs, AddCauses); zero when that
	// tracer did not run.
	WALCause CauseTotals
	Deciders map[uint64]int           // member id (LocalVote: the leader's WAL) -> writes it decided
	AckAfter map[uint64]*stats.Series // follower -> Send-to-ack (RTT + its WAL append)
	// ClientPutNs: the put latency a client measured (--load), when given.
	ClientPutNs stats.Series
	// partRows: per write, its parts: the spread the verdict's PartLead
	// weighs.
	partRows leadRows[partRow]
}

// partRow is one write's parts in PartOrder's order (a part it lacks: 0).
type partRow [8]int64

// NewReport returns an empty report.
func NewReport() *Report {
	return &Report{Roles: map[Role]int{}, Parts: map[string]*stats.Series{}, Deciders: map[uint64]int{}, AckAfter: map[uint64]*stats.Series{}}
}

// Add counts one write.
func (r *Report) Add(w *Write) {
	r.Writes++
	r.Roles[w.Role]++
	if len(w.Missing) > 0 {
		r.Incomplete++
	}
	if w.BatchEntries > 1 {
		r.Batched++
	}
	r.Total.Add(w.TotalNs())
	var row partRow
	for i, p := range PartOrder {
		v, ok := w.PartsNs[p]
		if !ok {
			continue
		}
		row[i] = v
		s := r.Parts[p]
		if s == nil {
			s = &stats.Series{}
			r.Parts[p] = s
		}
		s.Add(v)
	}
	r.partRows.add(row)
	if w.WALSyncNs >= 0 && w.PartsNs != nil {
		if _, ok := w.PartsNs[PartWALAppend]; ok {
			r.WALSync.Add(w.WALSyncNs)
		}
	}
	if w.DeciderKnown {
		r.Deciders[w.Decider]++
	}
	for _, a := range w.Acks {
		if len(r.AckAfter) >= maxFollow && r.AckAfter[a.Member] == nil {
			continue
		}
		s := r.AckAfter[a.Member]
		if s == nil {
			s = &stats.Series{}
			r.AckAfter[a.Member] = s
		}
		s.Add(a.AfterSendNs)
	}
}

// AddCauses counts the writes' WAL sync causes (JoinSyncs' result) and
// their fdatasync calls' own time (WALFdatasync).
func (r *Report) AddCauses(cs []*SyncCause) {
	for _, c := range cs {
		r.WALCause.Add(c)
		if c != nil {
			r.WALFdatasync.Add(c.CallNs)
		}
	}
}

// Names maps member ids to names for output; a missing id prints in hex
// (etcd's own form, as in its peer metrics' To label).
type Names map[uint64]string

// Of returns the member's name and id, "local WAL" for LocalVote (the
// leader's own vote).
func (n Names) Of(id uint64) string {
	if id == LocalVote {
		return "local WAL"
	}
	if s, ok := n[id]; ok && s != "" {
		return s + " (" + strconv.FormatUint(id, 16) + ")"
	}
	return strconv.FormatUint(id, 16)
}

// ClusterState is what the verdicts need to know of the cluster beyond
// the writes: the members and which answer.
type ClusterState struct {
	Voters int      // voting members in the member list
	Down   []uint64 // members in the list that sent no ack while traced (leader only)
	Names  Names
}

// VerdictKind says what a Verdict is about.
type VerdictKind int

// Verdict kinds. The first verdict of a report with writes names the part
// they waited on most (VerdictWAL to VerdictScheduling, or VerdictGRPC);
// the others follow it when they hold.
const (
	VerdictNoWrites   VerdictKind = iota + 1 // no write was traced
	VerdictWAL                               // the WAL append: WAL (and Cause, when the fsync tracer split the fdatasyncs)
	VerdictQuorum                            // the quorum: Member decided Count of Writes (AckP50Ns; Down)
	VerdictForward                           // forwarding to the leader (Forward)
	VerdictApply                             // apply or commit_to_apply (Part)
	VerdictScheduling                        // etcd's own scheduling: propose or return (Part)
	// VerdictCPUWait: the WAL fdatasyncs waited most for a CPU though
	// another part dominates (WALCause).
	VerdictCPUWait
	VerdictDecider    // the quorum's deciding vote: Member in Count of Writes
	VerdictBatched    // Count of Writes shared a WAL append (one Raft Ready)
	VerdictIncomplete // Count of Writes could not be followed through every step
	// VerdictGRPC: the unary RPC around the write's function (PartGRPC:
	// request decode, the auth and quota interceptors, response encode).
	VerdictGRPC
)

// Verdict is one thing the writes of a Report waited on, as numbers; the
// sinks word it (render.CommitVerdicts). Which fields are set depends on
// Kind.
type Verdict struct {
	Kind VerdictKind
	// Part: the dominant part (PartOrder's names), for the kinds of the
	// first verdict.
	Part string
	// SharePct: the dominant part's share of the summed part means, in
	// percent (on a follower, forward and quorum_wait together).
	SharePct float64
	// Writes: the report's writes; Count: how many of them the verdict
	// holds for (VerdictQuorum, VerdictDecider, VerdictBatched,
	// VerdictIncomplete).
	Writes, Count int
	// Member: the deciding vote (VerdictQuorum, VerdictDecider; LocalVote
	// for the leader's WAL).
	Member uint64
	// AckP50Ns: Member's send-to-ack p50 (RTT + its WAL append),
	// VerdictQuorum; -1 when no ack of it was timed.
	AckP50Ns int64
	// Down: members that sent no ack while traced, which made Member a
	// deciding vote (VerdictQuorum).
	Down []uint64
	// Forward (VerdictForward).
	Forward ForwardWait
	// WAL (VerdictWAL).
	WAL WALWait
	// WALCause: what the writes' WAL fdatasyncs waited on (VerdictWAL
	// when CauseKnown, VerdictCPUWait).
	WALCause CauseTotals
	// Lead: the dominant part against the next, for the kinds of the
	// first verdict.
	Lead PartLead
	// Few: the verdict on the dominant part rests on fewer than FewWrites
	// writes.
	Few bool
	// Decider: Member against the vote deciding the next most writes
	// (VerdictDecider), weighed as `etcdscope cluster` weighs them
	// (LeadDecider): the verdict names both when not Separated.
	Decider DeciderLead
}

// PartLead is the dominant part (a Verdict's Part) weighed against the
// next, as CauseLead weighs the WAL sync's causes: their shares of the
// summed part means (the table's share column) and whether the run's own
// spread sets the first apart.
type PartLead struct {
	// Runner: the part with the next largest mean; RunnerPct its share of
	// the summed part means, percent; HasRunner false when no other part
	// was measured.
	Runner    string
	RunnerPct float64
	HasRunner bool
	// Follower: the writes ran on a follower, where PartForward (as Part
	// or Runner) is forward and quorum_wait together (ForwardWait).
	Follower bool
	// Gap: Part against Runner over the writes (each write's parts on
	// each side summed; every stride-th write past maxLeadRows).
	Gap
	// Separated: GapCI lies above 0 (the claim is where the summed time
	// went, as for CauseLead). One write's interval is a point: the
	// verdict's Few caveat says so.
	Separated bool
}

// FewWrites is the fewest writes the verdict on the dominant part rests
// on without a caveat (Verdict.Few). That verdict compares the parts'
// p50s and means over the writes. A distribution-free 95% interval of a
// median exists only from 6 writes (P(min < median < max) = 1-2^(1-n))
// and excludes the fastest and the slowest write only from 9
// (P(Bin(n, 1/2) <= 1) <= 2.5%: 10/512 at n=9, 9/256 at n=8): below 9
// writes one odd write (the first put's new connection, a GC pause) can
// decide the p50 the verdict quotes.
const FewWrites = 9

// ForwardWait is a VerdictForward's numbers. On a follower, forward (to
// the leader and back with the entry) and quorum_wait (the leader's quorum
// round and its commit notice) are each about one round trip to the
// leader, and the verdict is about their sum.
type ForwardWait struct {
	Follower bool
	// ForwardP50Ns, QuorumWaitP50Ns: each part's p50; -1 when the writes
	// have no such part.
	ForwardP50Ns, QuorumWaitP50Ns int64
	// ForwardPct, QuorumWaitPct: each part's share of the summed part
	// means, percent, as the table's share column (0 when absent); on a
	// follower the Verdict's SharePct is their sum.
	ForwardPct, QuorumWaitPct float64
}

// WALWait is a VerdictWAL's numbers: the WAL append's p50, the write's,
// the fdatasync's inside the append, and what the fdatasyncs waited on
// most when the fsync tracer split them (Cause, when CauseKnown: the disk
// by its largest layer, or a scheduler state; Lead, its share of the
// summed time against the next cause's, and whether they are separated).
type WALWait struct {
	P50Ns, TotalP50Ns, SyncP50Ns int64
	Cause                        Cause
	CauseKnown                   bool
	Lead                         CauseLead
}

// Verdicts says what the writes waited on: the dominant part (by mean,
// its share of the summed means), the deciding vote and why, and the
// facts that qualify the numbers (batched, incomplete writes).
func (r *Report) Verdicts(cs ClusterState) []Verdict {
	if r.Writes == 0 {
		return []Verdict{{Kind: VerdictNoWrites}}
	}
	var out []Verdict
	total := r.Total.Summary()
	// On a follower, forward (to the leader and back with the entry) and
	// quorum_wait (the leader's quorum round and its commit notice) are
	// both the round trip to the leader, about one RTT each: which of the
	// two is larger is noise, and a follower sees no deciding vote. Their
	// sum is what the write waits on: one side, named PartForward.
	follower := r.Roles[RoleFollower] > r.Writes/2
	merged := follower && r.Parts[PartForward] != nil
	side := func(p string) string {
		if merged && p == PartQuorumWait {
			return PartForward
		}
		return p
	}
	// The sides by mean, in PartOrder; the dominant one and the next.
	var sides []string
	means := map[string]float64{}
	var sum float64
	for _, p := range PartOrder {
		if s := r.Parts[p]; s != nil {
			m := s.Summary().Mean()
			sum += m
			if _, ok := means[side(p)]; !ok {
				sides = append(sides, side(p))
			}
			means[side(p)] += m
		}
	}
	var dom, runner string
	var domMean, runnerMean float64
	for _, p := range sides {
		if means[p] > domMean {
			dom, domMean = p, means[p]
		}
	}
	for _, p := range sides {
		if p != dom && means[p] > runnerMean {
			runner, runnerMean = p, means[p]
		}
	}
	share, runnerPct := 0.0, 0.0
	if sum > 0 {
		share, runnerPct = 100*domMean/sum, 100*runnerMean/sum
	}
	p50 := func(p string) int64 {
		if s := r.Parts[p]; s != nil {
			return s.Summary().P50
		}
		return -1
	}
	// pct is a part's share of the summed means, as the table's column.
	pct := func(p string) float64 {
		if s := r.Parts[p]; s != nil && sum > 0 {
			return 100 * s.Summary().Mean() / sum
		}
		return 0
	}
	v := Verdict{Part: dom, SharePct: share, Writes: r.Writes, Few: r.Writes < FewWrites}
	if dom != "" {
		v.Lead = r.partLead(dom, runner, side, runnerPct, merged)
	}
	switch dom {
	case PartWALAppend:
		v.Kind = VerdictWAL
		v.WAL = WALWait{P50Ns: max(p50(PartWALAppend), 0), TotalP50Ns: total.P50, SyncP50Ns: r.WALSync.Summary().P50}
		v.WAL.Lead, v.WAL.CauseKnown = r.WALCause.Lead()
		if v.WAL.CauseKnown {
			v.WAL.Cause, v.WALCause = v.WAL.Lead.Cause, r.WALCause.Sums()
		}
	case PartQuorumWait:
		v.Kind = VerdictQuorum
		v.Member, v.Count = r.topDecider()
		v.AckP50Ns = -1
		if s := r.AckAfter[v.Member]; s != nil {
			v.AckP50Ns = s.Summary().P50
		}
		v.Down = cs.Down
	case PartForward:
		v.Kind = VerdictForward
		v.Forward = ForwardWait{Follower: follower, ForwardP50Ns: p50(PartForward), QuorumWaitP50Ns: p50(PartQuorumWait),
			ForwardPct: pct(PartForward), QuorumWaitPct: pct(PartQuorumWait)}
	case PartApply, PartCommitToApply:
		v.Kind = VerdictApply
	case PartPropose, PartReturn:
		v.Kind = VerdictScheduling
	case PartGRPC:
		v.Kind = VerdictGRPC
	}
	if v.Kind != 0 {
		out = append(out, v)
	}
	// A CPU-starved member stretches every part; when the WAL append is
	// not the largest, its fdatasync calls still show the starving.
	if top, ok := r.WALCause.Top(); ok && top == CauseCPUWait && dom != PartWALAppend {
		out = append(out, Verdict{Kind: VerdictCPUWait, Writes: r.Writes, WALCause: r.WALCause.Sums()})
	}
	// The deciding vote in general (leader with followers).
	if l := LeadDecider(r.Deciders); l.Decided > 0 && dom != PartQuorumWait {
		out = append(out, Verdict{Kind: VerdictDecider, Member: uint64(l.Member), Count: l.Decided, Writes: r.Writes, Decider: l})
	}
	if r.Batched > 0 {
		out = append(out, Verdict{Kind: VerdictBatched, Count: r.Batched, Writes: r.Writes})
	}
	if r.Incomplete > 0 {
		out = append(out, Verdict{Kind: VerdictIncomplete, Count: r.Incomplete, Writes: r.Writes})
	}
	return out
}

// partLead weighs side dom against side runner ("": none) over the
// writes' parts (side maps a part to its side); runnerPct is runner's
// share of the summed part means.
func (r *Report) partLead(dom, runner string, side func(string) string, runnerPct float64, follower bool) PartLead {
	l := PartLead{Follower: follower, Gap: unweighed}
	rows := r.partRows.rows
	if runner == "" {
		// Nothing else measured: the one part is all of it.
		l.Separated = len(rows) > 0
		return l
	}
	l.Runner, l.RunnerPct, l.HasRunner = runner, runnerPct, true
	if len(rows) == 0 {
		return l
	}
	gr := make([]gapRow, len(rows))
	for i, row := range rows {
		for k, v := range row {
			switch side(PartOrder[k]) {
			case dom:
				gr[i].A += v
			case runner:
				gr[i].B += v
			}
			gr[i].Total += v
		}
	}
	l.Gap = weighGap(gr)
	l.Separated = l.GapCI.Lo > 0
	return l
}

// topDecider returns the follower that decided most writes.
func (r *Report) topDecider() (uint64, int) {
	ids := make([]uint64, 0, len(r.Deciders))
	for id := range r.Deciders {
		if id != LocalVote {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var best uint64
	n := 0
	for _, id := range ids {
		if r.Deciders[id] > n {
			best, n = id, r.Deciders[id]
		}
	}
	return best, n
}
