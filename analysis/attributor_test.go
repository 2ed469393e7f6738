// Tests of attributor.go: partial completions, pruning, Add and AddEvent;
// and the fixtures (lookup, fsyncEv, blk) the package's tests share.

package analysis

import (
	"math/rand/v2"
	"reflect"
	"slices"
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

// TestAroundWithDisorderSkew: around with a buffer's tracked disorder as
// its skew finds every event whose key lies in the window, the same
// events as around with maxSkew, in streams whose keys run back by up to
// twice maxSkew.
func TestAroundWithDisorderSkew(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, back := range []uint64{0, 1, 1e3, 1e6, maxSkew, 2 * maxSkew} {
		var keys []uint64
		var d disorder
		ns := uint64(1e9)
		for i := 0; i < 5000; i++ {
			ns += uint64(rng.IntN(20e3))
			k := ns
			if back > 0 && rng.IntN(50) == 0 {
				k -= uint64(rng.Int64N(int64(back) + 1))
			}
			keys = append(keys, k)
			d.add(k)
		}
		if d.skew() > maxSkew {
			t.Fatalf("skew %d over maxSkew", d.skew())
		}
		key := func(k *uint64) uint64 { return *k }
		in := func(s []uint64, from, to uint64) []uint64 {
			var out []uint64
			for _, k := range s {
				if k >= from && k <= to {
					out = append(out, k)
				}
			}
			return out
		}
		for q := 0; q < 500; q++ {
			from := keys[rng.IntN(len(keys))] - uint64(rng.IntN(50e3))
			to := from + uint64(rng.IntN(3e6))
			got := in(aroundSkew(keys, from, to, d.skew(), key), from, to)
			old := in(around(keys, from, to, key), from, to)
			if !slices.Equal(got, old) {
				t.Fatalf("back %d: window [%d, %d]: %d events with the disorder's skew %d, %d with maxSkew", back, from, to, len(got), d.skew(), len(old))
			}
			if back < maxSkew {
				if all := in(keys, from, to); !slices.Equal(got, all) {
					t.Fatalf("back %d: window [%d, %d]: %d events, %d in the buffer", back, from, to, len(got), len(all))
				}
			}
		}
	}
}
