package commit

import (
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// clusterRun builds three members' EntryLogs from the records their
// commit tracers would send for entries 1..n (leader 1, followers 2 and
// 3; follower 3 is slow on entry 2, the leader's disk on entry 5, and
// 3's agent's window ends after entry 3), each on its own clock: the followers' clocks are offset from
// the leader's by arbitrary amounts, which the join must not need.
func clusterRun(n uint64) []EntryWindow {
	lead, f2, f3 := NewEntryLog(0), NewEntryLog(0), NewEntryLog(0)
	lead.SetMember(1)
	f2.SetMember(2)
	f3.SetMember(3)
	const off2, off3 = 7_000_000_000, 123_456_789 // the followers' clocks
	for i := uint64(1); i <= n; i++ {
		t := i * 10_000_000    // the leader's Send of entry i
		wal := uint64(300_000) // the leader's Save; slow on entry 5
		if i == 5 {
			wal = 2_000_000
		}
		lead.Add(&event.Commit{Kind: event.CommitSaveDone, TsNs: t + 100_000 + wal, Save: event.CommitSave{First: i, Last: i, Term: 2,
			SendNs: t, StartNs: t + 100_000, EndNs: t + 100_000 + wal, SyncStartNs: t + 150_000, SyncEndNs: t + 50_000 + wal}}, nil)
		for _, f := range []struct {
			log          *EntryLog
			id, off, wal uint64
		}{{f2, 2, off2, 500_000}, {f3, 3, off3, 300_000}} {
			if f.id == 3 && i == 2 {
				f.wal = 5_000_000
			}
			if f.id == 3 && i > 3 {
				// Its agent stopped; the leader still sees its acks.
				lead.Add(&event.Commit{Kind: event.CommitAppResp, TsNs: t + 150_000 + 50_000 + f.wal + 20_000 + 150_000, A: f.id, B: i}, nil)
				continue
			}
			recv := t + 150_000 + f.off // one way: 150 µs
			f.log.Add(&event.Commit{Kind: event.CommitMsgApp, TsNs: recv, Msg: event.CommitMsg{From: 1, Term: 2, First: i, Last: i}}, nil)
			f.log.Add(&event.Commit{Kind: event.CommitSaveDone, TsNs: recv + 50_000 + f.wal, Save: event.CommitSave{First: i, Last: i, Term: 2,
				StartNs: recv + 50_000, EndNs: recv + 50_000 + f.wal, SyncStartNs: recv + 60_000, SyncEndNs: recv + 40_000 + f.wal}}, nil)
			resp := recv + 50_000 + f.wal + 20_000
			f.log.Add(&event.Commit{Kind: event.CommitSaveSent, TsNs: resp, Msg: event.CommitMsg{Term: 2, First: i, Last: i}}, nil)
			lead.Add(&event.Commit{Kind: event.CommitAppResp, TsNs: resp - f.off + 150_000, A: f.id, B: i}, nil)
		}
	}
	var ws []EntryWindow
	for _, l := range []*EntryLog{f3, lead, f2} {
		ws = append(ws, l.Window(0, MaxEntries))
	}
	return ws
}

// TestJoinCluster: each write's deciding vote is the earliest quorum's
// last; a follower's vote (the leader's Send to its ack) splits exactly
// into the follower's own receive-to-answer and the network remainder
// (300 µs here: 150 µs each way), whatever the members' clocks; a write
// whose deciding follower has no record is counted, not dropped.
func TestJoinCluster(t *testing.T) {
	const n = 6
	j := JoinCluster(clusterRun(n))
	if j.Leader != 1 || j.Voters != 3 || len(j.Writes) != n {
		t.Fatalf("leader %v, voters %d, %d writes: want 1, 3, %d", j.Leader, j.Voters, len(j.Writes), n)
	}
	for _, w := range j.Writes {
		t.Logf("%+v", w)
		if !w.Joined() {
			continue
		}
		// Follower 3's WAL append takes 300 µs, 2's 500 µs: 3's ack
		// (670 µs after the Send) decides, after the leader's Save
		// (400 µs), except on entry 2, where 3 is slow and 2 decides,
		// and on entry 5, where the leader's Save (2.1 ms) is last.
		want := MemberID(3)
		switch w.Index {
		case 2:
			want = 2
		case 5:
			if !w.DeciderLocal {
				t.Errorf("entry 5: decider %v, want the leader's WAL", w.Decider)
			}
			continue
		}
		if w.DeciderLocal || w.Decider != want {
			t.Errorf("entry %d: decider %v (local %v), want %v", w.Index, w.Decider, w.DeciderLocal, want)
		}
		s := w.Follower
		if s == nil {
			t.Fatalf("entry %d joined to follower %v without its split", w.Index, w.Decider)
		}
		if s.QueueNs+s.WALNs+s.RespondNs != s.TotalNs || w.NetworkNs+s.TotalNs != w.VoteNs || w.NetworkNs != 300_000 {
			t.Errorf("entry %d: split %+v, network %d, vote %d: want parts summing to the total, network 300000 ns", w.Index, s, w.NetworkNs, w.VoteNs)
		}
	}
	if j.Joined != 4 || j.Deciders[3] != 2 || j.Deciders[2] != 1 || j.Deciders[MemberID(LocalVote)] != 1 || j.NotByWhy[NotJoinedNoFollowerRecord] != 2 {
		t.Errorf("joined %d, deciders %v, not joined %v: want 4 joined (3 twice, 2 once, the leader's WAL once), 2 (entries 4 and 6) without 3's record", j.Joined, j.Deciders, j.NotByWhy)
	}
}

// TestEntryLogWindow: the log keeps the last Max entries, and Since pages
// through them in order.
func TestEntryLogWindow(t *testing.T) {
	l := NewEntryLog(8)
	for i := uint64(1); i <= 40; i++ {
		l.Add(&event.Commit{Kind: event.CommitSaveDone, TsNs: i, Save: event.CommitSave{First: i, Last: i, Term: 1, StartNs: i, EndNs: i}}, nil)
	}
	es, more := l.Since(0, 100)
	if more || len(es) > 10 || es[len(es)-1].Index != 40 || es[0].Index < 31 {
		t.Errorf("%d records from %d to %d (more %v): want the last 8 to 10 up to 40", len(es), es[0].Index, es[len(es)-1].Index, more)
	}
	es, more = l.Since(35, 3)
	if !more || len(es) != 3 || es[0].Index != 36 {
		t.Errorf("since 35, limit 3: %d records from %d, more %v", len(es), es[0].Index, more)
	}
	// A new leader's entry of term 2 at index 40 replaces term 1's.
	l.Add(&event.Commit{Kind: event.CommitMsgApp, TsNs: 99, Msg: event.CommitMsg{From: 7, Term: 2, First: 40, Last: 40}}, nil)
	if e, ok := l.Get(40); !ok || e.Term != 2 || e.SaveStartNs != 0 || e.RecvNs != 99 || l.Replaced() != 1 {
		t.Errorf("index 40 after term 2's MsgApp: %+v, replaced %d", e, l.Replaced())
	}
}

// TestClusterVerdict: on the six-write run no vote is named: follower 3
// decided 2 writes, 2 and the leader's WAL one each, and 2 of the 3
// writes 3 and the leader's WAL decided is no evidence that 3 decides
// more often. Two
// writes by one follower only are too few as well; the same split over
// eight writes names its WAL append.
func TestClusterVerdict(t *testing.T) {
	j := JoinCluster(clusterRun(6))
	if v := j.Verdict(); v.Kind != ClusterVerdictNoSingleDecider || v.Member != 3 || v.Decided != 2 || v.Joined != 4 || !v.HasRunner ||
		v.Runner != MemberID(LocalVote) || v.RunnerDecided != 1 || !v.DecidedCI.Excludes(0) {
		t.Errorf("verdict %+v: want no single decider: 3 (2 writes) ahead of the leader's WAL (1; before 2 by its id)", v)
	}
	slow := func(n int) ClusterJoin {
		j := ClusterJoin{Joined: n, Deciders: map[MemberID]int{2: n}}
		for i := range n {
			j.Writes = append(j.Writes, ClusterWrite{Index: uint64(i + 1), Decider: 2, VoteNs: 9e6, NetworkNs: 1e6,
				Follower: &FollowerSplit{TotalNs: 8e6, QueueNs: 1e5, WALNs: 7.8e6, FdatasyncNs: 7.5e6, RespondNs: 1e5}})
		}
		return j
	}
	two := slow(2)
	if v := two.Verdict(); v.Kind != ClusterVerdictNoSingleDecider || v.Member != 2 || v.HasRunner || v.Decided != 2 {
		t.Errorf("2 writes: verdict %+v: want no single decider (too few), follower 2 alone", v)
	}
	eight := slow(8)
	if v := eight.Verdict(); v.Kind != ClusterVerdictFollowerWAL || v.Member != 2 || v.PartNs != 7.8e6 || v.FdatasyncNs != 7.5e6 || v.VoteNs != 9e6 {
		t.Errorf("8 writes: verdict %+v: want follower 2's WAL append, 7.8 of 9 ms", v)
	}
	if v := (&ClusterJoin{}).Verdict(); v.Kind != ClusterVerdictNone {
		t.Errorf("no writes: verdict %+v", v)
	}
}

// TestEntryLogSplitOnce: a follower entry's split is handed out once,
// when its last record is read, whichever that is (the MsgApp after the
// answer was seen once in a real run).
func TestEntryLogSplitOnce(t *testing.T) {
	msg := event.Commit{Kind: event.CommitMsgApp, TsNs: 100, Msg: event.CommitMsg{From: 1, Term: 2, First: 5, Last: 5}}
	save := event.Commit{Kind: event.CommitSaveDone, TsNs: 300, Save: event.CommitSave{First: 5, Last: 5, Term: 2, StartNs: 120, EndNs: 300}}
	sent := event.Commit{Kind: event.CommitSaveSent, TsNs: 320, Msg: event.CommitMsg{Term: 2, First: 5, Last: 5}}
	for _, order := range [][]*event.Commit{{&msg, &save, &sent}, {&save, &sent, &msg}, {&save, &msg, &sent}} {
		l := NewEntryLog(0)
		var got []FollowerSplit
		for _, ev := range order {
			got = l.Add(ev, got)
		}
		got = l.Add(&msg, got) // a retransmitted MsgApp
		if len(got) != 1 || got[0] != (FollowerSplit{TotalNs: 220, QueueNs: 20, WALNs: 180, RespondNs: 20}) {
			t.Errorf("order %v: splits %+v, want one of 220 ns", []event.CommitKind{order[0].Kind, order[1].Kind, order[2].Kind}, got)
		}
	}
}

// TestLeadDeciderBothCommands: `etcdscope commit` and `etcdscope cluster`
// weigh the deciding votes with one test (LeadDecider), so over the same
// writes they name the same vote or both. The walk of 2026-12-07: of 496
// writes m3 decided 183, m2 161, the leader's WAL 152; commit named m3,
// cluster named neither (ClopperPearson(183, 344) = 0.478-0.586 holds
// 1/2). 300 of 496 against 120 is separated (0.668-0.757).
func TestLeadDeciderBothCommands(t *testing.T) {
	const m2, m3 = 0x2222, 0x3333
	for _, c := range []struct {
		name      string
		deciders  map[uint64]int
		separated bool
	}{
		{"walk: 183/161/152 of 496", map[uint64]int{m3: 183, m2: 161, LocalVote: 152}, false},
		{"separated: 300/120/76 of 496", map[uint64]int{m3: 300, m2: 120, LocalVote: 76}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := LeadDecider(c.deciders)
			if l.Member != m3 || l.Runner != m2 || !l.HasRunner || l.Separated != c.separated || l.DecidedCI != ClopperPearson(l.Decided, l.Decided+l.RunnerDecided) {
				t.Fatalf("LeadDecider = %+v, want m3 against m2, separated %v", l, c.separated)
			}
			// commit: the decider verdict carries the same lead.
			r := NewReport()
			for id, n := range c.deciders {
				for range n {
					r.Add(&Write{Role: RoleLeader, StartNs: 1, EndNs: 1e6 + 1, PartsNs: map[string]int64{PartWALAppend: 1e6}, BatchEntries: 1, Decider: id, DeciderKnown: true})
				}
			}
			var got *Verdict
			for _, v := range r.Verdicts(ClusterState{Voters: 3}) {
				if v.Kind == VerdictDecider {
					got = &v
				}
			}
			if got == nil || got.Decider != l {
				t.Fatalf("commit's decider verdict %+v, want the lead %+v", got, l)
			}
			e := got.Evidence().DeciderLead
			if e == nil || e.Decider != "3333" || e.Decided != l.Decided || e.Runner != "2222" || e.RunnerDecided != l.RunnerDecided || e.Separated != c.separated {
				t.Errorf("evidence %+v, want the lead's counts", e)
			}
			// cluster: the same writes joined name m3 only when separated.
			j := ClusterJoin{Deciders: map[MemberID]int{}}
			for id, n := range c.deciders {
				j.Deciders[MemberID(id)], j.Joined = n, j.Joined+n
			}
			v := j.Verdict()
			if named := v.Kind != ClusterVerdictNoSingleDecider && !v.Both; named != c.separated || v.DecidedCI != l.DecidedCI {
				t.Errorf("cluster verdict %+v: names m3 alone %v, want %v", v, named, c.separated)
			}
		})
	}
}
