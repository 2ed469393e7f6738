package analysis

import (
	"reflect"
	"testing"

	"github.com/etcdscope/etcdscope/event"
)

var (
	fsDev   = event.MkDev(253, 1) // vda1
	diskDev = event.MkDev(253, 0) // vda
	other   = event.MkDev(7, 0)   // loop0
)

func lookup(d event.Dev) (string, []event.Dev) {
	if d == fsDev {
		return "vda1", []event.Dev{diskDev}
	}
	return "", nil
}

const tid = 100

func fsyncEv(s, e uint64) event.Fsync {
	return event.Fsync{Syscall: event.SysFdatasync, PID: 99, TID: tid, Comm: "etcd", Dev: fsDev, FSType: "ext4", Ino: 12, StartNs: s, EndNs: e}
}

func blk(rq uint64, op event.Op, f event.ReqFlags, ins, iss, cpl uint64, t uint32, comm string) event.Block {
	return event.Block{Rq: rq, Dev: diskDev, Op: op, Flags: f, InsertNs: ins, IssueNs: iss, CompleteNs: cpl, TID: t, Comm: comm, Final: true, Bytes: 4096}
}

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

func TestPartialBytesAdd(t *testing.T) {
	a := NewAttributor(lookup)
	p := blk(1, event.OpWrite, 0, 0, 1100, 1200, tid, "etcd")
	p.Final, p.Bytes = false, 4096
	f := blk(1, event.OpWrite, 0, 0, 1100, 1300, tid, "etcd")
	f.Bytes = 8192
	a.Add(p)
	a.Add(f)
	rec := a.Attribute(fsyncEv(1000, 2000))
	if len(rec.Requests) != 1 || rec.Requests[0].Bytes != 12288 {
		t.Fatalf("requests %+v", rec.Requests)
	}
}

// TestPruneKeepsWhatInflightNeeds: events older than keepNs are dropped
// unless an fsync in flight started before them.
func TestPruneKeepsWhatInflightNeeds(t *testing.T) {
	a := NewAttributor(lookup)
	a.Add(event.FsyncEnter{TID: tid, StartNs: 1e9})
	a.Add(blk(1, event.OpWrite, 0, 0, 1.1e9, 1.2e9, tid, "etcd"))
	// Another thread's fsyncs run for 10 s of event time.
	for i := uint64(0); i < 10; i++ {
		f := fsyncEv(2e9+i*1e9, 2e9+i*1e9+1000)
		f.TID = 7
		a.Attribute(f)
	}
	rec := a.Attribute(fsyncEv(1e9, 12e9))
	if len(rec.Requests) != 1 {
		t.Fatalf("the in-flight fsync lost its request: %+v", rec.Requests)
	}
	a.Attribute(func() event.Fsync { f := fsyncEv(20e9, 20e9+1); f.TID = 7; return f }())
	if a.Retained() != 0 {
		t.Fatalf("retained %d events after everything was attributed", a.Retained())
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

// anyOf is what tracer.FsyncTracer.Read fills in for an event Read
// would return as ev.
func anyOf(t testing.TB, ev any) event.Any {
	switch e := ev.(type) {
	case event.KernelFsync:
		return event.Any{Kind: event.KindKernelFsync, Fsync: e.Fsync}
	case event.FsyncEnter:
		return event.Any{Kind: event.KindFsyncEnter, Enter: e}
	case event.Block:
		return event.Any{Kind: event.KindBlock, Block: e}
	case event.FlushBio:
		return event.Any{Kind: event.KindFlushBio, FlushBio: e}
	case event.Journal:
		return event.Any{Kind: event.KindJournal, Journal: e}
	}
	t.Fatalf("no event.Any for %T", ev)
	return event.Any{}
}

// AddEvent and Add are two doors to the same state: a stream with partial
// completions, flush bios, jbd2 commits and nested host fsyncs attributes
// identically through either, and Any.Value gives Add what Read gave.
func TestAddEventMatchesAdd(t *testing.T) {
	hostFS := event.MkDev(254, 0)
	newAttr := func() *Attributor {
		a := NewAttributor(lookup)
		a.SetBackingLookup(func(d event.Dev) (Backing, bool) {
			return Backing{Dev: hostFS, Ino: 77, Path: "/var/tmp/img"}, d == diskDev
		})
		return a
	}
	byAdd, byEvent, byValue := newAttr(), newAttr(), newAttr()
	for i := 0; i < 200; i++ {
		s := uint64(1e9 + i*300e3)
		var evs []any
		for _, x := range benchEvents(s, uint64(2*i), nil) {
			evs = append(evs, x.Value())
		}
		part := evs[1].(event.Block)
		part.Final, part.Bytes, part.CompleteNs = false, 512, s+40e3
		host := event.KernelFsync{Fsync: event.Fsync{Syscall: event.SysKthread, TID: 9, Comm: "kworker/u8:1",
			Dev: hostFS, FSType: "ext4", Ino: 77, StartNs: s + 60e3, EndNs: s + 100e3}}
		evs = append([]any{evs[0], part, host}, evs[1:]...)
		for _, ev := range evs {
			byAdd.Add(ev)
			x := anyOf(t, ev)
			byEvent.AddEvent(&x)
			byValue.Add(x.Value())
		}
		f := fsyncEv(s, s+120e3)
		want := byAdd.Attribute(f)
		if len(want.Requests) != 2 || want.Requests[0].Bytes != 4096+512 || len(want.Requests[1].Host) != 1 {
			t.Fatalf("fsync %d: the stream did not exercise partials and nesting: %+v", i, want.Requests)
		}
		if got := byEvent.Attribute(f); !reflect.DeepEqual(got, want) {
			t.Fatalf("fsync %d: AddEvent gave\n%+v\nAdd gave\n%+v", i, got, want)
		}
		if got := byValue.Attribute(f); !reflect.DeepEqual(got, want) {
			t.Fatalf("fsync %d: Add(Any.Value()) gave\n%+v\nAdd gave\n%+v", i, got, want)
		}
	}
}
