package commit

import (
	"math"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
)

// The Raft loop's thread, another etcd thread (bbolt's commit), and the
// thread the Raft goroutine moved to.
const (
	tidRaft  = 101
	tidBolt  = 102
	tidMoved = 103
)

// Times in µs from here on.
func us(v uint64) uint64 { return v * 1000 }

func fdatasync(tid uint32, start, end uint64, wal bool, l analysis.Layers, other *analysis.SchedSplit) SyncCall {
	return SyncCall{TID: tid, StartNs: us(start), EndNs: us(end), WAL: wal, Layers: l, Other: other}
}

func TestJoinSyncs(t *testing.T) {
	// The (*WAL).sync of a write: 1000..2000 µs on the Raft thread. Its
	// write(2) 1010..1050, its fdatasync 1100..1900: device flush 500,
	// journal 200, the rest (100) runnable inside the syscall.
	win := SyncWindow{StartNs: us(1000), EndNs: us(2000), TIDs: [2]uint32{tidRaft, tidRaft}}
	walSync := fdatasync(tidRaft, 1100, 1900, true, analysis.Layers{DeviceFlushNs: 500e3, JournalNs: 200e3, OtherNs: 100e3}, &analysis.SchedSplit{RunnableNs: 100e3})
	write := SyncCall{TID: tidRaft, StartNs: us(1010), EndNs: us(1050), WAL: true, Write: true, WriteWaitNs: 30e3,
		Layers: analysis.Layers{OtherNs: 10e3}, Other: &analysis.SchedSplit{RunningNs: 10e3}}
	bolt := fdatasync(tidBolt, 1200, 1800, false, analysis.Layers{DeviceFlushNs: 600e3}, nil) // bbolt's, same window: not the WAL's
	late := fdatasync(tidRaft, 1950, 2100, true, analysis.Layers{DeviceFlushNs: 150e3}, nil)  // ends after the sync returned
	// The thread after the fdatasync: throttled at the return to user
	// space (runnable 1900..1980), running to the sync's return.
	scheds := []event.Sched{
		{TID: tidRaft, State: event.SchedRunnable, Ns: us(1900)},
		{TID: tidRaft, State: event.SchedRunning, Ns: us(1980)},
		{TID: tidBolt, State: event.SchedRunnable, Ns: us(1950)}, // another thread: not this write's
	}
	got := JoinSyncs([]SyncWindow{win, {}}, []SyncCall{late, bolt, walSync, write}, scheds)
	if got[1] != nil {
		t.Errorf("an empty window joined %+v", got[1])
	}
	c := got[0]
	if c == nil {
		t.Fatal("the WAL's fdatasync was not joined")
	}
	want := map[Cause]int64{
		CauseDeviceFlush: 500e3, CauseJournal: 200e3, CauseCPUWait: 100e3 + 80e3, CauseWriteWait: 30e3, CauseRunning: 10e3,
		// Go code: 1000..1010, 1050..1100, 1980..2000.
		CauseOutside: 10e3 + 50e3 + 20e3,
	}
	if c.CallNs != 800e3 || c.WritesNs != 40e3 {
		t.Errorf("call %d ns, writes %d ns; want 800000, 40000", c.CallNs, c.WritesNs)
	}
	var sum int64
	for k, v := range c.Ns {
		sum += v
		if want[k] != v {
			t.Errorf("%s: %d ns, want %d", k, v, want[k])
		}
	}
	for k, v := range want {
		if c.Ns[k] != v {
			t.Errorf("%s: %d ns, want %d", k, c.Ns[k], v)
		}
	}
	if sum != int64(win.EndNs-win.StartNs) {
		t.Errorf("the causes sum to %d ns, the sync took %d", sum, win.EndNs-win.StartNs)
	}

	// The goroutine moved threads between the sync's probe and the
	// syscall: the WAL file's call in the window is the one, not
	// bbolt's on a thread that is neither.
	moved := fdatasync(tidMoved, 1100, 1900, true, analysis.Layers{DeviceFlushNs: 800e3}, nil)
	got = JoinSyncs([]SyncWindow{win}, []SyncCall{bolt, moved}, nil)
	if got[0] == nil || got[0].Ns[CauseDeviceFlush] != 800e3 {
		t.Errorf("moved goroutine: %+v, want the WAL file's call (device flush 800000)", got[0])
	}
	// Only bbolt's call in the window: nothing joined.
	if got = JoinSyncs([]SyncWindow{win}, []SyncCall{bolt}, nil); got[0] != nil {
		t.Errorf("bbolt's fdatasync joined to the WAL's sync: %+v", got[0])
	}
}

// TestJoinerSyncWindow checks the joiner hands each write the window and
// threads of its Save's (*WAL).sync.
func TestJoinerSyncWindow(t *testing.T) {
	evs := leaderWrite(0x10, 7, 5, 100, 200, 700, 800, 900, 950, nil)
	for i := range evs {
		switch evs[i].Kind {
		case event.CommitSyncEnter:
			evs[i].TID = tidRaft
		case event.CommitSyncRet:
			evs[i].TID = tidMoved
		}
	}
	ws, _ := run(Config{Role: RoleLeader, Voters: 1}, evs)
	if len(ws) != 1 {
		t.Fatalf("%d writes", len(ws))
	}
	w := ws[0].WALSyncWindow
	if w.StartNs != us(201) || w.EndNs != us(699) || w.TIDs != [2]uint32{tidRaft, tidMoved} || int64(w.EndNs-w.StartNs) != ws[0].WALSyncNs {
		t.Errorf("window %+v, WALSyncNs %d", w, ws[0].WALSyncNs)
	}
}

// TestCauseLead: the verdict's number is the top side's share of the
// summed time the table prints (the disk's layers together), and two
// sides the run's spread does not set apart are not separated. The
// user's run of 2026-12-07 (3 members, ~20 puts/s): disk 40% (data
// writeback 15% its largest layer) against waiting for a CPU 38%; the
// verdict quoted "15% of (*WAL).sync" and named the disk alone.
func TestCauseLead(t *testing.T) {
	mk := func(wb, journal, flush, queue, cpu, running, blocked, outside int64) *SyncCause {
		return &SyncCause{Ns: map[Cause]int64{CauseDataWriteback: wb, CauseJournal: journal, CauseDeviceFlush: flush, CauseBlockQueue: queue,
			CauseCPUWait: cpu, CauseRunning: running, CauseBlocked: blocked, CauseOutside: outside}}
	}
	// 100 writes of 100 µs summing to the user's shares: disk 40 (15 +
	// 10 + 8 + 7), cpu_wait 38, running 8, blocked 10, outside 4; half
	// the writes wait on the disk more, half on a CPU.
	var near, clear CauseTotals
	for i := range 100 {
		if i%2 == 0 {
			near.Add(mk(25e3, 15e3, 12e3, 8e3, 18e3, 8e3, 10e3, 4e3)) // disk 60
		} else {
			near.Add(mk(5e3, 5e3, 4e3, 6e3, 58e3, 8e3, 10e3, 4e3)) // disk 20
		}
		// The disk 70 in every write, a CPU 10-20: separated.
		clear.Add(mk(30e3, 20e3, 12e3, 8e3, 10e3+int64(i%10)*1e3, 5e3, 3e3, 2e3))
	}
	l, ok := near.Lead()
	if !ok || l.Cause != CauseDataWriteback || l.Runner != CauseCPUWait || !l.HasRunner {
		t.Fatalf("close: %+v, want data_writeback (the disk) against cpu_wait", l)
	}
	if math.Abs(l.Pct-40) > 1e-9 || math.Abs(l.RunnerPct-38) > 1e-9 {
		t.Errorf("close: disk %.2f%%, cpu_wait %.2f%%; want the table's 40%% and 38%%", l.Pct, l.RunnerPct)
	}
	if l.Separated || l.GapCI.Lo > 0 || l.Longer != 50 || l.Compared != 100 {
		t.Errorf("close: %+v, want not separated (the gap's interval holds 0; disk longer in 50 of 100)", l)
	}
	l, ok = clear.Lead()
	if !ok || l.Cause != CauseDataWriteback || l.Runner != CauseCPUWait || !l.Separated || l.GapCI.Lo <= 0 || l.Longer != 100 {
		t.Errorf("clear: %+v, want the disk separated from cpu_wait", l)
	}
	// Read back from JSON the totals carry no spread: never separated.
	sums := clear.Sums()
	if l, ok := sums.Lead(); !ok || l.Separated || l.Compared != 0 || math.Abs(l.Pct-clear.DiskShare()*100) > 1e-9 {
		t.Errorf("sums only: %+v, want the disk's share, not separated", l)
	}
	// Past maxLeadRows writes the kept ones are thinned, never more.
	var many CauseTotals
	for range 3*maxLeadRows + 7 {
		many.Add(mk(30e3, 0, 0, 0, 10e3, 0, 0, 0))
	}
	if n := len(many.rows.rows); n < maxLeadRows/2 || n >= 2*maxLeadRows || many.Joined != 3*maxLeadRows+7 {
		t.Errorf("%d writes: %d rows kept, stride %d", many.Joined, n, many.rows.stride)
	}
}
