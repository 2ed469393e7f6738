package etcdmetric

import (
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// Member is one etcd member as its member list reports it.
type Member struct {
	ID      uint64       `json:"id"` // Raft member ID; the metric's To label is its hex
	Name    string       `json:"name"`
	PeerIPs []netip.Addr `json:"peer_ips"` // hosts of its peer URLs
	Leader  bool         `json:"leader"`
}

// ToLabel returns the To label etcd gives this member: the ID in hex.
func (m Member) ToLabel() string { return strconv.FormatUint(m.ID, 16) }

// PeerComparison is one metric series set beside the kernel's numbers for
// the same peer.
type PeerComparison struct {
	Comparison
	// Peer: the address the kernel numbers are for; invalid when the To ID
	// could not be matched (no member list), and the input then pools
	// every link of the scraped member.
	Peer   netip.Addr `json:"peer,omitempty"`
	Member string     `json:"member,omitempty"`
	// FromPID: the scraped member's pid, the local end of the link the
	// input was taken from (Peer its remote end); 0 when the member was
	// not found (the input then pools the links of every process) or the
	// recording predates the field. The metric is that member's: it
	// belongs to its link to Peer only (LinkModels).
	FromPID uint32 `json:"from_pid,omitempty"`
}

// Window is the span between the two scrapes and etcd's process start.
// MonoAtStart is CLOCK_MONOTONIC (the events' clock) read at Start, to
// place traced connections on etcd's uptime; 0 turns replay off.
type Window struct {
	Start, End, ProcessStart time.Time
	MonoAtStart              uint64
	// ProbeErrors: etcdscope's kept-alive probe's last error per peer
	// address; the verdict names it where it falls back to the kernel
	// srtt estimate.
	ProbeErrors map[netip.Addr]string
}

// CompareScrapes pairs each series' delta between start and end with the
// links the scraped member opened to that peer (links from fromPID, or all
// active links when fromPID is 0) and runs Compare. members maps To IDs to
// peer addresses; without it every series is compared with all links
// pooled.
//
// keptAlive, if it has the peer, is the measured time of a probe on a
// kept-alive connection (etcdscope's own GET /raft/probing); it replaces
// the kernel-srtt estimate of ReusedProbe.
func CompareScrapes(start, end Scrape, w Window, links []peers.LinkStats, fromPID uint32, members []Member, keptAlive map[netip.Addr]time.Duration) (out []PeerComparison, resets []Key) {
	deltas, resets := DeltaScrapes(start, end)
	byTo := map[string]Member{}
	for _, m := range members {
		byTo[m.ToLabel()] = m
	}
	var own []peers.LinkStats
	for _, l := range links {
		if l.Link.Direction == event.PeerActive && (fromPID == 0 || l.Link.FromPID == fromPID) {
			own = append(own, l)
		}
	}
	window := w.End.Sub(w.Start)
	ps := end.ProcessStart
	if ps.IsZero() {
		ps = w.ProcessStart
	}
	for _, d := range deltas {
		pc := PeerComparison{}
		var in ModelInput
		if m, ok := byTo[d.Key.To]; ok {
			pc.Member = m.Name
			for _, l := range own {
				if contains(m.PeerIPs, l.Link.To) {
					pc.Peer, pc.FromPID = l.Link.To, fromPID
					in = InputFromLink(l, window)
					if v := keptAlive[l.Link.To]; v > 0 {
						in.ReusedProbe = v
						in.ReusedMeasured = true
					}
					in.ProbeError = w.ProbeErrors[l.Link.To]
					if w.MonoAtStart != 0 && !ps.IsZero() {
						base := w.Start.Sub(ps)
						for _, smp := range l.PerRequestSeries {
							up := base + time.Duration(int64(smp.OpenNs)-int64(w.MonoAtStart))
							in.NewConnSeries = append(in.NewConnSeries, UptimeSample{Uptime: up, Value: time.Duration(smp.InUseNs)})
						}
					}
				}
			}
		} else if len(own) > 0 {
			in = pooled(own, window)
		}
		in = in.WithUptime(ps, w.Start, w.End)
		pc.Comparison = Compare(d, in)
		out = append(out, pc)
	}
	return out, resets
}

func contains(a []netip.Addr, x netip.Addr) bool {
	for _, y := range a {
		if y == x {
			return true
		}
	}
	return false
}

// pooled averages the inputs of several links (per-peer rates divided by
// the number of links), for series that cannot be matched to one peer.
func pooled(links []peers.LinkStats, window time.Duration) ModelInput {
	var rtt, reused, newc []int64
	var perMin float64
	for _, l := range links {
		in := InputFromLink(l, window)
		rtt = append(rtt, int64(in.RTT))
		reused = append(reused, int64(in.ReusedProbe))
		if in.NewConnProbe > 0 {
			newc = append(newc, int64(in.NewConnProbe))
		}
		perMin += in.NewConnPerMinute
	}
	med := func(v []int64) time.Duration {
		if len(v) == 0 {
			return 0
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return time.Duration(v[(len(v)-1)/2])
	}
	return ModelInput{RTT: med(rtt), ReusedProbe: med(reused), NewConnProbe: med(newc), NewConnPerMinute: perMin / float64(len(links))}
}

// FarLeader is a leader far from this host: Leader, its RTT from here,
// and the next highest RTT to a member.
type FarLeader struct {
	Leader    Member
	RTT, Next time.Duration
}

// FindFarLeader returns the leader when it is the member this host
// measures the highest RTT to (handshake RTT p50, else min RTT p50) and
// that RTT stands out: at least twice the next highest and LeaderMargin
// more. A far leader costs every write round trips to the far site. It
// returns nil when there is nothing to warn about or too little to tell.
func FindFarLeader(members []Member, links []peers.LinkStats) *FarLeader {
	rtt := map[netip.Addr]int64{}
	for _, l := range links {
		v := l.HandshakeRTT.P50
		if v == 0 {
			v = l.MinRTT.P50
		}
		if v > rtt[l.Link.Peer] {
			rtt[l.Link.Peer] = v
		}
	}
	type measured struct {
		m   Member
		rtt int64
	}
	var ms []measured
	for _, m := range members {
		var best int64
		for _, ip := range m.PeerIPs {
			if v := rtt[ip]; v > best {
				best = v
			}
		}
		if best > 0 {
			ms = append(ms, measured{m, best})
		}
	}
	if len(ms) < 2 {
		return nil
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].rtt > ms[j].rtt })
	far, next := ms[0], ms[1]
	if !far.m.Leader || far.rtt < 2*next.rtt || time.Duration(far.rtt-next.rtt) < LeaderMargin {
		return nil
	}
	return &FarLeader{Leader: far.m, RTT: time.Duration(far.rtt), Next: time.Duration(next.rtt)}
}

// LeaderMargin is how much farther than the next member the leader must
// be for FindFarLeader: differences of microseconds (one rack, loopback)
// are noise, not a far site.
const LeaderMargin = time.Millisecond
