package commit

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestVerdicts: the verdicts of a report are typed: which part the writes
// waited on, which vote decided, the numbers the sinks word (render's
// TestCommitVerdicts checks the words).
func TestVerdicts(t *testing.T) {
	mk := func(role Role, parts map[string]int64, decider uint64, known bool, acks ...Ack) Write {
		var total int64
		for _, v := range parts {
			total += v
		}
		return Write{Role: role, StartNs: 1, EndNs: 1 + uint64(total), PartsNs: parts, WALSyncNs: parts[PartWALAppend] * 9 / 10,
			BatchEntries: 1, Decider: decider, DeciderKnown: known, Acks: acks}
	}
	// One write the leader's WAL decided: no runner, not separated.
	localOnce := DeciderLead{Member: MemberID(LocalVote), Decided: 1, DecidedCI: ClopperPearson(1, 1)}
	tests := []struct {
		name   string
		write  Write
		causes []*SyncCause
		cs     ClusterState
		want   []Verdict
	}{
		{"local disk", mk(RoleLeader, map[string]int64{PartPropose: 1e4, PartWALAppend: 11e6, PartApply: 2e5, PartReturn: 3e4}, LocalVote, true), nil,
			ClusterState{Voters: 1}, []Verdict{
				{Few: true, Kind: VerdictWAL, Part: PartWALAppend, SharePct: 100 * 11e6 / (1e4 + 11e6 + 2e5 + 3e4), Writes: 1, WAL: WALWait{P50Ns: 11e6, TotalP50Ns: 11_240_000, SyncP50Ns: 9_900_000}},
				{Kind: VerdictDecider, Member: LocalVote, Count: 1, Writes: 1, Decider: localOnce}}},
		{"the CPU, by the fsync tracer's split", mk(RoleLeader, map[string]int64{PartWALAppend: 9e6, PartApply: 1e6}, LocalVote, true),
			[]*SyncCause{{Ns: map[Cause]int64{CauseCPUWait: 8e6, CauseDeviceFlush: 1e6}}},
			ClusterState{Voters: 1}, []Verdict{
				{Few: true, Kind: VerdictWAL, Part: PartWALAppend, SharePct: 90, Writes: 1, WAL: WALWait{P50Ns: 9e6, TotalP50Ns: 10e6, SyncP50Ns: 8_100_000, Cause: CauseCPUWait, CauseKnown: true,
					// One write: its gap's interval is a point (Few says so).
					Lead: CauseLead{Cause: CauseCPUWait, Pct: 100 * 8.0 / 9, Runner: CauseDeviceFlush, RunnerPct: 100 * 1.0 / 9, HasRunner: true,
						Gap: Gap{GapCI: Interval{100 * 7.0 / 9, 100 * 7.0 / 9}, Longer: 1, Compared: 1, LongerCI: ClopperPearson(1, 1)}, Separated: true}},
					WALCause: CauseTotals{Joined: 1, Ns: map[Cause]int64{CauseCPUWait: 8e6, CauseDeviceFlush: 1e6}}},
				{Kind: VerdictDecider, Member: LocalVote, Count: 1, Writes: 1, Decider: localOnce}}},
		{"far follower decides because the near one is down", mk(RoleLeader, map[string]int64{PartPropose: 1e4, PartWALAppend: 1e6, PartQuorumWait: 50e6, PartApply: 2e5}, f2, true, Ack{f2, 52_500_000}), nil,
			ClusterState{Voters: 3, Down: []uint64{f1}}, []Verdict{
				{Few: true, Kind: VerdictQuorum, Part: PartQuorumWait, SharePct: 100 * 50e6 / (1e4 + 1e6 + 50e6 + 2e5), Writes: 1, Count: 1, Member: f2, AckP50Ns: 52_500_000, Down: []uint64{f1}}}},
		{"quorum, no ack timed", mk(RoleLeader, map[string]int64{PartWALAppend: 1e6, PartQuorumWait: 9e6}, f2, true), nil,
			ClusterState{Voters: 3}, []Verdict{{Few: true, Kind: VerdictQuorum, Part: PartQuorumWait, SharePct: 90, Writes: 1, Count: 1, Member: f2, AckP50Ns: -1}}},
		// A far leader (scenario run of 2026-12-02): forward and the
		// follower's quorum_wait are each about one RTT, and quorum_wait
		// was the larger; the verdict named "the quorum" with "the
		// deciding vote is local WAL in 0 of 40 writes", which a follower
		// never sees. Both are the round trip to the leader.
		{"follower of a far leader, quorum_wait the larger", mk(RoleFollower, map[string]int64{PartForward: 40e6, PartWALAppend: 2e6, PartQuorumWait: 48e6, PartApply: 3e6, PartReturn: 1e6}, 0, false), nil,
			ClusterState{Voters: 3}, []Verdict{{Few: true, Kind: VerdictForward, Part: PartForward, SharePct: 100 * 88e6 / 94e6, Writes: 1,
				Forward: ForwardWait{Follower: true, ForwardP50Ns: 40e6, QuorumWaitP50Ns: 48e6, ForwardPct: 100 * 40e6 / 94e6, QuorumWaitPct: 100 * 48e6 / 94e6}}}},
		{"forward, not a follower", mk("", map[string]int64{PartForward: 40e6, PartWALAppend: 2e6}, 0, false), nil,
			ClusterState{Voters: 3}, []Verdict{{Few: true, Kind: VerdictForward, Part: PartForward, SharePct: 100 * 40e6 / 42e6, Writes: 1,
				Forward: ForwardWait{ForwardP50Ns: 40e6, QuorumWaitP50Ns: -1, ForwardPct: 100 * 40e6 / 42e6}}}},
		{"apply, the fdatasyncs starved", mk(RoleLeader, map[string]int64{PartWALAppend: 1e6, PartApply: 9e6}, LocalVote, true),
			[]*SyncCause{{Ns: map[Cause]int64{CauseCPUWait: 9e5, CauseDeviceFlush: 1e5}}},
			ClusterState{Voters: 1}, []Verdict{
				{Few: true, Kind: VerdictApply, Part: PartApply, SharePct: 90, Writes: 1},
				{Kind: VerdictCPUWait, Writes: 1, WALCause: CauseTotals{Joined: 1, Ns: map[Cause]int64{CauseCPUWait: 9e5, CauseDeviceFlush: 1e5}}},
				{Kind: VerdictDecider, Member: LocalVote, Count: 1, Writes: 1, Decider: localOnce}}},
		{"propose", mk(RoleLeader, map[string]int64{PartWALAppend: 1e6, PartPropose: 9e6}, LocalVote, true), nil,
			ClusterState{Voters: 1}, []Verdict{{Few: true, Kind: VerdictScheduling, Part: PartPropose, SharePct: 90, Writes: 1}, {Kind: VerdictDecider, Member: LocalVote, Count: 1, Writes: 1, Decider: localOnce}}},
		{"grpc", mk(RoleLeader, map[string]int64{PartWALAppend: 1e6, PartGRPC: 9e6}, LocalVote, true), nil,
			ClusterState{Voters: 1}, []Verdict{{Few: true, Kind: VerdictGRPC, Part: PartGRPC, SharePct: 90, Writes: 1}, {Kind: VerdictDecider, Member: LocalVote, Count: 1, Writes: 1, Decider: localOnce}}},
	}
	// From FewWrites writes on, the same report's verdict carries no
	// caveat; one fewer, it does.
	for _, n := range []int{FewWrites - 1, FewWrites} {
		r := NewReport()
		for range n {
			w := mk(RoleLeader, map[string]int64{PartWALAppend: 9e6, PartApply: 1e6}, LocalVote, true)
			r.Add(&w)
		}
		if v := r.Verdicts(ClusterState{Voters: 1})[0]; v.Kind != VerdictWAL || v.Few != (n < FewWrites) {
			t.Errorf("%d writes: %+v, want a WAL verdict with Few %v", n, v, n < FewWrites)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReport()
			r.Add(&tc.write)
			r.AddCauses(tc.causes)
			got := r.Verdicts(tc.cs)
			for i := range got {
				// One write's lead is a point: TestPartLead weighs it.
				got[i].Lead = PartLead{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("verdicts\n got %+v\nwant %+v", got, tc.want)
			}
			if tc.write.Role == RoleFollower && slices.ContainsFunc(got, func(v Verdict) bool { return v.Kind == VerdictQuorum || v.Kind == VerdictDecider }) {
				t.Errorf("a follower's verdicts name a deciding vote: %+v", got)
			}
		})
	}
	r := NewReport()
	b, inc := mk(RoleLeader, map[string]int64{PartWALAppend: 1e6}, LocalVote, true), mk(RoleLeader, map[string]int64{PartWALAppend: 1e6}, LocalVote, true)
	b.BatchEntries, inc.Missing = 2, []Missing{MissingApply}
	r.Add(&b)
	r.Add(&inc)
	v := r.Verdicts(ClusterState{Voters: 1})
	if n := len(v); n != 4 || !reflect.DeepEqual(v[2], Verdict{Kind: VerdictBatched, Count: 1, Writes: 2}) || !reflect.DeepEqual(v[3], Verdict{Kind: VerdictIncomplete, Count: 1, Writes: 2}) {
		t.Errorf("batched and incomplete: %+v", v)
	}
	if v := NewReport().Verdicts(ClusterState{}); !reflect.DeepEqual(v, []Verdict{{Kind: VerdictNoWrites}}) {
		t.Errorf("empty report: %+v", v)
	}
}

// TestPartLead: the user's follower run of 2026-12-07: wal_append 44.5%
// against forward + quorum_wait 43.6%, the writes split both ways. The
// verdict named the WAL append alone; the gap between the two shares is
// now weighed by the run's own writes (weighGap, as CauseTotals.Lead), and
// the same means with the writes each far apart set the WAL append apart.
func TestPartLead(t *testing.T) {
	mk := func(wal, fwd, quorum int64) Write {
		parts := map[string]int64{PartGRPC: 50e3, PartForward: fwd, PartWALAppend: wal, PartQuorumWait: quorum, PartApply: 80e3, PartReturn: 20e3}
		return Write{Role: RoleFollower, StartNs: 1, EndNs: 1 + uint64(wal+fwd+quorum+150e3), PartsNs: parts, BatchEntries: 1}
	}
	close, apart := NewReport(), NewReport()
	for i := range 200 {
		// close: half the writes slow on the disk, half on the leader's
		// round trip; apart: every write alike, the WAL a little longer.
		if i%2 == 0 {
			close.Add(ptr(mk(1_500_000, 250e3, 250e3)))
		} else {
			close.Add(ptr(mk(280e3, 700e3, 570e3)))
		}
		apart.Add(ptr(mk(890e3, 475e3, 410e3)))
	}
	for _, tc := range []struct {
		name      string
		r         *Report
		separated bool
	}{{"close", close, false}, {"apart", apart, true}} {
		v := tc.r.Verdicts(ClusterState{Voters: 3})[0]
		l := v.Lead
		if v.Kind != VerdictWAL || !l.HasRunner || l.Runner != PartForward || !l.Follower || l.Separated != tc.separated {
			t.Errorf("%s: %+v, want the WAL append against forward + quorum_wait, separated %v", tc.name, v, tc.separated)
		}
		// The shares are the table's column: the part means over their sum.
		if math.Abs(v.SharePct-100*890/1925.0) > 1e-6 || math.Abs(l.RunnerPct-100*885/1925.0) > 1e-6 {
			t.Errorf("%s: shares %.3f%% and %.3f%%, want %.3f%% and %.3f%%", tc.name, v.SharePct, l.RunnerPct, 100*890/1925.0, 100*885/1925.0)
		}
		if l.GapCI.Excludes(0) != tc.separated || l.Compared != 200 {
			t.Errorf("%s: gap %+v over %d writes, want 0 inside it %v", tc.name, l.GapCI, l.Compared, !tc.separated)
		}
	}
	if l := close.Verdicts(ClusterState{Voters: 3})[0].Lead; l.Longer != 100 || l.LongerCI != ClopperPearson(100, 200) {
		t.Errorf("close: the WAL append longer in %d writes, CI %+v; want 100", l.Longer, l.LongerCI)
	}
	if n := len(PartOrder); n != len(partRow{}) {
		t.Errorf("partRow holds %d parts, PartOrder has %d", len(partRow{}), n)
	}
}

// ptr returns a pointer to a copy of w.
func ptr(w Write) *Write { return &w }

func TestModel(t *testing.T) {
	m := func(ms float64) Measure { return Measure{Ns: int64(ms * 1e6), Source: "test"} }
	tests := []struct {
		name        string
		in          ModelInput
		wantMs      float64
		wantDecider uint64
		known       bool
	}{
		{"one member", ModelInput{Voters: 1, LocalIsLeader: true, LeaderWAL: m(2), Apply: m(0.5)}, 2.5, LocalVote, true},
		{"healthy three: the near follower decides", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(2), Apply: m(0.5),
			Followers: []ModelFollower{{ID: f1, RTT: m(1), Fsync: m(2)}, {ID: f2, RTT: m(50), Fsync: m(2)}}}, 3.5, f1, true},
		{"leader's disk slower than the near follower", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(9), Apply: m(0.5),
			Followers: []ModelFollower{{ID: f1, RTT: m(1), Fsync: m(2)}, {ID: f2, RTT: m(50), Fsync: m(2)}}}, 9.5, LocalVote, true},
		{"near follower down: the far one decides", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(2), Apply: m(0.5),
			Followers: []ModelFollower{{ID: f1, RTT: m(1), Fsync: m(2), Down: true}, {ID: f2, RTT: m(50), Fsync: m(2.1)}}}, 52.6, f2, true},
		{"five members: the second follower decides, plus forwarding", ModelInput{Voters: 5, LeaderWAL: m(1), Apply: m(0.5), ForwardRTT: m(10),
			Followers: []ModelFollower{{ID: 1, RTT: m(1), Fsync: m(1)}, {ID: 2, RTT: m(3), Fsync: m(1)}, {ID: 3, RTT: m(30), Fsync: m(1)}, {ID: 4, RTT: m(40), Fsync: m(1)}}}, 14.5, 2, true},
		// etcd v3.4 has no etcd_server_apply_duration_seconds: no apply
		// part, not a 0 ms one.
		{"apply unknown (etcd v3.4)", ModelInput{Voters: 1, LocalIsLeader: true, LeaderWAL: m(2)}, 2, LocalVote, true},
		{"no quorum", ModelInput{Voters: 3, LocalIsLeader: true, LeaderWAL: m(2), Followers: []ModelFollower{{ID: f1, Down: true}, {ID: f2, Down: true}}}, 2, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Model(tc.in)
			if got := float64(r.ExpectedNs) / 1e6; got < tc.wantMs-1e-6 || got > tc.wantMs+1e-6 {
				t.Errorf("expected %.3f ms, want %.3f", got, tc.wantMs)
			}
			if r.DeciderKnown != tc.known || r.Decider != tc.wantDecider {
				t.Errorf("decider %x known %v, want %x %v", r.Decider, r.DeciderKnown, tc.wantDecider, tc.known)
			}
			var sum int64
			for _, p := range r.Parts {
				sum += p.Ns
			}
			if _, ok := r.Parts[PartApply]; ok != (tc.in.Apply.Source != "") {
				t.Errorf("apply part %v with apply %+v", r.Parts[PartApply], tc.in.Apply)
			}
			if tc.known && sum != r.ExpectedNs {
				t.Errorf("parts sum %d, expected %d", sum, r.ExpectedNs)
			}
		})
	}
}

// TestModelDeciderJSON: the model's decider is written as every record
// writes a vote ("local_wal" or the member id in hex; it was the number 0
// for the local WAL), and read back from that and from an older number.
func TestModelDeciderJSON(t *testing.T) {
	for _, c := range []struct {
		m    ModelResult
		want string
	}{
		{ModelResult{Decider: LocalVote, DeciderKnown: true}, `"decider":"local_wal"`},
		{ModelResult{Decider: 0x2222, DeciderKnown: true}, `"decider":"2222"`},
		{ModelResult{}, `"decider":""`},
	} {
		b, err := json.Marshal(c.m)
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("%+v: %s (%v), want %s", c.m, b, err, c.want)
		}
		var back ModelResult
		if err := json.Unmarshal(b, &back); err != nil || back.Decider != c.m.Decider || back.DeciderKnown != c.m.DeciderKnown {
			t.Errorf("%s read back as %+v (%v)", b, back, err)
		}
	}
	var old ModelResult
	if err := json.Unmarshal([]byte(`{"expected_ns":1,"decider":8738,"decider_known":true}`), &old); err != nil || old.Decider != 0x2222 {
		t.Errorf("an older summary's number: %+v (%v)", old, err)
	}
}

// TestAddCausesFdatasync: the report keeps the joined fdatasync calls'
// own time beside the (*WAL).sync's, which also holds the encoder's
// write(2); a write not joined adds to neither.
func TestAddCausesFdatasync(t *testing.T) {
	r := NewReport()
	w := Write{Role: RoleLeader, PartsNs: map[string]int64{PartWALAppend: 900e3}, WALSyncNs: 744e3}
	r.Add(&w)
	r.Add(&w)
	r.AddCauses([]*SyncCause{{CallNs: 673e3, WritesNs: 50e3, Ns: map[Cause]int64{CauseDeviceFlush: 744e3}}, nil})
	if s, f := r.WALSync.Summary(), r.WALFdatasync.Summary(); s.Count != 2 || f.Count != 1 || f.Sum != 673e3 {
		t.Errorf("WAL sync %+v, fdatasync %+v: want 2 syncs and 1 fdatasync of 673 µs", s, f)
	}
}
