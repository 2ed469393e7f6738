// Tests of dm.go: a call on dm-delay over a loop device, in three levels.

package analysis

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

// TestDMLevel: an fdatasync on ext4 on dm-delay over loop0, as the kernel
// traces it (times in µs × 1000): its data write goes through dm at once,
// its flush is held 20 ms by the target before the remap; the loop
// device's requests are the level beneath. Every instant has one owner and
// the three levels sum to the call. The flush request beneath comes
// without an insert event (issued from kblockd) or, as on Debian's 6.12,
// inserted by the flush state machine after the remap: either way the
// disk beneath owns the wait from the remap, not dm. Also when the flush
// bio got its request (block_getrq) only at that insert, not at the remap
// (a VM run: 5.2 ms later; its wait was dm's before), and when it got it
// late and no insert came (Debian's 6.12 under TCG: 0.06-0.48 ms after
// the remap on every call, 2.35 ms on one first call; that gap was dm's
// until 2026-12-07).
func TestDMLevel(t *testing.T) {
	for _, c := range []struct{ insert, getrq uint64 }{{0, 22200 * 1000}, {0, 22250 * 1000}, {22250 * 1000, 22200 * 1000}, {22250 * 1000, 22250 * 1000}} {
		t.Run(fmt.Sprintf("flush_insert=%d,getrq=%d", c.insert, c.getrq), func(t *testing.T) { testDMLevel(t, c.insert, c.getrq) })
	}
}

func testDMLevel(t *testing.T, flushInsert, flushGetrq uint64) {
	const us = 1000
	dmDev, loop := event.MkDev(253, 0), event.MkDev(7, 0)
	a := NewAttributor(func(d event.Dev) (string, []event.Dev) {
		switch d {
		case dmDev:
			return "dm-0", []event.Dev{dmDev}
		case loop:
			return "loop0", []event.Dev{loop}
		}
		return "", nil
	})
	lb := func(rq uint64, op event.Op, f event.ReqFlags, ins, iss, cpl uint64, t uint32, comm string) event.Block {
		b := blk(rq, op, f, ins, iss, cpl, t, comm)
		b.Dev, b.Sector = loop, 8
		return b
	}
	for _, ev := range []any{
		event.FsyncEnter{TID: tid, StartNs: 500 * us},
		event.BioRemap{Dev: dmDev, Target: loop, Op: event.OpWrite, Flags: event.ReqSync, TID: tid, Sector: 8, RemapNs: 950 * us},
		lb(1, event.OpWrite, event.ReqSync, 0, 1100*us, 2000*us, tid, "etcd"), // from a plug: queued from its remap
		event.DMBio{Bio: 1, Dev: dmDev, Op: event.OpWrite, Flags: event.ReqSync, Bytes: 4096, TID: tid, Comm: "etcd", QueueNs: 900 * us, CompleteNs: 2100 * us},
		event.BioRemap{Dev: dmDev, Target: loop, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqSync, TID: 55, RemapNs: 22200 * us},
		event.FlushBio{Dev: loop, Op: event.OpWrite, Flags: event.ReqPreflush, TID: 55, QueueNs: flushGetrq},
		lb(2, event.OpFlush, 0, flushInsert, 22300*us, 22500*us, 0, ""),
		event.DMBio{Bio: 2, Dev: dmDev, Op: event.OpWrite, Flags: event.ReqPreflush | event.ReqSync, TID: tid, Comm: "etcd", QueueNs: 2200 * us, CompleteNs: 22600 * us},
		// another disk's dm bio and a read: not this call's
		event.DMBio{Bio: 3, Dev: event.MkDev(253, 5), Op: event.OpWrite, Flags: event.ReqPreflush, TID: tid, QueueNs: 3000 * us, CompleteNs: 4000 * us},
	} {
		a.Add(ev)
	}
	f := fsyncEv(500*us, 23000*us)
	f.Dev = dmDev
	rec := a.Attribute(f)
	want := Layers{DataWritebackNs: 900 * us, BlockQueueNs: 250 * us, DeviceFlushNs: 200 * us, DMNs: 20250 * us, OtherNs: 900 * us}
	if rec.Layers != want {
		t.Errorf("layers %+v, want %+v", rec.Layers, want)
	}
	if rec.Layers.Sum() != rec.TotalNs {
		t.Errorf("layers sum %d, total %d", rec.Layers.Sum(), rec.TotalNs)
	}
	if rec.DM == nil {
		t.Fatal("no dm level")
	}
	d := rec.DM
	if d.DevName != "dm-0" || !slices.Equal(d.TargetNames, []string{"loop0"}) || d.Bios != 2 || d.HeldNs != 20250*us {
		t.Errorf("dm level %+v", d)
	}
	if wl := (Layers{DataWritebackNs: 900 * us, BlockQueueNs: 250 * us, DeviceFlushNs: 200 * us}); d.Lower != wl {
		t.Errorf("lower %+v, want %+v", d.Lower, wl)
	}
	if fs := rec.TotalNs - d.HeldNs - d.Lower.Sum(); fs != 900*us {
		t.Errorf("filesystem level %d, want %d", fs, 900*us)
	}
	var remaps []uint64
	for _, q := range rec.Requests {
		if q.DM {
			remaps = append(remaps, q.RemapNs)
			if q.Target != "7:0" {
				t.Errorf("dm bio %+v: target %q", q, q.Target)
			}
		}
	}
	if !slices.Equal(remaps, []uint64{950 * us, 22200 * us}) {
		t.Errorf("remaps of the dm bios %v, want the data's at 950 µs and the flush's at 22200 µs", remaps)
	}
	// two flushes: the dm bio and the loop request beneath it
	if rec.Flushes != 2 {
		t.Errorf("flushes %d, want 2", rec.Flushes)
	}
	rows := BuildLevels([]FsyncRecord{rec})
	var got []string
	for _, r := range rows {
		got = append(got, r.Level+" "+r.Device+"/"+r.FS+" "+strconv.FormatInt(r.Total.Sum/1000, 10))
	}
	if w := []string{"upper dm-0/ext4 22500", "dm dm-0/dm 20250", "lower loop0/disk 1350"}; !slices.Equal(got, w) {
		t.Errorf("levels %q, want %q", got, w)
	}
	// the JSON round trip keeps the level
	var back FsyncRecord
	if err := json.Unmarshal(rec.AppendJSON(nil), &back); err != nil || !reflect.DeepEqual(back.DM, rec.DM) {
		t.Errorf("JSON round trip: %v, %+v", err, back.DM)
	}
}
