package diagnose

import (
	"math"
	"time"

	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// StallCount is how many observations of a histogram lie above a
// threshold, read from its buckets: those above Bound, the first bucket
// bound at or over the threshold (observations between the threshold and
// Bound share a bucket with faster ones and are not counted).
type StallCount struct {
	Threshold time.Duration `json:"threshold_ns"`
	Bound     float64       `json:"bound_seconds"`
	Count     float64       `json:"count"`
	// AtLeast: the total is unknown (no _count or +Inf line): Count is
	// a lower bound, from the highest finite bucket.
	AtLeast bool `json:"at_least,omitempty"`
}

// StallVerdict: a disk histogram's observations slower than etcd's
// heartbeat interval, half its election timeout and the whole election
// timeout (etcd's defaults, 100 ms and 1 s), whatever its p99 says. A
// WAL fsync that long on the leader holds its Raft loop: no heartbeat
// goes out for that long.
type StallVerdict struct {
	Member string `json:"member"`
	// Node: Where in words, empty here: render fills it.
	Node      string `json:"node"`
	Where     Where  `json:"-"`
	Histogram string `json:"histogram"` // wal_fsync or backend_commit
	Window    string `json:"window"`
	// Observations: the histogram's total (0 when unknown).
	Observations float64 `json:"observations"`
	// P99Severity: the same histogram's p99 verdict, for the contrast.
	P99Severity      Severity      `json:"p99_severity"`
	OverHeartbeat    StallCount    `json:"over_heartbeat"`
	OverHalfElection *StallCount   `json:"over_half_election,omitempty"`
	OverElection     *StallCount   `json:"over_election,omitempty"`
	Heartbeat        time.Duration `json:"heartbeat_ns"`
	Election         time.Duration `json:"election_ns"`
	// HeartbeatFromLog, ElectionFromLog: the value is the one etcd's
	// start-up line in a log given beside the metrics says, not etcd's
	// default.
	HeartbeatFromLog bool `json:"heartbeat_from_log,omitempty"`
	ElectionFromLog  bool `json:"election_from_log,omitempty"`
}

// Timeouts are a member's --heartbeat-interval and --election-timeout as
// the evidence gives them; a zero field is not given (etcd's default
// applies).
type Timeouts struct {
	Heartbeat, Election time.Duration
}

// logTimeouts returns the timeouts etcd's start-up lines in logs give; a
// field stays zero when no log gives it, or two logs disagree (the inputs
// are one cluster's, whose members may still differ).
func logTimeouts(logs []LogRead) Timeouts {
	var t Timeouts
	hbs, els := map[time.Duration]bool{}, map[time.Duration]bool{}
	for _, lr := range logs {
		for _, e := range lr.Events {
			if e.Kind != EvConfig {
				continue
			}
			if e.Interval > 0 {
				hbs[e.Interval] = true
			}
			if e.Election > 0 {
				els[e.Election] = true
			}
		}
	}
	for v := range hbs {
		if len(hbs) == 1 {
			t.Heartbeat = v
		}
	}
	for v := range els {
		if len(els) == 1 {
			t.Election = v
		}
	}
	return t
}

// countOver counts the observations above the first bucket bound at or
// over threshold; ok is false when the ladder shown has no such bound.
func countOver(s *etcdmetric.Series, threshold time.Duration) (StallCount, bool) {
	c := StallCount{Threshold: threshold}
	total, known := s.Count, s.HasCount
	highest := 0.0
	for _, b := range s.Buckets {
		if math.IsInf(b.UpperBound, 1) {
			if !known {
				total, known = b.Count, true
			}
			continue
		}
		highest = b.Count
	}
	if !known {
		total, c.AtLeast = highest, true
	}
	for _, b := range s.Buckets {
		if !math.IsInf(b.UpperBound, 1) && b.UpperBound >= threshold.Seconds()*(1-1e-9) {
			c.Bound, c.Count = b.UpperBound, math.Max(0, total-b.Count)
			return c, true
		}
	}
	return c, false
}

// stallFinding: a finding when some observations of s took longer than
// the heartbeat interval; nil when none did or the ladder cannot say.
func stallFinding(w MemberWindow, topic string, s *etcdmetric.Series, p99 Severity, given Timeouts) *Finding {
	if s == nil {
		return nil
	}
	heartbeat, election := DefaultHeartbeat, DefaultElection
	if given.Heartbeat > 0 {
		heartbeat = given.Heartbeat
	}
	if given.Election > 0 {
		election = given.Election
	}
	hb, ok := countOver(s, heartbeat)
	if !ok || hb.Count <= 0 {
		return nil
	}
	v := StallVerdict{Member: w.Member, Where: w.where(), Histogram: topic, Window: w.Window, P99Severity: p99,
		OverHeartbeat: hb, Heartbeat: heartbeat, Election: election,
		HeartbeatFromLog: given.Heartbeat > 0, ElectionFromLog: given.Election > 0}
	if s.HasCount {
		v.Observations = s.Count
	}
	if c, ok := countOver(s, election/2); ok && c.Count > 0 {
		v.OverHalfElection = &c
	}
	if c, ok := countOver(s, election); ok && c.Count > 0 {
		v.OverElection = &c
	}
	sev := Warn
	if topic == TopicWALFsync && v.OverElection != nil {
		// A WAL fsync past the election timeout on the leader is an
		// election.
		sev = Bad
	}
	return &Finding{Topic: TopicDiskStalls, Subject: w.Member, Severity: sev, Stalls: &v}
}
