package commit

import (
	"cmp"
	"slices"
)

// Measure is a number with where it came from, so that a report can say
// which source each number of the model is. From is where the pipeline
// read it in etcd's metrics (typed); Source is the JSON's words for it,
// empty in analysis and filled by render (render.MeasureSource), or a
// record's or a test's own words. A Measure with neither is unknown
// (etcd v3.4 has no etcd_server_apply_duration_seconds): the model leaves
// it out (Known).
type Measure struct {
	Ns     int64  `json:"ns"`
	Source string `json:"source"`
	// From: the series, window and member of etcd's /metrics the mean
	// was read from (nil: Source says, or unknown).
	From *MetricSource `json:"-"`
	// Quorum: for the model's quorum wait, the deciding follower's
	// measures it comes from (its RTT + fsync, minus the leader's WAL
	// append); Source is then empty and render.MeasureSource words it.
	Quorum *ModelFollower `json:"-"`
}

// Known reports whether m was measured (it has a source).
func (m Measure) Known() bool { return m.From != nil || m.Source != "" || m.Quorum != nil }

// MeasureWindow is the window of etcd's metrics a Measure's mean is over.
type MeasureWindow uint8

// The windows of a MetricSource.
const (
	// WindowRun: between the scrapes at the start and at the end of the
	// run (or the latest during it).
	WindowRun MeasureWindow = iota + 1
	// WindowSinceStart: since that etcd started, none having been
	// observed during the run (etcd observes the peer RTT once per 30 s
	// per prober).
	WindowSinceStart
)

// MetricSource is where a Measure of the model was read in etcd's
// /metrics: a histogram's mean (sum/count) over a window.
type MetricSource struct {
	// Series names the histogram as PromQL does:
	// etcd_network_peer_round_trip_time_seconds{To="8e9e05c52164694d"}.
	Series string
	Window MeasureWindow
	Member string // whose /metrics
	// OfLeader: the leader's own measure (its WAL append), said so.
	OfLeader bool
	// Prober: etcd's peer-RTT prober's, which reads up to twice the
	// network RTT (docs/peers.md).
	Prober bool
}

// ModelFollower is one of the leader's followers in the kernel-only model.
type ModelFollower struct {
	ID    uint64  `json:"member"`
	RTT   Measure `json:"rtt"`   // leader ↔ follower round trip
	Fsync Measure `json:"fsync"` // the follower's WAL fdatasync
	Down  bool    `json:"down"`  // not answering: never a vote
}

// ModelInput is what the model combines when etcd's functions cannot be
// probed: kernel tracers (fsync, peers) and etcd's own metrics.
type ModelInput struct {
	Voters        int             `json:"voters"`
	LocalIsLeader bool            `json:"local_is_leader"`
	LeaderWAL     Measure         `json:"leader_wal"` // the leader's WAL append (write + fdatasync)
	Followers     []ModelFollower `json:"followers"`
	Apply         Measure         `json:"apply"`       // applying one entry (the backend)
	ForwardRTT    Measure         `json:"forward_rtt"` // this member to the leader, when it is not the leader
}

// ModelResult is the model's expected write latency, split like a Write.
type ModelResult struct {
	ExpectedNs int64              `json:"expected_ns"`
	Parts      map[string]Measure `json:"parts"`
	// Decider is the quorum's deciding vote: LocalVote or a follower;
	// DeciderKnown is false when too few members answer for a quorum.
	Decider      uint64 `json:"decider"`
	DeciderKnown bool   `json:"decider_known"`
}

// Model computes the expected commit latency of a write. etcd's leader
// sends its entries to the followers before it saves them to its own WAL
// (the two overlap), so the commit waits for the q-th earliest vote, q =
// Voters/2+1, the leader's WAL append being one vote and each follower's
// RTT + WAL fdatasync another:
//
//	expected ≈ forward RTT (not leader) + max(leader WAL, (q−1)-th smallest follower RTT + fsync) + apply
//
// (the max is the q-th earliest vote when the leader's own WAL is among
// the first q; otherwise the (q−1)-th follower decides and the leader's
// WAL is hidden under it: the same value).
func Model(in ModelInput) ModelResult {
	res := ModelResult{Parts: map[string]Measure{}}
	var fol []ModelFollower
	for _, f := range in.Followers {
		if !f.Down {
			fol = append(fol, f)
		}
	}
	slices.SortFunc(fol, func(a, b ModelFollower) int { return cmp.Compare(a.RTT.Ns+a.Fsync.Ns, b.RTT.Ns+b.Fsync.Ns) })
	voters := in.Voters
	if voters == 0 {
		voters = 1 + len(in.Followers)
	}
	q := voters/2 + 1
	commit := in.LeaderWAL.Ns
	res.Parts[PartWALAppend] = in.LeaderWAL
	switch {
	case q == 1:
		res.Decider, res.DeciderKnown = LocalVote, true
	case q-1 <= len(fol):
		f := fol[q-2]
		if v := f.RTT.Ns + f.Fsync.Ns; v > commit {
			res.Parts[PartQuorumWait] = Measure{Ns: v - commit, Quorum: &f}
			commit = v
			res.Decider = f.ID
		} else {
			res.Decider = LocalVote
		}
		res.DeciderKnown = true
	}
	res.ExpectedNs = commit
	if in.Apply.Known() {
		res.ExpectedNs += in.Apply.Ns
		res.Parts[PartApply] = in.Apply
	}
	if !in.LocalIsLeader {
		res.Parts[PartForward] = in.ForwardRTT
		res.ExpectedNs += in.ForwardRTT.Ns
	}
	return res
}

// ScrapeUsed is which of a member's /metrics scrapes ends the model's
// window for that member (its means run from the start scrape to it).
type ScrapeUsed string

const (
	// ScrapeEnd: the scrape at the end of the run (the whole run).
	ScrapeEnd ScrapeUsed = "end"
	// ScrapeDuring: the end scrape missed the member; its latest scrape
	// from during the run stands in (the run but its last seconds).
	ScrapeDuring ScrapeUsed = "during_run"
	// ScrapeNone: neither answered: the model has none of the member's
	// numbers.
	ScrapeNone ScrapeUsed = "none"
)

// ModelScrape is, for one member, the scrape the model's numbers of that
// member end on. The model takes means (a histogram's sum over its count
// between two scrapes of one member), never a rate: each member's means
// are exact over its own window, and members whose windows differ are
// combined as they are.
type ModelScrape struct {
	Member string     `json:"member"` // the member id in hex, as "decider"
	Scrape ScrapeUsed `json:"scrape"`
	// WindowNs: from the member's start scrape to the one used (0 for
	// ScrapeNone, or NoStart).
	WindowNs int64 `json:"window_ns"`
	// NoStart: the start scrape missed the member: no window, so only
	// what etcd observed since it started (a peer RTT's stand-in).
	NoStart bool `json:"no_start,omitempty"`
	// ShortNs: how much earlier than the end scrape the one used was
	// taken (the run's last seconds its means leave out; 0 for ScrapeEnd).
	ShortNs int64 `json:"short_ns,omitempty"`
	// EndErr: why the end scrape missed the member (the error's text).
	EndErr string `json:"end_error,omitempty"`
}
