// Tests of partition.go: layers from synthetic event streams, each instant
// owned once.

package analysis

import (
	"reflect"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		name    string
		events  []any
		fsync   event.Fsync
		want    Layers
		flushes int
		roles   []string
	}{{
		name:  "nothing traced: all other",
		fsync: fsyncEv(1000, 2000),
		want:  Layers{OtherNs: 1000},
		roles: []string{},
	}, {
		// ext4 fdatasync: own data write, jbd2 commit with journal write,
		// flush, commit block; the flush inside the commit goes to flush.
		name: "ext4 data, journal commit, flush",
		events: []any{
			event.FsyncEnter{TID: tid, StartNs: 1000},
			blk(1, event.OpWrite, event.ReqSync, 1100, 1150, 1300, tid, "etcd"),                 // data: queue 50, data 150
			blk(2, event.OpWrite, event.ReqSync|event.ReqMeta, 0, 1400, 1500, 7, "jbd2/vda1-8"), // journal write 100
			blk(3, event.OpFlush, 0, 0, 1500, 1800, 7, "jbd2/vda1-8"),                           // flush 300
			event.Journal{Source: event.JournalJBD2Commit, Dev: fsDev, Txn: 5, StartNs: 1350, EndNs: 1900},
		},
		fsync:   fsyncEv(1000, 2000),
		want:    Layers{BlockQueueNs: 50, DataWritebackNs: 150, JournalNs: 50 + 100 + 100, DeviceFlushNs: 300, OtherNs: 100 + 50 + 100},
		flushes: 1,
		roles:   []string{RoleData, RoleJournal, RoleFlush},
	}, {
		name: "overlaps are not double counted: flush wins over data, queue over data",
		events: []any{
			blk(1, event.OpWrite, 0, 1000, 1200, 1600, tid, "etcd"), // queue 1000-1200, data 1200-1600
			blk(2, event.OpFlush, 0, 0, 1100, 1400, 0, "kworker/0:1H"),
		},
		fsync:   fsyncEv(1000, 2000),
		want:    Layers{BlockQueueNs: 100, DeviceFlushNs: 300, DataWritebackNs: 200, OtherNs: 400},
		flushes: 1,
		roles:   []string{RoleFlush, RoleData}, // by issue time
	}, {
		name: "requests outside the window, of other disks, other threads' data, reads and late completions do not count",
		events: []any{
			blk(1, event.OpWrite, 0, 0, 500, 900, tid, "etcd"),    // completed before start
			blk(2, event.OpWrite, 0, 0, 1100, 1200, 555, "fio"),   // other thread's data
			blk(3, event.OpRead, 0, 0, 1100, 1200, tid, "etcd"),   // read
			blk(4, event.OpFlush, 0, 0, 1900, 2100, 0, "kworker"), // completes after exit
			func() event.Block { b := blk(5, event.OpFlush, 0, 0, 1100, 1200, 0, ""); b.Dev = other; return b }(),
		},
		fsync: fsyncEv(1000, 2000),
		want:  Layers{OtherNs: 1000},
		roles: []string{},
	}, {
		name: "a request that started before the fsync is clipped to the window",
		events: []any{
			blk(1, event.OpWrite, event.ReqPreflush|event.ReqFUA, 0, 800, 1300, 9, "xfsaild"),
		},
		fsync:   fsyncEv(1000, 2000),
		want:    Layers{DeviceFlushNs: 300, OtherNs: 700},
		flushes: 1,
		roles:   []string{RoleFlush},
	}, {
		name: "xfs log force runs from the force to the fsync's end",
		events: []any{
			event.Journal{Source: event.JournalXFSLogForce, Dev: fsDev, TID: tid, StartNs: 1500},
			event.Journal{Source: event.JournalXFSLogForce, Dev: fsDev, TID: 1, StartNs: 1200}, // another thread
			blk(1, event.OpWrite, event.ReqMeta|event.ReqSync, 0, 1600, 1700, 0, "kworker"),
			blk(2, event.OpFlush, 0, 0, 1700, 1900, 0, "kworker"),
		},
		fsync:   fsyncEv(1000, 2000),
		want:    Layers{OtherNs: 500, JournalNs: 100 + 100 + 100, DeviceFlushNs: 200},
		flushes: 1,
		roles:   []string{RoleJournal, RoleFlush},
	}, {
		name: "partial completions merge into one request",
		events: []any{
			func() event.Block {
				b := blk(1, event.OpWrite, 0, 0, 1100, 1200, tid, "etcd")
				b.Final = false
				return b
			}(),
			blk(1, event.OpWrite, 0, 0, 1100, 1300, tid, "etcd"),
		},
		fsync: fsyncEv(1000, 2000),
		want:  Layers{DataWritebackNs: 200, OtherNs: 800},
		roles: []string{RoleData},
	}, {
		// The tracer emits every completion, also those whose insert and
		// issue it never saw: the second, 0-byte completion the flush state
		// machine gives a journal commit block, a request from before
		// tracing. They have no start to place and count in no layer.
		name: "completions with no start seen do not count",
		events: []any{
			blk(1, event.OpWrite, event.ReqMeta|event.ReqSync, 0, 0, 1500, 0, ""),
			blk(2, event.OpWrite, event.ReqSync, 0, 0, 1600, 0, ""),
		},
		fsync: fsyncEv(1000, 2000),
		want:  Layers{OtherNs: 1000},
		roles: []string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAttributor(lookup)
			for _, ev := range tc.events {
				a.Add(ev)
			}
			rec := a.Attribute(tc.fsync)
			if rec.Layers != tc.want {
				t.Errorf("layers = %+v\nwant     %+v", rec.Layers, tc.want)
			}
			if rec.Layers.Sum() != rec.TotalNs {
				t.Errorf("layers sum %d != total %d", rec.Layers.Sum(), rec.TotalNs)
			}
			if rec.Flushes != tc.flushes {
				t.Errorf("flushes = %d, want %d", rec.Flushes, tc.flushes)
			}
			var roles []string
			for _, r := range rec.Requests {
				roles = append(roles, r.Role)
			}
			if roles == nil {
				roles = []string{}
			}
			if !reflect.DeepEqual(roles, tc.roles) {
				t.Errorf("roles = %v, want %v", roles, tc.roles)
			}
		})
	}
}

func TestJBD2WaitCounts(t *testing.T) {
	a := NewAttributor(lookup)
	a.Add(event.Journal{Source: event.JournalJBD2Wait, Dev: fsDev, TID: tid, Txn: 41, StartNs: 1200, EndNs: 1700})
	a.Add(event.Journal{Source: event.JournalJBD2Wait, Dev: fsDev, TID: 5, Txn: 41, StartNs: 1100, EndNs: 1800}) // another thread
	a.Add(blk(1, event.OpFlush, 0, 0, 1500, 1600, 3, "kworker"))
	rec := a.Attribute(fsyncEv(1000, 2000))
	want := Layers{JournalNs: 400, DeviceFlushNs: 100, OtherNs: 500}
	if rec.Layers != want || len(rec.Journal) != 1 || rec.Journal[0].Txn != 41 {
		t.Fatalf("layers %+v journal %+v", rec.Layers, rec.Journal)
	}
}
