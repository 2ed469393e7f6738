package otlp

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// Span parts: the last element of a span's identity (with the cluster,
// the Raft entry and the member that emits it), so that every agent
// derives the same IDs for the same span without talking to the others.
const (
	// PartWrite is the write itself, the trace's root: emitted by the
	// member whose client call ran it (its member is 0 in the ID, so
	// that the other members can name it as a parent).
	PartWrite = "write"
	// PartReplicate is the leader's replication of the entry: from its
	// Send of the entry (or its Save, whichever came first) to the vote
	// that made the quorum.
	PartReplicate = "replicate"
	// PartWALAppend and PartFdatasync are a member's WAL Save of the
	// entry and the (*WAL).sync inside it: the encoder's write(2) and
	// the fdatasync (span "wal sync"; the value is kept, as span IDs
	// derive from it).
	PartWALAppend = "wal_append"
	PartFdatasync = "fdatasync"
	// PartVotePrefix + a follower's hex id: the leader's Send of the
	// entry to that follower's MsgAppResp covering it.
	PartVotePrefix = "vote/"
	// PartEntry is a follower's receive of the entry to its answer, with
	// its parts PartQueue, PartWALAppend and PartRespond.
	PartEntry   = "entry"
	PartQueue   = "queue"
	PartRespond = "respond"
)

// Key is what a span's IDs are derived from.
type Key struct {
	Cluster uint64 // etcd's cluster id
	Term    uint64 // the entry's Raft term
	Index   uint64 // the entry's Raft index
}

// idDomain separates these IDs from any other use of the hash.
const idDomain = "etcdscope.otlp.v1"

// TraceID is the trace of the write at k: the first 16 bytes of
// SHA-256 over the cluster, term and index.
func TraceID(k Key) trace.TraceID {
	var id trace.TraceID
	h := keyHash(k, 0, "")
	copy(id[:], h[:16])
	if !id.IsValid() {
		id[15] = 1
	}
	return id
}

// SpanID is the span part emitted by member (0 for PartWrite) in the
// trace of k: the first 8 bytes of SHA-256 over k, member and part.
func SpanID(k Key, member commit.MemberID, part string) trace.SpanID {
	var id trace.SpanID
	h := keyHash(k, member, "/"+part)
	copy(id[:], h[:8])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

func keyHash(k Key, member commit.MemberID, part string) [32]byte {
	b := make([]byte, 0, len(idDomain)+32+len(part))
	b = append(b, idDomain...)
	b = binary.BigEndian.AppendUint64(b, k.Cluster)
	b = binary.BigEndian.AppendUint64(b, k.Term)
	b = binary.BigEndian.AppendUint64(b, k.Index)
	b = binary.BigEndian.AppendUint64(b, uint64(member))
	b = append(b, part...)
	return sha256.Sum256(b)
}

// VotePart is the part of the leader's vote span for follower f.
func VotePart(f commit.MemberID) string {
	return PartVotePrefix + strconv.FormatUint(uint64(f), 16)
}

// Span is one span to export: its identity (Member, Part) and its
// parent's (ParentMember, ParentPart; NoParent for the root), its times
// on the emitting member's CLOCK_MONOTONIC (ns), and what it is about.
type Span struct {
	Member       commit.MemberID
	Part         string
	ParentMember commit.MemberID
	ParentPart   string // "" for the root
	StartNs      uint64
	EndNs        uint64
	// Peer: the other member the span is about (a vote's follower, a
	// follower entry's leader); 0 if none.
	Peer commit.MemberID
	// Deciding: a vote span whose ack made the quorum, or the leader's
	// WAL append when it came last.
	Deciding bool
	// Batch: the entries of the WAL Save (wal_append spans).
	Batch int
	// Laid: the span's start is laid out (a write part placed end to
	// end after the one before it): its duration is exact, its start
	// within the write is not.
	Laid bool
}

// DurationNs is End-Start.
func (s *Span) DurationNs() int64 { return int64(s.EndNs - s.StartNs) }

// Sampling decides which entries are exported.
type Sampling struct {
	// Every: 1 entry in Every, those whose Raft index is a multiple of
	// it, so that every member picks the same writes (0 and 1: all).
	Every uint64
	// MinNs: a member exports its spans of an entry only when its own
	// part of it lasted at least this long (0: always): the write's
	// total on the member that ran it, Send to quorum on the leader,
	// receive to answer on a follower. No member knows the others'.
	MinNs int64
}

// Sampled reports whether the entry at index is one of the 1 in Every.
func (s Sampling) Sampled(index uint64) bool {
	return s.Every <= 1 || index%s.Every == 0
}

// WriteSpans plans the spans of w, a write this member ran (its client
// call), in the trace of k: the root (PartWrite) and its parts laid end
// to end in commit.PartOrder from its start. nil when w has no entry
// index.
func WriteSpans(k Key, self commit.MemberID, w *commit.Write) []Span {
	if w.Index == 0 || w.EndNs < w.StartNs {
		return nil
	}
	out := []Span{{Part: PartWrite, StartNs: w.StartNs, EndNs: w.EndNs}}
	at := w.StartNs
	for _, p := range commit.PartOrder {
		ns, ok := w.PartsNs[p]
		if !ok || ns < 0 {
			continue
		}
		out = append(out, Span{Member: self, Part: PartWrite + "/" + p, ParentPart: PartWrite,
			StartNs: at, EndNs: at + uint64(ns), Laid: true})
		at += uint64(ns)
	}
	return out
}

// LeaderSpans plans the leader's spans of its record e: PartReplicate
// (under the write's root), its WAL append (and fdatasync) and one vote
// per follower ack. voters is the cluster's size (the quorum is
// voters/2+1); the replication ends at the later of the leader's Save
// and the (q-1)-th ack, or at the last time seen when fewer acks came.
func LeaderSpans(self commit.MemberID, e *commit.Entry, voters int) []Span {
	if e.Follower() || e.SaveStartNs == 0 || e.SaveEndNs < e.SaveStartNs {
		return nil
	}
	start := e.SaveStartNs
	if e.SendNs != 0 && e.SendNs < start {
		start = e.SendNs
	}
	acks := slices.Clone(e.Acks)
	slices.SortStableFunc(acks, func(a, b commit.EntryAck) int {
		switch {
		case a.AckNs < b.AckNs:
			return -1
		case a.AckNs > b.AckNs:
			return 1
		}
		return 0
	})
	q := max(voters, 1)/2 + 1
	end, decider := e.SaveEndNs, commit.MemberID(0)
	localDecides := true
	if q > 1 && len(acks) >= q-1 && acks[q-2].AckNs > end {
		end, decider, localDecides = acks[q-2].AckNs, acks[q-2].Member, false
	} else if len(acks) < q-1 {
		localDecides = false
		for _, a := range acks {
			end = max(end, a.AckNs)
		}
	}
	out := []Span{
		{Member: self, Part: PartReplicate, ParentPart: PartWrite, StartNs: start, EndNs: end},
		{Member: self, Part: PartWALAppend, ParentMember: self, ParentPart: PartReplicate, StartNs: e.SaveStartNs, EndNs: e.SaveEndNs,
			Deciding: localDecides, Batch: batch(e)},
	}
	if e.SyncEndNs > e.SyncStartNs && e.SyncStartNs >= e.SaveStartNs {
		out = append(out, Span{Member: self, Part: PartFdatasync, ParentMember: self, ParentPart: PartWALAppend, StartNs: e.SyncStartNs, EndNs: e.SyncEndNs})
	}
	if e.SendNs == 0 {
		return out
	}
	for _, a := range acks {
		if a.AckNs < e.SendNs {
			continue
		}
		out = append(out, Span{Member: self, Part: VotePart(a.Member), ParentMember: self, ParentPart: PartReplicate,
			StartNs: e.SendNs, EndNs: a.AckNs, Peer: a.Member, Deciding: a.Member == decider && decider != 0})
	}
	return out
}

// FollowerSpans plans a follower's spans of its record e: PartEntry
// (receive to answer, under the leader's vote span for this member) and
// its parts; nil unless e was received, saved and answered in order.
func FollowerSpans(self commit.MemberID, e *commit.Entry) []Span {
	if _, ok := e.Split(); !ok {
		return nil
	}
	out := []Span{
		{Member: self, Part: PartEntry, ParentMember: e.From, ParentPart: VotePart(self), StartNs: e.RecvNs, EndNs: e.RespondNs, Peer: e.From},
		{Member: self, Part: PartQueue, ParentMember: self, ParentPart: PartEntry, StartNs: e.RecvNs, EndNs: e.SaveStartNs},
		{Member: self, Part: PartWALAppend, ParentMember: self, ParentPart: PartEntry, StartNs: e.SaveStartNs, EndNs: e.SaveEndNs, Batch: batch(e)},
	}
	if e.SyncEndNs > e.SyncStartNs && e.SyncStartNs >= e.SaveStartNs {
		out = append(out, Span{Member: self, Part: PartFdatasync, ParentMember: self, ParentPart: PartWALAppend, StartNs: e.SyncStartNs, EndNs: e.SyncEndNs})
	}
	return append(out, Span{Member: self, Part: PartRespond, ParentMember: self, ParentPart: PartEntry, StartNs: e.SaveEndNs, EndNs: e.RespondNs})
}

func batch(e *commit.Entry) int {
	if e.SaveLast < e.SaveFirst || e.SaveFirst == 0 {
		return 0
	}
	return int(e.SaveLast - e.SaveFirst + 1)
}

// newestNs is the latest time in e (its member's clock).
func newestNs(e *commit.Entry) uint64 {
	t := max(e.SendNs, e.SaveEndNs, e.SyncEndNs, e.RecvNs, e.RespondNs)
	for _, a := range e.Acks {
		t = max(t, a.AckNs)
	}
	return t
}

// settled reports whether e is complete, or its newest time is at least
// waitNs before nowNs: a leader's record with every follower's ack
// (voters-1), a follower's received, saved and answered.
func settled(e *commit.Entry, voters int, nowNs, waitNs uint64) bool {
	if e.Follower() {
		if _, ok := e.Split(); ok {
			return true
		}
	} else if e.SaveEndNs != 0 && voters > 0 && len(e.Acks) >= voters-1 {
		return true
	}
	return nowNs >= newestNs(e)+waitNs
}
