package tracer

import (
	"testing"
	"unsafe"
)

// TestPeerEventLayout pins the offsets decodePeerEvent uses to the layout
// bpf2go generated from bpf/peers.h, so a field added in C cannot shift
// the decoding silently.
func TestPeerEventLayout(t *testing.T) {
	var e peersPeerEvent
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"pid", unsafe.Offsetof(e.Pid), 40},
		{"netns", unsafe.Offsetof(e.Netns), 60},
		{"sport", unsafe.Offsetof(e.Sport), 64},
		{"kind", unsafe.Offsetof(e.Kind), 70},
		{"newstate", unsafe.Offsetof(e.Newstate), 73},
		{"saddr", unsafe.Offsetof(e.Saddr), 76},
		{"daddr", unsafe.Offsetof(e.Daddr), 92},
		{"comm", unsafe.Offsetof(e.Comm), 108},
		{"sock_ino", unsafe.Offsetof(e.SockIno), 128},
		{"size", unsafe.Sizeof(e), 136},
	} {
		if c.got != c.want {
			t.Errorf("struct peer_event %s at %d, decoder expects %d", c.name, c.got, c.want)
		}
	}
}
