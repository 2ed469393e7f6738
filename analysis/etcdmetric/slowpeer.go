package etcdmetric

import (
	"net/netip"
	"slices"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// etcd's defaults for --heartbeat-interval and --election-timeout.
const (
	DefaultHeartbeat = 100 * time.Millisecond
	DefaultElection  = time.Second
)

// Timeouts are the traced member's --heartbeat-interval and
// --election-timeout; FromFlags says they were read from its command line
// or environment, not etcd's defaults assumed.
type Timeouts struct {
	Heartbeat time.Duration `json:"heartbeat_ns"`
	Election  time.Duration `json:"election_ns"`
	FromFlags bool          `json:"from_flags,omitempty"`
}

// DefaultTimeouts are etcd's defaults.
var DefaultTimeouts = Timeouts{Heartbeat: DefaultHeartbeat, Election: DefaultElection}

// SlowPart is which part of a request to a peer was slow.
type SlowPart string

const (
	SlowSetup   SlowPart = "setup"   // connect to the first response on a new connection (LinkStats.Setup)
	SlowRequest SlowPart = "request" // a request's round trip on a connection (LinkStats.PerRequest)
)

// SlowPeer is a peer that answered a request more slowly than etcd's
// heartbeat interval on a link this host opened to it: a member that
// stopped answering (SIGSTOP, a stall, an overloaded host or a partition)
// for a while.
type SlowPeer struct {
	Peer netip.Addr `json:"peer"`
	// Member: its name from the member list ("" when not known).
	Member string `json:"member,omitempty"`
	// Part and P99: which of the link's times (connection setup, else
	// per-request) was over the heartbeat interval, and its p99.
	Part SlowPart      `json:"part"`
	P99  time.Duration `json:"p99_ns"`
	// From is the link whose p99 is P99 (the slowest to this peer).
	From peers.Link `json:"from"`
	// OverElection: P99 is over the election timeout too, not only the
	// heartbeat interval (a follower that hears no heartbeat for that
	// long starts an election).
	OverElection bool `json:"over_election"`
	// Timeouts: the bounds P99 was held against.
	Timeouts Timeouts `json:"timeouts"`
}

// SlowPeers returns, per peer, the largest p99 of connection setup or
// per-request time over the links this host opened to it (active: the
// wait is the peer's answer, not this host's), when it is over t's
// heartbeat interval, slowest first.
func SlowPeers(links []peers.LinkStats, members []Member, t Timeouts) []SlowPeer {
	byPeer := map[netip.Addr]SlowPeer{}
	for _, l := range links {
		if l.Link.Direction != event.PeerActive || l.Folded > 0 {
			continue
		}
		// A per-request connection's time includes its setup (dial to the
		// first answer): a slow setup is the cause, named first.
		part, p99 := SlowSetup, time.Duration(l.Setup.P99)
		if p99 <= t.Heartbeat {
			part, p99 = SlowRequest, time.Duration(l.PerRequest.P99)
		}
		if p99 <= t.Heartbeat || p99 <= byPeer[l.Link.Peer].P99 {
			continue
		}
		byPeer[l.Link.Peer] = SlowPeer{Peer: l.Link.Peer, Member: memberName(members, l.Link.Peer), Part: part, P99: p99,
			From: l.Link, OverElection: p99 > t.Election, Timeouts: t}
	}
	out := make([]SlowPeer, 0, len(byPeer))
	for _, s := range byPeer {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b SlowPeer) int {
		if a.P99 != b.P99 {
			return int(b.P99 - a.P99)
		}
		return a.Peer.Compare(b.Peer)
	})
	return out
}

// memberName is the name of the member with peer IP ip, or "".
func memberName(members []Member, ip netip.Addr) string {
	for _, m := range members {
		if slices.Contains(m.PeerIPs, ip) {
			return m.Name
		}
	}
	return ""
}
