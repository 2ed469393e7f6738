package pipeline

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
)

// PeerSource yields the peers tracer's events: tracer.PeersTracer or a
// capture.Reader (ReadPeer). tracer.ErrClosed, tracer.ErrDrained and
// io.EOF end the stream; any other error is one record lost to decoding.
type PeerSource interface {
	Read(ev *event.Peer) error
}

// PeerReadFunc adapts a read method to PeerSource.
type PeerReadFunc func(ev *event.Peer) error

// Read calls f.
func (f PeerReadFunc) Read(ev *event.Peer) error { return f(ev) }

// PeerSink receives every peer-port event; ev is valid only during the
// call. An error ends Run with it.
type PeerSink interface {
	Peer(ev *event.Peer) error
}

// PeersConfig says where a Peers pipeline's events go.
type PeersConfig struct {
	Sinks []PeerSink
	// OnDecodeError, if set, is called for each record the source could
	// not decode (the loop goes on).
	OnDecodeError func(error)
}

// Peers is the peers tracer's data path: every event to every sink, with
// the fsync path's error policy (decode errors counted, the loop goes
// on). Run it on one goroutine; the counters may be read from others.
type Peers struct {
	cfg     PeersConfig
	decErrs atomic.Uint64
	events  atomic.Uint64
}

// NewPeers returns a pipeline for cfg.
func NewPeers(cfg PeersConfig) *Peers { return &Peers{cfg: cfg} }

// DecodeErrors returns how many records the source could not decode.
func (p *Peers) DecodeErrors() uint64 { return p.decErrs.Load() }

// Events returns how many events went to the sinks.
func (p *Peers) Events() uint64 { return p.events.Load() }

// Run reads src until it ends (nil), a sink fails, or the source fails
// maxConsecutiveErrors times in a row (that error).
func (p *Peers) Run(src PeerSource) error {
	return run(src.Read, &p.decErrs, p.cfg.OnDecodeError, func(ev *event.Peer) (bool, error) {
		p.events.Add(1)
		for _, s := range p.cfg.Sinks {
			if err := s.Peer(ev); err != nil {
				return false, err
			}
		}
		return false, nil
	})
}

// PeerConns is the sink of `etcdscope peers`: it folds each event into its
// connection as it comes (peers.Assembler) and keeps the connections, not
// the events, so its memory follows the connections (a handful per link
// per minute), not the event rate. Safe for concurrent use.
type PeerConns struct {
	mu sync.Mutex
	a  peers.Assembler
}

// Peer folds ev into its connection.
func (s *PeerConns) Peer(ev *event.Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a.Add(ev)
	return nil
}

// Exclude sets the Assembler's Exclude: the local ends of etcdscope's own
// connections, dropped when their connections are folded into link
// totals. Set it before the first event.
func (s *PeerConns) Exclude(f func(netip.AddrPort) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a.Exclude = f
}

// Report summarises the connections so far (peers.Assembler.Report).
func (s *PeerConns) Report(opt peers.Options) peers.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.a.Report(opt)
}
