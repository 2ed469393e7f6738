package tracer

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/etcdscope/etcdscope/event"
)

// sink keeps decoded events alive the way Read's `any` result does, so the
// Read benchmarks count the boxing allocation Read's callers pay.
var sink any

func setCstr(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// BenchmarkDecodeFsync decodes one raw fsync record (the largest, with a
// four-component path) as ReadEvent does: fixed layout over the ring
// buffer's bytes into a reused event.Any, through a decoder that has seen
// the file before (its strings and Names interned, as for every fsync of a
// file after its first). The Read variant boxes it into Read's `any` too.
func BenchmarkDecodeFsync(b *testing.B) {
	b.Run("ReadEvent", func(b *testing.B) { benchDecodeFsync(b, false) })
	b.Run("Read", func(b *testing.B) { benchDecodeFsync(b, true) })
}

func benchDecodeFsync(b *testing.B, boxed bool) {
	raw := make([]byte, unsafe.Sizeof(fsyncFsyncEvent{}))
	e := (*fsyncFsyncEvent)(unsafe.Pointer(&raw[0]))
	e.Kind, e.Syscall, e.Pid, e.Tid, e.Dev, e.Ino = 1, 1, 99, 100, 254<<20, 12
	e.StartNs, e.EndNs = 1e9, 1e9+120e3
	setCstr(e.Comm[:], "etcd")
	setCstr(e.Fstype[:], "ext4")
	for i, n := range []string{"0000000000000000-0000000000000000.wal", "wal", "member", "default.etcd"} {
		setCstr(e.Names[i][:], n)
	}
	var d decoder
	var ev event.Any
	d.fsync(&ev.Fsync, e)
	if f := ev.Fsync; f.Comm != "etcd" || f.FSType != "ext4" || len(f.Names) != 4 || f.Names[3] != "default.etcd" {
		b.Fatalf("decoded %+v", f)
	}
	ev.Kind = event.KindFsync
	b.ReportAllocs()
	for b.Loop() {
		d.fsync(&ev.Fsync, (*fsyncFsyncEvent)(unsafe.Pointer(&raw[0])))
		if boxed {
			sink = ev.Value()
		}
	}
}

// BenchmarkDecodeBlock decodes one raw block-request record, the most
// frequent kind (one per request completion, on every disk), as ReadEvent
// and as Read do.
func BenchmarkDecodeBlock(b *testing.B) {
	b.Run("ReadEvent", func(b *testing.B) { benchDecodeBlock(b, false) })
	b.Run("Read", func(b *testing.B) { benchDecodeBlock(b, true) })
}

func benchDecodeBlock(b *testing.B, boxed bool) {
	raw := make([]byte, unsafe.Sizeof(blockBlkEvent{}))
	e := (*blockBlkEvent)(unsafe.Pointer(&raw[0]))
	e.Kind, e.Op, e.Final, e.Dev, e.Bytes, e.Rq = 3, 2, 1, 254<<20, 4096, 0xffff888012345678
	e.InsertNs, e.IssueNs, e.CompleteNs, e.Pid, e.Tid = 1e9, 1e9+1e3, 1e9+50e3, 99, 100
	setCstr(e.Comm[:], "etcd")
	var d decoder
	ev := event.Any{Kind: event.KindBlock}
	b.ReportAllocs()
	for b.Loop() {
		d.block(&ev.Block, (*blockBlkEvent)(unsafe.Pointer(&raw[0])))
		if boxed {
			sink = ev.Value()
		}
	}
}

// TestDecoderInterns: interning changes no decoded value, also across the
// table resets a long run of distinct names causes, and the Names slice
// ends at the first empty component as before.
func TestDecoderInterns(t *testing.T) {
	var d decoder
	raw := make([]byte, unsafe.Sizeof(fsyncFsyncEvent{}))
	e := (*fsyncFsyncEvent)(unsafe.Pointer(&raw[0]))
	for i := 0; i < 3*internMax; i++ {
		clear(raw)
		comm := []string{"etcd", "fio", "jbd2/vda1-8", "kworker/u8:1", "etcd-with-a-15b"}[i%5]
		file := fmt.Sprintf("%016x.wal", i)
		setCstr(e.Comm[:], comm)
		setCstr(e.Fstype[:], "ext4")
		setCstr(e.Names[0][:], file)
		want := []string{file}
		if i%3 != 0 { // i%3 == 0: one component only
			setCstr(e.Names[1][:], "wal")
			want = append(want, "wal")
		}
		setCstr(e.Names[3][:], "unreached") // after an empty component
		var f, again event.Fsync
		d.fsync(&f, e)
		if f.Comm != comm || f.FSType != "ext4" || !slices.Equal(f.Names, want) {
			t.Fatalf("record %d: decoded comm %q fstype %q names %q, want %q ext4 %q", i, f.Comm, f.FSType, f.Names, comm, want)
		}
		if d.fsync(&again, e); &again.Names[0] != &f.Names[0] {
			t.Fatalf("record %d: the same names were not interned", i)
		}
	}
	clear(raw)
	var f event.Fsync
	if d.fsync(&f, e); f.Names != nil || f.Comm != "" || f.FSType != "" {
		t.Fatalf("empty record decoded as %+v", f)
	}
}
