package analysis

import "testing"

// TestMissEffect: only a call's own programs' missed runs can hide a call
// and so weigh on a verdict (Bias.Hiding); a block or journal program's
// only leave layers short. Programs not known count as a call's.
func TestMissEffect(t *testing.T) {
	for _, c := range []struct {
		progs []MissedRuns
		want  MissEffect
	}{
		{nil, MissHidesCalls},
		{[]MissedRuns{{Program: "block_rq_complete", Runs: 5, Unseen: 5}}, MissBlockLayers},
		{[]MissedRuns{{Program: "jbd2_end_commit", Runs: 1}, {Program: "xfs_log_force", Runs: 1}}, MissJournalLayers},
		{[]MissedRuns{{Program: "block_rq_issue", Runs: 1}, {Program: "jbd2_start_commit", Runs: 1}}, MissLayers},
		{[]MissedRuns{{Program: "block_rq_complete", Runs: 3}, {Program: "sys_exit_fdatasync", Runs: 2}}, MissHidesCalls},
		{[]MissedRuns{{Program: "ext4_sync_file_enter", Runs: 1}}, MissHidesCalls},
		{[]MissedRuns{{Program: "some_new_program", Runs: 1}}, MissHidesCalls},
	} {
		if got := MissEffectOf(c.progs); got != c.want {
			t.Errorf("MissEffectOf(%v) = %d, want %d", c.progs, got, c.want)
		}
	}
	// The walk's run: 5 missed runs, all block_rq_complete's, 100 calls
	// at the budget's edge. The verdict stands (no hole can hide a call)
	// and the Bias says which runs were the layers'.
	b := NewReportBuilder()
	for i := range 100 {
		r := FsyncRecord{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: KindWAL, TotalNs: 1e6, Flushes: 1}
		if i == 99 {
			r.TotalNs = 20e6
		}
		b.Add(&r)
	}
	b.SetMissedPrograms([]MissedRuns{{Program: "block_rq_complete", Runs: 5, Unseen: 5}})
	rep := b.Report(0, 5, nil)
	g := rep.Groups[0]
	if g.Bias != (Bias{MissedRuns: 5, MissedLayerRuns: 5}) || !g.Bias.Hiding().IsZero() || g.VerdictHolds {
		t.Errorf("block misses: bias %+v (hiding %+v), holds %v; want 5 layer runs, none hiding", g.Bias, g.Bias.Hiding(), g.VerdictHolds)
	}
	b.SetMissedPrograms([]MissedRuns{{Program: "block_rq_complete", Runs: 3}, {Program: "sys_exit_fdatasync", Runs: 2}})
	rep = b.Report(0, 5, nil)
	if h := rep.Groups[0].Bias.Hiding(); h != (Bias{MissedRuns: 2}) {
		t.Errorf("mixed misses: hiding %+v, want the exit's 2", h)
	}
}
