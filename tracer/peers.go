package tracer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/analysis/peers"
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
}

// Peers traces TCP connections on etcd's peer port with three tp_btf
// programs: sock:inet_sock_set_state (opens, handshake RTT, closes),
// tcp:tcp_probe (rate-limited srtt samples of live connections) and
// tcp:tcp_retransmit_skb. Create it with NewPeers, read with Next or Run,
// and Close it.
type Peers struct {
	objs   peersObjects
	links  []link.Link
	rd     *ringbuf.Reader
	closed sync.Once
	err    error

	owners   map[uint64]uint32 // socket inode → tgid holding it (0: not found)
	lastScan time.Time
}

// peerEventSize is sizeof(struct peer_event); decode checks it.
const peerEventSize = int(unsafe.Sizeof(peersPeerEvent{}))

// NewPeers loads and attaches the peers programs. It returns ErrNoBTF or
// ErrNoPrivilege (wrapped) when BPF cannot work here, and a load error with
// the verifier's last lines otherwise. On error nothing stays attached.
func NewPeers(cfg PeersConfig) (_ *Peers, err error) {
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
	if err := setVariables(spec, vars); err != nil {
		return nil, err
	}

	p := &Peers{}
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
	for _, prog := range []*ebpf.Program{p.objs.InetSockSetState, p.objs.TcpProbe, p.objs.TcpRetransmitSkb} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			return nil, fmt.Errorf("attaching %s: %w", prog.String(), err)
		}
		p.links = append(p.links, l)
	}
	p.rd, err = ringbuf.NewReader(p.objs.PeerEvents)
	if err != nil {
		return nil, fmt.Errorf("opening peer_events ring buffer: %w", err)
	}
	return p, nil
}

// Next blocks until the next event and returns it. After Close it returns
// an error wrapping ringbuf.ErrClosed (errors.Is(err, os.ErrClosed) too).
func (p *Peers) Next() (peers.Event, error) {
	for {
		rec, err := p.rd.Read()
		if err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return peers.Event{}, fmt.Errorf("peers tracer: %w", os.ErrClosed)
			}
			return peers.Event{}, fmt.Errorf("reading peer_events: %w", err)
		}
		ev, err := decodePeerEvent(rec.RawSample)
		if err != nil {
			return peers.Event{}, err
		}
		ev.Owner = ev.PID
		if ev.PID == 0 && ev.SockIno != 0 && ev.Kind == peers.KindRTT {
			ev.Owner = p.owner(ev.SockIno)
			if ev.Owner != 0 && ev.Comm == "" {
				if b, err := os.ReadFile("/proc/" + strconv.Itoa(int(ev.Owner)) + "/comm"); err == nil {
					ev.Comm = strings.TrimSpace(string(b))
				}
			}
		}
		return ev, nil
	}
}

// owner returns the tgid whose fd table holds socket inode ino, from a
// scan of /proc/*/fd made at most once per second (only long-lived
// connections' RTT samples ask, so the scan cost stays small).
func (p *Peers) owner(ino uint64) uint32 {
	if pid, ok := p.owners[ino]; ok {
		return pid
	}
	if time.Since(p.lastScan) < time.Second {
		return 0
	}
	p.lastScan = time.Now()
	found := socketOwners()
	if p.owners == nil {
		p.owners = map[uint64]uint32{}
	}
	for k, v := range found {
		p.owners[k] = v
	}
	if _, ok := p.owners[ino]; !ok {
		p.owners[ino] = 0 // do not rescan for it
	}
	return p.owners[ino]
}

// Run calls fn for every event until ctx ends, then closes p. It returns
// nil when ctx ended, or the read error.
func (p *Peers) Run(ctx context.Context, fn func(peers.Event)) error {
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	for {
		ev, err := p.Next()
		if err != nil {
			if errors.Is(err, os.ErrClosed) && ctx.Err() != nil {
				return nil
			}
			return err
		}
		fn(ev)
	}
}

// Lost returns how many events the kernel dropped because the ring buffer
// was full (the sum of the per-CPU lost_events counter).
func (p *Peers) Lost() (uint64, error) {
	var perCPU []uint64
	if err := p.objs.LostEvents.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("reading lost_events: %w", err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// Close detaches the programs and frees the maps; safe to call twice.
// Lost must be read before Close.
func (p *Peers) Close() error {
	p.closed.Do(func() {
		var errs []error
		if p.rd != nil {
			errs = append(errs, p.rd.Close())
		}
		for _, l := range p.links {
			errs = append(errs, l.Close())
		}
		errs = append(errs, p.objs.Close())
		p.err = errors.Join(errs...)
	})
	return p.err
}

// RecordPeers traces for d (or until ctx ends) and returns the events and
// the count of events lost in the kernel. ready, if not nil, is called
// once the programs are attached. It is the one-call entry point for
// tests elsewhere (the netem rig): feed the events to peers.Analyze.
func RecordPeers(ctx context.Context, cfg PeersConfig, d time.Duration, ready func()) ([]peers.Event, uint64, error) {
	p, err := NewPeers(cfg)
	if err != nil {
		return nil, 0, err
	}
	defer p.Close()
	if ready != nil {
		ready()
	}
	p.rd.SetDeadline(time.Now().Add(d))
	// A cancelled ctx flushes the reader: a Read waiting in the poller
	// wakes, returns what is left, then ErrFlushed. (Moving the deadline
	// would not wake it: SetDeadline waits for the Read's lock.)
	stop := context.AfterFunc(ctx, func() { p.rd.Flush() })
	defer stop()
	var evs []peers.Event
	for {
		ev, err := p.Next()
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
			break
		}
		if err != nil {
			return evs, 0, err
		}
		evs = append(evs, ev)
	}
	lost, err := p.Lost()
	return evs, lost, err
}

// decodePeerEvent decodes struct peer_event (bpf/peers.h) by its fixed
// little/big-endian layout as the host writes it, without reflection.
func decodePeerEvent(b []byte) (peers.Event, error) {
	if len(b) < peerEventSize {
		return peers.Event{}, fmt.Errorf("peer_event record of %d bytes, want %d", len(b), peerEventSize)
	}
	ne := binary.NativeEndian
	var r peersPeerEvent
	r.TsNs = ne.Uint64(b[0:])
	r.Sk = ne.Uint64(b[8:])
	r.DurationNs = ne.Uint64(b[16:])
	r.BytesAcked = ne.Uint64(b[24:])
	r.BytesReceived = ne.Uint64(b[32:])
	r.Pid = ne.Uint32(b[40:])
	r.SrttUs = ne.Uint32(b[44:])
	r.MdevUs = ne.Uint32(b[48:])
	r.MinRttUs = ne.Uint32(b[52:])
	r.TotalRetrans = ne.Uint32(b[56:])
	r.Netns = ne.Uint32(b[60:])
	r.Sport = ne.Uint16(b[64:])
	r.Dport = ne.Uint16(b[66:])
	r.Family = ne.Uint16(b[68:])
	r.Kind, r.Flags, r.Oldstate, r.Newstate = b[70], b[71], b[72], b[73]
	var saddr, daddr [16]byte
	copy(saddr[:], b[76:92])
	copy(daddr[:], b[92:108])
	r.SockIno = ne.Uint64(b[128:])
	comm := b[108:124]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}

	ev := peers.Event{
		Kind:          peers.Kind(r.Kind),
		TimeNs:        r.TsNs,
		Socket:        r.Sk,
		PID:           r.Pid,
		Comm:          string(comm),
		Netns:         r.Netns,
		DurationNs:    r.DurationNs,
		SRTTus:        r.SrttUs,
		MdevUs:        r.MdevUs,
		MinRTTus:      r.MinRttUs,
		TotalRetrans:  r.TotalRetrans,
		BytesAcked:    r.BytesAcked,
		BytesReceived: r.BytesReceived,
		OldState:      r.Oldstate,
		NewState:      r.Newstate,
		SockIno:       r.SockIno,
	}
	switch {
	case r.Flags&1 != 0:
		ev.Direction = peers.Active
	case r.Flags&2 != 0:
		ev.Direction = peers.Passive
	default:
		ev.Direction = peers.Preexisting
	}
	ev.Local = netip.AddrPortFrom(addrOf(r.Family, saddr), r.Sport)
	ev.Remote = netip.AddrPortFrom(addrOf(r.Family, daddr), r.Dport)
	return ev, nil
}

// addrOf returns the address in a[:4] for AF_INET, a for AF_INET6 (an
// IPv4-mapped IPv6 address is unmapped, so one peer has one key).
func addrOf(family uint16, a [16]byte) netip.Addr {
	if family == 2 {
		return netip.AddrFrom4([4]byte(a[:4]))
	}
	return netip.AddrFrom16(a).Unmap()
}
