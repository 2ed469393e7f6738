package analysis

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strings"
	"testing"
)

// TestDiskVerdict: the floor and contention verdicts at and either side
// of their thresholds, computed from records through the report builder.
func TestDiskVerdict(t *testing.T) {
	// Each call is 10 ms: flush and queue ms as given, the rest data
	// writeback; flushes flush requests per call.
	cases := []struct {
		name         string
		calls        int
		flush, queue int64 // ms of 10
		other        int64 // ms of 10 in "other" (the rest is data writeback)
		flushes      int
		want         string
		dev          string // DevName, "" for nvme0n1
	}{
		{"floor", 20, 6, 0, 0, 2, DiskFloor, ""},
		{"floor at the flush threshold", 20, 4, 0, 3, 1, DiskFloor, ""},
		{"flush under its threshold", 20, 3, 0, 0, 1, "", ""},
		{"flush not the largest layer", 20, 4, 0, 5, 1, "", ""},
		{"queue at the floor's limit", 20, 6, 1, 0, 1, "", ""},
		{"queue just under it", 20, 6, 0, 0, 1, DiskFloor, ""},
		{"contention", 20, 2, 5, 0, 1, DiskContention, ""},
		{"contention at the threshold", 20, 3, 3, 0, 1, DiskContention, ""},
		{"queue under the threshold", 20, 2, 2, 0, 1, "", ""},
		{"queue under the flush share", 20, 4, 3, 0, 1, "", ""},
		{"too few calls", DiskVerdictMinCalls - 1, 6, 0, 0, 1, "", ""},
		{"floor on a loop device", 20, 6, 0, 0, 2, DiskFloor, "loop3"},
		{"floor on a loop partition", 20, 6, 0, 0, 2, DiskFloor, "loop3p1"},
		{"floor on a disk named like loop", 20, 6, 0, 0, 2, DiskFloor, "loopy"},
	}
	const ms = 1_000_000
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var recs []FsyncRecord
			for i := 0; i < c.calls; i++ {
				l := Layers{DeviceFlushNs: c.flush * ms, BlockQueueNs: c.queue * ms, OtherNs: c.other * ms}
				l.DataWritebackNs = 10*ms - l.Sum()
				if c.name == "queue just under it" {
					l.BlockQueueNs, l.DataWritebackNs = ms-1000, l.DataWritebackNs-(ms-1000)
				}
				dev := cmp.Or(c.dev, "nvme0n1")
				recs = append(recs, FsyncRecord{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "259:0", DevName: dev, FS: "ext4", FileKind: KindWAL,
					TotalNs: 10 * ms, Layers: l, Flushes: c.flushes})
			}
			rep := BuildReport(recs, 0, 0, nil)
			d := rep.Groups[0].Disk
			switch {
			case c.want == "" && d != nil:
				t.Fatalf("verdict %q (%+v), want none", d.Kind, d)
			case c.want == "":
				return
			case d == nil:
				t.Fatalf("no verdict, want %q; layers %+v", c.want, rep.Groups[0].Layers)
			case d.Kind != c.want:
				t.Fatalf("verdict %q, want %q", d.Kind, c.want)
			}
			if d.DeviceFlushShare != float64(c.flush)/10 || d.DeviceFlushP50Ns != c.flush*ms {
				t.Errorf("flush share %v p50 %d, want %v and %d", d.DeviceFlushShare, d.DeviceFlushP50Ns, float64(c.flush)/10, c.flush*ms)
			}
			if want := c.flush * ms / int64(c.flushes); d.PerFlushNs != want {
				t.Errorf("per flush %d ns, want %d", d.PerFlushNs, want)
			}
			// No write cache on a loop device: the host's fsync
			// (render.TestDiskVerdictText words it).
			if loop := strings.HasPrefix(c.dev, "loop3"); d.LoopDevice != loop {
				t.Errorf("loop device %v, want %v", d.LoopDevice, loop)
			}
		})
	}
}

// TestDiskVerdictLoopReadBack: a floor verdict on a loop device is one
// again when a recording's summary is read back (LoopDevice is not in the
// JSON: its dev_name says it).
func TestDiskVerdictLoopReadBack(t *testing.T) {
	const ms = 1_000_000
	var recs []FsyncRecord
	for i := 0; i < DiskVerdictMinCalls; i++ {
		recs = append(recs, FsyncRecord{Type: "fsync", PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "7:3", DevName: "loop3", FS: "ext4", FileKind: KindWAL,
			TotalNs: 10 * ms, Layers: Layers{DeviceFlushNs: 6 * ms, DataWritebackNs: 4 * ms}, Flushes: 1})
	}
	rep := BuildReport(recs, 0, 0, nil)
	if d := rep.Groups[0].Disk; d == nil || !d.LoopDevice {
		t.Fatalf("verdict %+v, want floor on a loop device", d)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	_, back, err := ReadJSONL(bytes.NewReader(append(b, '\n')))
	if err != nil || len(back.Groups) != 1 || back.Groups[0].Disk == nil || !back.Groups[0].Disk.LoopDevice {
		t.Errorf("read back (%v): %+v", err, back.Groups)
	}
}
