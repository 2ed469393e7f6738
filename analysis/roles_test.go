// Tests of roles.go: flush requests placed from their bios, flushes that
// rode on one in flight, FUA writes counted.

package analysis

import (
	"encoding/json"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

func TestFlushQueuedFromBio(t *testing.T) {
	a := NewAttributor(lookup)
	a.Add(blk(1, event.OpWrite, 0, 1100, 1150, 1300, tid, "etcd"))
	a.Add(event.FlushBio{Dev: diskDev, Op: event.OpFlush, Flags: event.ReqPreflush, TID: tid, QueueNs: 1400})
	a.Add(blk(2, event.OpFlush, event.ReqPreflush, 0, 1500, 1800, 3, "kworker/1:0H"))
	rec := a.Attribute(fsyncEv(1000, 2000))
	want := Layers{BlockQueueNs: 50 + 100, DataWritebackNs: 150, DeviceFlushNs: 300, OtherNs: 100 + 100 + 200}
	if rec.Layers != want {
		t.Fatalf("layers %+v want %+v", rec.Layers, want)
	}
	if rec.Requests[1].InsertNs != 1400 {
		t.Fatalf("flush request's insert should be its bio's queue time: %+v", rec.Requests[1])
	}
}

// TestFlushNotIssued: a flush that joined one already in flight completes
// without an issue; it counts as a flush, from its bio's queueing.
func TestFlushNotIssued(t *testing.T) {
	a := NewAttributor(lookup)
	a.Add(event.FlushBio{Dev: diskDev, Op: event.OpFlush, Flags: event.ReqPreflush, TID: tid, QueueNs: 1200})
	a.Add(event.Block{Rq: 9, Dev: diskDev, Op: event.OpFlush, Flags: event.ReqPreflush, CompleteNs: 1700, Final: true})
	rec := a.Attribute(fsyncEv(1000, 2000))
	want := Layers{DeviceFlushNs: 500, OtherNs: 500}
	if rec.Layers != want || rec.Flushes != 1 || !rec.Requests[0].NotIssued {
		t.Fatalf("layers %+v flushes %d requests %+v", rec.Layers, rec.Flushes, rec.Requests)
	}
}

// TestFUAWriteCounted: on a disk with FUA, ext4's journal commit is an
// empty flush (REQ_PREFLUSH, from kblockd) and the commit block written
// with REQ_FUA, which completes twice (at the disk, then, not issued,
// when its flush sequence ends): one flush and one FUA write, both
// device flush time, and a JSON record that says so.
func TestFUAWriteCounted(t *testing.T) {
	a := NewAttributor(lookup)
	a.Add(event.FlushBio{Dev: diskDev, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqFUA | event.ReqMeta, TID: 7, QueueNs: 1100})
	a.Add(blk(1, event.OpFlush, event.ReqPreflush, 0, 1200, 1500, 3, "kworker/0:1H"))
	a.Add(blk(2, event.OpWrite, event.ReqFUA|event.ReqMeta|event.ReqSync, 0, 1500, 1700, 7, "jbd2/vda-8"))
	a.Add(blk(2, event.OpWrite, event.ReqFUA|event.ReqMeta|event.ReqSync, 0, 0, 1710, 7, "jbd2/vda-8"))
	rec := a.Attribute(fsyncEv(1000, 2000))
	if rec.Flushes != 1 || rec.FUAWrites != 1 {
		t.Errorf("flushes %d, FUA writes %d; want 1 and 1; requests %+v", rec.Flushes, rec.FUAWrites, rec.Requests)
	}
	if want := (Layers{BlockQueueNs: 100, DeviceFlushNs: 500, OtherNs: 400}); rec.Layers != want {
		t.Errorf("layers %+v, want %+v", rec.Layers, want)
	}
	var back FsyncRecord
	if err := json.Unmarshal(rec.AppendJSON(nil), &back); err != nil || back.FUAWrites != 1 || back.Flushes != 1 {
		t.Errorf("JSON round trip: %v, flushes %d, FUA writes %d", err, back.Flushes, back.FUAWrites)
	}
	g := BuildReport([]FsyncRecord{rec, rec}, 0, 0, nil).Groups[0]
	if g.Flushes != 2 || g.FUAWrites != 2 || g.FlushesPerFsync != 1 {
		t.Errorf("group: flushes %d, FUA writes %d, per fsync %v", g.Flushes, g.FUAWrites, g.FlushesPerFsync)
	}
}
