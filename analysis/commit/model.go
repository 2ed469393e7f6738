package commit

import (
	"cmp"
	"slices"
)

// Measure is a number with where it came from, so that a report can say
// which source each number of the model is ("fsync tracer", "etcd
// /metrics of m1: etcd_disk_wal_fsync_duration_seconds p50", ...). A
// Measure without a Source is unknown (etcd v3.4 has no
// etcd_server_apply_duration_seconds): the model leaves it out.
type Measure struct {
	Ns     int64  `json:"ns"`
	Source string `json:"source"`
	// Quorum: for the model's quorum wait, the deciding follower's
	// measures it comes from (its RTT + fsync, minus the leader's WAL
	// append); Source is then empty and render.MeasureSource words it.
	Quorum *ModelFollower `json:"-"`
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
	if in.Apply.Source != "" {
		res.ExpectedNs += in.Apply.Ns
		res.Parts[PartApply] = in.Apply
	}
	if !in.LocalIsLeader {
		res.Parts[PartForward] = in.ForwardRTT
		res.ExpectedNs += in.ForwardRTT.Ns
	}
	return res
}
