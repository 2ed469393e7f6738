package tracer

import (
	"testing"
	"unsafe"
)

// sink keeps decoded events alive the way Read's `any` result does, so the
// benchmarks count the boxing allocation Read's callers pay.
var sink any

func setCstr(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// BenchmarkDecodeFsync decodes one raw fsync record (the largest, with a
// four-component path) as Read does: fixed layout over the ring buffer's
// bytes, then boxed into Read's `any`.
func BenchmarkDecodeFsync(b *testing.B) {
	raw := make([]byte, unsafe.Sizeof(fsyncFsyncEvent{}))
	e := (*fsyncFsyncEvent)(unsafe.Pointer(&raw[0]))
	e.Kind, e.Syscall, e.Pid, e.Tid, e.Dev, e.Ino = 1, 1, 99, 100, 254<<20, 12
	e.StartNs, e.EndNs = 1e9, 1e9+120e3
	setCstr(e.Comm[:], "etcd")
	setCstr(e.Fstype[:], "ext4")
	for i, n := range []string{"0000000000000000-0000000000000000.wal", "wal", "member", "default.etcd"} {
		setCstr(e.Names[i][:], n)
	}
	b.ReportAllocs()
	for b.Loop() {
		sink = decodeFsync((*fsyncFsyncEvent)(unsafe.Pointer(&raw[0])))
	}
}

// BenchmarkDecodeBlock decodes one raw block-request record, the most
// frequent kind (one per request completion, on every disk).
func BenchmarkDecodeBlock(b *testing.B) {
	raw := make([]byte, unsafe.Sizeof(blockBlkEvent{}))
	e := (*blockBlkEvent)(unsafe.Pointer(&raw[0]))
	e.Kind, e.Op, e.Final, e.Dev, e.Bytes, e.Rq = 3, 2, 1, 254<<20, 4096, 0xffff888012345678
	e.InsertNs, e.IssueNs, e.CompleteNs, e.Pid, e.Tid = 1e9, 1e9+1e3, 1e9+50e3, 99, 100
	setCstr(e.Comm[:], "etcd")
	b.ReportAllocs()
	for b.Loop() {
		sink = decodeBlock((*blockBlkEvent)(unsafe.Pointer(&raw[0])))
	}
}
