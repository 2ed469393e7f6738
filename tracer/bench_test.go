package tracer

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/etcdscope/etcdscope/event"
)

// sink keeps decoded events alive the way an `any` result would (the
// Read()(any, error) that Read(*event.Any) replaced), so the Boxed
// benchmarks count the allocation that boxing costs.
var sink any

func setCstr(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// BenchmarkDecodeFsync decodes one raw fsync record (the largest, with a
// four-component path) as Read does: fixed layout over the ring buffer's
// bytes into a reused event.Any, through a decoder that has seen the file
// before (its strings and Names interned, as for every fsync of a file
// after its first). The Boxed variant boxes it into an `any` too.
func BenchmarkDecodeFsync(b *testing.B) {
	b.Run("Read", func(b *testing.B) { benchDecodeFsync(b, false) })
	b.Run("Boxed", func(b *testing.B) { benchDecodeFsync(b, true) })
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
// frequent kind (one per request completion, on every disk), as Read does,
// and boxed.
func BenchmarkDecodeBlock(b *testing.B) {
	b.Run("Read", func(b *testing.B) { benchDecodeBlock(b, false) })
	b.Run("Boxed", func(b *testing.B) { benchDecodeBlock(b, true) })
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

// TestDecodeAllocatesNothing: once a record's strings have been seen,
// decoding it into the caller's event allocates nothing, for every event
// type the tracers decode (fsync, block, peer, hypervisor).
func TestDecodeAllocatesNothing(t *testing.T) {
	var d decoder
	fraw := make([]byte, unsafe.Sizeof(fsyncFsyncEvent{}))
	fe := (*fsyncFsyncEvent)(unsafe.Pointer(&fraw[0]))
	setCstr(fe.Comm[:], "etcd")
	setCstr(fe.Fstype[:], "ext4")
	setCstr(fe.Names[0][:], "0.wal")
	setCstr(fe.Names[1][:], "wal")
	braw := make([]byte, unsafe.Sizeof(blockBlkEvent{}))
	be := (*blockBlkEvent)(unsafe.Pointer(&braw[0]))
	setCstr(be.Comm[:], "kworker/0:1H")
	praw := make([]byte, unsafe.Sizeof(peersPeerEvent{}))
	pe := (*peersPeerEvent)(unsafe.Pointer(&praw[0]))
	pe.Family, pe.Sport, pe.Dport, pe.Kind, pe.Flags = afInet, 2380, 40000, uint8(event.PeerRTT), uint8(peersPeerEventFlagPEER_F_ACTIVE)
	pe.Saddr[0], pe.Daddr[0] = 10, 10
	setCstr(pe.Comm[:], "etcd")
	hraw := make([]byte, unsafe.Sizeof(hypervisorHvEvent{}))
	he := (*hypervisorHvEvent)(unsafe.Pointer(&hraw[0]))
	setCstr(he.Comm[:], "qemu-system-x86")
	setCstr(he.Fstype[:], "xfs")
	setCstr(he.Names[0][:], "disk.qcow2")
	var a event.Any
	var p event.Peer
	var h event.HypervisorIO
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"fsync", func() { d.fsync(&a.Fsync, fe) }},
		{"block", func() { d.block(&a.Block, be) }},
		{"peer", func() { d.peer(&p, pe) }},
		{"hypervisor", func() { d.hypervisor(&h, he) }},
	} {
		c.f() // first sight interns the strings
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("decoding a %s record: %.1f allocations, want 0", c.name, n)
		}
	}
	if p.Comm != "etcd" || p.Local.String() != "10.0.0.0:2380" || p.Direction != event.PeerActive || p.Kind != event.PeerRTT {
		t.Errorf("peer decoded as %+v", p)
	}
	if h.Comm != "qemu-system-x86" || h.FSType != "xfs" || !slices.Equal(h.Names, []string{"disk.qcow2"}) {
		t.Errorf("hypervisor event decoded as %+v", h)
	}
}

// TestDecoderRecentNames: the two raw name fields pathNames keeps in front
// of its table answer only for equal fields: three files in turn (each
// slot hit and replaced), bytes after a component's NUL and a component
// after an empty one (raw fields that differ, names that do not).
func TestDecoderRecentNames(t *testing.T) {
	var d decoder
	raw := make([]byte, unsafe.Sizeof(fsyncFsyncEvent{}))
	e := (*fsyncFsyncEvent)(unsafe.Pointer(&raw[0]))
	files := [][]string{{"0.wal", "wal", "member", "default.etcd"}, {"db", "snap"}, {"1.wal", "wal", "member", "default.etcd"}}
	for n, i := range []int{0, 0, 1, 0, 1, 2, 1, 2, 0, 2, 0, 1, 1, 0, 2, 2, 1} {
		clear(raw)
		setCstr(e.Comm[:], "etcd")
		for c, name := range files[i] {
			setCstr(e.Names[c][:], name)
			if n%2 == 1 { // leftovers after the NUL
				e.Names[c][len(name)+1] = int8('x' + c)
			}
		}
		if n%3 == 2 && len(files[i]) < 4 {
			setCstr(e.Names[3][:], "unreached") // after an empty component
		}
		var f event.Fsync
		d.fsync(&f, e)
		if !slices.Equal(f.Names, files[i]) {
			t.Fatalf("record %d (file %d): names %q, want %q", n, i, f.Names, files[i])
		}
	}
}
