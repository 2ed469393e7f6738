package analysis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestReportGroupsBounded: a report of many groups keeps MaxGroups apart
// and folds the rest into one group that counts them; every call is
// counted once; etcd's own groups, busy or not, are not folded by a flood
// of one-call groups that comes first and goes on after them.
func TestReportGroupsBounded(t *testing.T) {
	b := NewReportBuilder()
	rec := func(pid uint32, kind string, ns int64) {
		b.Add(&FsyncRecord{PID: pid, Comm: "x", Dev: "8:0", FS: "ext4", FileKind: kind, Syscall: "fsync", TotalNs: ns})
		b.AddWrite(&WriteRecord{PID: pid, Comm: "x", Dev: "8:0", FS: "ext4", FileKind: kind, Syscall: "write", TotalNs: ns})
	}
	const flood = 10_000
	calls := int64(0)
	for i := range flood {
		rec(uint32(100_000+i), KindOther, 1000)
		calls++
		if i >= flood/2 && i%10 == 0 { // etcd starts in the middle of the flood
			rec(7, KindWAL, 2000)
			calls++
		}
		if i == flood/2 {
			rec(7, KindSnapshot, 3000) // once: the fewest calls of all
			calls++
		}
	}
	rep := b.Report(0, 0, nil)
	if len(rep.Groups) != MaxGroups+1 {
		t.Fatalf("%d groups, want %d and other", len(rep.Groups), MaxGroups)
	}
	other := rep.Groups[len(rep.Groups)-1]
	if other.Folded == 0 || other.Key != (GroupKey{}) || other.Verdict != VerdictNA {
		t.Errorf("the last group is not the folded one: %+v", other.Key)
	}
	sum, folded := int64(0), int64(0)
	var wal, snap bool
	for _, g := range rep.Groups {
		sum += g.Total.Count
		if g.Folded == 0 {
			folded++
		}
		switch g.Key.FileKind {
		case KindWAL:
			wal = g.Total.Count == flood/2/10
		case KindSnapshot:
			snap = g.Total.Count == 1
		}
	}
	if sum != calls || rep.Fsyncs != calls {
		t.Errorf("the groups count %d calls, the report %d, want %d", sum, rep.Fsyncs, calls)
	}
	// Each group is folded once (the one-call flood never comes back):
	// the folded ones and those apart are all the groups there were.
	if other.Folded+folded != flood+2 {
		t.Errorf("%d folded + %d apart, want %d groups", other.Folded, folded, flood+2)
	}
	if !wal || !snap {
		t.Errorf("etcd's WAL group (%d calls) or snapshot group (1 call) not kept apart whole: %v %v", flood/2/10, wal, snap)
	}
	if len(rep.Writes) != MaxGroups+1 || rep.Writes[MaxGroups].Folded == 0 {
		t.Errorf("%d write groups, want %d and other", len(rep.Writes), MaxGroups)
	}
}

// TestReportGroupsKeepAHeavyHitter: another local user's processes cannot
// fold etcd's WAL group away (a hostile check, 2026-12-06): 32 of its
// processes fsync a */member/wal/*.wal file first, 5 calls each, then 8
// more, 200 calls each, shuffled with etcd's 100 slow calls. Under the
// rule "fold the fewest calls since its row began" etcd's group came back
// with 1 call each time and was the next folded: no etcd row, its 50 ms
// p99 in other (verdict n/a), and --fail-over-budget exited 0. With each
// group's estimate of all its calls, etcd's (over 1/MaxGroups of them)
// keeps a row with the verdict over budget.
func TestReportGroupsKeepAHeavyHitter(t *testing.T) {
	b := NewReportBuilder()
	rec := func(pid uint32, ns int64) {
		b.Add(&FsyncRecord{PID: pid, Comm: "x", Dev: "8:0", FS: "ext4", FileKind: KindWAL, Syscall: "fdatasync", TotalNs: ns})
	}
	for p := range uint32(32) {
		for range 5 {
			rec(1000+p, 1e5)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var rest []uint32
	for p := range uint32(8) {
		for range 200 {
			rest = append(rest, 2000+p)
		}
	}
	for range 100 {
		rest = append(rest, 7) // etcd
	}
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, p := range rest {
		ns := int64(1e5)
		if p == 7 {
			ns = 50e6
		}
		rec(p, ns)
	}
	rep := b.Report(0, 0, nil)
	var etcd *Group
	for i := range rep.Groups {
		if rep.Groups[i].Key.PID == 7 {
			etcd = &rep.Groups[i]
		}
	}
	if etcd == nil {
		t.Fatalf("no row of etcd's WAL group among %d", len(rep.Groups))
	}
	if etcd.Verdict != VerdictOverBudget {
		t.Errorf("etcd's WAL group: %d calls, verdict %q, want over budget", etcd.Total.Count, etcd.Verdict)
	}
	t.Logf("etcd's row: %d of its 100 calls (the rest in other, folded %d rows)", etcd.Total.Count, rep.Groups[len(rep.Groups)-1].Folded)
}

// TestReportFewGroupsUnfolded: up to MaxGroups groups, none is folded.
func TestReportFewGroupsUnfolded(t *testing.T) {
	b := NewReportBuilder()
	for i := range MaxGroups {
		b.Add(&FsyncRecord{PID: uint32(i + 1), Comm: "x", FileKind: KindOther, Syscall: "fsync", TotalNs: 1})
	}
	rep := b.Report(0, 0, nil)
	for _, g := range rep.Groups {
		if g.Folded != 0 {
			t.Fatalf("%d groups: one folded", MaxGroups)
		}
	}
	if len(rep.Groups) != MaxGroups {
		t.Errorf("%d groups, want %d", len(rep.Groups), MaxGroups)
	}
}

// TestLevelsBounded: calls on 1,000 dm devices make MaxLevelRows rows a
// level and one that folds the rest, every call counted once; a dm device
// with many calls, seen last, stays apart.
func TestLevelsBounded(t *testing.T) {
	b := NewReportBuilder()
	rec := func(i int) {
		d := fmt.Sprintf("dm-%d", i)
		b.Add(&FsyncRecord{PID: 1, Comm: "x", DevName: d, FS: "ext4", FileKind: KindWAL, Syscall: "fsync", TotalNs: 1,
			DM: &DMLevel{Dev: "253:1", DevName: d, Targets: []string{fmt.Sprintf("8:%d", i)}}})
	}
	for i := range 1000 {
		rec(i)
	}
	for range 5 {
		rec(7777)
	}
	rep := b.Report(0, 0, nil)
	rows := map[string][]LevelRow{}
	for _, r := range rep.Levels {
		rows[r.Level] = append(rows[r.Level], r)
	}
	for _, lv := range []string{LevelUpper, LevelDM, LevelLower} {
		rs := rows[lv]
		if len(rs) != MaxLevelRows+1 || rs[len(rs)-1].Folded != 1001-MaxLevelRows {
			t.Fatalf("%s: %d rows, the last folding %d; want %d and %d", lv, len(rs), rs[len(rs)-1].Folded, MaxLevelRows+1, 1001-MaxLevelRows)
		}
		n, kept := int64(0), false
		for _, r := range rs {
			n += r.Total.Count
			kept = kept || r.Total.Count == 5
		}
		if n != 1005 || !kept {
			t.Errorf("%s: %d calls counted (want 1005), the busy device apart: %v", lv, n, kept)
		}
	}
}

// TestSyscallNamesBounded: a group lists at most MaxSyscallNames distinct
// syscall names and MoreSyscalls after them, however many a recording
// holds (a hostile check: 250,000 names in one group, 72 s).
func TestSyscallNamesBounded(t *testing.T) {
	b := NewReportBuilder()
	for i := range 100_000 {
		b.Add(&FsyncRecord{PID: 1, Comm: "x", FileKind: KindWAL, Syscall: fmt.Sprint("s", i), TotalNs: 1})
	}
	rep := b.Report(0, 0, nil)
	if s := rep.Groups[0].Syscalls; len(s) != MaxSyscallNames+1 || s[len(s)-1] != MoreSyscalls {
		t.Errorf("syscalls %q, want %d names and %q", s, MaxSyscallNames, MoreSyscalls)
	}
	if rep.Groups[0].Total.Count != 100_000 {
		t.Errorf("%d calls counted", rep.Groups[0].Total.Count)
	}
}

// TestReportExactValuesBounded (issue 25): 16 device-mapper groups of
// stats.ExactLimit-1 calls each, every series of their groups and level
// rows exact before, took 505-562 MiB in `report`; the builder's series
// now keep MaxExactValues exact values together, the rest binned (within
// 0.8%, Summary.Binned), every call counted, the min and max exact.
func TestReportExactValuesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("1 M calls")
	}
	b := NewReportBuilder()
	const groups, calls = 16, stats.ExactLimit - 1
	grew := testenv.HeapGrowth(func() any {
		for g := range groups {
			d := fmt.Sprintf("dm-%d", g)
			dm := &DMLevel{Dev: fmt.Sprintf("253:%d", g), DevName: d, Targets: []string{fmt.Sprintf("8:%d", g)}}
			for i := range calls {
				v := int64(1000 + i)
				b.Add(&FsyncRecord{PID: uint32(g + 1), Comm: "x", Dev: dm.Dev, DevName: d, FS: "ext4", FileKind: KindOther, Syscall: "fsync",
					TotalNs: v, Layers: Layers{OtherNs: v}, DM: dm})
			}
		}
		return b
	})
	t.Logf("the builder holds %d MiB", grew>>20)
	if grew > 64<<20 {
		t.Errorf("the builder holds %d MiB, want under 64 (MaxExactValues: %d MiB of values)", grew>>20, MaxExactValues*8>>20)
	}
	rep := b.Report(0, 0, nil)
	binned := 0
	for _, g := range rep.Groups {
		if g.Total.Count != calls || g.Total.Min != 1000 || g.Total.Max != 1000+calls-1 {
			t.Errorf("group %v: %d calls, min %d, max %d; want %d, 1000, %d", g.Key, g.Total.Count, g.Total.Min, g.Total.Max, calls, 1000+calls-1)
		}
		if g.Total.Binned {
			binned++
			if exact := int64(1000 + calls/2); math.Abs(float64(g.Total.P50-exact)) > float64(exact)/128 {
				t.Errorf("group %v: binned p50 %d, exact %d: more than 0.8%% apart", g.Key, g.Total.P50, exact)
			}
		}
	}
	if binned == 0 || binned == groups {
		t.Errorf("%d of %d groups binned, want some exact and the rest binned", binned, groups)
	}
}

// TestUntracedLevelsCounted (issue 25): past MaxUntracedLevels untraced
// (disk, filesystem) pairs the report lists, the flush requests on the
// others are counted in one row; before, they were dropped unsaid.
func TestUntracedLevelsCounted(t *testing.T) {
	b := NewReportBuilder()
	const pairs = MaxUntracedLevels + 24
	for i := range pairs {
		for range 2 { // each pair twice: a pair listed is not counted again
			b.Add(&FsyncRecord{PID: 1, Comm: "x", DevName: "loop0", FS: "ext4", FileKind: KindWAL, Syscall: "fsync", TotalNs: 1,
				Requests: []Request{{Role: RoleFlush, Dev: "7:0", HostUntraced: fmt.Sprintf("fuse.fs%d", i)}}})
		}
	}
	listed, dropped := 0, int64(0)
	for _, r := range b.Report(0, 0, nil).Levels {
		if r.Untraced != "" {
			listed++
		}
		dropped += r.UntracedDropped
	}
	if listed != MaxUntracedLevels || dropped != 2*(pairs-MaxUntracedLevels) {
		t.Errorf("%d untraced rows and %d requests counted past them, want %d and %d", listed, dropped, MaxUntracedLevels, 2*(pairs-MaxUntracedLevels))
	}
}

// TestLevelsFoldedCountsDevices (issue 25): a level's "devices folded" is
// the distinct devices folded, not the folds: 20 devices in turn, 50
// rounds, fold one device, seen again, many times; before, each fold
// counted (hundreds of "devices" out of 20).
func TestLevelsFoldedCountsDevices(t *testing.T) {
	b := NewReportBuilder()
	const devs, rounds = MaxLevelRows + 4, 50
	for range rounds {
		for i := range devs {
			d := fmt.Sprintf("dm-%d", i)
			b.Add(&FsyncRecord{PID: 1, Comm: "x", DevName: d, FS: "ext4", FileKind: KindWAL, Syscall: "fsync", TotalNs: 1,
				DM: &DMLevel{Dev: "253:1", DevName: d, Targets: []string{fmt.Sprintf("8:%d", i)}}})
		}
	}
	for _, r := range b.Report(0, 0, nil).Levels {
		if r.Folded > devs {
			t.Errorf("%s: %d devices folded, of %d devices", r.Level, r.Folded, devs)
		}
	}
}

// TestLevelsFoldedPastKeyBound (issue 25, round three): a level remembers
// at most MaxFoldedDevices folded devices to count each once; past that
// every fold counted, so a device folded twice counted twice and a report
// of 70,000 dm devices seen twice said more devices folded than it had
// devices (74,433 before). Past the bound the count stays a lower bound,
// MaxFoldedDevices, which the table says is "or more".
func TestLevelsFoldedPastKeyBound(t *testing.T) {
	b := NewReportBuilder()
	const devs = 70_000
	for range 2 {
		for i := range devs {
			d := fmt.Sprintf("dm-%d", i)
			b.Add(&FsyncRecord{PID: 1, Comm: "x", DevName: d, FS: "ext4", FileKind: KindWAL, Syscall: "fsync", TotalNs: 1,
				DM: &DMLevel{Dev: "253:1", DevName: d, Targets: []string{"8:1"}}})
		}
	}
	folded := 0
	for _, r := range b.Report(0, 0, nil).Levels {
		if r.Folded == 0 {
			continue
		}
		folded++
		t.Logf("%s: %d devices folded, of %d", r.Level, r.Folded, devs)
		if r.Folded > devs || r.Folded != MaxFoldedDevices {
			t.Errorf("%s: %d devices folded, of %d devices: want the bound, %d (a lower bound)", r.Level, r.Folded, devs, MaxFoldedDevices)
		}
	}
	if folded == 0 {
		t.Fatal("no level folded a device")
	}
}
