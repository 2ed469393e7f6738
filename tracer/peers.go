package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type peer_event -type peer_event_kind -type peer_event_flag peers ../bpf/peers.bpf.c

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// DefaultPeerPort is etcd's peer (Raft) port.
const DefaultPeerPort = 2380

// PeersConfig selects the connections the peers tracer reports.
type PeersConfig struct {
	// Port matches a TCP socket whose local or remote port equals it;
	// 0 means DefaultPeerPort.
	Port uint16
	// Peers, if not empty, keeps only connections whose remote address is
	// one of these (IPv4 or IPv6; IPv4-mapped IPv6 counts as IPv4).
	Peers []netip.Addr
	// NetnsInode, if not 0, keeps only sockets of that network namespace
	// (the inode of /proc/PID/ns/net); tests use it to ignore other
	// clusters on the same host.
	NetnsInode uint32
	// RTTSampleInterval bounds the RTT samples per connection; 0 means 1 s.
	RTTSampleInterval time.Duration
	// RingBytes is the peer_events ring buffer size (a power of two ≥
	// page size); 0 means DefaultPeerRingBytes.
	RingBytes uint32
}

// DefaultPeerRingBytes is the peers tracer's ring buffer size when
// PeersConfig.RingBytes is 0: DefaultRingBytes, as every other ring
// (2 MiB, ~29k events of 72 bytes with the ring's header: about a second
// at 30k events/s). 1 MiB was not enough for a reader starved to 10% of a
// CPU under connection churn on a loaded machine: it saw 1.35 MiB unread
// (bench/findings.md, section 13). Its cost: 2 MiB more resident (the
// kernel maps the data pages twice).
const DefaultPeerRingBytes = DefaultRingBytes

// PeersTracer traces TCP connections on etcd's peer port with three
// tp_btf programs: sock:inet_sock_set_state (opens, handshake RTT,
// closes), tcp:tcp_probe (rate-limited srtt samples of live connections)
// and tcp:tcp_retransmit_skb. It has the shape of Tracer[event.Peer].
type PeersTracer struct {
	objs   peersObjects
	links  []link.Link
	probes []event.Probe
	ring   *quietRing
	rec    ringbuf.Record
	dec    decoder
	owners *host.SocketOwnerResolver
	// learned: owners the resolver found, handed out as PeerOwner
	// events from learned[nextLearned:] before the next ring record.
	learned     []host.LearnedOwner
	nextLearned int
	lastNs      uint64 // the last ring record's time, PeerOwner's

	closeOnce sync.Once
	closeErr  error
}

// NewPeers loads and attaches the peers programs. It returns ErrNoBTF or
// ErrNoPrivilege (wrapped) when BPF cannot work here, and a load error with
// the verifier's last lines otherwise. On error nothing stays attached.
func NewPeers(cfg PeersConfig) (_ *PeersTracer, err error) {
	if err := prepare(""); err != nil {
		return nil, err
	}
	spec, err := loadPeers()
	if err != nil {
		return nil, fmt.Errorf("reading embedded peers BPF object: %w", err)
	}
	port := cfg.Port
	if port == 0 {
		port = DefaultPeerPort
	}
	interval := cfg.RTTSampleInterval
	if interval <= 0 {
		interval = time.Second
	}
	vars := map[string]any{
		"port":                   port,
		"filter_peers":           uint8(0),
		"netns_ino":              cfg.NetnsInode,
		"rtt_sample_interval_ns": uint64(interval),
	}
	if len(cfg.Peers) > 0 {
		vars["filter_peers"] = uint8(1)
	}
	// tcp_retransmit_skb passes the retransmit's error third from Linux
	// 6.13 on, and fires on failed retransmits too (bpf/peers.bpf.c).
	n, _ := tracepointArgs(btf.NewCache(), "tcp_retransmit_skb")
	vars["retransmit_err_arg"] = n >= 3
	if err := setVariables(spec, vars); err != nil {
		return nil, err
	}
	ring := cfg.RingBytes
	if ring == 0 {
		ring = DefaultPeerRingBytes
	}
	spec.Maps["peer_events"].MaxEntries = ring
	// Records go in quietly; the one that fills the ring past an eighth
	// wakes the reader (bpf/ring.h), and so does a socket's first record
	// its owner is looked up from, at most one every pollInterval
	// (peer_submit): else it polls, pollInterval to idlePoll.
	if err := setVariables(spec, map[string]any{"peer_wake_bytes": uint64(ring / 8), "owner_wake_gap_ns": uint64(pollInterval)}); err != nil {
		return nil, err
	}

	p := &PeersTracer{owners: host.NewSocketOwnerResolver(host.SocketOwnerConfig{})}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, explainLoad("peers programs", err)
	}
	for _, a := range cfg.Peers {
		key := a.As16() // IPv4 becomes ::ffff:a.b.c.d, as the program keys it
		if err := p.objs.PeerAddrs.Put(key, uint8(1)); err != nil {
			return nil, fmt.Errorf("adding peer %s to the filter: %w", a, err)
		}
	}
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"inet_sock_set_state", p.objs.InetSockSetState},
		{"tcp_probe", p.objs.TcpProbe},
		{"tcp_retransmit_skb", p.objs.TcpRetransmitSkb},
	} {
		l, err := link.AttachTracing(link.TracingOptions{Program: tp.prog})
		if err != nil {
			return nil, fmt.Errorf("attaching tp_btf/%s: %w", tp.name, err)
		}
		p.links = append(p.links, l)
		p.probes = append(p.probes, event.Probe{Name: "tp_btf/" + tp.name, Attached: true})
	}
	if p.ring, err = openQuietRing(p.objs.PeerEvents); err != nil {
		return nil, fmt.Errorf("opening peer_events: %w", err)
	}
	return p, nil
}

// Read blocks until the next event and decodes it into ev (struct
// peer_event through its bpf2go type, without reflection or allocation
// once the comms have been seen). For an event of a socket whose opener
// is unknown (PID 0) it fills Owner, and Comm if empty, with the process
// holding the socket if host.SocketOwnerResolver already knows it, and
// otherwise leaves them unknown and has it looked up in the background:
// Read never waits on /proc. An owner found that way comes out as an
// event.PeerOwner event before the next record. It returns ErrClosed
// after Close and ErrDrained once Drain has emptied the ring buffer.
func (p *PeersTracer) Read(ev *event.Peer) error {
	if p.nextOwner(ev) {
		return nil
	}
	r, err := readFixed[peersPeerEvent](p.ring, &p.rec, "peer")
	if err != nil {
		if errors.Is(err, ErrDrained) && p.nextOwner(ev) {
			return nil
		}
		return err
	}
	p.dec.peer(ev, r)
	p.lastNs = ev.TimeNs
	ev.Owner = ev.PID
	if ev.PID == 0 && ev.SockIno != 0 {
		var o host.SocketOwner
		switch ev.Kind {
		case event.PeerCloseStart, event.PeerClose:
			// Its fd is likely gone: a scan would find no one.
			o, _ = p.owners.Cached(ev.SockIno)
		default:
			o, _ = p.owners.Lookup(ev.Socket, ev.SockIno)
		}
		if o.PID != 0 {
			ev.Owner = o.PID
			if ev.Comm == "" {
				ev.Comm = o.Comm
			}
		}
	}
	return nil
}

// nextOwner puts the next owner the resolver learned into ev as a
// PeerOwner event, if there is one.
func (p *PeersTracer) nextOwner(ev *event.Peer) bool {
	if p.nextLearned == len(p.learned) {
		if !p.owners.HasLearned() {
			return false
		}
		p.learned, p.nextLearned = p.owners.TakeLearned(p.learned), 0
		if len(p.learned) == 0 {
			return false
		}
	}
	l := p.learned[p.nextLearned]
	p.nextLearned++
	*ev = event.Peer{Kind: event.PeerOwner, TimeNs: p.lastNs, Socket: l.Key, Direction: event.PeerPreexisting,
		Owner: l.Owner.PID, Comm: l.Owner.Comm, SockIno: l.Ino}
	return true
}

// OwnerStats returns the background owner look-up's counters: its queue
// and cache drops, scans and their cost (host.SocketOwnerStats).
func (p *PeersTracer) OwnerStats() host.SocketOwnerStats { return p.owners.Stats() }

// peer decodes struct peer_event (bpf/peers.h).
func (d *decoder) peer(ev *event.Peer, r *peersPeerEvent) {
	*ev = event.Peer{
		Kind:          event.PeerKind(r.Kind),
		TimeNs:        r.TsNs,
		Socket:        r.Sk,
		PID:           r.Pid,
		Comm:          d.intern(cbytes(r.Comm[:])),
		Netns:         r.Netns,
		DurationNs:    r.DurationNs,
		SRTTus:        r.SrttUs,
		MdevUs:        r.MdevUs,
		MinRTTus:      r.MinRttUs,
		TotalRetrans:  r.TotalRetrans,
		BytesAcked:    r.BytesAcked,
		BytesReceived: r.BytesReceived,
		Segments:      r.Segs,
		OldState:      r.Oldstate,
		NewState:      r.Newstate,
		SockIno:       r.SockIno,
		Local:         netip.AddrPortFrom(addrOf(r.Family, r.Saddr), r.Sport),
		Remote:        netip.AddrPortFrom(addrOf(r.Family, r.Daddr), r.Dport),
	}
	switch {
	case peersPeerEventFlag(r.Flags)&peersPeerEventFlagPEER_F_ACTIVE != 0:
		ev.Direction = event.PeerActive
	case peersPeerEventFlag(r.Flags)&peersPeerEventFlagPEER_F_PASSIVE != 0:
		ev.Direction = event.PeerPassive
	default:
		ev.Direction = event.PeerPreexisting
	}
}

// addrOf returns the address in a[:4] for AF_INET, a for AF_INET6 (an
// IPv4-mapped IPv6 address is unmapped, so one peer has one key).
func addrOf(family uint16, a [16]uint8) netip.Addr {
	if family == afInet {
		return netip.AddrFrom4([4]byte(a[:4]))
	}
	return netip.AddrFrom16(a).Unmap()
}

// afInet is AF_INET, the family of an IPv4 peer_event.
const afInet = 2

// Probes lists the three tp_btf programs (all attached once NewPeers has
// returned).
func (p *PeersTracer) Probes() []event.Probe { return p.probes }

// Lost returns how many events the kernel dropped because the ring buffer
// was full (the sum of the per-CPU lost_events counter).
func (p *PeersTracer) Lost() (uint64, error) {
	return sumPerCPU(p.objs.LostEvents, "lost_events")
}

// ProgramStats returns the statistics of the peers tracer's programs
// (inet_sock_set_state, tcp_probe, tcp_retransmit_skb), sorted by name.
func (p *PeersTracer) ProgramStats() []event.ProgramStats {
	return programStats(map[string]*ebpf.Program{
		"inet_sock_set_state": p.objs.InetSockSetState,
		"tcp_probe":           p.objs.TcpProbe,
		"tcp_retransmit_skb":  p.objs.TcpRetransmitSkb,
	})
}

// Missed returns how many times the kernel skipped one of the peers
// programs (bpf_prog_info.recursion_misses summed: fired again, from an
// interrupt, while it ran on that CPU; each is an event lost).
func (p *PeersTracer) Missed() uint64 {
	return missed(p.objs.InetSockSetState, p.objs.TcpProbe, p.objs.TcpRetransmitSkb)
}

// RingPeakBytes returns the most unread data the reader has seen in
// peer_events (sampled, so a lower bound), in bytes: how close a slow or
// starved reader came to losing events (the ring holds RingBytes).
func (p *PeersTracer) RingPeakBytes() uint64 { return p.ring.peakBytes() }

// Drain makes a Read in progress, and the ones after it, return every
// record already in the ring buffer and then ErrDrained.
func (p *PeersTracer) Drain() error { return p.ring.drain() }

// Close detaches the programs and frees the maps; it is safe to call more
// than once and on a half-built tracer. Lost must be read before Close.
func (p *PeersTracer) Close() error {
	p.closeOnce.Do(func() {
		var errs []error
		if p.owners != nil {
			p.owners.Close()
		}
		if p.ring != nil {
			errs = append(errs, p.ring.close())
		}
		errs = append(errs, closeLinks(p.links)...)
		errs = append(errs, p.objs.Close())
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// RecordPeers traces for d (or until ctx ends) and returns the events and
// the count of events lost in the kernel. ready, if not nil, is called
// once the programs are attached. It is the one-call entry point for
// tests elsewhere (the netem rig): feed the events to peers.Analyze.
func RecordPeers(ctx context.Context, cfg PeersConfig, d time.Duration, ready func()) ([]event.Peer, uint64, error) {
	var evs []event.Peer
	lost, err := StreamPeers(ctx, cfg, d, ready, func(e *event.Peer) error {
		evs = append(evs, *e)
		return nil
	})
	return evs, lost, err
}

// StreamPeers is RecordPeers handing each event to each as it is read
// instead of keeping them: what a caller folds them into (peers.Assembler,
// a recording) bounds its memory, not the event rate. The event is reused
// for the next read: each must copy what it keeps. An error from each
// stops the tracing and is returned.
func StreamPeers(ctx context.Context, cfg PeersConfig, d time.Duration, ready func(), each func(*event.Peer) error) (uint64, error) {
	p, err := NewPeers(cfg)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if ready != nil {
		ready()
	}
	// At d, or when ctx ends, Read returns what is left, then ErrDrained.
	timer := time.AfterFunc(d, func() { p.Drain() })
	defer timer.Stop()
	stop := context.AfterFunc(ctx, func() { p.Drain() })
	defer stop()
	var ev event.Peer
	for {
		err := p.Read(&ev)
		if errors.Is(err, ErrDrained) {
			break
		}
		if err != nil {
			return 0, err
		}
		if err := each(&ev); err != nil {
			return 0, err
		}
	}
	return p.Lost()
}
