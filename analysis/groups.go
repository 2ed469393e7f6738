package analysis

import (
	"slices"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// MaxGroups bounds the groups a report keeps apart, fsync groups and
// write groups each: a group is a process, a device, a filesystem and a
// file kind, and any local user can make processes that fsync, one group
// each (50,000 pids in an 18 MB recording held 385 MiB, and their page
// 1.15 GB). A run on an etcd node has a handful: etcd's WAL, its
// directory, the backend and snapshots, and a few other processes'.
// Past MaxGroups, a held group is folded into one "other" group
// (Group.Folded counts the rows folded) and the new group takes its place.
// Which one is the Space-Saving rule of streaming heavy hitters (Metwally
// et al., 2005): each held group carries an estimate of all its calls,
// those of earlier rows folded under its key included (its calls since
// it was let in, plus the estimate of the group it displaced), and the
// lowest estimate goes; so a group with more than 1/MaxGroups of all the
// calls is held at the end, however the calls were interleaved. Another
// user's processes cannot push etcd's WAL group out by arriving first and
// coming back (the rule "fewest calls since its row began" let 40 such
// processes fold it away every time it came back). Before the estimate,
// the groups of etcd's own files (WAL, WAL directory, backend, snapshot)
// are folded only when all groups held are, so a flood of one-shot
// processes leaves them apart whole. A group folded and seen again starts
// a new row (its earlier calls stay in other): every call is counted
// once, in one row.
const MaxGroups = 32

// groupAccumulator is what a groupSet holds: a group's accumulated calls
// (groupAcc, writeAcc).
type groupAccumulator[T any] interface {
	*T
	groupKey() GroupKey
	setKey(GroupKey)
	calls() int64
	fold(from *T) // add from's calls to this group's; from is emptied
	// series lists its stats.Series (to bind them to a budget).
	series() []*stats.Series
}

// groupSet holds at most MaxGroups groups by key and folds the rest
// into other. The zero value is not ready: use newGroupSet.
type groupSet[T any, P groupAccumulator[T]] struct {
	byKey map[GroupKey]P
	held  []P // a folded group's place goes to the group that displaced it
	// over: held[i]'s estimate less its calls (the estimate of the group
	// it displaced): its calls plus over[i] bound all the calls of its key.
	over   []int64
	other  P // nil until a group is folded
	folded int64
	budget *stats.Budget // the exact values of every group's series
}

func newGroupSet[T any, P groupAccumulator[T]](budget *stats.Budget) groupSet[T, P] {
	return groupSet[T, P]{byKey: map[GroupKey]P{}, budget: budget}
}

// made returns g with its series bound to s's budget.
func (s *groupSet[T, P]) made(g P) P {
	for _, x := range g.series() {
		x.Bind(s.budget)
	}
	return g
}

// get returns k's group, made (and another folded) if it is not held.
func (s *groupSet[T, P]) get(k GroupKey) P {
	if g := s.byKey[k]; g != nil {
		return g
	}
	g := s.made(P(new(T)))
	g.setKey(k)
	s.byKey[k] = g
	if len(s.held) < MaxGroups {
		s.held = append(s.held, g)
		s.over = append(s.over, 0)
		return g
	}
	v := s.victim()
	s.over[v] += s.held[v].calls()
	if s.other == nil {
		s.other = s.made(P(new(T)))
	}
	s.other.fold(s.held[v])
	s.folded++
	delete(s.byKey, s.held[v].groupKey())
	s.held[v] = g
	return g
}

// victim is the place of the group to fold: the lowest estimate of its
// calls, a group of etcd's own files only when every group held is one;
// the first of equals.
func (s *groupSet[T, P]) victim() int {
	best := 0
	rank := func(i int) (bool, int64) {
		return etcdKind(s.held[i].groupKey().FileKind), s.held[i].calls() + s.over[i]
	}
	bk, bn := rank(0)
	for i := 1; i < len(s.held); i++ {
		if k, n := rank(i); (!k && bk) || (k == bk && n < bn) {
			best, bk, bn = i, k, n
		}
	}
	return best
}

// all returns the groups held, and other last if any was folded.
func (s *groupSet[T, P]) all() []P {
	if s.other == nil {
		return s.held
	}
	return append(slices.Clip(s.held), s.other)
}

// etcdKind reports whether kind is one of etcd's own files.
func etcdKind(kind string) bool {
	switch kind {
	case KindWAL, KindWALDir, KindBackend, KindSnapshot:
		return true
	}
	return false
}

func (g *groupAcc) groupKey() GroupKey { return g.key }
func (g *groupAcc) setKey(k GroupKey)  { g.key = k }
func (g *groupAcc) calls() int64       { return g.totals.Count() }
func (g *writeAcc) groupKey() GroupKey { return g.key }
func (g *writeAcc) setKey(k GroupKey)  { g.key = k }
func (g *writeAcc) calls() int64       { return g.totals.Count() }

func (g *groupAcc) series() []*stats.Series {
	return append([]*stats.Series{&g.totals}, seriesOf(g.layers[:], g.other.parts[:])...)
}

func (g *writeAcc) series() []*stats.Series {
	return append([]*stats.Series{&g.totals}, seriesOf(g.layers[:], g.other.parts[:])...)
}

// seriesOf lists the series of lists.
func seriesOf(lists ...[]stats.Series) []*stats.Series {
	var out []*stats.Series
	for _, l := range lists {
		for i := range l {
			out = append(out, &l[i])
		}
	}
	return out
}

func (g *groupAcc) fold(f *groupAcc) {
	g.totals.Absorb(&f.totals)
	mergeSeries(g.layers[:], f.layers[:])
	g.flushes += f.flushes
	g.fuas += f.fuas
	g.errors += f.errors
	g.commits += f.commits
	g.overBudget += f.overBudget
	g.syscalls = unionStrings(g.syscalls, f.syscalls)
	g.other.fold(&f.other)
}

func (g *writeAcc) fold(f *writeAcc) {
	g.totals.Absorb(&f.totals)
	mergeSeries(g.layers[:], f.layers[:])
	g.throttles += f.throttles
	g.waits += f.waits
	g.errors += f.errors
	g.syscalls = unionStrings(g.syscalls, f.syscalls)
	g.other.fold(&f.other)
}

func (o *otherAcc) fold(f *otherAcc) {
	o.n += f.n
	mergeSeries(o.parts[:], f.parts[:])
}

// mergeSeries absorbs each series of src into dst's (stats.Series.Absorb).
func mergeSeries(dst, src []stats.Series) {
	for i := range dst {
		dst[i].Absorb(&src[i])
	}
}

// unionStrings appends to a those of b it does not hold.
func unionStrings(a, b []string) []string {
	for _, s := range b {
		a = addSyscall(a, s)
	}
	return a
}

// MaxSyscallNames bounds the distinct syscall names a group lists: a run
// has a few (fsync, fdatasync, the write calls), but a recording is text
// anyone can write, and 250,000 distinct names in one group took 72 s to
// look up one by one and 4,096 names of 64 KiB 1.3 GiB (a hostile check,
// 2026-12-06). Past it the list ends with MoreSyscalls.
const MaxSyscallNames = 8

// MoreSyscalls ends a group's syscall list when it had more names than
// MaxSyscallNames.
const MoreSyscalls = "…"

// addSyscall adds name to a group's list of distinct syscall names, or
// MoreSyscalls once the list holds MaxSyscallNames.
func addSyscall(list []string, name string) []string {
	switch {
	case slices.Contains(list, name):
	case len(list) < MaxSyscallNames:
		list = append(list, name)
	case !slices.Contains(list, MoreSyscalls):
		list = append(list, MoreSyscalls)
	}
	return list
}
