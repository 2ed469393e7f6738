package otlp

import (
	"testing"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// TestIDsDeterministic: the IDs depend on every element of the key and
// on nothing else.
func TestIDsDeterministic(t *testing.T) {
	k := Key{Cluster: 0xc1, Term: 2, Index: 10}
	if TraceID(k) != TraceID(k) || SpanID(k, 3, PartEntry) != SpanID(k, 3, PartEntry) {
		t.Fatal("IDs differ for one key")
	}
	seen := map[string]string{TraceID(k).String(): "base"}
	for name, o := range map[string]Key{"cluster": {0xc2, 2, 10}, "term": {0xc1, 3, 10}, "index": {0xc1, 2, 11}} {
		if prev, ok := seen[TraceID(o).String()]; ok {
			t.Errorf("trace ID of %s equals %s's", name, prev)
		}
		seen[TraceID(o).String()] = name
	}
	spans := map[string]bool{}
	for _, m := range []commit.MemberID{0, 1, 2, 3} {
		for _, p := range []string{PartWrite, PartReplicate, PartWALAppend, PartEntry, VotePart(2), VotePart(3)} {
			id := SpanID(k, m, p).String()
			if spans[id] {
				t.Errorf("span ID %s repeats (member %d, part %s)", id, m, p)
			}
			spans[id] = true
		}
	}
}

func TestSampling(t *testing.T) {
	for _, c := range []struct {
		every, index uint64
		want         bool
	}{{0, 7, true}, {1, 7, true}, {4, 8, true}, {4, 9, false}, {4, 12, true}} {
		if got := (Sampling{Every: c.every}).Sampled(c.index); got != c.want {
			t.Errorf("every %d, index %d: %v, want %v", c.every, c.index, got, c.want)
		}
	}
}

// TestLeaderSpans: the replication ends at the later of the leader's
// Save and the (q-1)-th ack, and that ack's vote is marked deciding.
func TestLeaderSpans(t *testing.T) {
	e := &commit.Entry{Term: 2, Index: 10, SaveFirst: 10, SaveLast: 11, SendNs: 1000, SaveStartNs: 1100, SaveEndNs: 1500,
		SyncStartNs: 1200, SyncEndNs: 1450, Acks: []commit.EntryAck{{Member: 3, AckNs: 2500}, {Member: 2, AckNs: 1900}}}
	spans := LeaderSpans(1, e, 3)
	byPart := map[string]Span{}
	for _, s := range spans {
		byPart[s.Part] = s
	}
	rep := byPart[PartReplicate]
	if rep.StartNs != 1000 || rep.EndNs != 1900 || rep.ParentPart != PartWrite {
		t.Errorf("replicate %+v: want [1000, 1900] under the write", rep)
	}
	if v := byPart[VotePart(2)]; v.DurationNs() != 900 || !v.Deciding || v.ParentPart != PartReplicate || v.Peer != 2 {
		t.Errorf("vote of 2 %+v: want 900 ns, deciding", v)
	}
	if v := byPart[VotePart(3)]; v.DurationNs() != 1500 || v.Deciding {
		t.Errorf("vote of 3 %+v: want 1500 ns, not deciding", v)
	}
	if w := byPart[PartWALAppend]; w.DurationNs() != 400 || w.Deciding || w.Batch != 2 {
		t.Errorf("wal %+v: want 400 ns of a batch of 2, not deciding", w)
	}
	if f := byPart[PartFdatasync]; f.DurationNs() != 250 || f.ParentPart != PartWALAppend {
		t.Errorf("fdatasync %+v", f)
	}
	// The local WAL decides when it ends after the quorum's ack.
	e.SaveEndNs = 3000
	if s := LeaderSpans(1, e, 3); s[0].EndNs != 3000 || !s[1].Deciding {
		t.Errorf("local decider: %+v", s[:2])
	}
	// No quorum seen: the last time seen ends it, nothing decides.
	e.SaveEndNs, e.Acks = 1500, nil
	if s := LeaderSpans(1, e, 3); len(s) != 3 || s[0].EndNs != 1500 || s[1].Deciding {
		t.Errorf("no acks: %+v", s)
	}
	if LeaderSpans(1, &commit.Entry{Index: 3, RecvNs: 5}, 3) != nil {
		t.Error("a follower's record made leader spans")
	}
}

// TestFollowerSpans: the entry hangs under the leader's vote for this
// member, and its parts sum to it.
func TestFollowerSpans(t *testing.T) {
	e := &commit.Entry{Term: 2, Index: 10, From: 1, RecvNs: 100, SaveStartNs: 130, SaveEndNs: 600, SyncStartNs: 200, SyncEndNs: 580, RespondNs: 650}
	spans := FollowerSpans(2, e)
	if len(spans) != 5 || spans[0].Part != PartEntry || spans[0].ParentMember != 1 || spans[0].ParentPart != VotePart(2) || spans[0].DurationNs() != 550 {
		t.Fatalf("spans %+v", spans)
	}
	var sum int64
	for _, s := range spans[1:] {
		if s.Part != PartFdatasync {
			sum += s.DurationNs()
		}
	}
	if sum != 550 {
		t.Errorf("parts sum to %d ns, want 550", sum)
	}
	e.RespondNs = 0
	if FollowerSpans(2, e) != nil {
		t.Error("spans of an entry not answered")
	}
}

// TestWriteSpans: the write's parts are laid end to end from its start.
func TestWriteSpans(t *testing.T) {
	w := &commit.Write{Index: 10, StartNs: 1000, EndNs: 1600, PartsNs: map[string]int64{
		commit.PartGRPC: 100, commit.PartPropose: 50, commit.PartWALAppend: 300, commit.PartApply: 150}}
	spans := WriteSpans(Key{1, 2, 10}, 1, w)
	if len(spans) != 5 || spans[0].Part != PartWrite || spans[0].ParentPart != "" {
		t.Fatalf("spans %+v", spans)
	}
	want := []string{commit.PartGRPC, commit.PartPropose, commit.PartWALAppend, commit.PartApply}
	at := uint64(1000)
	for i, s := range spans[1:] {
		if s.Part != PartWrite+"/"+want[i] || s.StartNs != at || s.DurationNs() != w.PartsNs[want[i]] || !s.Laid {
			t.Errorf("part %d: %+v", i, s)
		}
		at = s.EndNs
	}
	if at != 1600 {
		t.Errorf("parts end at %d, want the write's end 1600", at)
	}
}
