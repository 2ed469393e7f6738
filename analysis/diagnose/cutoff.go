package diagnose

import (
	"slices"
	"time"
)

// PeerDown is one peer a member's log says it could not reach.
type PeerDown struct {
	Peer  string `json:"peer"`
	Lines int    `json:"lines"`
	// From, To: the first and last such line (zero without stamps).
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
	// Errors: the distinct errors logged, first three.
	Errors []string `json:"errors,omitempty"`
}

// CutOffVerdict is what a log's Raft and peer lines say of a member cut
// off from its peers: the elections it ran, whether one ended with a
// leader, and the peers it could not reach.
type CutOffVerdict struct {
	Source string `json:"source"`
	// Campaigns: election rounds: a "became pre-candidate" line, or a
	// "became candidate" line that does not follow its own pre-vote (a
	// pre-candidate at the term before: the same round's second half);
	// PreVote: some were pre-vote rounds (the term stays until a quorum
	// answers).
	Campaigns int  `json:"campaigns"`
	PreVote   bool `json:"pre_vote"`
	FirstTerm int  `json:"first_term,omitempty"`
	LastTerm  int  `json:"last_term,omitempty"`
	// From, To: the first and last campaign or peer line; the stamps'
	// zone and year known or not (capnslog, syslog).
	From      time.Time `json:"from,omitzero"`
	To        time.Time `json:"to,omitzero"`
	HasTime   bool      `json:"has_time"`
	ZoneKnown bool      `json:"zone_known"`
	YearKnown bool      `json:"year_known"`
	// LeaderAfter: a leader line (elected, became leader) follows the
	// last campaign.
	LeaderAfter bool       `json:"leader_after"`
	Peers       []PeerDown `json:"peers,omitempty"`
	// SlowFsyncs: slow fdatasync lines in the same log.
	SlowFsyncs int `json:"slow_fsyncs"`
	// OneMember: the configuration the member last switched to before
	// its first round has one voter: no peer to be cut off from.
	OneMember bool `json:"one_member,omitempty"`
}

// bootstrapTerm is the term of a new cluster's first leader: etcd starts
// its members as followers at term 1 (raft.StartNode), so the first
// election raises the term to 2.
const bootstrapTerm = 2

// cutOffFinding reads one log's campaigns and unreachable peers; nil
// when it has neither.
func cutOffFinding(src string, evs []LogEvent) *Finding {
	v := CutOffVerdict{Source: src}
	at := map[string]int{}
	lastCampaign, voters := -1, 0
	var prev *LogEvent
	for i, e := range evs {
		switch e.Kind {
		case EvVoters:
			if v.Campaigns == 0 {
				voters = e.Voters
			}
			continue
		case EvCampaign:
			// pre-candidate at N, then candidate at N+1: one round
			if e.PreVote || prev == nil || !prev.PreVote || prev.Term+1 != e.Term {
				v.Campaigns++
			}
			prev = &evs[i]
			v.PreVote = v.PreVote || e.PreVote
			if v.FirstTerm == 0 {
				v.FirstTerm = e.Term
			}
			v.LastTerm = e.Term
			lastCampaign = i
		case EvPeerDown:
			j, ok := at[e.To]
			if !ok {
				j = len(v.Peers)
				at[e.To] = j
				v.Peers = append(v.Peers, PeerDown{Peer: e.To, From: e.Time})
			}
			p := &v.Peers[j]
			p.Lines++
			if e.HasTime {
				p.To = e.Time
			}
			if e.Error != "" && len(p.Errors) < 3 && !slices.Contains(p.Errors, e.Error) {
				p.Errors = append(p.Errors, e.Error)
			}
		case EvLeader:
			if lastCampaign >= 0 {
				v.LeaderAfter = true
			}
			continue
		case EvSlowFdatasync:
			v.SlowFsyncs++
			continue
		default:
			continue
		}
		if e.HasTime {
			if !v.HasTime {
				v.From, v.HasTime, v.ZoneKnown, v.YearKnown = e.Time, true, e.ZoneKnown, e.YearKnown
			}
			v.To = e.Time
		}
	}
	// A leader line before the last campaign does not end it.
	if lastCampaign >= 0 {
		v.LeaderAfter = false
		for _, e := range evs[lastCampaign:] {
			if e.Kind == EvLeader {
				v.LeaderAfter = true
			}
		}
	}
	if v.Campaigns == 0 && len(v.Peers) == 0 {
		return nil
	}
	v.OneMember = voters == 1 && v.Campaigns > 0
	// A new cluster's first election (terms up to 2), or any on a
	// one-member cluster, that ends with a leader is a start, not a
	// member cut off; peers not yet up before it are members still
	// starting. A peer lost after the leader is still a finding.
	if v.LeaderAfter && (v.LastTerm <= bootstrapTerm || v.OneMember) && !peerDownAfterLeader(evs) {
		return nil
	}
	sev := Warn
	if v.Campaigns > 0 && !v.LeaderAfter {
		sev = Bad
	}
	return &Finding{Topic: TopicCutOff, Subject: src, Severity: sev, CutOff: &v}
}

// peerDownAfterLeader: a peer line follows the log's first leader line.
func peerDownAfterLeader(evs []LogEvent) bool {
	led := false
	for _, e := range evs {
		switch {
		case e.Kind == EvLeader && !e.Lost:
			led = true
		case e.Kind == EvPeerDown && led:
			return true
		}
	}
	return false
}
