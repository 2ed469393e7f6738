package pipeline

import (
	"errors"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/tracer"
)

// TestPeersDecodeErrorsCounted: the peers path has the fsync path's
// policy: a record that does not decode is counted and skipped, every
// other event reaches every sink, and the tracer's closed error ends it.
func TestPeersDecodeErrorsCounted(t *testing.T) {
	bad := errors.New("decoding peer_event: record of 3 bytes")
	steps := []error{nil, bad, nil, nil, bad, tracer.ErrClosed}
	i := 0
	src := PeerReadFunc(func(ev *event.Peer) error {
		defer func() { i++ }()
		if steps[i] == nil {
			*ev = event.Peer{Kind: event.PeerRTT, TimeNs: uint64(i)}
		}
		return steps[i]
	})
	var a, b PeerEvents
	n := 0
	p := NewPeers(PeersConfig{Sinks: []PeerSink{&a, &b}, OnDecodeError: func(error) { n++ }})
	if err := p.Run(src); err != nil {
		t.Fatal(err)
	}
	if len(a.Events()) != 3 || len(b.Events()) != 3 || p.Events() != 3 || p.DecodeErrors() != 2 || n != 2 {
		t.Fatalf("sinks got %d and %d events, pipeline %d, decode errors %d (hook %d); want 3, 3, 3, 2, 2",
			len(a.Events()), len(b.Events()), p.Events(), p.DecodeErrors(), n)
	}
	if got := a.Events()[2].TimeNs; got != 3 {
		t.Errorf("third event from read %d, want 3", got)
	}
	if err := NewPeers(PeersConfig{}).Run(PeerReadFunc(func(*event.Peer) error { return io.EOF })); err != nil {
		t.Errorf("EOF: %v", err)
	}
}

// TestPeerConnsMatchesAnalyze: the streaming sink of `etcdscope peers`,
// fed by the pipeline from a source that reuses one event value, reports
// what peers.Analyze reports of the same events kept whole.
func TestPeerConnsMatchesAnalyze(t *testing.T) {
	local := netip.MustParseAddrPort("10.0.0.1:40000")
	remote := netip.MustParseAddrPort("10.0.0.2:2380")
	var evs []event.Peer
	for i := uint64(0); i < 5; i++ {
		t0 := (i + 1) * 4e9
		sk := 100 + i
		evs = append(evs,
			event.Peer{Kind: event.PeerOpen, TimeNs: t0, Socket: sk, Direction: event.PeerActive, PID: 7, Comm: "etcd", Local: local, Remote: remote, DurationNs: 50_000, SRTTus: 40},
			event.Peer{Kind: event.PeerCloseStart, TimeNs: t0 + 3e6, Socket: sk, Direction: event.PeerActive, Local: local, Remote: remote, DurationNs: 3e6},
			event.Peer{Kind: event.PeerClose, TimeNs: t0 + 3.1e6, Socket: sk, Direction: event.PeerActive, Local: local, Remote: remote, DurationNs: 3.05e6})
	}
	i := 0
	src := PeerReadFunc(func(ev *event.Peer) error {
		if i == len(evs) {
			return io.EOF
		}
		*ev = evs[i]
		i++
		return nil
	})
	var conns PeerConns
	if err := NewPeers(PeersConfig{Sinks: []PeerSink{&conns}}).Run(src); err != nil {
		t.Fatal(err)
	}
	opt := peers.Options{Window: 24 * time.Second}
	got, want := conns.Report(opt), peers.Analyze(evs, opt)
	if got.Events != len(evs) || len(got.Links) != 1 || len(want.Links) != 1 {
		t.Fatalf("streamed %d events into %d links; Analyze %d links (want %d events, 1 link)", got.Events, len(got.Links), len(want.Links), len(evs))
	}
	if g, w := got.Links[0], want.Links[0]; g.Opened != 5 || g.Opened != w.Opened || g.HandshakeRTT != w.HandshakeRTT || g.PerRequest != w.PerRequest {
		t.Errorf("streamed %+v\nAnalyze  %+v (want 5 opened)", g, w)
	}
}

// PeerEvents is a sink that keeps every event (`etcdscope peers` and
// report's replay fold them as they come instead: PeerConns).
type PeerEvents struct {
	mu  sync.Mutex
	evs []event.Peer
}

// Peer keeps a copy of ev.
func (s *PeerEvents) Peer(ev *event.Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, *ev)
	return nil
}

// Events returns the events kept so far (the slice is shared: read only).
func (s *PeerEvents) Events() []event.Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evs
}
