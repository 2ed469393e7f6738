package render

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// FsyncReport prints the report as the human table of `etcdscope fsync`
// and `etcdscope report`.
func FsyncReport(w io.Writer, r *analysis.Report) error {
	bw := NewTerminal(w) // comms and paths come from other users' processes
	if r.LossIsUnknown() {
		fmt.Fprintf(bw, "etcdscope fsync report: %d calls, lost events and missed probe runs %s\n", r.Fsyncs, LossUnknown(r))
	} else {
		fmt.Fprintf(bw, "etcdscope fsync report: %d calls, %d lost events, %d missed probe runs", r.Fsyncs, r.LostEvents, r.MissedEvents)
		if r.LostEvents > 0 {
			fmt.Fprintf(bw, " (ring buffer overflowed: numbers below miss events; raise --ring-size)")
		}
		switch {
		case r.MissedEvents > 0 && len(r.MissedPrograms) > 0:
			// Which programs, and what their runs can leave out, as
			// serve's minute line says it.
			fmt.Fprintf(bw, " (skipped by the kernel, no ring size brings them back%s: %s)", MissedWhich(r.MissedPrograms), MissedEffect(analysis.MissEffectOf(r.MissedPrograms)))
		case r.MissedEvents > 0:
			fmt.Fprint(bw, " (skipped by the kernel, no ring size brings them back: a call or some of its requests may be missing)")
		}
		fmt.Fprintln(bw)
	}
	for _, u := range r.Unavailable {
		Unavailable(bw, u)
	}
	if r.DroppedEnters > 0 || r.DroppedPartials > 0 {
		fmt.Fprintf(bw, "not held: %d fsync enters past the %d in flight at once, %d partial block completions past the %d held (calls longer than 2 s may miss events; requests may miss bytes)\n",
			r.DroppedEnters, analysis.MaxInflight, r.DroppedPartials, analysis.MaxPartial)
	}
	if r.Unpartitioned > 0 {
		fmt.Fprintf(bw, "not partitioned: %d calls the kernel could not assemble (--kernel-partition: a slot overflowed): no record, counted in lost\n", r.Unpartitioned)
	}
	for _, d := range r.Disks {
		if line := DiskCacheLine(d); line != "" {
			fmt.Fprintln(bw, line)
		}
	}
	shown := make([]bool, len(r.Writes)) // write groups printed under their fsync group
	for i := range r.Groups {
		g := &r.Groups[i]
		if g.Folded > 0 {
			fmt.Fprintf(bw, "\n%s  [%s]\n", FoldedTitle(g.Folded), strings.Join(g.Syscalls, ","))
		} else {
			fmt.Fprintf(bw, "\n%s\n", groupTitle(g.Key, g.Syscalls))
		}
		layerTable(bw, g.Total, g.Layers, g.OtherSplit)
		fua := ""
		if g.FUAWrites > 0 {
			fua = fmt.Sprintf(", and %d FUA write%s", g.FUAWrites, plural(g.FUAWrites))
		}
		fmt.Fprintf(bw, "  flushes per fsync: %.2f (%d flush request%s%s); waited on a journal commit: %d; errors: %d\n",
			g.FlushesPerFsync, g.Flushes, plural(g.Flushes), fua, g.WithCommit, g.Errors)
		if g.Total.Binned {
			fmt.Fprintf(bw, "  note: %s: p50/p99 binned as fio bins its latencies (64 bins per power of two, within 0.8%%); count, max and mean exact\n", binnedWhy(g.Total.Count))
		}
		if g.WithCommit == 0 && g.Key.FS == "ext4" {
			// Whether the device holds a journal, where the live run read
			// /proc/fs/jbd2 (Report.Journals); both notes where not known.
			jbd2, known := r.JBD2(g.Key.Dev)
			if known && !jbd2 {
				fmt.Fprintf(bw, "  note: no jbd2 journal on %s (not in /proc/fs/jbd2): no call waits on a commit; its REQ_META writes are the journal layer\n", g.Key.DevName)
			} else {
				fmt.Fprintf(bw, "  note: no call waited on a jbd2 commit: %s\n", noCommitWhy(g.Key.FileKind))
			}
			if !known {
				fmt.Fprintln(bw, "  note: an ext4 without a journal has no jbd2 commits (its REQ_META writes are the journal layer then; ls /proc/fs/jbd2 lists the journals)")
			}
		}
		switch g.Verdict {
		case analysis.VerdictOK:
			fmt.Fprintf(bw, "  verdict: OK, p99 %s ms is under etcd's WAL fsync budget of %v\n", Ms(g.Total.P99), analysis.WALFsyncBudget)
		case analysis.VerdictOverBudget:
			d := g.Dominant()
			fmt.Fprintf(bw, "  verdict: OVER BUDGET, p99 %s ms exceeds etcd's WAL fsync budget of %v; most time in %s (%.0f%%)\n",
				Ms(g.Total.P99), analysis.WALFsyncBudget, d.Name, 100*d.Share)
		case analysis.VerdictInMemory:
			fmt.Fprintf(bw, "  verdict: not judged, %s keeps files in memory: these fsyncs reach no disk (trace the filesystem etcd's data directory is on)\n", g.Key.FS)
		default:
			if g.Folded > 0 {
				fmt.Fprintf(bw, "  verdict: n/a (the calls of %d groups together)\n", g.Folded)
				break
			}
			fmt.Fprintf(bw, "  verdict: n/a (etcd's %v budget is for WAL fsyncs)\n", analysis.WALFsyncBudget)
		}
		if g.Disk != nil {
			fmt.Fprintf(bw, "  disk verdict: %s\n    %s\n", DiskVerdictText(g.Disk), DiskVerdictNumbers(g.Disk))
		} else if g.DiskWhy != nil {
			// The layer table rounds shares: a 39.98% reads as 40.0%.
			fmt.Fprintf(bw, "  disk verdict: none (%s)\n", DiskWhyText(g.DiskWhy))
		}
		if d := g.Dominant(); d.Name == analysis.LayerOther && d.Share >= otherHintShare && len(g.OtherSplit) == 0 && !analysis.InMemoryFS(g.Key.FS) {
			// No kernel layer explains the time: the scheduler's view can.
			fmt.Fprintf(bw, "  note: %.0f%% of the time is in other (no block request or journal commit in flight): rerun with --sched to split it into runnable, running and blocked off I/O\n", 100*d.Share)
		}
		// Only the holes that can hide a call (lost events, runs of the
		// call's own programs) bear on the verdict; a block or journal
		// program's missed runs can only leave layers short.
		if bias := g.Bias.Hiding(); !bias.IsZero() {
			// Only the lost events are the ring's: a bigger ring brings
			// those back, never the probe runs the kernel skipped.
			hint := "the ring buffer overflowed: raise --ring-size"
			switch {
			case bias.LostEvents == 0:
				hint = "runs the kernel skipped, not the ring: --ring-size does not help"
			case bias.MissedRuns > 0:
				hint = "raise --ring-size for the lost events; it does not bring back the missed probe runs"
			}
			// A group without a verdict (not WAL files) still has its
			// numbers biased: say that instead of "verdict".
			what := "verdict"
			if !g.Verdict.Judged() {
				what = "numbers"
			}
			switch {
			case g.VerdictHolds && g.Verdict == analysis.VerdictOK:
				fmt.Fprintf(bw, "  verdict holds though %s: even if each hid a call of %v or more, p99 would stay under the budget (%s)\n",
					BiasCounts(bias), analysis.WALFsyncBudget, hint)
			case g.VerdictHolds:
				fmt.Fprintf(bw, "  verdict holds though %s: even if each hid a call under %v, p99 would stay over the budget (%s)\n",
					BiasCounts(bias), analysis.WALFsyncBudget, hint)
			case what == "verdict":
				// The verdict above may not hold: say so, not "biased",
				// which left a reader unsure whether the OK stands.
				fmt.Fprintf(bw, "  verdict uncertain: %s could each hide a call that would change it (%s)\n", BiasCounts(bias), hint)
			default:
				fmt.Fprintf(bw, "  %s biased: %s (%s)\n", what, BiasCounts(bias), hint)
			}
		}
		if l := LayerMissLine(r.MissedPrograms); g.Bias.MissedLayerRuns > 0 && l != "" {
			fmt.Fprintf(bw, "  %s\n", l)
		}
		for j := range r.Writes {
			if r.Writes[j].Key == g.Key && r.Writes[j].Folded == 0 && g.Folded == 0 {
				shown[j] = true
				fmt.Fprintf(bw, "  the write calls before them  [%s]\n", strings.Join(r.Writes[j].Syscalls, ","))
				writeTable(bw, &r.Writes[j])
			}
		}
	}
	for j := range r.Writes {
		if !shown[j] {
			w := &r.Writes[j]
			if w.Folded > 0 {
				fmt.Fprintf(bw, "\nwrite calls of %s  [%s]\n", FoldedTitle(w.Folded), strings.Join(w.Syscalls, ","))
			} else {
				fmt.Fprintf(bw, "\n%s\n", groupTitle(w.Key, w.Syscalls))
			}
			writeTable(bw, w)
		}
	}
	Levels(bw, r.Levels)
	return bw.Flush()
}

// noCommitWhy says why calls of a file kind on an ext4 with a journal can
// wait on no jbd2 commit. The WAL's preallocation is only the WAL files'
// reason: a directory's fsync forces a commit of whatever the journal
// holds (ext4_sync_file: ext4_force_commit for anything not a regular
// file), so it waits on none only when the journal holds nothing.
func noCommitWhy(kind string) string {
	switch kind {
	case analysis.KindWAL:
		// etcd preallocates its segments with fallocate, which leaves
		// unwritten extents: the first write of each block converts one,
		// and that conversion is what the fdatasync must commit (the
		// ext4-stacked golden: 111 of 196 WAL calls waited on a commit).
		return "with a journal etcd's WAL calls usually do (the first write to each extent of the WAL segments etcd preallocates is new metadata)"
	case analysis.KindWALDir:
		return "a directory's fsync commits whatever the journal holds: none when nothing changed since the last commit"
	}
	return "an fdatasync needs one only for new metadata (a new block, a larger size, an unwritten extent's first write), not to overwrite blocks"
}

// otherHintShare: from this share of a group's time in "other" (the
// largest layer), the report points to --sched.
const otherHintShare = 0.5

// groupTitle is the line above a group's table.
// FoldedTitle names the group that sums the groups past
// analysis.MaxGroups (analysis.Group.Folded).
func FoldedTitle(folded int64) string {
	return fmt.Sprintf("other (%d row%s folded: a report keeps %d rows apart, every group with over 1/%d of the calls among them)", folded, plural(folded), analysis.MaxGroups, analysis.MaxGroups)
}

func groupTitle(k analysis.GroupKey, syscalls []string) string {
	dev := k.Dev
	if k.DevName != "" {
		dev = k.DevName + " (" + k.Dev + ")"
	}
	return OneLine(fmt.Sprintf("%s pid %d  %s on %s  %s files  [%s]", k.Comm, k.PID, k.FS, dev, k.FileKind, strings.Join(syscalls, ",")))
}

// layerTable prints a group's total and layer rows with their header.
// otherSplit (fsync --sched) is printed under the other row.
func layerTable(w io.Writer, total stats.Summary, layers, otherSplit []analysis.LayerStat) {
	fmt.Fprintf(w, "  %-15s %8s %10s %10s %10s %10s %7s\n", "layer", "count", "p50 ms", "p99 ms", "max ms", "mean ms", "share")
	row := func(name string, s stats.Summary, share float64) {
		fmt.Fprintf(w, "  %-15s %8d %10s %10s %10s %10s %6.1f%%\n", name, s.Count, Ms(s.P50), Ms(s.P99), Ms(s.Max), Ms(int64(s.Mean())), 100*share)
	}
	row("total", total, 1)
	for _, l := range layers {
		row(l.Name, l.Stats, l.Share)
		if l.Name == analysis.LayerOther {
			for _, o := range otherSplit {
				row("  "+o.Name, o.Stats, o.Share)
			}
		}
	}
}

// writeTable prints a write group (fsync --writes): its layers and waits.
func writeTable(w io.Writer, g *analysis.WriteGroup) {
	layerTable(w, g.Total, g.Layers, g.OtherSplit)
	fmt.Fprintf(w, "  throttled sleeps (balance_dirty_pages): %d; waits on a page under writeback: %d; errors: %d\n",
		g.Throttles, g.WritebackWaits, g.Errors)
}

// LevelDevice names a stacked level's row: "loop0 / ext4", or the row
// that folds the devices past analysis.MaxLevelRows.
func LevelDevice(r *analysis.LevelRow) string {
	if r.Folded > 0 {
		n := strconv.FormatInt(r.Folded, 10)
		if r.Folded >= analysis.MaxFoldedDevices {
			n += " or more"
		}
		return fmt.Sprintf("other (%s devices folded: a level keeps the %d with the most calls apart)", n, analysis.MaxLevelRows)
	}
	return OneLine(r.Device + " / " + r.FS)
}

// UntracedDroppedText says how many flush requests were on untraced
// levels past those listed (LevelRow.UntracedDropped).
func UntracedDroppedText(n int64) string {
	return fmt.Sprintf("not listed: %d flush requests on more untraced backing filesystems (past the %d listed, analysis.MaxUntracedLevels)", n, analysis.MaxUntracedLevels)
}

// UntracedText says why a stacked level has no numbers
// (analysis.LevelRow.Untraced) for its backing filesystem fs.
func UntracedText(why analysis.UntracedReason, fs string) string {
	switch why {
	case analysis.UntracedBackingFS:
		return "not traced: the loop driver's fsyncs of a backing file on " + fs + " come from a kernel thread and only ext4's sync_file tracepoints show them; their time stays in upper's device_flush"
	}
	return "not traced (" + string(why) + ")"
}

// levelHeadings say what each level other than upper is, in the stacked
// table's heading.
var levelHeadings = map[string]string{
	analysis.LevelBacking: "backing: the loop driver's fsyncs of its backing file for upper's flushes",
	analysis.LevelDM:      "dm: the time the device-mapper target held upper's bios",
	analysis.LevelLower:   "lower: the requests beneath it, per upper fsync",
}

// Levels prints the stacked-device table (analysis.BuildLevels), nothing
// when rows is empty.
func Levels(w io.Writer, rows []analysis.LevelRow) {
	if len(rows) == 0 {
		return
	}
	var heading []string
	for _, l := range analysis.LevelNames {
		if h := levelHeadings[l]; h != "" && slices.ContainsFunc(rows, func(r analysis.LevelRow) bool { return r.Level == l }) {
			heading = append(heading, h)
		}
	}
	heading = append(heading, "flushes: flush requests per upper fsync")
	fmt.Fprintf(w, "\nstacked levels (%s)\n", strings.Join(heading, "; "))
	fmt.Fprintf(w, "  %-7s %-22s %10s %10s %10s  %s\n", "level", "device / filesystem", "p50 ms", "p99 ms", "flushes", "layers (share)")
	for _, r := range rows {
		var parts []string
		for _, l := range r.Layers {
			if l.Share >= 0.005 {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", l.Name, 100*l.Share))
			}
		}
		if r.Untraced != "" {
			fmt.Fprintf(w, "  %-7s %-22s %s\n", r.Level, LevelDevice(&r), UntracedText(r.Untraced, r.FS))
			continue
		}
		if r.UntracedDropped > 0 {
			fmt.Fprintf(w, "  %-7s %s\n", r.Level, UntracedDroppedText(r.UntracedDropped))
			continue
		}
		extra := ""
		if r.NestedShare > 0 {
			extra = fmt.Sprintf("; %.0f%% of upper's device flush", 100*r.NestedShare)
		}
		fmt.Fprintf(w, "  %-7s %-22s %10s %10s %10.2f  %s%s\n", r.Level, LevelDevice(&r),
			Ms(r.Total.P50), Ms(r.Total.P99), r.FlushesPerFsync, strings.Join(parts, ", "), extra)
	}
}

// IntervalLine is the live line's summary of one interval (fsync
// --interval), e.g. "fsyncs=2 p50=2.000ms p99=4.000ms
// dominant=device_flush(75%)"; "fsyncs=0" for none.
func IntervalLine(iv analysis.Interval) string {
	if iv.Count == 0 {
		return "fsyncs=0"
	}
	return fmt.Sprintf("fsyncs=%d p50=%sms p99=%sms dominant=%s(%.0f%%)", iv.Count, Ms(iv.P50), Ms(iv.P99), iv.Dominant, 100*iv.Share)
}

// IntervalLoss is the live line's loss part: "lost=N missed=M", this
// interval's lost events and missed probe runs.
func IntervalLoss(lost, missed uint64) string {
	return fmt.Sprintf("lost=%d missed=%d", lost, missed)
}

// IntervalRow is one live line of fsync --interval: the time, the
// interval's calls and its losses; lossErr when the lost count could not
// be read (never shown as 0); last for the partial interval at the end.
func IntervalRow(at time.Time, iv analysis.Interval, lost, missed uint64, lossErr error, last bool) string {
	loss := IntervalLoss(lost, missed)
	if lossErr != nil {
		loss = "lost=unknown (" + lossErr.Error() + ")"
	}
	row := at.Format("15:04:05") + " " + IntervalLine(iv) + " " + loss
	if last {
		row += " (last, partial interval)"
	}
	return row
}

// DiskCacheLine is the line the table and the page print for a disk's
// write cache, e.g. "disk nullb0 (252:0): write cache write back, FUA
// (...)"; "" when its cache is not known.
func DiskCacheLine(d analysis.DiskCache) string {
	if d.WriteCache == "" {
		return ""
	}
	what := "no FUA (the block layer follows each FUA write with a flush)"
	switch {
	case d.WriteCache != "write back":
		what = "no volatile cache (the block layer drops flushes and FUA)"
	case d.FUA:
		what = "FUA (a journal commit is a flush and a FUA write)"
	}
	return fmt.Sprintf("disk %s (%s): write cache %s, %s", d.Name, d.Dev, d.WriteCache, what)
}

// DiskVerdictText is the line the table, the page and the JSON summary's
// disk_verdict.text give a group's disk verdict: its kind, the number it
// rests on and what helps (docs/schema.md says how it is decided).
// DiskVerdictNumbers gives the rest of its numbers.
func DiskVerdictText(v *analysis.DiskVerdict) string {
	flush := fmt.Sprintf("device_flush %.0f%% of the time, %s ms per flush or FUA write", 100*v.DeviceFlushShare, Ms(v.PerFlushNs))
	switch {
	case v.Kind == analysis.DiskFloor && v.LoopDevice:
		return "floor: " + flush + ": the host's fsync of the loop's backing file (levels: backing): a faster host fsync helps, throttling not"
	case v.Kind == analysis.DiskFloor:
		return "floor: " + flush + ", a volatile write cache's fixed cost: a drive with power-loss protection helps, throttling other I/O does not"
	case v.Kind == analysis.DiskContention:
		return fmt.Sprintf("contention: block_queue %.0f%% of the time: other I/O on this disk delays etcd's (%s)", 100*v.BlockQueueShare, flush)
	}
	return v.Kind + ": " + flush
}

// DiskVerdictNumbers is the line under DiskVerdictText: the per-call
// numbers, as the JSON's disk_verdict fields have them.
func DiskVerdictNumbers(v *analysis.DiskVerdict) string {
	return fmt.Sprintf("device_flush p50 %s ms a call (the fixed price a floor shows); block_queue p99 %s ms a call, %.0f%% of the time (the queue contention shows)",
		Ms(v.DeviceFlushP50Ns), Ms(v.BlockQueueP99Ns), 100*v.BlockQueueShare)
}

// BiasCounts words a trace's holes as the summary counts them: "3 lost
// events, 1 missed probe run", a part only where its count is not 0. The
// table and the page (report/) say it after "biased: " or "holds though";
// the JSON's groups[].biased carries the counts (TestBiasCountsAsTheJSON).
func BiasCounts(b analysis.Bias) string {
	var parts []string
	if b.LostEvents > 0 {
		parts = append(parts, fmt.Sprintf("%d lost event%s", b.LostEvents, plural(int64(b.LostEvents))))
	}
	if b.MissedRuns > 0 {
		parts = append(parts, fmt.Sprintf("%d missed probe run%s", b.MissedRuns, plural(int64(b.MissedRuns))))
	}
	return strings.Join(parts, ", ")
}

// MissedEffect words what missed probe runs of that effect can leave out
// (analysis.ProgramMissEffect; docs/metrics.md#missed-probe-runs): serve's
// minute line and fsync's report say it alike.
func MissedEffect(e analysis.MissEffect) string {
	if w, ok := missedEffectWords[e]; ok {
		return w
	}
	return "calls may be uncounted or short" // analysis.MissHidesCalls
}

// missedEffectWords are MissedEffect's words of the effects that leave a
// counted call's layers short.
var missedEffectWords = map[analysis.MissEffect]string{
	analysis.MissBlockLayers:   "block layer times of calls may be short",
	analysis.MissJournalLayers: "journal times of calls may be short",
	analysis.MissLayers:        "block layer and journal times of calls may be short",
}

// MissedWhich names the programs that missed runs, the most first: "
// (block_rq_complete)", " (block_rq_complete +2)" ("" for none).
func MissedWhich(progs []analysis.MissedRuns) string {
	switch {
	case len(progs) == 1:
		return " (" + progs[0].Program + ")"
	case len(progs) > 1:
		return fmt.Sprintf(" (%s +%d)", progs[0].Program, len(progs)-1)
	}
	return ""
}

// LayerMissLine words the missed runs of programs that cannot hide a call
// (analysis.LayerMisses), "" when none: how many, which programs, and
// what they can leave short, in serve's words (MissedEffect).
func LayerMissLine(progs []analysis.MissedRuns) string {
	layer, runs := analysis.LayerMisses(progs)
	if runs == 0 {
		return ""
	}
	return fmt.Sprintf("%d missed probe run%s%s cannot hide a call: %s (runs the kernel skipped: --ring-size does not bring them back)",
		runs, plural(int64(runs)), MissedWhich(layer), MissedEffect(analysis.MissEffectOf(layer)))
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// binnedWhy says why a group's quantiles are binned: it outgrew
// stats.ExactLimit, or the report's exact values were spent on other
// series first (analysis.MaxExactValues).
func binnedWhy(calls int64) string {
	if calls > stats.ExactLimit {
		return fmt.Sprintf("over %d calls", stats.ExactLimit)
	}
	return fmt.Sprintf("the report's %d exact values (analysis.MaxExactValues) spent", analysis.MaxExactValues)
}

// Unavailable writes the "unavailable:" lines of a probe that did not
// attach: the probe and what goes dark lead, why on an indented line under
// it, so that the number of words per line stays within maxLineRunes. An
// older entry (u.Text: one string, "probe: what goes dark (why)") is split
// at its last parentheses, or is one line without them.
func Unavailable(w io.Writer, u analysis.Unavailable) {
	what, why := UnavailableWords(u)
	if why == "" {
		fmt.Fprintf(w, "unavailable: %s\n", what)
		return
	}
	fmt.Fprintf(w, "unavailable: %s\n  why: %s\n", what, why)
}

// UnavailableWords words u as the table and the page say it: the probe
// and what goes dark, and why ("" when an older entry said no why).
func UnavailableWords(u analysis.Unavailable) (what, why string) {
	if u.Text != "" || u.Reason == "" {
		s := u.Probe
		if u.Text != "" {
			s += ": " + u.Text
		}
		if what, why, ok := cutReason(s); ok {
			return what, why
		}
		return s, ""
	}
	what = u.Probe
	switch {
	case u.Part != "" && u.Probe != "":
		what = u.Part + " (" + u.Probe + ")"
	case u.Part != "":
		what = u.Part
	}
	if d := darkWords(u.Dark); d != "" {
		what += ": " + d
	}
	why = reasonWords(u.Reason, u.Module)
	if u.Err != "" {
		why += ": " + u.Err
	}
	return what, why
}

// JBD2WaitFallback says what measures the journal layer when neither
// jbd2_log_wait_commit probe attaches (this build machine: fentry refused,
// kprobes compiled out). The probe's line and etcdscope check's kprobes
// line both carry it, so that the missing probe reads as what it is:
// optional, with nothing to fix.
const JBD2WaitFallback = "journal layer by overlap with jbd2 commits"

// darkWords words what goes dark without a probe (event.Dark).
func darkWords(d event.Dark) string {
	switch d {
	case event.DarkJBD2Commits:
		return "no jbd2 commits: an ext4 fsync's wait on its journal commit unseen"
	case event.DarkXFSLogForce:
		return "no xfs_log_force: an xfs fsync's log force unseen"
	case event.DarkKthreadFsyncs:
		return "fsyncs by kernel threads (loop backing files on ext4) unseen"
	case event.DarkJournalWaitExact:
		return "optional, " + JBD2WaitFallback
	case event.DarkIOUring:
		return "io_uring requests not timed"
	case event.DarkCommitFunction:
		return "its part of each write not timed"
	case event.DarkNone:
		return ""
	}
	return string(d)
}

// reasonWords words why a probe did not attach (event.Reason), of module
// where the reason is a module's.
func reasonWords(r event.Reason, module string) string {
	switch r {
	case event.ReasonModuleNotLoaded:
		return module + " not loaded: no " + module + " tracepoints"
	case event.ReasonNoModuleBTF:
		return fmt.Sprintf("%s is a module and this kernel has no BTF for modules (/sys/kernel/btf/%s; CONFIG_DEBUG_INFO_BTF_MODULES, Linux 5.11+)", module, module)
	case event.ReasonNoIOUringTracepoint:
		return "no io_uring tracepoint (CONFIG_IO_URING=n or a kernel before 5.19)"
	case event.ReasonRefused:
		return "could not be attached"
	case event.ReasonNoFunction:
		return "not found in the binary"
	case event.ReasonConfigured:
		return "left unprobed, as configured (commit --grpc=false)"
	case event.ReasonLoadFailed:
		return "its programs did not load"
	case event.ReasonAttachFailed:
		return "did not attach"
	}
	return string(r)
}

// cutReason splits s before its last balanced parentheses, when s ends
// with them and something comes before: "a (b (c))" is "a" and "b (c)".
func cutReason(s string) (what, why string, ok bool) {
	if !strings.HasSuffix(s, ")") {
		return "", "", false
	}
	depth := 0
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			if depth--; depth == 0 {
				what = strings.TrimRight(s[:i], " ")
				return what, s[i+1 : len(s)-1], what != "" && strings.HasSuffix(s[:i], " ")
			}
		}
	}
	return "", "", false
}
