package event

import (
	"fmt"
	"net/netip"
	"time"
)

// PeerKind says what happened to a connection on etcd's peer port.
type PeerKind uint8

// The peer event kinds; values are enum peer_event_kind of bpf/peers.h
// (pinned by tracer's TestEnumsMatchC), but for PeerOwner (made in Go).
const (
	// PeerOpen: the connection reached ESTABLISHED. For an active open
	// DurationNs is the handshake (SYN_SENT → ESTABLISHED, as the local
	// stack saw it); for a passive open DurationNs is 0 and SRTTus is the
	// RTT the kernel measured from its SYN-ACK to the peer's ACK.
	PeerOpen PeerKind = 1
	// PeerCloseStart: the first state after ESTABLISHED (FIN_WAIT1 when we
	// close, CLOSE_WAIT when the peer does). DurationNs: time in use,
	// counted from SYN_SENT for active opens, from ESTABLISHED for passive
	// ones.
	PeerCloseStart PeerKind = 2
	// PeerClose: the socket reached CLOSE. DurationNs: lifetime since
	// ESTABLISHED, 0 when unknown (opened before tracing, or never
	// established).
	PeerClose PeerKind = 3
	// PeerRTT: a sample of the kernel's RTT estimate for a live connection
	// (tcp:tcp_probe, at most one per connection per sampling interval).
	PeerRTT PeerKind = 4
	// PeerRetransmit: tcp:tcp_retransmit_skb on the connection.
	PeerRetransmit PeerKind = 5
	// PeerSetup: the first segment with data from the peer, once per
	// connection opened while tracing. DurationNs is the connection's
	// setup: for an active open since SYN_SENT (handshake plus the peer's
	// time to its first byte: a TLS ServerHello, or the answer to the
	// first request on a plain connection; a peer that stalls after
	// accept stalls here); for a passive open since ESTABLISHED (the wait
	// for the first request).
	PeerSetup PeerKind = 6
	// PeerOwner is not a kernel event: the peers tracer makes it when its
	// background look-up (host.SocketOwnerResolver) finds the process
	// holding a socket (Owner, Comm) after events of that socket went out
	// with the owner unknown, so that the owner still lands on their
	// connection (Socket and SockIno name it; TimeNs is the last kernel
	// event's). It carries no TCP fields.
	PeerOwner PeerKind = 7
)

// String returns the kind's lower-case name as used in JSON.
func (k PeerKind) String() string {
	switch k {
	case PeerOpen:
		return "open"
	case PeerCloseStart:
		return "close_start"
	case PeerClose:
		return "close"
	case PeerRTT:
		return "rtt"
	case PeerRetransmit:
		return "retransmit"
	case PeerSetup:
		return "setup"
	case PeerOwner:
		return "owner"
	}
	return "unknown"
}

// MarshalText writes the kind's name ("open", "close", ...), the form of
// the peers/v1 JSON Lines.
func (k PeerKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name; an unknown name is an error.
func (k *PeerKind) UnmarshalText(b []byte) error {
	for c := PeerOpen; c <= PeerOwner; c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown peer event kind %q", b)
}

// PeerDirection says which side opened a connection.
type PeerDirection string

// Directions, as written in JSON.
const (
	PeerActive      PeerDirection = "active"  // this host called connect()
	PeerPassive     PeerDirection = "passive" // this host accepted it
	PeerPreexisting PeerDirection = "unknown" // established before tracing began
)

// Peer is one decoded peer-port event (struct peer_event of bpf/peers.h).
// It is also the JSON Lines record (schema "peers/v1") that `etcdscope
// peers --record` writes and analysis/peers reads back. Times are
// CLOCK_MONOTONIC nanoseconds from bpf_ktime_get_ns; RTT fields are
// microseconds, as the kernel keeps them in tcp_sock.
type Peer struct {
	Kind      PeerKind      `json:"kind"`
	TimeNs    uint64        `json:"time_ns"`       // CLOCK_MONOTONIC
	Socket    uint64        `json:"socket"`        // struct sock address: a connection id while it lives
	Direction PeerDirection `json:"direction"`     // who opened it
	PID       uint32        `json:"pid,omitempty"` // connect() caller (active opens), else 0
	Comm      string        `json:"comm,omitempty"`
	// Owner: the tgid holding this end's socket: PID for active opens;
	// otherwise found from SockIno in /proc/*/fd, off the reader's path
	// (host.SocketOwnerResolver), for connections opened before tracing or
	// accepted here: 0 while unknown, then on the socket's events after
	// the look-up and on a PeerOwner event.
	Owner   uint32         `json:"owner_pid,omitempty"`
	SockIno uint64         `json:"sock_ino,omitempty"` // the socket file's inode, 0 if none
	Local   netip.AddrPort `json:"local"`
	Remote  netip.AddrPort `json:"remote"`
	Netns   uint32         `json:"netns,omitempty"`
	// DurationNs: see the PeerKind constants.
	DurationNs uint64 `json:"duration_ns,omitempty"`
	// SRTTus is tcp_sock.srtt_us>>3, the smoothed RTT; MdevUs is
	// mdev_us>>2; MinRTTus is the windowed minimum (tcp_sock.rtt_min, the
	// value `ss -ti` shows as minrtt). All µs; SRTTus and MdevUs are 0
	// before the first sample, MinRTTus is ^uint32(0) then (the kernel's
	// minmax_reset value, peers.NoMinRTTus: no sample, not 4294.967295 s).
	SRTTus       uint32 `json:"srtt_us"`
	MdevUs       uint32 `json:"mdev_us"`
	MinRTTus     uint32 `json:"min_rtt_us"`
	TotalRetrans uint32 `json:"total_retrans"` // tcp_sock.total_retrans: segments retransmitted so far
	// Segments: on a PeerRetransmit, the segments it sent (tcp_skb_pcount,
	// what Tcp RetransSegs adds); 0 on other kinds, and in recordings made
	// before it was read (count those as 1: Peer.RetransmitSegments).
	Segments      uint16 `json:"segments,omitempty"`
	BytesAcked    uint64 `json:"bytes_acked"`         // tcp_sock.bytes_acked: sent and acknowledged
	BytesReceived uint64 `json:"bytes_received"`      // tcp_sock.bytes_received
	OldState      uint8  `json:"old_state,omitempty"` // TCP state before (TCPEstablished, ...)
	NewState      uint8  `json:"new_state,omitempty"` // TCP state after
}

// RetransmitSegments returns the segments a PeerRetransmit sent: Segments,
// or 1 for a recording that predates it.
func (e Peer) RetransmitSegments() uint64 {
	if e.Segments == 0 {
		return 1
	}
	return uint64(e.Segments)
}

// Duration returns DurationNs as a time.Duration.
func (e Peer) Duration() time.Duration { return time.Duration(e.DurationNs) }

// TCP states as numbered in include/net/tcp_states.h: the values of
// Peer.OldState and Peer.NewState.
const (
	TCPEstablished = 1
	TCPSynSent     = 2
	TCPSynRecv     = 3
	TCPFinWait1    = 4
	TCPClose       = 7
	TCPCloseWait   = 8
)
