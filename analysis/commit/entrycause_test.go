package commit

import (
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
)

// followerSave is a follower's records of one Save of entries 7..8 (its
// clock, µs): the MsgApp at 1000, the Save 1050..2500 with its
// (*WAL).sync 1100..2400 on the Raft thread, the answer at 2520.
func followerSave() (msg, save, sent event.Commit) {
	msg = event.Commit{Kind: event.CommitMsgApp, TsNs: us(1000), Msg: event.CommitMsg{From: 1, Term: 3, First: 7, Last: 8}}
	save = event.Commit{Kind: event.CommitSaveDone, TsNs: us(2500), Save: event.CommitSave{First: 7, Last: 8, Term: 3,
		StartNs: us(1050), EndNs: us(2500), SyncStartNs: us(1100), SyncEndNs: us(2400), SyncTIDs: [2]uint32{tidRaft, tidRaft}}}
	sent = event.Commit{Kind: event.CommitSaveSent, TsNs: us(2520), Msg: event.CommitMsg{Term: 3, First: 7, Last: 8}}
	return msg, save, sent
}

// TestEntryLogSyncCause: a Save's (*WAL).sync is joined with the fsync
// tracer's split of its fdatasync whichever of the two rings delivers
// first; every entry of the batch carries the split, which sums to its
// fdatasync time and travels in its FollowerSplit; a call on another
// thread outside the WAL, or outside the window, is not joined.
func TestEntryLogSyncCause(t *testing.T) {
	msg, save, sent := followerSave()
	// The encoder's write(2) 1110..1150 (20 µs of it waiting on
	// writeback), the fdatasync 1200..2300: device flush 790, journal
	// 100, block queue 50, the rest (160) runnable; after it the thread
	// is throttled 2300..2350, then runs Go code to the sync's return.
	write := SyncCall{TID: tidRaft, StartNs: us(1110), EndNs: us(1150), WAL: true, Write: true, WriteWaitNs: 20e3,
		Layers: analysis.Layers{OtherNs: 20e3}, Other: &analysis.SchedSplit{RunningNs: 20e3}}
	call := fdatasync(tidRaft, 1200, 2300, true, analysis.Layers{DeviceFlushNs: 790e3, JournalNs: 100e3, BlockQueueNs: 50e3, OtherNs: 160e3},
		&analysis.SchedSplit{RunnableNs: 160e3})
	bolt := fdatasync(tidBolt, 1300, 1400, false, analysis.Layers{DeviceFlushNs: 100e3}, nil)
	scheds := []event.Sched{{TID: tidRaft, State: event.SchedRunnable, Ns: us(2300)}, {TID: tidRaft, State: event.SchedRunning, Ns: us(2350)}}
	want := map[Cause]int64{CauseDeviceFlush: 790e3, CauseJournal: 100e3, CauseBlockQueue: 50e3, CauseCPUWait: 160e3 + 50e3,
		CauseWriteWait: 20e3, CauseRunning: 20e3, CauseOutside: 10e3 + 50e3 + 50e3} // 1100..1110, 1150..1200, 2350..2400
	type step func(l *EntryLog)
	commitRec := func(ev event.Commit) step { return func(l *EntryLog) { l.Add(&ev, nil) } }
	syncRec := func(c SyncCall) step { return func(l *EntryLog) { l.AddSyncCall(c) } }
	schedRecs := func(l *EntryLog) {
		for _, e := range scheds {
			l.AddSched(e)
		}
	}
	for name, order := range map[string][]step{
		"calls first":      {syncRec(bolt), syncRec(write), syncRec(call), schedRecs, commitRec(msg), commitRec(save), commitRec(sent)},
		"calls last":       {commitRec(msg), schedRecs, commitRec(save), commitRec(sent), syncRec(write), syncRec(bolt), syncRec(call)},
		"calls in between": {commitRec(msg), schedRecs, syncRec(write), commitRec(save), syncRec(call), commitRec(sent)},
	} {
		l := NewEntryLog(0)
		for _, s := range order {
			s(l)
		}
		for _, i := range []uint64{7, 8} {
			e, ok := l.Get(i)
			if !ok || e.SyncCause == nil {
				t.Errorf("%s: entry %d: %+v: want its sync's cause", name, i, e)
				continue
			}
			var sum int64
			for c, v := range e.SyncCause.Ns {
				sum += v
				if v != want[c] {
					t.Errorf("%s: entry %d: %s %d ns, want %d", name, i, c, v, want[c])
				}
			}
			s, ok := e.Split()
			if !ok || s.Cause != e.SyncCause || sum != s.FdatasyncNs || s.FdatasyncNs != 1300e3 || e.SyncCause.CallNs != 1100e3 || e.SyncCause.WritesNs != 40e3 {
				t.Errorf("%s: entry %d: causes sum to %d ns, split %+v (ok %v), cause %+v: want 1300000 ns, the fdatasync's 1100000 and the write's 40000", name, i, sum, s, ok, e.SyncCause)
			}
		}
	}
	// Only bbolt's fdatasync and a late WAL call: nothing joined, the
	// Save still waits for its own.
	l := NewEntryLog(0)
	l.Add(&save, nil)
	l.AddSyncCall(bolt)
	l.AddSyncCall(fdatasync(tidRaft, 2300, 2450, true, analysis.Layers{DeviceFlushNs: 150e3}, nil))
	if e, _ := l.Get(7); e.SyncCause != nil {
		t.Errorf("joined %+v: want none (bbolt's call, and one ending after the sync)", e.SyncCause)
	}
	l.AddSyncCall(call)
	if e, _ := l.Get(8); e.SyncCause == nil || e.SyncCause.Ns[CauseDeviceFlush] != 790e3 {
		t.Errorf("after its call: %+v", e.SyncCause)
	}
}

// TestEntryLogSyncCauseBounded: a Save whose fdatasync the fsync tracer
// lost waits among at most maxPendingSyncs, the calls and scheduler
// records kept are bounded, and the Saves after it still join.
func TestEntryLogSyncCauseBounded(t *testing.T) {
	l := NewEntryLog(0)
	const n = 3 * maxPendingSyncs
	for i := uint64(1); i <= n; i++ {
		base := i * 10_000 // µs
		l.Add(&event.Commit{Kind: event.CommitSaveDone, TsNs: us(base + 1000), Save: event.CommitSave{First: i, Last: i, Term: 1,
			StartNs: us(base), EndNs: us(base + 1000), SyncStartNs: us(base + 100), SyncEndNs: us(base + 900), SyncTIDs: [2]uint32{tidRaft, tidRaft}}}, nil)
		if i%2 == 0 { // every other call lost
			l.AddSyncCall(fdatasync(tidRaft, base+200, base+800, true, analysis.Layers{DMNs: 600e3}, nil))
		}
		l.AddSched(event.Sched{TID: tidRaft, State: event.SchedRunning, Ns: us(base + 850)})
	}
	l.mu.Lock()
	pending, calls, scheds := len(l.pending), len(l.calls), len(l.scheds)
	l.mu.Unlock()
	if pending > maxPendingSyncs || calls > maxSyncCalls || scheds > maxSyncScheds {
		t.Errorf("kept %d pending, %d calls, %d scheds: want at most %d, %d, %d", pending, calls, scheds, maxPendingSyncs, maxSyncCalls, maxSyncScheds)
	}
	joined := 0
	for i := uint64(1); i <= n; i++ {
		e, _ := l.Get(i)
		if (e.SyncCause != nil) != (i%2 == 0) {
			t.Errorf("entry %d: cause %+v", i, e.SyncCause)
		}
		if e.SyncCause != nil {
			joined++
			if e.SyncCause.Ns[CauseDM] != 600e3 {
				t.Errorf("entry %d: dm %d ns, want 600000", i, e.SyncCause.Ns[CauseDM])
			}
		}
	}
	if joined != n/2 {
		t.Errorf("%d of %d joined, want %d", joined, n, n/2)
	}
}

// TestClusterVerdictCause: the deciding follower's fdatasync causes
// (carried in its window) reach the join, and the verdict names the top
// one: its disk by the largest layer, or a CPU when runnable time holds
// more than the disk's layers together.
func TestClusterVerdictCause(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause map[Cause]int64 // per write, µs
		want  Cause
		ns    int64
	}{
		{"disk", map[Cause]int64{CauseDeviceFlush: 7900, CauseJournal: 600, CauseCPUWait: 300, CauseOutside: 300}, CauseDeviceFlush, 7900e3},
		{"cpu", map[Cause]int64{CauseDeviceFlush: 2000, CauseJournal: 1000, CauseCPUWait: 5800, CauseOutside: 300}, CauseCPUWait, 5800e3},
	} {
		// 8 writes: 6 is the fewest whose every vote by one follower
		// separates it (ClopperPearson(6, 6) lies above 1/2).
		ws := slowFollowerRun(8, tc.cause)
		j := JoinCluster(ws)
		v := j.Verdict()
		if v.Kind != ClusterVerdictFollowerWAL || v.Member != 3 || v.Cause != tc.want || v.CauseNs != tc.ns || v.CauseJoined != 8 || v.Decided != 8 {
			t.Errorf("%s: verdict %+v: want follower 3's WAL, %s %d ns over 8 of 8 votes", tc.name, v, tc.want, tc.ns)
		}
		if j.FollowerCause.Joined != 8 || j.FollowerCause.Unjoined != 0 || j.FollowerCause.Ns[tc.want] != 8*tc.ns {
			t.Errorf("%s: totals %+v", tc.name, j.FollowerCause)
		}
		for _, w := range j.Writes {
			var sum int64
			for _, v := range w.Follower.Cause.Ns {
				sum += v
			}
			if sum != w.Follower.FdatasyncNs {
				t.Errorf("%s: write %d: causes sum %d ns, fdatasync %d", tc.name, w.Index, sum, w.Follower.FdatasyncNs)
			}
			if w.LeaderCause == nil || w.LeaderCause.Ns[CauseJournal] != w.LeaderFdatasyncNs {
				t.Errorf("%s: write %d: the leader's cause %+v, want its journal %d ns", tc.name, w.Index, w.LeaderCause, w.LeaderFdatasyncNs)
			}
		}
	}
	// A v 1 window (no causes): the verdict as before, no cause.
	j := JoinCluster(slowFollowerRun(8, nil))
	if v := j.Verdict(); v.Kind != ClusterVerdictFollowerWAL || v.Cause != "" || v.CauseJoined != 0 {
		t.Errorf("no causes: verdict %+v", v)
	}
}

// slowFollowerRun builds the windows of a leader (1) and two followers:
// 3 with a 9.1 ms fdatasync split as cause says (µs; nil: no fsync
// tracer there), deciding every write, and 2 behind a 30 ms network.
func slowFollowerRun(n uint64, cause map[Cause]int64) []EntryWindow {
	lead, f2, f3 := NewEntryLog(0), NewEntryLog(0), NewEntryLog(0)
	lead.SetMember(1)
	f2.SetMember(2)
	f3.SetMember(3)
	var syncUs uint64
	for _, v := range cause {
		syncUs += uint64(v)
	}
	if cause == nil {
		syncUs = 9100
	}
	for i := uint64(1); i <= n; i++ {
		t := i * 100_000_000
		lead.Add(&event.Commit{Kind: event.CommitSaveDone, TsNs: t + 400_000, Save: event.CommitSave{First: i, Last: i, Term: 2,
			SendNs: t, StartNs: t + 100_000, EndNs: t + 400_000, SyncStartNs: t + 150_000, SyncEndNs: t + 350_000, SyncTIDs: [2]uint32{tidRaft, tidRaft}}}, nil)
		if cause != nil { // the leader's agent splits its own
			lead.AddSyncCall(SyncCall{TID: tidRaft, StartNs: t + 150_000, EndNs: t + 350_000, WAL: true, Layers: analysis.Layers{JournalNs: 200_000}})
		}
		for _, f := range []struct {
			log         *EntryLog
			id, wal, rt uint64
		}{{f2, 2, 300_000, 30_000_000}, {f3, 3, us(syncUs) + 100_000, 200_000}} {
			recv := t + f.rt/2 + 5_000_000_000*f.id
			f.log.Add(&event.Commit{Kind: event.CommitMsgApp, TsNs: recv, Msg: event.CommitMsg{From: 1, Term: 2, First: i, Last: i}}, nil)
			syncStart := recv + 60_000
			syncEnd := syncStart + f.wal - 100_000
			f.log.Add(&event.Commit{Kind: event.CommitSaveDone, TsNs: recv + 50_000 + f.wal, Save: event.CommitSave{First: i, Last: i, Term: 2,
				StartNs: recv + 50_000, EndNs: recv + 50_000 + f.wal, SyncStartNs: syncStart, SyncEndNs: syncEnd, SyncTIDs: [2]uint32{tidRaft, tidRaft}}}, nil)
			if f.id == 3 && cause != nil {
				// One call from the sync's entry to its return, its
				// layers the causes (runnable as "other").
				l := analysis.Layers{DeviceFlushNs: cause[CauseDeviceFlush] * 1000, JournalNs: cause[CauseJournal] * 1000,
					OtherNs: (cause[CauseCPUWait] + cause[CauseOutside]) * 1000}
				f.log.AddSyncCall(SyncCall{TID: tidRaft, StartNs: syncStart, EndNs: syncEnd, WAL: true, Layers: l,
					Other: &analysis.SchedSplit{RunnableNs: cause[CauseCPUWait] * 1000, RunningNs: cause[CauseOutside] * 1000}})
			}
			resp := recv + 50_000 + f.wal + 20_000
			f.log.Add(&event.Commit{Kind: event.CommitSaveSent, TsNs: resp, Msg: event.CommitMsg{Term: 2, First: i, Last: i}}, nil)
			lead.Add(&event.Commit{Kind: event.CommitAppResp, TsNs: t + f.rt + (resp - recv), A: f.id, B: i}, nil)
		}
	}
	return []EntryWindow{lead.Window(0, MaxEntries), f2.Window(0, MaxEntries), f3.Window(0, MaxEntries)}
}

// TestClusterVerdictLeaderCause: when the leader's own WAL append
// decides most writes, the verdict names its fdatasync's top cause, from
// the leader's window, over the writes it decided.
func TestClusterVerdictLeaderCause(t *testing.T) {
	cpu := &SyncCause{CallNs: 2e6, Ns: map[Cause]int64{CauseCPUWait: 1.5e6, CauseDeviceFlush: 0.5e6}}
	// The leader's WAL decides 9 writes, follower 2 one: 9 of 10 is
	// separated (ClopperPearson(9, 10) lies above 1/2).
	j := ClusterJoin{Joined: 10, Deciders: map[MemberID]int{MemberID(LocalVote): 9, 2: 1}, Writes: []ClusterWrite{
		{Index: 10, Decider: 2, VoteNs: 1e6, NetworkNs: 0.5e6, LeaderCause: &SyncCause{Ns: map[Cause]int64{CauseDeviceFlush: 9e6}},
			Follower: &FollowerSplit{TotalNs: 0.5e6, WALNs: 0.4e6}},
	}}
	for i := uint64(1); i <= 9; i++ {
		j.Writes = append(j.Writes, ClusterWrite{Index: i, DeciderLocal: true, LeaderWALNs: 2.2e6, LeaderFdatasyncNs: 2e6, LeaderCause: cpu})
		j.LeaderWALNs.Add(2.2e6)
		j.LeaderCause.Add(cpu)
	}
	if v := j.Verdict(); v.Kind != ClusterVerdictLeaderWAL || v.Cause != CauseCPUWait || v.CauseNs != 1.5e6 || v.CauseJoined != 9 || v.Runner != 2 || v.RunnerDecided != 1 {
		t.Errorf("verdict %+v: want the leader's WAL, cpu_wait 1.5 ms over its 9 writes, follower 2 the runner-up with 1", v)
	}
	// The lead carries the shares the cause line prints: cpu_wait 75%
	// against the disk's 25%, every write alike: set apart.
	if l := j.Verdict().CauseLead; l.Cause != CauseCPUWait || l.Pct != 75 || l.Runner != CauseDeviceFlush || l.RunnerPct != 25 || !l.Separated {
		t.Errorf("lead %+v: want cpu_wait 75%% against the disk's 25%%, separated", l)
	}
}
