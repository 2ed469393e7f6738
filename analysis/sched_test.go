package analysis

import (
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// TestSchedSplit: a call's scheduler timeline splits the whole call, and
// the part no I/O layer claims splits "other"; a preemption of the
// running thread is a wait for a CPU (runnable until it is switched in
// again: it counted as running before 2026-12-06), and other threads'
// events do not count.
func TestSchedSplit(t *testing.T) {
	disk := event.MkDev(254, 0)
	a := NewAttributor(func(event.Dev) (string, []event.Dev) { return "vda", []event.Dev{disk} })
	a.SetSched(true)
	const tid = 7
	evs := []any{
		event.FsyncEnter{TID: tid, StartNs: 1000},
		event.Sched{TID: tid, State: event.SchedRunnable, Ns: 1005}, // preempted
		event.Sched{TID: tid, State: event.SchedRunning, Ns: 1008},
		event.Sched{TID: tid, State: event.SchedBlocked, Ns: 1010},
		event.Sched{TID: 99, State: event.SchedRunnable, Ns: 1020}, // another thread
		// The data write [1010, 1040]: the thread sleeps through it.
		event.Block{Dev: disk, Op: event.OpWrite, Final: true, IssueNs: 1010, CompleteNs: 1040, TID: tid, Bytes: 4096},
		event.Sched{TID: tid, State: event.SchedRunnable, Ns: 1040}, // woken by the completion
		event.Sched{TID: tid, State: event.SchedRunning, Ns: 1060},
		event.Sched{TID: tid, State: event.SchedBlocked, Ns: 1080}, // a lock
		event.Sched{TID: tid, State: event.SchedRunnable, Ns: 1090},
		event.Sched{TID: tid, State: event.SchedRunning, Ns: 1095},
	}
	for _, e := range evs {
		a.Add(e)
	}
	rec := a.Attribute(event.Fsync{Syscall: event.SysFdatasync, PID: 1, TID: tid, Dev: event.MkDev(254, 1), StartNs: 1000, EndNs: 1100})
	if rec.Sched == nil {
		t.Fatal("no sched split")
	}
	if want := (SchedSplit{RunnableNs: 28, RunningNs: 32, BlockedNs: 40}); rec.Sched.Call != want {
		t.Errorf("call %+v, want %+v", rec.Sched.Call, want)
	}
	if rec.Layers.DataWritebackNs != 30 || rec.Layers.OtherNs != 70 {
		t.Errorf("layers %+v, want data 30, other 70", rec.Layers)
	}
	if want := (SchedSplit{RunnableNs: 28, RunningNs: 32, BlockedNs: 10}); rec.Sched.Other != want {
		t.Errorf("other %+v, want %+v", rec.Sched.Other, want)
	}

	// A write's waits (sums) come off its blocked time first, then
	// runnable: throttled 30 of a call blocked 20, runnable 15, running 15.
	a.Add(event.Sched{TID: tid, State: event.SchedBlocked, Ns: 2010})
	a.Add(event.Sched{TID: tid, State: event.SchedRunnable, Ns: 2030})
	a.Add(event.Sched{TID: tid, State: event.SchedRunning, Ns: 2045})
	w := a.AttributeWrite(&event.Write{Call: event.Fsync{Syscall: event.SysWrite, TID: tid, StartNs: 2000, EndNs: 2050}, ThrottledNs: 30, Throttles: 1})
	if w.Sched == nil || w.Sched.Call != (SchedSplit{RunnableNs: 15, RunningNs: 15, BlockedNs: 20}) ||
		w.Sched.Other != (SchedSplit{RunnableNs: 5, RunningNs: 15}) || w.Sched.Other.Sum() != w.Layers.OtherNs {
		t.Errorf("write sched %+v, layers %+v", w.Sched, w.Layers)
	}
}
