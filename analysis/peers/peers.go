// Package peers turns the TCP events of etcd's peer port (2380) into
// per-peer statistics: handshake RTT, smoothed and minimum RTT weighted per
// connection, connection churn, lifetimes and retransmits. It is pure Go
// over event.Peer values (from tracer.PeersTracer or from recorded JSON Lines),
// so it needs no root and is tested on synthetic streams.
package peers

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// Options tune Analyze.
type Options struct {
	// PerRequestMax: a connection whose time in use after its setup
	// (the peer's first byte → first FIN) is below this is a per-request
	// connection (etcd's RAFT_MESSAGE prober dials one per probe); longer
	// ones are kept-alive connections (Raft streams, the pipeline). 0
	// means 2 s: a probe times out after 5 s and streams live for hours.
	// The setup is left out so that a peer slow to answer a new
	// connection (TLS verification waiting on DNS) makes slow per-request
	// probes, not kept-alive connections.
	PerRequestMax time.Duration
	// Window is the traced duration; 0 means first to last event.
	Window time.Duration
	// ExcludeLocal: connections whose local end (address and port) is in
	// this set are left out of every link: etcdscope's own kept-alive
	// probe connections (the CLI records each one's local address as it
	// dials) are not etcd's links, and must neither show as a link nor
	// feed etcd's metric model. The accepting end of such a
	// connection, when traced too, goes with it (it folds into it first).
	ExcludeLocal map[netip.AddrPort]bool
}

// NoMinRTTus is tcp_sock.rtt_min's value before its first RTT sample
// (minmax_reset to ~0U): "no sample", not 4294.967295 s.
const NoMinRTTus = ^uint32(0)

// Conn is one TCP connection assembled from its events.
type Conn struct {
	Socket    uint64
	Direction event.PeerDirection
	PID       uint32 // connect() caller for active opens; for a passive open, the peer's opener when its other end was traced here too (loopback)
	Comm      string
	Owner     uint32 // tgid holding this end's socket, when known (Event.Owner)
	Local     netip.AddrPort
	Remote    netip.AddrPort
	// OpenNs, CloseStartNs, CloseNs: CLOCK_MONOTONIC ns, 0 if not seen.
	OpenNs, CloseStartNs, CloseNs uint64
	// HandshakeNs: active opens, SYN_SENT → ESTABLISHED; passive opens,
	// the kernel's SYN-ACK → ACK RTT (srtt at ESTABLISHED) in ns.
	HandshakeNs uint64
	// InUseNs: SYN_SENT (active) or ESTABLISHED (passive) → first FIN.
	InUseNs uint64
	// SetupNs: SYN_SENT (active) or ESTABLISHED (passive) → the first
	// data from the peer (event.PeerSetup); 0 when not seen.
	SetupNs uint64
	// LifetimeNs: ESTABLISHED → CLOSE.
	LifetimeNs uint64
	// SRTTus: the last kernel srtt seen; MinRTTus: its windowed minimum.
	SRTTus, MinRTTus uint32
	Retransmits      uint32 // segments retransmitted (tcp_retransmit_skb's, summed)
	TotalRetrans     uint32 // tcp_sock.total_retrans at the last event
	BytesAcked       uint64
	BytesReceived    uint64
	// Mirror: a passive connection whose active end was traced here too
	// (both members on this host); it is folded into that one.
	Mirror bool

	peerSynAck uint64 // the mirror's HandshakeNs, when folded
	sockIno    uint64 // the socket file's inode, once an event had it
}

// Link is who talks to whom: for active opens From is this host's
// address and FromPID the process that connected; for passive ones From is
// the remote address (and FromPID the opener's pid when it runs here).
type Link struct {
	Direction event.PeerDirection `json:"direction"`
	FromPID   uint32              `json:"from_pid,omitempty"`
	FromComm  string              `json:"from_comm,omitempty"`
	// FromAnyPID: the connections of every process named FromComm
	// (FromPID 0), which is not etcd (EtcdComm): short-lived clients
	// (curl, a script's prober) fold into one link per name and ends
	// instead of one per process (LinkStats.Processes counts them);
	// etcd's links stay one per pid. A report names such a link by its
	// pid (FromPID, FromAnyPID false) while it holds one process only.
	FromAnyPID bool       `json:"from_any_pid,omitempty"`
	From       netip.Addr `json:"from"`
	To         netip.Addr `json:"to"`
	// ToPID: for links this host accepted, the process holding the
	// accepting end, when known.
	ToPID uint32 `json:"to_pid,omitempty"`
	// Peer is the remote end as this host sees it: To for active opens,
	// From for passive ones.
	Peer netip.Addr `json:"peer"`
}

// String formats the link as "etcd[123] 127.0.0.1 → 127.0.0.2", or
// "curl[*] 127.0.0.1 → 127.0.0.2" (FromAnyPID: every curl process;
// LinkStats.Processes counts them).
func (l Link) String() string {
	from := l.From.String()
	switch {
	case l.FromAnyPID:
		from = fmt.Sprintf("%s[*] %s", l.FromComm, from)
	case l.FromPID != 0:
		from = fmt.Sprintf("%s[%d] %s", l.FromComm, l.FromPID, from)
	}
	to := l.To.String()
	if l.ToPID != 0 {
		to = fmt.Sprintf("[%d] %s", l.ToPID, to)
	}
	return fmt.Sprintf("%s → %s (%s)", from, to, l.Direction)
}

// LinkStats are the statistics of one link. Durations are ns
// (stats.Summary in ns); per-connection RTTs are weighted one value per
// connection (see docs/peers.md: a busy stream must not outvote an idle
// probe connection, as it does in bcc tcprtt's per-packet histogram).
type LinkStats struct {
	Link Link `json:"link"`
	// Opened/Closed count ESTABLISHED and CLOSE transitions seen.
	Opened int `json:"opened"`
	Closed int `json:"closed"`
	// OpenedPerMinute, ClosedPerMinute: over Report.WindowNs.
	OpenedPerMinute float64 `json:"opened_per_minute"`
	ClosedPerMinute float64 `json:"closed_per_minute"`
	// HandshakeRTT: per connection, SYN_SENT → ESTABLISHED (active) or
	// the kernel's SYN-ACK RTT (passive).
	HandshakeRTT stats.Summary `json:"handshake_rtt_ns"`
	// PeerSynAckRTT: for loopback links whose accepting end was traced too,
	// that end's SYN-ACK RTT.
	PeerSynAckRTT stats.Summary `json:"peer_synack_rtt_ns"`
	// SRTT and MinRTT of kept-alive connections: one value per connection
	// (its last srtt, its min_rtt), in ns.
	SRTT   stats.Summary `json:"srtt_ns"`
	MinRTT stats.Summary `json:"min_rtt_ns"`
	// Setup: per connection opened in the window that received data,
	// SYN_SENT → the peer's first byte (active) or ESTABLISHED → the first
	// request (passive): see event.PeerSetup.
	Setup stats.Summary `json:"setup_ns"`
	// PerRequest: time in use of per-request connections (in use after
	// setup below Options.PerRequestMax): for active opens, dial + TLS +
	// request + answer, what a prober that dials per probe measures.
	PerRequest stats.Summary `json:"per_request_ns"`
	// PerRequestSeries: the same connections in time order, for replaying
	// them through etcd's prober EWMA (analysis/etcdmetric); the last
	// MaxSeries of them (fewer for a link past its share when the links
	// pass MaxSeriesSamples together), PerRequestSeriesDropped the older
	// ones left out.
	PerRequestSeries        []Sample `json:"per_request_series,omitempty"`
	PerRequestSeriesDropped int      `json:"per_request_series_dropped,omitempty"`
	// Lifetime: ESTABLISHED → CLOSE of connections closed in the window.
	Lifetime stats.Summary `json:"lifetime_ns"`
	// KeptAlive: connections open at the end or in use longer than
	// PerRequestMax.
	KeptAlive int `json:"kept_alive"`
	// Failed: connects that closed without reaching ESTABLISHED (refused,
	// timed out, unreachable: CLOSE seen, no open, no RTT sample, nothing
	// received). A link with Failed > 0 and Opened == 0 is a peer that is
	// down or unreachable (Down).
	Failed int `json:"failed"`
	// Retransmits: segments retransmitted (as Tcp RetransSegs and ss's
	// retrans count them), not tcp_retransmit_skb calls.
	Retransmits uint64 `json:"retransmits"`
	BytesAcked  uint64 `json:"bytes_acked"`
	BytesRecv   uint64 `json:"bytes_received"`
	// Processes: for a Link.FromAnyPID link, the distinct pids of its
	// connections, counted up to MaxProcesses (a count of MaxProcesses
	// means at least that many).
	Processes int `json:"processes,omitempty"`
	// NoOwner: why the link names no process at its local end (a link
	// this host opened whose sockets' owner was never found); absent
	// when it names one, or when its From end is another host's.
	NoOwner NoOwner `json:"no_owner,omitempty"`
	// Folded, when not 0, marks the one link that sums the links past
	// MaxLinks (its Link is zero): how many links were folded into it. It
	// comes last; its per-request series is not kept (counted dropped).
	Folded int `json:"folded_links,omitempty"`
}

// NoOwner says why a link this host opened names no process (its
// Link.FromPID 0, not FromAnyPID): its connections were opened before
// tracing began, so no connect() named the caller, and the socket look-up
// (host.SocketOwnerResolver) did not find the process holding them.
type NoOwner uint8

// The reasons, in increasing order of what a user should check: a link
// with both kinds of connection carries the later.
const (
	// OwnerKnown: the link names its process, or its local end is
	// another host's (a passive link's From).
	OwnerKnown NoOwner = iota
	// NoOwnerClosed: every connection of the link closed before the
	// look-up found its owner (an owner event after the close still
	// names it, until the connection is folded into its link).
	NoOwnerClosed
	// NoOwnerNotFound: a connection of the link was still open at the
	// end and the look-up found no owner (dropped or not yet run: the
	// report's owner_lookups count what it dropped).
	NoOwnerNotFound
)

// noOwnerNames are NoOwner's JSON names.
var noOwnerNames = jsonl.Names[NoOwner]{Kind: "no_owner", Of: map[NoOwner]string{NoOwnerClosed: "closed_before_owner_found", NoOwnerNotFound: "owner_not_found"}}

// MarshalText names n as the JSON writes it.
func (n NoOwner) MarshalText() ([]byte, error) { return noOwnerNames.Marshal(n) }

// UnmarshalText reads a name MarshalText writes.
func (n *NoOwner) UnmarshalText(b []byte) error { return noOwnerNames.Unmarshal(b, n) }

// noOwnerOf is why connection c of link l names no process (OwnerKnown
// when l names one).
func noOwnerOf(l Link, c *Conn) NoOwner {
	switch {
	case l.Direction != event.PeerActive || l.FromPID != 0 || l.FromAnyPID:
		return OwnerKnown
	case c.CloseNs != 0:
		return NoOwnerClosed
	}
	return NoOwnerNotFound
}

// Down reports a peer that is down or unreachable in the window: its
// connects failed and none was established.
func (l LinkStats) Down() bool { return l.Failed > 0 && l.Opened == 0 && l.SRTT.Count == 0 }

// Sample is one per-request connection: when it opened and how long it
// was in use.
type Sample struct {
	OpenNs  uint64 `json:"open_ns"` // CLOCK_MONOTONIC
	InUseNs uint64 `json:"in_use_ns"`
}

// Report is the result of Analyze.
type Report struct {
	WindowNs uint64      `json:"window_ns"`
	Events   int         `json:"events"`
	Links    []LinkStats `json:"links"`
	// Conns: the connections not yet folded into their link's totals
	// (open, or closed less than CompactAfter before the last event).
	Conns []Conn `json:"-"`
	// LateOwners: event.PeerOwner events (owners the tracer learned after
	// a connection's events went out without one) attached to their
	// connection; LateOwnersMissed: those whose connection was folded
	// into its link already (or never seen), whose owner stays unknown.
	LateOwners       int `json:"late_owners,omitempty"`
	LateOwnersMissed int `json:"late_owners_missed,omitempty"`
	// Unassembled counts the events not folded into any connection
	// because MaxOpenConns connections were held open already.
	Unassembled int `json:"unassembled_events,omitempty"`
	// FoldedEarly counts the closed connections folded into their links
	// before CompactAfter had passed, because more than MaxHeldClosed
	// were held: among them both ends of a loopback connection whose other
	// end was still open count as two, and a late owner finds none.
	FoldedEarly int `json:"folded_early,omitempty"`
	// FirstNs, LastNs: the first and last event's time_ns (CLOCK_MONOTONIC;
	// owner events not counted), 0 without events: the recording's span,
	// which report --html sets against the fsync recording's.
	FirstNs uint64 `json:"-"`
	LastNs  uint64 `json:"-"`
}

// Analyze assembles connections from events (in time order) and
// summarises them per Link, sorted by link.
func Analyze(events []event.Peer, opt Options) Report {
	var a Assembler
	for i := range events {
		a.Add(&events[i])
	}
	return a.Report(opt)
}

// Assembler is Analyze over a stream: it folds each event into its
// connection as it comes, never keeping the events (tens of thousands a
// second of RTT samples on a busy cluster), and folds each connection
// closed more than CompactAfter ago into its link's totals (bounded
// series, as a report's fsync groups), so that its memory stays flat
// however long it runs and however fast connections come and go (a
// connection churn of 3.5k a second, 30k events, grew it by 190 MB a
// minute while every Conn was kept). The zero value is ready. Not safe
// for concurrent use.
type Assembler struct {
	// Exclude, if set, says which local ends are etcdscope's own
	// connections (Options.ExcludeLocal, which only Report sees): they
	// are dropped when folded.
	Exclude func(netip.AddrPort) bool

	conns       []Conn
	live        map[uint64]int // socket -> index in conns of its open connection
	byIno       map[uint64]int // socket inode -> index in conns (PeerOwner's)
	lateOwners  int            // PeerOwner events attached
	lateMissed  int            // PeerOwner events with no connection left
	unassembled int            // events past MaxOpenConns
	foldedEarly int            // connections folded past MaxHeldClosed
	done        linkSet        // the links of the connections folded
	nextCompact int
	n           int // events added
	// compact's buffers, kept between calls (see compact).
	fold        []bool
	newIdx      []int
	batch       []Conn
	kept        map[tuple]bool
	first, last uint64 // their time range
}

// CompactAfter: a connection closed this long before the last event is
// folded into its link's totals. Both ends of a loopback connection close
// within microseconds of each other, and are folded together.
const CompactAfter = time.Second

// MaxSeries bounds LinkStats.PerRequestSeries per link (the most recent).
const MaxSeries = 1 << 16

// MaxLinks bounds the links a report keeps apart: a link is a direction,
// a pid and the two addresses, and any local user can connect to the peer
// port from as many loopback addresses as it likes (100,000 distinct
// remotes in a 35 MB recording held 648 MiB, its JSON 951 MiB). A
// cluster's member has a few per peer. Past MaxLinks the link that moved
// the fewest bytes (then had the fewest connections) is folded into one
// other link (LinkStats.Folded counts them) and the new link takes its
// place: etcd's streams, which carry the cluster's traffic, stay apart.
const MaxLinks = 64

// MaxOpenConns bounds the connections the Assembler holds open at once
// (a closed one is folded into its link CompactAfter later): a recording
// of connections that never close would otherwise be held whole, one Conn
// each. Past it, the events of a connection not held are counted
// (Report.Unassembled), not assembled. A member holds a few per peer.
const MaxOpenConns = 1 << 14

// MaxHeldClosed bounds the closed connections the Assembler holds before
// CompactAfter has passed for them (kept so that both ends of a loopback
// connection fold together and a late owner still finds its connection).
// Past it every closed connection is folded at once and counted
// (Report.FoldedEarly): a recording whose connections all close at one
// time_ns is never CompactAfter old. A member closes a few a second.
const MaxHeldClosed = 1 << 13

// compactMin: the Assembler folds once it holds this many connections
// (and then once it holds twice what the last fold kept, if more).
const compactMin = 4096

// Add folds e (events in time order) into its connection; e is not kept.
// An event.PeerOwner event is not counted as an event: it only gives its
// connection the owner learned late.
func (a *Assembler) Add(e *event.Peer) {
	if e.Kind == event.PeerOwner {
		a.lateOwner(e)
		return
	}
	if a.n == 0 || e.TimeNs < a.first {
		a.first = e.TimeNs
	}
	if e.TimeNs > a.last {
		a.last = e.TimeNs
	}
	a.n++
	if a.live == nil {
		a.live = map[uint64]int{}
		a.byIno = map[uint64]int{}
	}
	a.add(e)
	if len(a.conns) >= max(a.nextCompact, compactMin) {
		a.compact()
	}
}

// lateOwner gives the connection of e's socket and inode, open or closed
// but not yet folded into its link, the owner e carries (if it has none:
// events of the socket after the look-up carry it too); a connection
// folded already keeps its unknown owner, counted.
func (a *Assembler) lateOwner(e *event.Peer) {
	i, ok := a.byIno[e.SockIno]
	if !ok || e.SockIno == 0 || e.Owner == 0 || a.conns[i].Socket != e.Socket {
		a.lateMissed++
		return
	}
	a.lateOwners++
	if c := &a.conns[i]; c.Owner == 0 {
		c.Owner = e.Owner
		if c.Comm == "" {
			c.Comm = e.Comm
		}
	}
}

// linkAcc accumulates one link's statistics over its connections.
type linkAcc struct {
	st                                                LinkStats
	hs, synack, srtt, minrtt, perreq, lifetime, setup stats.Series
	samples                                           *sampleBudget       // its set's; nil: MaxSeries alone
	pids                                              map[uint32]struct{} // a FromAnyPID link's (MaxProcesses)
}

func (l *linkAcc) clone() *linkAcc {
	c := &linkAcc{st: l.st, hs: l.hs.Clone(), synack: l.synack.Clone(), srtt: l.srtt.Clone(), minrtt: l.minrtt.Clone(),
		perreq: l.perreq.Clone(), lifetime: l.lifetime.Clone(), setup: l.setup.Clone(), pids: maps.Clone(l.pids)}
	c.st.PerRequestSeries = slices.Clone(l.st.PerRequestSeries)
	return c
}

// MaxProcesses bounds the pids a FromAnyPID link counts (LinkStats.
// Processes): ~52 KiB of map each at the bound, 3.3 MiB for MaxLinks
// links (TestLinkProcessesBounded).
const MaxProcesses = 1024

// addPID counts pid among a FromAnyPID link's processes.
func (l *linkAcc) addPID(pid uint32) {
	if pid == 0 || len(l.pids) >= MaxProcesses {
		return
	}
	if l.pids == nil {
		l.pids = map[uint32]struct{}{}
	}
	l.pids[pid] = struct{}{}
	l.st.Processes = len(l.pids)
}

// MaxSeriesSamples bounds the per-request samples (16 bytes each: 8 MiB)
// the links of a report keep together, as MaxExactValues bounds their
// series' values: any local user can open and close connections to the
// peer port from MaxLinks addresses, and each link kept up to 2*MaxSeries
// (64 links of 131,071 connections: 143 MiB). Past it every link holding
// more than its share (MaxSeriesSamples over the links) keeps its newest
// half share and counts the rest dropped, so a link of few samples (etcd's
// prober opens one connection a probe, every 4 s) keeps them all. A
// member's own links, two per peer, hold 2*MaxSeries each at most: four
// of them fit.
const MaxSeriesSamples = 1 << 19

// sampleBudget holds the links of one linkSet, to keep their per-request
// samples within MaxSeriesSamples together.
type sampleBudget struct {
	held int
	accs []*linkAcc
}

// remove forgets acc (folded into the other link: its samples dropped).
func (b *sampleBudget) remove(acc *linkAcc) {
	b.held -= len(acc.st.PerRequestSeries)
	if i := slices.Index(b.accs, acc); i >= 0 {
		b.accs = slices.Delete(b.accs, i, i+1)
	}
}

// keepSample trims l's per-request series past 2*MaxSeries to the newest
// MaxSeries, and, when its set's links hold more than MaxSeriesSamples,
// each link's past its share to the newest half share.
func (l *linkAcc) keepSample() {
	if len(l.st.PerRequestSeries) >= 2*MaxSeries {
		l.trimSamples(MaxSeries)
	}
	b := l.samples
	if b == nil || b.held <= MaxSeriesSamples {
		return
	}
	share := MaxSeriesSamples / max(len(b.accs), 1)
	for _, a := range b.accs {
		if len(a.st.PerRequestSeries) > share {
			a.trimSamples(share / 2)
		}
	}
}

// trimSamples keeps l's newest keep per-request samples, counting the rest
// dropped, in a slice made anew so that the memory goes back.
func (l *linkAcc) trimSamples(keep int) {
	ser := l.st.PerRequestSeries
	sort.Slice(ser, func(i, j int) bool { return ser[i].OpenNs < ser[j].OpenNs })
	drop := len(ser) - keep
	l.st.PerRequestSeriesDropped += drop
	l.st.PerRequestSeries = slices.Clone(ser[drop:])
	if l.samples != nil {
		l.samples.held -= drop
	}
}

// addConn counts connection c (not a mirror, not excluded) in l; pid is
// its process when l is FromAnyPID (linkOf), else 0.
func (l *linkAcc) addConn(c *Conn, pid uint32, perRequestMax time.Duration) {
	l.addPID(pid)
	l.st.NoOwner = max(l.st.NoOwner, noOwnerOf(l.st.Link, c))
	if c.OpenNs != 0 {
		l.st.Opened++
		if c.HandshakeNs != 0 {
			l.hs.Add(int64(c.HandshakeNs))
		}
	}
	if c.CloseNs != 0 {
		l.st.Closed++
		if c.OpenNs != 0 {
			l.lifetime.Add(int64(c.LifetimeNs))
		}
	}
	if c.failed() {
		l.st.Failed++
		return // never established: no RTT, no request, not kept alive
	}
	if c.SetupNs != 0 {
		l.setup.Add(int64(c.SetupNs))
	}
	perRequest := c.OpenNs != 0 && c.CloseStartNs != 0 && c.InUseNs-min(c.SetupNs, c.InUseNs) < uint64(perRequestMax)
	if perRequest {
		l.perreq.Add(int64(c.InUseNs))
		l.st.PerRequestSeries = append(l.st.PerRequestSeries, Sample{OpenNs: c.OpenNs, InUseNs: c.InUseNs})
		if l.samples != nil {
			l.samples.held++
		}
		l.keepSample()
	} else {
		l.st.KeptAlive++
		if c.SRTTus != 0 {
			l.srtt.Add(int64(c.SRTTus) * 1000)
		}
		if c.MinRTTus != 0 {
			l.minrtt.Add(int64(c.MinRTTus) * 1000)
		}
	}
	if p := c.peerSynAck; p != 0 {
		l.synack.Add(int64(p))
	}
	l.st.Retransmits += uint64(c.Retransmits)
	l.st.BytesAcked += c.BytesAcked
	l.st.BytesRecv += c.BytesReceived
}

// compact folds the connections closed CompactAfter before the last
// event into their links' totals, with the default PerRequestMax (the
// only one callers use), keeping every other connection and any whose
// other end (a loopback mirror) is kept.
func (a *Assembler) compact() {
	// In place, with buffers kept from one compaction to the next: under
	// connection churn a fresh copy of every kept connection each time was
	// most of `etcdscope peers`' allocation, and the garbage collector's
	// work on it most of a starved reader's CPU (bench/findings.md,
	// section 13).
	n := len(a.conns)
	cut := a.last - min(a.last, uint64(CompactAfter))
	a.fold = slices.Grow(a.fold[:0], n)[:n]
	for i := range a.conns {
		c := &a.conns[i]
		a.fold[i] = !a.open(i) && c.CloseNs != 0 && c.CloseNs < cut
	}
	// A connection whose reversed 4-tuple is kept stays too: the pair is
	// folded together (foldMirrors) once both ends are old.
	if a.kept == nil {
		a.kept = map[tuple]bool{}
	}
	clear(a.kept)
	for i := range a.conns {
		if !a.fold[i] {
			a.kept[tuple{a.conns[i].Local, a.conns[i].Remote}] = true
		}
	}
	held := 0 // closed connections that would stay
	for i := range a.conns {
		c := &a.conns[i]
		if !a.open(i) && (!a.fold[i] || a.kept[tuple{c.Remote, c.Local}]) {
			held++
		}
	}
	// Past MaxHeldClosed closed connections that would stay (closed within
	// CompactAfter of the last event, at a time_ns of 0, on a socket
	// reused without a close, or the mirror of one kept), every closed one
	// is folded now, mirrors or not: otherwise a recording whose
	// connections all close at one time_ns was held whole (1 M of them,
	// 1.17 GiB).
	force := held > MaxHeldClosed
	if force {
		a.foldedEarly += held
		for i := range a.conns {
			a.fold[i] = !a.open(i)
		}
	}
	a.batch = a.batch[:0]
	a.newIdx = slices.Grow(a.newIdx[:0], n)[:n]
	w := 0
	for i := range n {
		c := a.conns[i] // a copy: the slot may be overwritten below
		if a.fold[i] && (force || !a.kept[tuple{c.Remote, c.Local}]) {
			a.batch = append(a.batch, c)
			a.newIdx[i] = -1
			continue
		}
		a.newIdx[i] = w
		a.conns[w] = c // w <= i: only slots already read are written
		w++
	}
	clear(a.conns[w:n]) // the strings the folded ones held
	a.conns = a.conns[:w]
	batch := a.batch
	foldMirrors(batch)
	for i := range batch {
		c := &batch[i]
		if c.Mirror || (a.Exclude != nil && a.Exclude(c.Local)) {
			continue
		}
		l, pid := linkOf(c)
		a.done.get(l).addConn(c, pid, defaultPerRequestMax)
	}
	clear(batch)
	for s, i := range a.live {
		a.live[s] = a.newIdx[i]
	}
	for ino, i := range a.byIno {
		if j := a.newIdx[i]; j >= 0 {
			a.byIno[ino] = j
		} else {
			delete(a.byIno, ino) // folded: a late owner comes too late
		}
	}
	// Geometric: connections that never close (a long-lived one, or one
	// whose close was lost) stay, and folding again after a fixed number
	// of additions would scan them all each time, quadratic in them: a
	// reader that lost events then fell further behind.
	a.nextCompact = max(w+compactMin, 2*w)
}

// open reports whether conns[i] is its socket's open connection.
func (a *Assembler) open(i int) bool {
	j, ok := a.live[a.conns[i].Socket]
	return ok && j == i
}

// tuple is a connection's (local, remote) ends, a map key.
type tuple struct{ a, b netip.AddrPort }

// defaultPerRequestMax is Options.PerRequestMax when 0.
const defaultPerRequestMax = 2 * time.Second

// Report summarises the connections so far per Link, sorted by link; the
// Assembler stays usable. Connections already folded (CompactAfter) were
// classified with the default PerRequestMax and without opt.ExcludeLocal
// (Assembler.Exclude dropped etcdscope's own then).
func (a *Assembler) Report(opt Options) Report {
	if opt.PerRequestMax == 0 {
		opt.PerRequestMax = defaultPerRequestMax
	}
	conns := slices.Clone(a.conns)
	foldMirrors(conns)

	window := uint64(opt.Window)
	if window == 0 {
		window = a.last - a.first
	}
	rep := Report{WindowNs: window, FirstNs: a.first, LastNs: a.last, Events: a.n, LateOwners: a.lateOwners, LateOwnersMissed: a.lateMissed, Unassembled: a.unassembled,
		FoldedEarly: a.foldedEarly}

	links := a.done.clone()
	for i := range conns {
		c := &conns[i]
		if c.Mirror || opt.ExcludeLocal[c.Local] {
			continue
		}
		l, pid := linkOf(c)
		links.get(l).addConn(c, pid, opt.PerRequestMax)
	}
	minutes := float64(window) / float64(time.Minute)
	var other *LinkStats
	for _, a := range links.all() {
		if minutes > 0 {
			a.st.OpenedPerMinute = float64(a.st.Opened) / minutes
			a.st.ClosedPerMinute = float64(a.st.Closed) / minutes
		}
		a.st.HandshakeRTT = a.hs.Summary()
		a.st.PeerSynAckRTT = a.synack.Summary()
		a.st.SRTT = a.srtt.Summary()
		a.st.MinRTT = a.minrtt.Summary()
		a.st.Setup = a.setup.Summary()
		a.st.PerRequest = a.perreq.Summary()
		sort.Slice(a.st.PerRequestSeries, func(i, j int) bool { return a.st.PerRequestSeries[i].OpenNs < a.st.PerRequestSeries[j].OpenNs })
		if n := len(a.st.PerRequestSeries); n > MaxSeries {
			a.st.PerRequestSeriesDropped += n - MaxSeries
			a.st.PerRequestSeries = a.st.PerRequestSeries[n-MaxSeries:]
		}
		a.st.Lifetime = a.lifetime.Summary()
		if a.st.Link.FromAnyPID && len(a.pids) == 1 {
			// One process of that name so far: its pid names it.
			for pid := range a.pids {
				a.st.Link.FromPID, a.st.Link.FromAnyPID, a.st.Processes = pid, false, 0
			}
		}
		if a == links.other {
			a.st.Folded = links.folded
			other = &a.st
			continue
		}
		rep.Links = append(rep.Links, a.st)
	}
	sort.Slice(rep.Links, func(i, j int) bool { return linkLess(rep.Links[i].Link, rep.Links[j].Link) })
	if other != nil {
		rep.Links = append(rep.Links, *other)
	}
	rep.Conns = conns
	return rep
}

// linkLess orders links: etcd's first, then those of a process not known
// (a socket closed before its owner was found, a remote opener), then
// those of processes that are not etcd (curl), each by direction, opener
// and ends.
func linkLess(a, b Link) bool {
	if ra, rb := a.etcdRank(), b.etcdRank(); ra != rb {
		return ra < rb
	}
	if a.Direction != b.Direction {
		return a.Direction < b.Direction
	}
	if a.FromPID != b.FromPID {
		return a.FromPID < b.FromPID
	}
	if c := a.From.Compare(b.From); c != 0 {
		return c < 0
	}
	return a.To.Less(b.To)
}

// linkOf returns c's link and, when the link is FromAnyPID, the pid it
// folded away (else 0).
func linkOf(c *Conn) (Link, uint32) {
	var l Link
	switch c.Direction {
	case event.PeerActive:
		l = Link{Direction: event.PeerActive, FromPID: c.PID, FromComm: c.Comm, From: c.Local.Addr(), To: c.Remote.Addr(), Peer: c.Remote.Addr()}
	default:
		// Passive or preexisting. A connection established before tracing
		// began (a Raft stream) has no open seen, but its ends say who
		// opened it: the side on the well-known port accepted it
		// (isClient). It goes to the link of the connections its process
		// opens (or accepts) while traced, so that one row carries both a
		// link's probes and its streams' srtt, which etcd's metric model
		// needs (etcdmetric.InputFromLink).
		if c.isClient() {
			l = Link{Direction: event.PeerActive, FromPID: c.Owner, FromComm: c.Comm, From: c.Local.Addr(), To: c.Remote.Addr(), Peer: c.Remote.Addr()}
		} else {
			l = Link{Direction: event.PeerPassive, FromPID: c.PID, FromComm: c.Comm, From: c.Remote.Addr(), To: c.Local.Addr(), ToPID: c.Owner, Peer: c.Remote.Addr()}
		}
	}
	if l.FromPID != 0 && l.NotEtcd() {
		pid := l.FromPID
		l.FromPID, l.FromAnyPID = 0, true
		return l, pid
	}
	return l, 0
}

// NotEtcd reports a link from a process known not to be etcd (curl, a
// script's prober): its name is known and is not etcd's (EtcdComm).
func (l Link) NotEtcd() bool { return l.FromComm != "" && !EtcdComm(l.FromComm) }

// etcdRank is 0 for a link from etcd, 1 from a process not known, 2
// from one that is not etcd (linkLess).
func (l Link) etcdRank() int {
	switch {
	case l.FromComm == "":
		return 1
	case l.NotEtcd():
		return 2
	}
	return 0
}

// EtcdComm reports whether comm (a task's name, at most 15 bytes) is
// etcd's: "etcd", or "etcd" and a version ("etcd35", "etcd-3.5.21",
// "etcd_v3"). etcdctl, etcdutl and etcdscope are not. A link from etcd
// stays one per pid (a member's restart is a new row); another process's
// links fold into one per name (Link.FromAnyPID).
func EtcdComm(comm string) bool {
	rest, ok := strings.CutPrefix(comm, "etcd")
	return ok && strings.Trim(rest, "0123456789.-_v") == ""
}

// localIsClient guesses for a preexisting connection that the end whose
// port is the larger (ephemeral) one connected.
func (c *Conn) localIsClient() bool { return c.Local.Port() > c.Remote.Port() }

// add folds e into its connection, keyed by socket; an open after a close
// of the same socket address starts a new connection.
func (a *Assembler) add(e *event.Peer) {
	if e.Kind == event.PeerOpen {
		if i, ok := a.live[e.Socket]; ok && a.conns[i].OpenNs != 0 {
			delete(a.live, e.Socket) // address reused without a CLOSE seen
		}
	}
	i, ok := a.live[e.Socket]
	if !ok {
		if len(a.live) >= MaxOpenConns {
			a.unassembled++
			return
		}
		a.conns = append(a.conns, Conn{Socket: e.Socket, Direction: e.Direction, PID: e.PID, Comm: e.Comm, Local: e.Local, Remote: e.Remote})
		i = len(a.conns) - 1
		a.live[e.Socket] = i
	}
	c := &a.conns[i]
	if e.SockIno != 0 && c.sockIno != e.SockIno {
		c.sockIno = e.SockIno
		a.byIno[e.SockIno] = i
	}
	if e.Direction != event.PeerPreexisting {
		c.Direction = e.Direction
	}
	if e.PID != 0 {
		c.PID, c.Comm = e.PID, e.Comm
	}
	if e.Owner != 0 {
		c.Owner = e.Owner
		if c.Comm == "" {
			c.Comm = e.Comm
		}
	}
	if e.Local.Port() != 0 {
		c.Local = e.Local
	}
	if e.Remote.Port() != 0 {
		c.Remote = e.Remote
	}
	if e.SRTTus != 0 {
		c.SRTTus = e.SRTTus
	}
	if e.MinRTTus != 0 && e.MinRTTus != NoMinRTTus && (c.MinRTTus == 0 || e.MinRTTus < c.MinRTTus) {
		c.MinRTTus = e.MinRTTus
	}
	c.TotalRetrans = e.TotalRetrans
	if e.BytesAcked > c.BytesAcked {
		c.BytesAcked = e.BytesAcked
	}
	if e.BytesReceived > c.BytesReceived {
		c.BytesReceived = e.BytesReceived
	}
	switch e.Kind {
	case event.PeerOpen:
		c.OpenNs = e.TimeNs
		if e.Direction == event.PeerActive {
			c.HandshakeNs = e.DurationNs
		} else {
			c.HandshakeNs = uint64(e.SRTTus) * 1000
		}
	case event.PeerCloseStart:
		c.CloseStartNs = e.TimeNs
		c.InUseNs = e.DurationNs
	case event.PeerClose:
		c.CloseNs = e.TimeNs
		c.LifetimeNs = e.DurationNs
		delete(a.live, e.Socket)
	case event.PeerRetransmit:
		c.Retransmits += uint32(e.RetransmitSegments())
	case event.PeerSetup:
		c.SetupNs = e.DurationNs
	}
}

// foldMirrors marks passive connections whose active end is in conns too
// (same 4-tuple reversed, both ends on this host) and hands the active
// end the passive end's SYN-ACK RTT and the opener's pid.
func foldMirrors(conns []Conn) {
	client := map[tuple]int{}
	for i := range conns {
		if conns[i].isClient() {
			client[tuple{conns[i].Local, conns[i].Remote}] = i
		}
	}
	for i := range conns {
		c := &conns[i]
		if c.isClient() {
			continue
		}
		j, ok := client[tuple{c.Remote, c.Local}]
		if !ok {
			continue
		}
		c.Mirror = true
		c.PID, c.Comm = conns[j].PID, conns[j].Comm
		if c.PID == 0 {
			c.PID = conns[j].Owner
		}
		conns[j].peerSynAck = c.HandshakeNs
	}
}

// failed reports a connect that never reached ESTABLISHED: closed, no
// open seen, and no trace of an established connection (no RTT sample,
// nothing received) that would mark one opened before tracing began.
func (c *Conn) failed() bool {
	return c.CloseNs != 0 && c.OpenNs == 0 && c.SRTTus == 0 && c.MinRTTus == 0 && c.BytesReceived == 0
}

// isClient reports whether this end connected: known for opens seen,
// guessed for preexisting connections (the ephemeral port is the larger).
func (c *Conn) isClient() bool {
	switch c.Direction {
	case event.PeerActive:
		return true
	case event.PeerPassive:
		return false
	}
	return c.localIsClient()
}

// linkSet holds at most MaxLinks links' accumulators and folds the rest
// into other. The zero value is ready.
type linkSet struct {
	byLink map[Link]*linkAcc
	held   []*linkAcc // a folded link's place goes to the link that displaced it
	other  *linkAcc   // nil until a link is folded
	folded int
	budget *stats.Budget // every link's exact values; nil until a link is made
	// samples: every link's per-request samples (MaxSeriesSamples); nil
	// until a link is made.
	samples *sampleBudget
}

// MaxExactValues bounds the exact values the links' series keep together
// for their quantiles (stats.Budget; 8 bytes each, 16 MiB): each of a
// link's seven series keeps at most stats.ExactLimit, MaxLinks+1 links
// 233 MiB. Past it a series bins its values as fio does (within 0.8%,
// Summary.Binned), as analysis.MaxExactValues does for a report's groups.
const MaxExactValues = 1 << 21

// made returns a new accumulator of link l, its series bound to s's
// budget.
func (s *linkSet) made(l Link) *linkAcc {
	if s.budget == nil {
		s.budget = stats.NewBudget(MaxExactValues)
	}
	if s.samples == nil {
		s.samples = &sampleBudget{}
	}
	acc := &linkAcc{st: LinkStats{Link: l}, samples: s.samples}
	s.samples.accs = append(s.samples.accs, acc)
	for _, x := range acc.series() {
		x.Bind(s.budget)
	}
	return acc
}

// series lists l's series.
func (l *linkAcc) series() []*stats.Series {
	return []*stats.Series{&l.hs, &l.synack, &l.srtt, &l.minrtt, &l.perreq, &l.lifetime, &l.setup}
}

// get returns l's accumulator, made (and another folded) if it is not held.
func (s *linkSet) get(l Link) *linkAcc {
	if acc := s.byLink[l]; acc != nil {
		return acc
	}
	if s.byLink == nil {
		s.byLink = map[Link]*linkAcc{}
	}
	acc := s.made(l)
	s.byLink[l] = acc
	if len(s.held) < MaxLinks {
		s.held = append(s.held, acc)
		return acc
	}
	v := 0
	for i, h := range s.held {
		if h.weight().less(s.held[v].weight()) {
			v = i
		}
	}
	if s.other == nil {
		s.other = s.made(Link{})
	}
	s.other.fold(s.held[v])
	s.folded++
	s.samples.remove(s.held[v])
	delete(s.byLink, s.held[v].st.Link)
	s.held[v] = acc
	return acc
}

// all returns the links held, and other last if any was folded.
func (s *linkSet) all() []*linkAcc {
	if s.other == nil {
		return s.held
	}
	return append(slices.Clip(s.held), s.other)
}

// clone returns a copy of s that shares no accumulator with it.
func (s *linkSet) clone() linkSet {
	c := linkSet{byLink: map[Link]*linkAcc{}, folded: s.folded}
	if s.samples != nil {
		c.samples = &sampleBudget{held: s.samples.held}
	}
	bind := func(acc *linkAcc) *linkAcc {
		if c.samples != nil {
			acc.samples = c.samples
			c.samples.accs = append(c.samples.accs, acc)
		}
		return acc
	}
	for _, h := range s.held {
		acc := bind(h.clone())
		c.held = append(c.held, acc)
		c.byLink[acc.st.Link] = acc
	}
	if s.other != nil {
		c.other = bind(s.other.clone())
	}
	return c
}

// linkWeight orders links for folding: bytes moved, then connections.
type linkWeight struct{ bytes, conns uint64 }

func (w linkWeight) less(o linkWeight) bool {
	if w.bytes != o.bytes {
		return w.bytes < o.bytes
	}
	return w.conns < o.conns
}

func (l *linkAcc) weight() linkWeight {
	return linkWeight{l.st.BytesAcked + l.st.BytesRecv, uint64(l.st.Opened + l.st.Closed + l.st.KeptAlive + l.st.Failed)}
}

// fold adds f's connections to l's (l is the other link: f's per-request
// series is counted dropped, not kept).
func (l *linkAcc) fold(f *linkAcc) {
	l.st.Opened += f.st.Opened
	l.st.Closed += f.st.Closed
	l.st.KeptAlive += f.st.KeptAlive
	l.st.Failed += f.st.Failed
	l.st.Retransmits += f.st.Retransmits
	l.st.BytesAcked += f.st.BytesAcked
	l.st.BytesRecv += f.st.BytesRecv
	l.st.PerRequestSeriesDropped += f.st.PerRequestSeriesDropped + len(f.st.PerRequestSeries)
	from := f.series()
	for i, x := range l.series() {
		x.Absorb(from[i])
	}
}
