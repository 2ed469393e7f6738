package analysis

import (
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

func TestAttributeWrite(t *testing.T) {
	a := NewAttributor(func(event.Dev) (string, []event.Dev) { return "vda1", []event.Dev{event.MkDev(254, 0)} })
	for _, tc := range []struct {
		name                   string
		start, end, thr, wbw   uint64
		wantThr, wantWB, other int64
	}{
		{"no wait", 100, 200, 0, 0, 0, 0, 100},
		{"throttled and a writeback wait", 1000, 9000, 6000, 500, 6000, 500, 1500},
		// Waits cannot sum over the call; if clocks disagree they are
		// clipped so the layers still partition it.
		{"clipped", 1000, 2000, 900, 300, 900, 100, 0},
		{"end before start", 2000, 1000, 5, 5, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := event.Write{Call: event.Fsync{Syscall: event.SysPwrite64, PID: 3, TID: 4, Comm: "etcd", Dev: event.MkDev(254, 1),
				FSType: "ext4", StartNs: tc.start, EndNs: tc.end, Ret: 4096}, ThrottledNs: tc.thr, Throttles: 2, WritebackWaitNs: tc.wbw, WritebackWaits: 1}
			r := a.AttributeWrite(&w)
			if r.Type != "write" || r.Syscall != "pwrite64" || r.DevName != "vda1" || r.Dev != "254:1" || len(r.Disks) != 1 || r.Disks[0] != "254:0" {
				t.Fatalf("record %+v", r)
			}
			if r.Layers.ThrottledNs != tc.wantThr || r.Layers.WritebackWaitNs != tc.wantWB || r.Layers.OtherNs != tc.other {
				t.Fatalf("layers %+v, want %d/%d/%d", r.Layers, tc.wantThr, tc.wantWB, tc.other)
			}
			if r.Layers.Sum() != r.TotalNs {
				t.Fatalf("layers sum %d, total %d", r.Layers.Sum(), r.TotalNs)
			}
		})
	}
}

// TestReportWrites: write records fold into their own groups, keyed as the
// fsync groups, with each layer's share of the summed wall time.
func TestReportWrites(t *testing.T) {
	b := NewReportBuilder()
	b.Add(&FsyncRecord{PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: "wal", Syscall: "fdatasync", TotalNs: 10})
	for _, w := range []WriteRecord{
		{PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: "wal", Syscall: "write", TotalNs: 100,
			Layers: WriteLayers{ThrottledNs: 60, OtherNs: 40}, Throttles: 1},
		{PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: "wal", Syscall: "pwrite64", TotalNs: 100,
			Layers: WriteLayers{WritebackWaitNs: 20, OtherNs: 80}, WritebackWaits: 1},
		{PID: 1, Comm: "etcd", Dev: "254:1", FS: "ext4", FileKind: "backend", Syscall: "pwrite64", TotalNs: 5, Ret: -28,
			Layers: WriteLayers{OtherNs: 5}},
	} {
		b.AddWrite(&w)
	}
	rep := b.Report(0, 0, nil)
	if rep.Fsyncs != 1 || len(rep.Groups) != 1 || len(rep.Writes) != 2 {
		t.Fatalf("fsyncs %d, groups %d, write groups %d", rep.Fsyncs, len(rep.Groups), len(rep.Writes))
	}
	g := rep.Writes[0]
	if g.Key != rep.Groups[0].Key || g.Total.Count != 2 || g.Throttles != 1 || g.WritebackWaits != 1 || g.Errors != 0 {
		t.Fatalf("first write group %+v", g)
	}
	want := map[string]float64{LayerThrottled: 0.3, LayerWritebackWait: 0.1, LayerOther: 0.6}
	for _, l := range g.Layers {
		if l.Share != want[l.Name] {
			t.Errorf("%s share %v, want %v", l.Name, l.Share, want[l.Name])
		}
	}
	if len(g.Syscalls) != 2 || g.Syscalls[0] != "pwrite64" || g.Syscalls[1] != "write" {
		t.Errorf("syscalls %v", g.Syscalls)
	}
	if rep.Writes[1].Errors != 1 || rep.Writes[1].Key.FileKind != "backend" {
		t.Errorf("second write group %+v", rep.Writes[1])
	}
}
