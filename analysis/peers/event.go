// Package peers turns the TCP events of etcd's peer port (2380) into
// per-peer statistics: handshake RTT, smoothed and minimum RTT weighted per
// connection, connection churn, lifetimes and retransmits. It is pure Go
// over Event values (from tracer.Peers or from recorded JSON Lines), so it
// needs no root and is tested on synthetic streams.
package peers

import (
	"net/netip"
	"time"
)

// Kind says what happened to a connection.
type Kind uint8

// The event kinds; values match enum peer_event_kind in bpf/peers.h.
const (
	// KindOpen: the connection reached ESTABLISHED. For an active open
	// Duration is the handshake (SYN_SENT → ESTABLISHED, as the local stack
	// saw it); for a passive open Duration is 0 and SRTT is the RTT the
	// kernel measured from its SYN-ACK to the peer's ACK.
	KindOpen Kind = 1
	// KindCloseStart: the first state after ESTABLISHED (FIN_WAIT1 when we
	// close, CLOSE_WAIT when the peer does). Duration: time in use, counted
	// from SYN_SENT for active opens, from ESTABLISHED for passive ones.
	KindCloseStart Kind = 2
	// KindClose: the socket reached CLOSE. Duration: lifetime since
	// ESTABLISHED, 0 when unknown (opened before tracing, or never
	// established).
	KindClose Kind = 3
	// KindRTT: a sample of the kernel's RTT estimate for a live connection
	// (tcp:tcp_probe, at most one per connection per sampling interval).
	KindRTT Kind = 4
	// KindRetransmit: tcp:tcp_retransmit_skb on the connection.
	KindRetransmit Kind = 5
)

// String returns the kind's lower-case name as used in JSON.
func (k Kind) String() string {
	switch k {
	case KindOpen:
		return "open"
	case KindCloseStart:
		return "close_start"
	case KindClose:
		return "close"
	case KindRTT:
		return "rtt"
	case KindRetransmit:
		return "retransmit"
	}
	return "unknown"
}

// Direction says which side opened the connection.
type Direction string

// Directions.
const (
	Active      Direction = "active"  // this host called connect()
	Passive     Direction = "passive" // this host accepted it
	Preexisting Direction = "unknown" // established before tracing began
)

// Event is one decoded peer-port event. It is also the JSON Lines record
// (schema "peers/v1") that `etcdscope peers --record` writes and analysis
// reads back. Times are CLOCK_MONOTONIC nanoseconds from bpf_ktime_get_ns;
// RTT fields are microseconds, as the kernel keeps them in tcp_sock.
type Event struct {
	Kind      Kind      `json:"kind"`
	TimeNs    uint64    `json:"time_ns"`       // CLOCK_MONOTONIC
	Socket    uint64    `json:"socket"`        // struct sock address: a connection id while it lives
	Direction Direction `json:"direction"`     // who opened it
	PID       uint32    `json:"pid,omitempty"` // connect() caller (active opens), else 0
	Comm      string    `json:"comm,omitempty"`
	// Owner: the tgid holding this end's socket: PID for active opens;
	// otherwise found from SockIno in /proc/*/fd for RTT samples of
	// connections opened before tracing or accepted here; 0 if unknown.
	Owner   uint32         `json:"owner_pid,omitempty"`
	SockIno uint64         `json:"sock_ino,omitempty"` // the socket file's inode, 0 if none
	Local   netip.AddrPort `json:"local"`
	Remote  netip.AddrPort `json:"remote"`
	Netns   uint32         `json:"netns,omitempty"`
	// DurationNs: see the Kind constants.
	DurationNs uint64 `json:"duration_ns,omitempty"`
	// SRTTus is tcp_sock.srtt_us>>3, the smoothed RTT; MdevUs is
	// mdev_us>>2; MinRTTus is the windowed minimum (tcp_sock.rtt_min, the
	// value `ss -ti` shows as minrtt). All µs, 0 before the first sample.
	SRTTus        uint32 `json:"srtt_us"`
	MdevUs        uint32 `json:"mdev_us"`
	MinRTTus      uint32 `json:"min_rtt_us"`
	TotalRetrans  uint32 `json:"total_retrans"`  // tcp_sock.total_retrans: segments retransmitted so far
	BytesAcked    uint64 `json:"bytes_acked"`    // tcp_sock.bytes_acked: sent and acknowledged
	BytesReceived uint64 `json:"bytes_received"` // tcp_sock.bytes_received
	OldState      uint8  `json:"old_state,omitempty"`
	NewState      uint8  `json:"new_state,omitempty"`
}

// Duration returns DurationNs as a time.Duration.
func (e Event) Duration() time.Duration { return time.Duration(e.DurationNs) }

// TCP states as numbered in include/net/tcp_states.h.
const (
	StateEstablished = 1
	StateSynSent     = 2
	StateSynRecv     = 3
	StateFinWait1    = 4
	StateClose       = 7
	StateCloseWait   = 8
)
