package commit

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// Goroutines of a synthetic etcd: a gRPC handler per write, the Raft
// loop, the apply scheduler, a peer reader.
const (
	gRaft  = 0xa0
	gApply = 0xb0
	gPeer  = 0xc0
	f1     = 0x1111
	f2     = 0x2222
)

func ev(ts uint64, k event.CommitKind, g uint64, a, b uint64) event.Commit {
	return event.Commit{Kind: k, TsNs: ts * 1000, Goroutine: g, A: a, B: b}
}

// leaderWrite is one write (id, index) on a leader: proposed at t0 µs,
// saved [save, saveEnd] with sync inside, acks at the given µs, applied
// at apply..trigger, returning at end.
func leaderWrite(g, id, idx, t0, save, saveEnd, apply, trigger, end uint64, acks map[uint64]uint64) []event.Commit {
	evs := []event.Commit{
		ev(t0, event.CommitProposeEnter, g, 0, 0),
		ev(t0+1, event.CommitRegister, g, id, 0),
		ev(save-1, event.CommitSend, gRaft, 2, 0),
		ev(save, event.CommitSaveEnter, gRaft, idx, idx),
		ev(save+1, event.CommitSyncEnter, gRaft, 0, 0),
		ev(saveEnd-1, event.CommitSyncRet, gRaft, 0, 0),
		ev(saveEnd, event.CommitSaveRet, gRaft, 0, 0),
		ev(apply, event.CommitApplyAll, gApply, 0, 0),
		ev(apply+1, event.CommitApplyEntry, gApply, idx, 0),
		ev(trigger, event.CommitTrigger, gApply, id, 0),
		ev(end, event.CommitProposeRet, g, 0, 0),
	}
	for m, ts := range acks {
		evs = append(evs, ev(ts, event.CommitAppResp, gPeer, m, idx))
	}
	slices.SortStableFunc(evs, func(a, b event.Commit) int { return int(int64(a.TsNs) - int64(b.TsNs)) })
	return evs
}

// run assembles the probes' firings evs (Assembler) and joins them;
// dropped is the writes both forgot.
func run(cfg Config, evs []event.Commit) (ws []Write, dropped int) {
	a, j := NewAssembler(), NewJoiner(cfg)
	var out []Write
	for i := range evs {
		out = feed(a, j, &evs[i], out)
	}
	return j.Flush(out), a.Dropped + j.Dropped
}

// feed passes one firing through a and its records through j.
func feed(a *Assembler, j *Joiner, ev *event.Commit, out []Write) []Write {
	for _, r := range a.Add(ev, nil) {
		out = j.Add(&r, out)
	}
	return out
}

func TestJoinLeader(t *testing.T) {
	tests := []struct {
		name        string
		voters      int
		acks        map[uint64]uint64
		wantParts   map[string]int64 // µs
		wantDecider uint64
		wantAcks    int
	}{
		{
			name: "one member: the local WAL decides", voters: 1,
			wantParts: map[string]int64{PartPropose: 10, PartWALAppend: 500, PartQuorumWait: 0, PartCommitToApply: 40, PartApply: 100, PartReturn: 50},
		},
		{
			name: "three members: a follower acks after the local WAL", voters: 3,
			acks:        map[uint64]uint64{f1: 900, f2: 1300},
			wantParts:   map[string]int64{PartPropose: 10, PartWALAppend: 500, PartQuorumWait: 390, PartCommitToApply: 0, PartApply: 100, PartReturn: 50},
			wantDecider: f1, wantAcks: 1, // f2's ack comes after the write returned
		},
		{
			// Acks of one time in map order decided by the map's order.
			name: "three members: both followers ack at once after the local WAL, the lower id decides", voters: 3,
			acks:        map[uint64]uint64{f2: 900, f1: 900},
			wantParts:   map[string]int64{PartPropose: 10, PartWALAppend: 500, PartQuorumWait: 390, PartCommitToApply: 0, PartApply: 100, PartReturn: 50},
			wantDecider: f1, wantAcks: 2,
		},
		{
			name: "three members: both followers before the local WAL, the WAL decides", voters: 3,
			acks:        map[uint64]uint64{f1: 200, f2: 300},
			wantParts:   map[string]int64{PartPropose: 10, PartWALAppend: 500, PartQuorumWait: 0, PartCommitToApply: 40, PartApply: 100, PartReturn: 50},
			wantDecider: LocalVote, wantAcks: 2,
		},
		{
			name: "three members, one down: the other follower decides", voters: 3,
			acks:        map[uint64]uint64{f2: 540},
			wantParts:   map[string]int64{PartPropose: 10, PartWALAppend: 500, PartQuorumWait: 30, PartCommitToApply: 10, PartApply: 100, PartReturn: 50},
			wantDecider: f2, wantAcks: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			apply := uint64(550)
			if tc.wantParts[PartQuorumWait] == 390 {
				apply = 900
			}
			evs := leaderWrite(0x10, 77, 5, 0, 10, 510, apply, apply+100, apply+150, tc.acks)
			ws, _ := run(Config{Role: RoleLeader, Voters: tc.voters}, evs)
			if len(ws) != 1 {
				t.Fatalf("got %d writes, want 1", len(ws))
			}
			w := ws[0]
			if w.ID != 77 || w.Index != 5 || len(w.Missing) != 0 {
				t.Fatalf("write %+v", w)
			}
			var sum int64
			for p, v := range w.PartsNs {
				sum += v
				if want, ok := tc.wantParts[p]; !ok || v != want*1000 {
					t.Errorf("%s = %d ns, want %d µs", p, v, want)
				}
			}
			if sum != w.TotalNs() {
				t.Errorf("parts sum to %d, total %d", sum, w.TotalNs())
			}
			if !w.DeciderKnown || w.Decider != tc.wantDecider {
				t.Errorf("decider %x (known %v), want %x", w.Decider, w.DeciderKnown, tc.wantDecider)
			}
			if len(w.Acks) != tc.wantAcks {
				t.Errorf("acks %v, want %d", w.Acks, tc.wantAcks)
			}
			if w.WALSyncNs != 498_000 {
				t.Errorf("WAL sync %d ns, want 498 µs", w.WALSyncNs)
			}
		})
	}
}

func TestJoinFollower(t *testing.T) {
	evs := []event.Commit{
		ev(0, event.CommitProposeEnter, 0x10, 0, 0),
		ev(1, event.CommitRegister, 0x10, 9, 0),
		ev(400, event.CommitSaveEnter, gRaft, 3, 3),
		ev(401, event.CommitSyncEnter, gRaft, 0, 0),
		ev(700, event.CommitSyncRet, gRaft, 0, 0),
		ev(701, event.CommitSaveRet, gRaft, 0, 0),
		ev(702, event.CommitSend, gRaft, 1, 0),
		ev(1200, event.CommitApplyAll, gApply, 0, 0),
		ev(1201, event.CommitApplyEntry, gApply, 3, 0),
		ev(1300, event.CommitTrigger, gApply, 9, 0),
		ev(1350, event.CommitProposeRet, 0x10, 0, 0),
	}
	ws, _ := run(Config{Role: RoleFollower, Voters: 3}, evs)
	if len(ws) != 1 {
		t.Fatalf("got %d writes", len(ws))
	}
	want := map[string]int64{PartForward: 400_000, PartWALAppend: 301_000, PartQuorumWait: 499_000, PartApply: 100_000, PartReturn: 50_000}
	if len(ws[0].PartsNs) != len(want) {
		t.Fatalf("parts %v, want %v", ws[0].PartsNs, want)
	}
	for p, v := range want {
		if ws[0].PartsNs[p] != v {
			t.Errorf("%s = %d, want %d", p, ws[0].PartsNs[p], v)
		}
	}
	if ws[0].DeciderKnown {
		t.Error("a follower cannot see the deciding vote")
	}
}

func TestJoinEdges(t *testing.T) {
	t.Run("two writes in one Save are a batch", func(t *testing.T) {
		evs := []event.Commit{
			ev(0, event.CommitProposeEnter, 0x10, 0, 0),
			ev(1, event.CommitRegister, 0x10, 1, 0),
			ev(2, event.CommitProposeEnter, 0x20, 0, 0),
			ev(3, event.CommitRegister, 0x20, 2, 0),
			ev(10, event.CommitSaveEnter, gRaft, 7, 8),
			ev(300, event.CommitSaveRet, gRaft, 0, 0),
			ev(310, event.CommitApplyAll, gApply, 0, 0),
			ev(311, event.CommitApplyEntry, gApply, 7, 0),
			ev(320, event.CommitTrigger, gApply, 1, 0),
			ev(321, event.CommitApplyEntry, gApply, 8, 0),
			ev(330, event.CommitTrigger, gApply, 2, 0),
			ev(340, event.CommitProposeRet, 0x10, 0, 0),
			ev(345, event.CommitProposeRet, 0x20, 0, 0),
		}
		ws, _ := run(Config{Role: RoleLeader, Voters: 1}, evs)
		if len(ws) != 2 || ws[0].BatchEntries != 2 || ws[1].BatchEntries != 2 || ws[1].Index != 8 {
			t.Fatalf("writes %+v", ws)
		}
		if ws[0].WALSyncNs != 0 {
			t.Errorf("a Save without sync has WALSyncNs %d, want 0", ws[0].WALSyncNs)
		}
	})
	t.Run("a forwarded write's apply here and a failed proposal are not writes", func(t *testing.T) {
		evs := []event.Commit{
			ev(0, event.CommitApplyAll, gApply, 0, 0),
			ev(1, event.CommitApplyEntry, gApply, 4, 0),
			ev(2, event.CommitTrigger, gApply, 555, 0), // proposed on another member
			ev(10, event.CommitProposeEnter, 0x10, 0, 0),
			ev(11, event.CommitRegister, 0x10, 6, 0),
			ev(20, event.CommitTrigger, 0x10, 6, 0), // the GC Trigger of a failed Propose
			ev(21, event.CommitProposeRet, 0x10, 0, 0),
			ev(30, event.CommitProposeEnter, 0x30, 0, 0), // rejected before Register
			ev(31, event.CommitProposeRet, 0x30, 0, 0),
		}
		ws, dropped := run(Config{Role: RoleLeader, Voters: 1}, evs)
		if len(ws) != 0 || dropped != 1 {
			t.Fatalf("writes %+v dropped %d, want none and 1", ws, dropped)
		}
	})
	t.Run("no Save for the index: missing, after the grace", func(t *testing.T) {
		evs := []event.Commit{
			ev(0, event.CommitProposeEnter, 0x10, 0, 0),
			ev(1, event.CommitRegister, 0x10, 6, 0),
			ev(50, event.CommitApplyAll, gApply, 0, 0),
			ev(51, event.CommitApplyEntry, gApply, 9, 0),
			ev(60, event.CommitTrigger, gApply, 6, 0),
			ev(70, event.CommitProposeRet, 0x10, 0, 0),
		}
		a, j := NewAssembler(), NewJoiner(Config{Role: RoleLeader, Voters: 1, GraceNs: 1e6})
		var out []Write
		for i := range evs {
			out = feed(a, j, &evs[i], out)
		}
		if len(out) != 0 {
			t.Fatal("resolved before the grace passed")
		}
		later := ev(5000, event.CommitAppResp, gPeer, f1, 0)
		out = feed(a, j, &later, out)
		if len(out) != 1 || len(out[0].Missing) == 0 || out[0].Missing[0] != MissingWAL {
			t.Fatalf("writes %+v", out)
		}
		if out[0].PartsNs[PartApply] != 10_000 || out[0].PartsNs[PartReturn] != 10_000 {
			t.Errorf("parts %v", out[0].PartsNs)
		}
	})
}

func TestRecordRoundTrip(t *testing.T) {
	ws, _ := run(Config{Role: RoleLeader, Voters: 3}, leaderWrite(0x10, 77, 5, 0, 10, 510, 900, 1000, 1050, map[uint64]uint64{f1: 900}))
	var b strings.Builder
	enc := json.NewEncoder(&b)
	rec := RecordOf(&ws[0], Names{f1: "m1"})
	if err := enc.Encode(rec); err != nil {
		t.Fatal(err)
	}
	r := NewReport()
	r.Add(&ws[0])
	if err := enc.Encode(r.Summary()); err != nil {
		t.Fatal(err)
	}
	recs, sum, err := ReadRecords(strings.NewReader(b.String()))
	if err != nil || len(recs) != 1 || sum == nil {
		t.Fatalf("read %v %v %v", recs, sum, err)
	}
	if got := recs[0]; got.Decider != "1111" || got.DeciderName != "m1" || got.TotalNs != 1_050_000 || got.PartsNs[PartQuorumWait] != 390_000 {
		t.Errorf("record %+v", got)
	}
	if sum.Deciders["1111"] != 1 || sum.Writes != 1 {
		t.Errorf("summary %+v", sum)
	}
	if _, _, err := ReadRecords(strings.NewReader(`{"type":"commit","v":3}`)); err == nil {
		t.Error("a newer schema version was accepted")
	}
}

func TestJoinRPC(t *testing.T) {
	evs := leaderWrite(0x10, 77, 5, 100, 110, 610, 650, 750, 800, nil)
	evs = append([]event.Commit{ev(20, event.CommitRPCEnter, 0x10, 0, 0), ev(30, event.CommitRPCEnter, 0x99, 0, 0)}, evs...)
	evs = append(evs, ev(830, event.CommitRPCRet, 0x99, 0, 0), ev(900, event.CommitRPCRet, 0x10, 0, 0))
	ws, _ := run(Config{Role: RoleLeader, Voters: 1}, evs)
	if len(ws) != 1 {
		t.Fatalf("got %d writes", len(ws))
	}
	w := ws[0]
	if w.StartNs != 20_000 || w.EndNs != 900_000 || w.PartsNs[PartGRPC] != 180_000 || w.PartsNs[PartReturn] != 50_000 {
		t.Fatalf("write %+v", w)
	}
	var sum int64
	for _, v := range w.PartsNs {
		sum += v
	}
	if sum != w.TotalNs() {
		t.Errorf("parts sum to %d, total %d", sum, w.TotalNs())
	}
}
