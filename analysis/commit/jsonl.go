package commit

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

// SchemaVersion is the version of the commit JSON Lines records (schema
// commit/v2, docs/schema.md). 2 (2026-12-07): the summary's unavailable
// entries are analysis.Unavailable's fields (part, probe, reason, err),
// not version 1's "part: why" strings, which ReadRecords still takes (as
// probe and text); the records are as version 1's.
const SchemaVersion = 2

// Source values of a record: how its numbers were measured.
const (
	SourceUprobes = "uprobes" // etcd's own functions, timed per write
	SourceModel   = "model"   // the kernel-only model (no uprobes)
)

// AckRecord is a follower's ack in a record.
type AckRecord struct {
	Member      string `json:"member"` // member id, hex
	Name        string `json:"name,omitempty"`
	AfterSendNs int64  `json:"after_send_ns"`
}

// Record is one write as a JSON Lines record ("type":"commit").
type Record struct {
	Type    string           `json:"type"`
	V       int              `json:"v"`
	Source  string           `json:"source"`
	ID      uint64           `json:"id"`
	Index   uint64           `json:"index,omitempty"`
	Role    Role             `json:"role"`
	StartNs uint64           `json:"start_ns"`
	EndNs   uint64           `json:"end_ns"`
	TotalNs int64            `json:"total_ns"`
	PartsNs map[string]int64 `json:"parts_ns"`
	// WALSyncNs: the write's WALSyncNs, (*WAL).sync: the encoder's
	// write(2) and the fdatasync (the name is schema v1's).
	WALSyncNs    int64       `json:"wal_fdatasync_ns"`
	BatchEntries int         `json:"batch_entries,omitempty"`
	Decider      string      `json:"decider,omitempty"` // "local_wal" or a member id in hex
	DeciderName  string      `json:"decider_name,omitempty"`
	Acks         []AckRecord `json:"acks,omitempty"`
	// Missing: the write's Missing, worded (render.CommitRecord fills
	// it; RecordOf leaves it empty).
	Missing []string `json:"missing,omitempty"`
	// Entry: this member's record of the write's Raft entry (term,
	// index): the Save that held it, and on the leader its send and the
	// followers' acks, on a follower the MsgApp's arrival and its answer.
	Entry *Entry `json:"entry,omitempty"`
}

// RecordOf returns w's record, but for its words (Missing:
// render.CommitRecord); names may be nil.
func RecordOf(w *Write, names Names) Record {
	r := Record{Type: "commit", V: SchemaVersion, Source: SourceUprobes, ID: w.ID, Index: w.Index, Role: w.Role,
		StartNs: w.StartNs, EndNs: w.EndNs, TotalNs: w.TotalNs(), PartsNs: w.PartsNs, WALSyncNs: w.WALSyncNs,
		BatchEntries: w.BatchEntries, Entry: w.Entry}
	if r.Decider = VoteName(w.Decider, w.DeciderKnown); w.DeciderKnown && w.Decider != LocalVote {
		r.DeciderName = names[w.Decider]
	}
	for _, a := range w.Acks {
		r.Acks = append(r.Acks, AckRecord{Member: strconv.FormatUint(a.Member, 16), Name: names[a.Member], AfterSendNs: a.AfterSendNs})
	}
	return r
}

// SummaryRecord closes a recording ("type":"commit_summary").
type SummaryRecord struct {
	Type   string `json:"type"`
	V      int    `json:"v"`
	Source string `json:"source"`
	// EtcdVersion: the traced member's etcd version, from its status
	// (with --etcd-endpoints; absent without, and in older recordings).
	EtcdVersion string `json:"etcd_version,omitempty"`
	Writes      int    `json:"writes"`
	Incomplete  int    `json:"incomplete"`
	Batched     int    `json:"batched"`
	Dropped     int    `json:"dropped"`
	// SampleEvery: 1 write in N was followed (--sample; absent: every
	// write); WritesSeen, WritesSampled: the writes the kernel saw enter
	// etcd's write function and those it followed (absent in recordings
	// made before sampling).
	SampleEvery   uint32                   `json:"sample_every,omitempty"`
	WritesSeen    uint64                   `json:"writes_seen,omitempty"`
	WritesSampled uint64                   `json:"writes_sampled,omitempty"`
	LostEvents    uint64                   `json:"lost_events"`
	Missed        uint64                   `json:"missed_events"`
	TotalNs       stats.Summary            `json:"total_ns"`
	PartsNs       map[string]stats.Summary `json:"parts_ns"`
	// WALSyncNs: the writes' (*WAL).sync, write(2) and fdatasync (the
	// name is schema v1's); WALFdatasyncNs: the fdatasync syscall alone,
	// of the writes the fsync tracer joined (absent when it did not run).
	WALSyncNs      stats.Summary  `json:"wal_fdatasync_ns"`
	WALFdatasyncNs *stats.Summary `json:"wal_fdatasync_syscall_ns,omitempty"`
	// WALSyncsNs: every (*WAL).sync traced, with or without a write's
	// entries: what etcd_disk_wal_fsync_duration_seconds also observes.
	WALSyncsNs *stats.Summary `json:"wal_syncs_ns,omitempty"`
	// WALCause: what the writes' WAL syncs waited on, from the
	// fsync tracer's split of each call; absent when it did not run.
	WALCause *CauseTotals `json:"wal_fdatasync_cause,omitempty"`
	// FsyncCalls, FsyncLost, FsyncMissed: etcd's fsync calls the fsync
	// tracer split, its lost events and missed probe runs (when it ran).
	FsyncCalls  int            `json:"fsync_calls,omitempty"`
	FsyncLost   uint64         `json:"fsync_lost_events,omitempty"`
	FsyncMissed uint64         `json:"fsync_missed_events,omitempty"`
	Deciders    map[string]int `json:"deciders,omitempty"` // "local_wal" or member hex -> writes
	ClientPutNs *stats.Summary `json:"client_put_ns,omitempty"`
	// ClientGetNs: the load's serializable get after each put (client,
	// gRPC and transport around a request answered without Raft).
	ClientGetNs *stats.Summary `json:"client_get_ns,omitempty"`
	// ClientIdleGetNs: the same get half an interval after each put,
	// from idle: the cold bound of the round trip, ClientGetNs the warm.
	ClientIdleGetNs *stats.Summary `json:"client_idle_get_ns,omitempty"`
	// ClientOutsideNs: for each load put paired with its traced write (the
	// write inside the put's interval), the client's time minus the
	// server's: client library, gRPC and transport.
	ClientOutsideNs *stats.Summary `json:"client_outside_ns,omitempty"`
	Model           *ModelResult   `json:"model,omitempty"`
	// ModelNotComputed: why Model is absent though the run asked etcd's
	// metrics for it (the table's "model: not computed" line).
	ModelNotComputed string `json:"model_not_computed,omitempty"`
	// ModelScrapes: per member, which /metrics scrape the model's window
	// ends on (the end scrape, else the latest from during the run) and
	// when; present whenever the start scrape was taken.
	ModelScrapes []ModelScrape          `json:"model_scrapes,omitempty"`
	Unavailable  []analysis.Unavailable `json:"unavailable,omitempty"`
	// Target: whether the traced process exited or was stopped during
	// the run (absent in recordings made before it was watched).
	Target *Target `json:"target,omitempty"`
	// Verdicts: Report.Verdicts worded, one sentence each, as the table
	// prints them (render.CommitVerdicts).
	Verdicts []string `json:"verdicts"`
	// VerdictEvidence: each verdict's numbers (Verdict.Evidence), one
	// per Verdicts line in its order; absent in recordings made before
	// 2026-12-07.
	VerdictEvidence []VerdictEvidence `json:"verdict_evidence,omitempty"`
}

// Summary returns the report as a summary record, without its Verdicts
// (the words are the sinks': render.CommitSummary).
func (r *Report) Summary() SummaryRecord {
	s := SummaryRecord{Type: "commit_summary", V: SchemaVersion, Source: SourceUprobes, Writes: r.Writes, Incomplete: r.Incomplete,
		Batched: r.Batched, TotalNs: r.Total.Summary(), PartsNs: map[string]stats.Summary{}, WALSyncNs: r.WALSync.Summary(),
		Deciders: map[string]int{}}
	for p, ser := range r.Parts {
		s.PartsNs[p] = ser.Summary()
	}
	if c := r.WALCause; c.Joined+c.Unjoined > 0 {
		s.WALCause = &c
	}
	if f := r.WALFdatasync.Summary(); f.Count > 0 {
		s.WALFdatasyncNs = &f
	}
	for id, n := range r.Deciders {
		k := "local_wal"
		if id != LocalVote {
			k = strconv.FormatUint(id, 16)
		}
		s.Deciders[k] = n
	}
	if r.ClientPutNs.Summary().Count > 0 {
		c := r.ClientPutNs.Summary()
		s.ClientPutNs = &c
	}
	return s
}

// ReadRecords reads a commit recording: every "commit" record, and the
// "commit_summary" if there is one. Other record types are skipped; a
// newer schema version is an error.
func ReadRecords(rd io.Reader) (recs []Record, sum *SummaryRecord, err error) {
	err = jsonl.Scan(rd, func(line int, h jsonl.Head, raw []byte) error {
		if h.Type != "commit" && h.Type != "commit_summary" {
			return nil
		}
		if h.V > SchemaVersion {
			return fmt.Errorf("commit schema v%d is newer than this etcdscope's v%d", h.V, SchemaVersion)
		}
		if h.Type == "commit_summary" {
			sum = &SummaryRecord{}
			return json.Unmarshal(raw, sum)
		}
		var r Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	return recs, sum, err
}

// VoteName is a deciding vote as every record writes it: "local_wal" for
// LocalVote, else the member id in hex; "" when unknown.
func VoteName(id uint64, known bool) string {
	switch {
	case !known:
		return ""
	case id == LocalVote:
		return "local_wal"
	}
	return strconv.FormatUint(id, 16)
}

// MarshalJSON writes decider as the other records do (VoteName), not as
// the number whose 0 means the local WAL.
func (m ModelResult) MarshalJSON() ([]byte, error) {
	type plain ModelResult
	return json.Marshal(struct {
		plain
		Decider string `json:"decider"`
	}{plain(m), VoteName(m.Decider, m.DeciderKnown)})
}

// UnmarshalJSON reads what MarshalJSON writes, and the number an older
// summary holds.
func (m *ModelResult) UnmarshalJSON(b []byte) error {
	type plain ModelResult
	var v struct {
		plain
		Decider json.RawMessage `json:"decider"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = ModelResult(v.plain)
	m.Decider = 0
	var s string
	switch {
	case len(v.Decider) == 0 || string(v.Decider) == "null":
	case json.Unmarshal(v.Decider, &s) == nil:
		if s != "" && s != "local_wal" {
			id, err := strconv.ParseUint(s, 16, 64)
			if err != nil {
				return fmt.Errorf("model decider %q: not local_wal or a member id in hex", s)
			}
			m.Decider = id
		}
	default:
		if err := json.Unmarshal(v.Decider, &m.Decider); err != nil {
			return fmt.Errorf("model decider: %w", err)
		}
	}
	return nil
}
