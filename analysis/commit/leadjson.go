package commit

import (
	"math"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
)

// VerdictEvidence is one verdict's numbers as the commit summary's JSON
// carries them (verdict_evidence[], one per verdicts[] line, in their
// order; docs/schema.md): the numbers the line is worded from.
type VerdictEvidence struct {
	Kind VerdictKind `json:"kind"`
	// PartLead: the first verdict's part against the next (Verdict.Lead),
	// shares of the summed part means.
	PartLead *LeadRecord `json:"part_lead,omitempty"`
	// CauseLead: a WAL verdict's top cause of (*WAL).sync against the
	// next (WALWait.Lead), shares of its summed time; absent when the
	// fsync tracer did not split the calls.
	CauseLead *LeadRecord `json:"cause_lead,omitempty"`
	// DeciderLead: a decider verdict's vote against the next
	// (Verdict.Decider), counts of writes.
	DeciderLead *DeciderRecord `json:"decider_lead,omitempty"`
}

// DeciderRecord is a DeciderLead as the JSON writes it, under the names
// the cluster summary's verdict_evidence gives the same numbers: the vote
// that decided the most writes (VoteName: "local_wal" or a member id in
// hex) and how many, the next and how many (absent when no other vote
// decided any), the 95% interval of the first's part of the writes the
// two decided (fractions, rounded to 4 decimals), and whether it lies
// above 1/2 (the verdict names both votes when not).
type DeciderRecord struct {
	Decider       string     `json:"decider"`
	Decided       int        `json:"decided"`
	Runner        string     `json:"runner,omitempty"`
	RunnerDecided int        `json:"runner_decided,omitempty"`
	DecidedCI     [2]float64 `json:"decided_ci"`
	Separated     bool       `json:"separated"`
}

// Record returns l as the JSON writes it.
func (l DeciderLead) Record() DeciderRecord {
	r := DeciderRecord{Decider: VoteName(uint64(l.Member), true), Decided: l.Decided, Separated: l.Separated,
		DecidedCI: [2]float64{round4(l.DecidedCI.Lo), round4(l.DecidedCI.Hi)}}
	if l.HasRunner {
		r.Runner, r.RunnerDecided = VoteName(uint64(l.Runner), true), l.RunnerDecided
	}
	return r
}

// Evidence returns v's record.
func (v Verdict) Evidence() VerdictEvidence {
	e := VerdictEvidence{Kind: v.Kind}
	if v.Part != "" {
		r := v.Lead.Record(v.Part, v.SharePct)
		e.PartLead = &r
	}
	if v.Kind == VerdictWAL && v.WAL.CauseKnown {
		r := v.WAL.Lead.Record()
		e.CauseLead = &r
	}
	if v.Kind == VerdictDecider {
		r := v.Decider.Record()
		e.DeciderLead = &r
	}
	return e
}

// LeadRecord is a lead (PartLead, CauseLead) as the JSON writes it: the
// side a verdict names first and its share, the next side and its share,
// the 95% interval of the gap between the shares and whether this run's
// spread sets the first apart (the verdict names both sides when not).
// Shares are percent of the time the lead splits; the gap's bounds are
// percentage points, rounded to 2 decimals.
type LeadRecord struct {
	// Lead: a part (PartOrder's names; "forward+quorum_wait" on a
	// follower, where the two are one side), or a side of the WAL sync:
	// "disk" (its layers together; LeadLayer its largest) or a cause.
	Lead         string  `json:"lead"`
	LeadLayer    Cause   `json:"lead_layer,omitempty"`
	LeadSharePct float64 `json:"lead_share_pct"`
	// LeadLayerSharePct: LeadLayer's own share (CauseLead.LayerPct).
	LeadLayerSharePct float64 `json:"lead_layer_share_pct,omitempty"`
	// Next, NextLayer, NextSharePct: the next side, as Lead; absent when
	// nothing else was measured.
	Next         string  `json:"next,omitempty"`
	NextLayer    Cause   `json:"next_layer,omitempty"`
	NextSharePct float64 `json:"next_share_pct,omitempty"`
	// GapCILowPctPoints, GapCIHighPctPoints: Gap.GapCI, absent when no
	// gap was weighed (no next side, or no per-write spread).
	GapCILowPctPoints  *float64 `json:"gap_ci_low_pct_points,omitempty"`
	GapCIHighPctPoints *float64 `json:"gap_ci_high_pct_points,omitempty"`
	// Longer of Compared writes spent longer on the lead side (Gap).
	Longer    int  `json:"longer,omitempty"`
	Compared  int  `json:"compared,omitempty"`
	Separated bool `json:"separated"`
}

// followerForward is PartForward's side name on a follower
// (PartLead.Follower): forward and quorum_wait together.
const followerForward = PartForward + "+" + PartQuorumWait

// Record returns l of part (the Verdict's Part, its share sharePct) as
// the JSON writes it.
func (l PartLead) Record(part string, sharePct float64) LeadRecord {
	side := func(p string) string {
		if l.Follower && p == PartForward {
			return followerForward
		}
		return p
	}
	r := LeadRecord{Lead: side(part), LeadSharePct: round2(sharePct), Separated: l.Separated}
	if l.HasRunner {
		r.Next, r.NextSharePct = side(l.Runner), round2(l.RunnerPct)
		r.setGap(l.Gap)
	}
	return r
}

// Record returns l as the JSON writes it.
func (l CauseLead) Record() LeadRecord {
	side := func(c Cause) (string, Cause) {
		if c.Disk() {
			return "disk", c
		}
		return string(c), ""
	}
	r := LeadRecord{LeadSharePct: round2(l.Pct), Separated: l.Separated}
	r.Lead, r.LeadLayer = side(l.Cause)
	if r.LeadLayer != "" {
		r.LeadLayerSharePct = round2(l.LayerPct)
	}
	if l.HasRunner {
		r.Next, r.NextLayer = side(l.Runner)
		r.NextSharePct = round2(l.RunnerPct)
		r.setGap(l.Gap)
	}
	return r
}

// setGap sets r's gap from g when it was weighed.
func (r *LeadRecord) setGap(g Gap) {
	if math.IsInf(g.GapCI.Lo, 0) || math.IsInf(g.GapCI.Hi, 0) {
		return
	}
	lo, hi := round2(g.GapCI.Lo), round2(g.GapCI.Hi)
	r.GapCILowPctPoints, r.GapCIHighPctPoints = &lo, &hi
	r.Longer, r.Compared = g.Longer, g.Compared
}

// round2 is x to 2 decimals: the records carry no more digits than the
// intervals warrant.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// round4 is a fraction x to 4 decimals (a percent to 2).
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// verdictKindNames are VerdictKind's JSON names.
var verdictKindNames = jsonl.Names[VerdictKind]{Kind: "verdict kind", Of: map[VerdictKind]string{
	VerdictNoWrites: "no_writes", VerdictWAL: "wal", VerdictQuorum: "quorum", VerdictForward: "forward", VerdictApply: "apply",
	VerdictScheduling: "scheduling", VerdictCPUWait: "cpu_wait", VerdictDecider: "decider", VerdictBatched: "batched",
	VerdictIncomplete: "incomplete", VerdictGRPC: "grpc",
}}

// MarshalText names k as the JSON writes it.
func (k VerdictKind) MarshalText() ([]byte, error) { return verdictKindNames.Marshal(k) }

// UnmarshalText reads a name MarshalText writes.
func (k *VerdictKind) UnmarshalText(b []byte) error { return verdictKindNames.Unmarshal(b, k) }
