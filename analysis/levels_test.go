package analysis

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestLevelNamesPinned: the stacked levels' names are the summary's
// levels[].level and the exporter's level label, which dashboards and
// recordings hold: a change is a new SummaryVersion (docs/schema.md).
func TestLevelNamesPinned(t *testing.T) {
	if want := []string{"upper", "backing", "dm", "lower"}; !slices.Equal(LevelNames, want) {
		t.Errorf("LevelNames %q, want %q", LevelNames, want)
	}
	if UntracedBackingFS != "backing_fs_unseen" || SummaryVersion != 3 { // 3 changed the biased field, not these
		t.Errorf("untraced reason %q, summary version %d", UntracedBackingFS, SummaryVersion)
	}
}

// TestLevelsLoopAndDMApart: a recording with calls on a loop device and
// calls on a device-mapper device gives the backing fsyncs and the dm
// target's hold rows of their own levels (version 1 put both in "L2").
func TestLevelsLoopAndDMApart(t *testing.T) {
	loop := FsyncRecord{DevName: "loop0", FS: "ext4", TotalNs: 1000, Layers: Layers{DeviceFlushNs: 600, OtherNs: 400},
		Requests: []Request{{Role: RoleFlush, Host: []FsyncRecord{{DevName: "vda", FS: "ext4", TotalNs: 300, Layers: Layers{OtherNs: 300}}}}}}
	dm := FsyncRecord{DevName: "dm-0", FS: "xfs", TotalNs: 1000, Layers: Layers{DMNs: 700, OtherNs: 300},
		DM: &DMLevel{Dev: "253:0", DevName: "dm-0", HeldNs: 700, Targets: []string{"8:0"}, TargetNames: []string{"sda"}}}
	var got []string
	for _, r := range BuildLevels([]FsyncRecord{loop, dm}) {
		got = append(got, r.Level+" "+r.Device+"/"+r.FS)
	}
	if want := []string{"upper dm-0/xfs", "upper loop0/ext4", "backing vda/ext4", "dm dm-0/dm", "lower sda/disk"}; !slices.Equal(got, want) {
		t.Errorf("levels %q, want %q", got, want)
	}
}

// TestReadSummaryV1Levels: a version 1 summary (levels "L1", "L2", "L3",
// an untraced sentence) reads as version 2: each row under its role's
// name, the dm rows (fs "dm", or a folded row whose time is all dm) as
// dm, and the sentence as UntracedBackingFS.
func TestReadSummaryV1Levels(t *testing.T) {
	const v1 = `{"type":"summary","v":1,"fsyncs":3,"lost_events":0,"missed_events":0,"groups":[],"levels":[` +
		`{"level":"L1","device":"loop0","fs":"ext4","total_ns":{"count":1,"sum":9},"flushes_per_fsync":1,"layers":[]},` +
		`{"level":"L2","device":"vda","fs":"ext4","total_ns":{"count":1,"sum":5},"flushes_per_fsync":1,"layers":[],"nested_share":0.5},` +
		`{"level":"L2","device":"dm-0","fs":"dm","total_ns":{"count":1,"sum":4},"flushes_per_fsync":0,"layers":[{"name":"dm","stats_ns":{"count":1,"sum":4},"share":1}]},` +
		`{"level":"L2","device":"","fs":"","total_ns":{"count":1,"sum":4},"flushes_per_fsync":0,"layers":[{"name":"other","stats_ns":{"count":1,"sum":0},"share":0},{"name":"dm","stats_ns":{"count":1,"sum":4},"share":1}],"folded_devices":20},` +
		`{"level":"L3","device":"sda","fs":"disk","total_ns":{"count":1,"sum":1},"flushes_per_fsync":1,"layers":[]},` +
		`{"level":"L2","device":"7:1","fs":"xfs","total_ns":{"count":0,"sum":0},"flushes_per_fsync":0,"layers":null,"untraced":"not traced: the loop driver's fsyncs of a backing file on xfs come from a kernel thread"},` +
		`{"level":"L2","device":"","fs":"","total_ns":{"count":0,"sum":0},"flushes_per_fsync":0,"layers":null,"untraced_dropped":3}]}` + "\n"
	_, sum, err := ReadJSONL(strings.NewReader(v1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sum.Levels {
		got = append(got, r.Level+" "+r.Device+"/"+r.FS+" "+string(r.Untraced))
	}
	want := []string{"upper loop0/ext4 ", "backing vda/ext4 ", "dm dm-0/dm ", "dm / ", "lower sda/disk ", "backing 7:1/xfs backing_fs_unseen", "backing / "}
	if !slices.Equal(got, want) || sum.Version != SummaryVersion {
		t.Errorf("v1 levels read as %q (v%d), want %q (v%d)", got, sum.Version, want, SummaryVersion)
	}
	// A version 2 summary is read as written (not mapped: its dm rows
	// stay backing), one with version 1's names is no summary a run
	// writes, and a newer one is refused.
	v2 := strings.NewReplacer(`"v":1`, `"v":2`, `"level":"L1"`, `"level":"upper"`, `"level":"L2"`, `"level":"backing"`, `"level":"L3"`, `"level":"lower"`,
		`"not traced: the loop driver's fsyncs of a backing file on xfs come from a kernel thread"`, `"backing_fs_unseen"`).Replace(v1)
	if _, sum, err := ReadJSONL(strings.NewReader(v2)); err != nil || sum.Levels[0].Level != LevelUpper || sum.Levels[2].Level != LevelBacking {
		t.Errorf("v2: %v, %+v", err, sum.Levels)
	}
	if _, _, err := ReadJSONL(strings.NewReader(strings.Replace(v1, `"v":1`, `"v":2`, 1))); !errors.Is(err, ErrForgedSummary) {
		t.Errorf("v2 with version 1's level names: %v, want ErrForgedSummary", err)
	}
	if _, _, err := ReadJSONL(strings.NewReader(strings.Replace(v1, `"v":1`, `"v":3`, 1))); err == nil {
		t.Error("a version 3 summary was read")
	}
}
