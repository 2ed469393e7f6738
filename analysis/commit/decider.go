package commit

// DeciderLead is the vote that decided the most writes weighed against
// the next (docs/commit.md, "How the cluster verdict decides"): the one
// test both `etcdscope commit` (Verdict.Decider) and `etcdscope cluster`
// (ClusterJoin.Verdict) name a deciding vote by, so the two commands give
// one answer over the same writes.
type DeciderLead struct {
	// Member decided Decided writes (MemberID(LocalVote) for the
	// leader's WAL); the most, the lower id on a tie.
	Member  MemberID
	Decided int
	// Runner decided RunnerDecided, the most after Member; HasRunner
	// false when no other vote decided any.
	Runner        MemberID
	RunnerDecided int
	HasRunner     bool
	// DecidedCI is ClopperPearson(Decided, Decided+RunnerDecided): the
	// interval of Member's part of the writes the two decided.
	DecidedCI Interval
	// Separated: DecidedCI lies above 1/2, so the run sets Member apart
	// from Runner (with no runner: enough writes that one vote deciding
	// them all is no chance, ClopperPearson(6, 6) being the first n of n
	// above 1/2). A verdict names Member alone only when Separated.
	Separated bool
}

// LeadDecider weighs the votes of deciders (writes per deciding vote) as
// DeciderLead says; the zero DeciderLead when no vote decided any.
func LeadDecider[K ~uint64](deciders map[K]int) DeciderLead {
	var l DeciderLead
	for id, n := range deciders {
		if m := MemberID(id); n > l.Decided || (n == l.Decided && n > 0 && m < l.Member) {
			l.Member, l.Decided = m, n
		}
	}
	if l.Decided == 0 {
		return DeciderLead{}
	}
	for id, n := range deciders {
		m := MemberID(id)
		if m != l.Member && n > 0 && (!l.HasRunner || n > l.RunnerDecided || (n == l.RunnerDecided && m < l.Runner)) {
			l.Runner, l.RunnerDecided, l.HasRunner = m, n, true
		}
	}
	l.DecidedCI = ClopperPearson(l.Decided, l.Decided+l.RunnerDecided)
	l.Separated = l.DecidedCI.Lo > 0.5
	return l
}
