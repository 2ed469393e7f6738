package peers

import (
	"cmp"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
)

// TestPeerDownIsNotAMeasurement pins issue 14's dead-peer defect: a peer
// that refuses every connect (SYN_SENT → CLOSE, 1,811 a minute in the
// field) produced kept-alive "connections" whose min RTT was tcp_sock's
// no-sample value ~0U µs, printed as MIN RTT 1h11m34.967295s. Failed
// connects are counted as such, the link is Down, and no RTT comes out.
func TestPeerDownIsNotAMeasurement(t *testing.T) {
	var ev []event.Peer
	local := netip.MustParseAddrPort("10.0.0.1:40000")
	for i := uint64(0); i < 30; i++ {
		l := netip.AddrPortFrom(local.Addr(), uint16(40000+i))
		// What the tracer emits for a refused connect: only the CLOSE,
		// with the socket's fields as the kernel left them.
		ev = append(ev, event.Peer{Kind: event.PeerClose, TimeNs: uint64(time.Second) + i*33*ms, Socket: 500 + i, Direction: event.PeerActive,
			PID: 7, Comm: "etcd", Local: l, Remote: hostB, MinRTTus: NoMinRTTus})
	}
	rep := Analyze(ev, Options{Window: time.Second})
	if len(rep.Links) != 1 {
		t.Fatalf("%d links, want 1: %+v", len(rep.Links), rep.Links)
	}
	l := rep.Links[0]
	if l.Failed != 30 || l.Opened != 0 || !l.Down() {
		t.Errorf("failed %d opened %d down %v, want 30 failed connects, 0 opened, down", l.Failed, l.Opened, l.Down())
	}
	if l.MinRTT.Count != 0 || l.SRTT.Count != 0 || l.KeptAlive != 0 || l.PerRequest.Count != 0 {
		t.Errorf("a dead peer has measurements: min RTT %+v srtt %+v kept alive %d per-request %d", l.MinRTT, l.SRTT, l.KeptAlive, l.PerRequest.Count)
	}

	// A live kept-alive connection whose first RTT sample has not come
	// yet carries the same no-sample value: it must not become its min.
	live := []event.Peer{
		{Kind: event.PeerOpen, TimeNs: uint64(time.Second), Socket: 9, Direction: event.PeerActive, PID: 7, Local: hostA, Remote: hostB, DurationNs: 50 * ms, MinRTTus: NoMinRTTus},
		{Kind: event.PeerRTT, TimeNs: uint64(2 * time.Second), Socket: 9, Direction: event.PeerActive, Local: hostA, Remote: hostB, SRTTus: 51_000, MinRTTus: 50_000, BytesReceived: 100},
	}
	rep = Analyze(live, Options{})
	if got := rep.Links[0].MinRTT; got.Count != 1 || got.Min != 50_000_000 {
		t.Errorf("min RTT %+v, want one sample of 50 ms", got)
	}
	if rep.Links[0].Down() || rep.Links[0].Failed != 0 {
		t.Errorf("a live link is down: %+v", rep.Links[0])
	}
}

// TestOwnProbeConnectionsExcluded pins the defect "its own kept-alive
// probe connection won": connections whose local end etcdscope's probe
// dialed from are no link of etcd's, and their accepting end (traced on
// the same host, in another namespace) goes with them.
func TestOwnProbeConnectionsExcluded(t *testing.T) {
	probeLocal := netip.MustParseAddrPort("10.0.0.254:45000")
	var ev []event.Peer
	ev = append(ev, probeConn(1, 0, event.PeerActive, hostA, hostB, 50*ms, 100*ms, 50_000)...) // etcd's
	// etcdscope's kept-alive probe: open, then RTT samples, no close.
	ev = append(ev,
		event.Peer{Kind: event.PeerOpen, TimeNs: uint64(2 * time.Second), Socket: 2, Direction: event.PeerActive, PID: 99, Comm: "etcdscope", Local: probeLocal, Remote: hostB, DurationNs: 100_000},
		event.Peer{Kind: event.PeerRTT, TimeNs: uint64(3 * time.Second), Socket: 2, Direction: event.PeerActive, Local: probeLocal, Remote: hostB, SRTTus: 300, MinRTTus: 200, BytesReceived: 500},
		// its accepting end at the peer
		event.Peer{Kind: event.PeerOpen, TimeNs: uint64(2 * time.Second), Socket: 3, Direction: event.PeerPassive, Local: hostB, Remote: probeLocal, SRTTus: 150},
	)
	all := Analyze(ev, Options{})
	mine := Analyze(ev, Options{ExcludeLocal: map[netip.AddrPort]bool{probeLocal: true}})
	if len(all.Links) != 2 {
		t.Fatalf("without exclusion %d links, want etcd's and the probe's", len(all.Links))
	}
	if len(mine.Links) != 1 || mine.Links[0].Link.From != hostA.Addr() || mine.Links[0].Opened != 1 {
		t.Fatalf("with the probe excluded: %+v, want only etcd's link from %s", mine.Links, hostA.Addr())
	}
	if mine.Links[0].SRTT.Count != 0 || mine.Links[0].MinRTT.Count != 0 {
		t.Errorf("the probe's RTT leaked into etcd's link: %+v", mine.Links[0])
	}
}

// TestSlowSetupIsSetup pins issue 14's slow-setup defect: a peer that
// stalls 2 s after accepting each new connection (etcd's TLS verification
// waiting on DNS) made every per-probe connection of the RAFT_MESSAGE
// prober look kept alive (in use 2.1 s > PerRequestMax), with 0
// per-request probes and the 2 s only in LIFETIME. The stall is the
// connection's setup (the peer's first byte came 2.05 s after SYN): the
// connections are per-request, and the setup has its own summary.
func TestSlowSetupIsSetup(t *testing.T) {
	var ev []event.Peer
	for i := uint64(0); i < 10; i++ {
		c := probeConn(10+i, i*4000*ms, event.PeerActive, hostA, hostB, 50*ms, 2100*ms, 50_000)
		setup := event.Peer{Kind: event.PeerSetup, TimeNs: c[0].TimeNs + 2000*ms, Socket: 10 + i, Direction: event.PeerActive,
			Local: hostA, Remote: hostB, DurationNs: 2050 * ms}
		ev = append(ev, c[0], c[1], setup, c[2], c[3])
	}
	// A kept-alive stream that answered at once: setup 100 ms, in use for
	// its whole minute.
	stream := probeConn(50, 0, event.PeerActive, hostA, hostB, 50*ms, 60_000*ms, 50_000)
	ev = append(ev, stream[0], event.Peer{Kind: event.PeerSetup, TimeNs: stream[0].TimeNs + 50*ms, Socket: 50, Direction: event.PeerActive, Local: hostA, Remote: hostB, DurationNs: 100 * ms})
	ev = append(ev, stream[1:]...)
	slices.SortStableFunc(ev, func(a, b event.Peer) int { return cmp.Compare(a.TimeNs, b.TimeNs) })
	rep := Analyze(ev, Options{})
	if len(rep.Links) != 1 {
		t.Fatalf("%d links, want 1", len(rep.Links))
	}
	l := rep.Links[0]
	if l.PerRequest.Count != 10 || l.KeptAlive != 1 {
		t.Errorf("per-request %d, kept alive %d; want the 10 slow-setup probes per-request and the stream kept alive", l.PerRequest.Count, l.KeptAlive)
	}
	if l.PerRequest.P50 != int64(2100*ms) {
		t.Errorf("per-request p50 %v, want 2.1s (what the prober measures, setup included)", time.Duration(l.PerRequest.P50))
	}
	if l.Setup.Count != 11 || l.Setup.P50 != int64(2050*ms) || l.Setup.Min != int64(100*ms) {
		t.Errorf("setup %+v, want 11 connections, p50 2.05s, min 100ms", l.Setup)
	}
}
