package etcdmetric

import (
	"net/netip"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
)

// PeersReport is the report of `etcdscope peers` (its --output json
// object; render.Peers prints the same as a table): the traced links and,
// with --etcd-metrics, the comparison of etcd's peer RTT metric with them.
type PeersReport struct {
	Port          int     `json:"port"`
	WindowSeconds float64 `json:"window_seconds"`
	Events        int     `json:"events"`
	LostEvents    uint64  `json:"lost_events"`
	// MissedEvents: program runs the kernel skipped (recursion_misses),
	// each an event the report lacks.
	MissedEvents uint64 `json:"missed_events"`
	// RingPeakBytes: the most unread data the reader saw in the ring
	// (sampled, a lower bound), bytes; 0 when not known (a replay).
	RingPeakBytes uint64 `json:"ring_peak_bytes,omitempty"`
	// Owners: how the owners of sockets with no known opener were found
	// (in the background, off the reader's path); nil in a replay.
	Owners *OwnerLookups     `json:"owner_lookups,omitempty"`
	Links  []peers.LinkStats `json:"links"`
	// Unassembled: events of connections past peers.MaxOpenConns open at
	// once, counted, not assembled (peers.Report.Unassembled).
	Unassembled int `json:"unassembled_events,omitempty"`
	// FoldedEarly: closed connections folded before their time, past
	// peers.MaxHeldClosed held (peers.Report.FoldedEarly).
	FoldedEarly  int              `json:"folded_early,omitempty"`
	MetricsURL   string           `json:"metrics_url,omitempty"`
	MetricsError string           `json:"metrics_error,omitempty"`
	MemberPID    int              `json:"member_pid,omitempty"`
	Metric       []PeerComparison `json:"metric,omitempty"`
	Resets       []Key            `json:"metric_resets,omitempty"`
	Members      []Member         `json:"members,omitempty"`
	MembersError string           `json:"members_error,omitempty"`
	// LeaderWarning: FarLeader in words, empty here: render fills it.
	LeaderWarning string     `json:"leader_warning,omitempty"`
	FarLeader     *FarLeader `json:"-"`
	// KeptAliveProbe: mean time of etcdscope's own kept-alive probes per
	// peer IP (ns); KeptAliveProbeErrors: why a peer could not be probed.
	KeptAliveProbe       map[netip.Addr]time.Duration `json:"kept_alive_probe_ns,omitempty"`
	KeptAliveProbeErrors map[netip.Addr]string        `json:"kept_alive_probe_errors,omitempty"`
	// OwnConns: the local ends of those probes' connections, left out of
	// Links (peers.Options.ExcludeLocal); --record keeps them in its
	// etcd_peer_metric record for a replay to leave out too.
	OwnConns []netip.AddrPort `json:"-"`
	// NotMemberLinks: the links whose accepting end is no member's peer
	// address (OutsideCluster; FillNotMember), when a member list was
	// read: another cluster's, or another process's, on the port.
	NotMemberLinks []peers.Link `json:"links_not_member,omitempty"`
	// Slow: the peers that answered a link this host opened more slowly
	// than the heartbeat interval (SlowPeers), slowest first.
	Slow []SlowPeer `json:"slow_peers,omitempty"`
}

// OwnerLookups counts the peers tracer's background look-ups of socket
// owners (host.SocketOwnerResolver) and what they dropped: a dropped or
// late look-up leaves that connection's owner unknown (pid 0), never
// guessed.
type OwnerLookups struct {
	Resolved uint64 `json:"resolved"` // sockets whose holder was found
	Unowned  uint64 `json:"unowned"`  // sockets no process held at the scan
	// QueueDrops: look-ups not queued (queue full; asked again later);
	// Evicted: answers dropped from the bounded cache; LearnedDrops:
	// owners found but not handed to the reader in time.
	QueueDrops   uint64 `json:"queue_drops"`
	Evicted      uint64 `json:"evicted"`
	LearnedDrops uint64 `json:"learned_drops"`
	// LateOwners: owners learned after their connection's events, given
	// to it; LateOwnersMissed: learned after it was folded, left unknown.
	LateOwners       int `json:"late_owners"`
	LateOwnersMissed int `json:"late_owners_missed"`
	// Scans: full /proc/*/fd scans; MaxScanCPUSeconds: the CPU time of
	// the costliest.
	Scans             uint64  `json:"scans"`
	MaxScanCPUSeconds float64 `json:"max_scan_cpu_seconds"`
}

// OutsideCluster says whether link l's accepting end (peers.Link.To) is
// none of the member list's peer addresses: a connection on the traced
// port of another cluster, or of a process that is not etcd. false when
// no member list was read, or when a member's peer URLs gave no address
// (a host name not resolved): then nothing can be told.
func (r *PeersReport) OutsideCluster(l peers.Link) bool {
	if len(r.Members) == 0 {
		return false
	}
	for _, m := range r.Members {
		if len(m.PeerIPs) == 0 {
			return false
		}
	}
	for _, m := range r.Members {
		for _, ip := range m.PeerIPs {
			if ip == l.To {
				return false
			}
		}
	}
	return true
}

// FillNotMember sets NotMemberLinks from Links and Members.
func (r *PeersReport) FillNotMember() { r.NotMemberLinks = NotMemberLinks(r.Links, r.Members) }

// NotMemberLinks returns the links whose accepting end is none of
// members' peer addresses (PeersReport.OutsideCluster); the folded link
// ("other") is none of them.
func NotMemberLinks(links []peers.LinkStats, members []Member) []peers.Link {
	r := PeersReport{Members: members}
	var out []peers.Link
	for _, l := range links {
		if l.Folded == 0 && r.OutsideCluster(l.Link) {
			out = append(out, l.Link)
		}
	}
	return out
}
