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
	// Campaigns: "became (pre-)candidate" lines; PreVote: some were
	// pre-vote rounds (the term stays until a quorum answers).
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
}

// cutOffFinding reads one log's campaigns and unreachable peers; nil
// when it has neither.
func cutOffFinding(src string, evs []LogEvent) *Finding {
	v := CutOffVerdict{Source: src}
	at := map[string]int{}
	lastCampaign := -1
	for i, e := range evs {
		switch e.Kind {
		case EvCampaign:
			v.Campaigns++
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
	sev := Warn
	if v.Campaigns > 0 && !v.LeaderAfter {
		sev = Bad
	}
	return &Finding{Topic: TopicCutOff, Subject: src, Severity: sev, CutOff: &v}
}
