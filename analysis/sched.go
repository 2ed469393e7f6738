package analysis

import (
	"cmp"
	"slices"
	"sort"

	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// SchedSplit is time split by the thread's scheduler state, ns: waiting
// for a CPU (woken or preempted, not running), on a CPU, or asleep.
type SchedSplit struct {
	RunnableNs int64 `json:"runnable_ns"`
	RunningNs  int64 `json:"running_ns"`
	BlockedNs  int64 `json:"blocked_ns"`
}

// Sum returns the sum of the three states, ns.
func (s SchedSplit) Sum() int64 { return s.RunnableNs + s.RunningNs + s.BlockedNs }

// Sched is a call's time by scheduler state (fsync --sched), from the
// sched_switch and sched_wakeup of its thread while it was in the call.
type Sched struct {
	// Call covers the whole call: it sums to total_ns.
	Call SchedSplit `json:"call"`
	// Other splits the "other" layer: it sums to other_ns. For an fsync,
	// the instants no I/O layer claims, by the thread's state then
	// (blocked: asleep on something that is not the I/O the layers follow:
	// a lock, a page fault, memory reclaim). For a write, whose waits are
	// known only as sums, the call's states less the waits: the waits are
	// blocked time first, and what they hold beyond it (the wake-up and
	// the copy up to their end mark) comes off runnable, then running.
	Other SchedSplit `json:"other"`
}

// SetSched makes Attribute and AttributeWrite split calls by scheduler
// state from the event.Sched events added (the tracer's FsyncConfig.Sched
// was on). Without it records have no Sched.
func (a *Attributor) SetSched(on bool) { a.sched = on }

func (a *Attributor) addSched(e *event.Sched) {
	a.see(e.Ns)
	a.scheds = append(a.scheds, *e)
}

// timeline calls fn for each stretch of [s, e] with thread tid's state in
// it: running at s (the thread is in its syscall), then as its Sched
// events say. Every runnable is a wait for a CPU: after a wake-up, or a
// preemption of the running thread (bpf/sched.bpf.c does not report a
// wake-up of a thread still on its CPU). Until 2026-12-06 a runnable
// after running was read as such a wake-up and skipped, so the time a
// thread spent preempted inside its call counted as running.
func (a *Attributor) timeline(tid uint32, s, e uint64, fn func(from, to uint64, st event.SchedState)) {
	const skew = 10e6 // events are ≈ in time order; cross-CPU reservations skew a little
	lo := sort.Search(len(a.scheds), func(i int) bool { return a.scheds[i].Ns+skew >= s })
	evs := a.schedBuf[:0]
	for i := lo; i < len(a.scheds) && a.scheds[i].Ns <= e+skew; i++ {
		if x := a.scheds[i]; x.TID == tid && x.Ns >= s && x.Ns <= e {
			evs = append(evs, x)
		}
	}
	slices.SortStableFunc(evs, func(x, y event.Sched) int { return cmp.Compare(x.Ns, y.Ns) })
	a.schedBuf = evs
	st, prev := event.SchedRunning, s
	for _, x := range evs {
		fn(prev, x.Ns, st)
		st, prev = x.State, x.Ns
	}
	fn(prev, e, st)
}

// addTo adds d ns of state st to s.
func (s *SchedSplit) addTo(st event.SchedState, d int64) {
	switch st {
	case event.SchedRunnable:
		s.RunnableNs += d
	case event.SchedRunning:
		s.RunningNs += d
	default:
		s.BlockedNs += d
	}
}

// schedSweep adds thread tid's runnable and running stretches of [s, e]
// to the sweep, under every I/O layer, and returns the whole call's split.
func (a *Attributor) schedSweep(tid uint32, s, e uint64) SchedSplit {
	var call SchedSplit
	a.timeline(tid, s, e, func(from, to uint64, st event.SchedState) {
		call.addTo(st, int64(to-from))
		switch st {
		case event.SchedRunnable:
			a.sw.add(from, to, catRunnable)
		case event.SchedRunning:
			a.sw.add(from, to, catRunning)
		}
	})
	return call
}

// writeSched is a write's Sched: its call's states, and the other layer
// as those states less the waits (Sched.Other).
func (a *Attributor) writeSched(tid uint32, s, e uint64, waitsNs int64) *Sched {
	var sc Sched
	a.timeline(tid, s, e, func(from, to uint64, st event.SchedState) { sc.Call.addTo(st, int64(to-from)) })
	sc.Other = sc.Call
	take := func(from *int64) {
		d := min(*from, waitsNs)
		*from -= d
		waitsNs -= d
	}
	take(&sc.Other.BlockedNs)
	take(&sc.Other.RunnableNs)
	take(&sc.Other.RunningNs)
	return &sc
}

// pruneScheds drops the Sched events before horizon.
func (a *Attributor) pruneScheds(horizon uint64) {
	i := 0
	for i < len(a.scheds) && a.scheds[i].Ns < horizon {
		i++
	}
	if i > 0 {
		a.scheds = a.scheds[i:]
	}
}

// Names of the "other" layer's parts (fsync --sched), as report rows and
// JSON name them.
const (
	SchedRunnable = "runnable"
	SchedRunning  = "running"
	SchedBlocked  = "blocked"
)

// SchedNames lists the parts of "other" in report order.
var SchedNames = []string{SchedRunnable, SchedRunning, SchedBlocked}

// Get returns the part called name (one of SchedNames), ns.
func (s SchedSplit) Get(name string) int64 {
	switch name {
	case SchedRunnable:
		return s.RunnableNs
	case SchedRunning:
		return s.RunningNs
	}
	return s.BlockedNs
}

// otherAcc accumulates the "other" split of a group's calls.
type otherAcc struct {
	parts [3]stats.Series
	n     int64
}

func (o *otherAcc) add(s *Sched) {
	if s == nil {
		return
	}
	o.n++
	for i, n := range SchedNames {
		o.parts[i].Add(s.Other.Get(n))
	}
}

// stats summarises the parts with their share of total; nil when no call
// had a split.
func (o *otherAcc) stats(total stats.Summary) []LayerStat {
	if o.n == 0 {
		return nil
	}
	return layerStats(SchedNames, o.parts[:], total)
}

// parts lists s's times, none for a nil s.
func (s *Sched) parts() []int64 {
	if s == nil {
		return nil
	}
	return []int64{s.Call.RunnableNs, s.Call.RunningNs, s.Call.BlockedNs, s.Other.RunnableNs, s.Other.RunningNs, s.Other.BlockedNs}
}
