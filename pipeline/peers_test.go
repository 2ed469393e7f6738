package pipeline

import (
	"errors"
	"io"
	"testing"

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
