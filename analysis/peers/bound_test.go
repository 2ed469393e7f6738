package peers

import (
	"net/netip"
	"testing"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// floodPeer is the event of connection i from remote address i (a
// hostile local user's connection to the peer port), kind k.
func floodPeer(i int, k event.PeerKind, t uint64) event.Peer {
	remote := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 40000)
	return event.Peer{Kind: k, TimeNs: t, Socket: uint64(1000 + i), Direction: event.PeerPassive,
		Local: netip.MustParseAddrPort("127.0.0.1:2380"), Remote: remote, SRTTus: 80, MinRTTus: 80}
}

// TestAssemblerLinksBounded: connections from 10,000 distinct remotes
// make MaxLinks links and one other link that counts the rest; every
// connection is counted once; the link that carries the traffic (a
// member's stream, opened first) stays apart.
func TestAssemblerLinksBounded(t *testing.T) {
	var a Assembler
	stream := event.Peer{Kind: event.PeerOpen, TimeNs: 1, Socket: 1, Direction: event.PeerActive, PID: 7, Comm: "etcd",
		Local: netip.MustParseAddrPort("127.0.0.1:50000"), Remote: netip.MustParseAddrPort("127.0.5.2:2380"), SRTTus: 50, MinRTTus: 40}
	a.Add(&stream)
	const flood = 10_000
	tm := uint64(10)
	for i := range flood {
		tm += 1000
		o, c := floodPeer(i, event.PeerOpen, tm), floodPeer(i, event.PeerClose, tm+500)
		a.Add(&o)
		a.Add(&c)
		if i%100 == 0 {
			s := stream
			s.Kind, s.TimeNs, s.BytesAcked, s.BytesReceived = event.PeerRTT, tm, uint64(i)*1000, uint64(i)*1000
			a.Add(&s)
		}
	}
	rep := a.Report(Options{})
	if len(rep.Links) != MaxLinks+1 {
		t.Fatalf("%d links, want %d and other", len(rep.Links), MaxLinks)
	}
	other := rep.Links[MaxLinks]
	if other.Folded != flood+1-MaxLinks || other.Link != (Link{}) {
		t.Errorf("other folds %d links (want %d), link %v", other.Folded, flood+1-MaxLinks, other.Link)
	}
	opened, stayed := 0, false
	for _, l := range rep.Links {
		opened += l.Opened
		stayed = stayed || (l.Link.FromPID == 7 && l.Opened == 1)
	}
	if opened != flood+1 {
		t.Errorf("%d connections opened in the links, want %d", opened, flood+1)
	}
	if !stayed {
		t.Errorf("the member's stream was folded")
	}
}

// TestAssemblerOpenConnsBounded: connections that never close are held
// up to MaxOpenConns; the events of those past it are counted, not
// assembled.
func TestAssemblerOpenConnsBounded(t *testing.T) {
	var a Assembler
	const extra = 100
	for i := range MaxOpenConns + extra {
		e := floodPeer(i, event.PeerOpen, uint64(i+1)*1000)
		a.Add(&e)
	}
	e := floodPeer(MaxOpenConns+1, event.PeerRTT, uint64(MaxOpenConns+extra+1)*1000) // a later event of one not held
	a.Add(&e)
	rep := a.Report(Options{})
	if rep.Unassembled != extra+1 || len(rep.Conns) != MaxOpenConns {
		t.Errorf("%d unassembled and %d connections held, want %d and %d", rep.Unassembled, len(rep.Conns), extra+1, MaxOpenConns)
	}
	if rep.Events != MaxOpenConns+extra+1 {
		t.Errorf("%d events, want every one counted", rep.Events)
	}
}

// TestAssemblerClosedHeldBounded: connections that close but are never
// CompactAfter older than the last event (all at one time_ns, at a
// time_ns of 0, or a socket reused without a close seen) are held up to
// MaxHeldClosed, then folded early and counted; every connection is
// counted once in the links. Before, all 200,000 were held.
func TestAssemblerClosedHeldBounded(t *testing.T) {
	const n = 200_000
	for _, c := range []struct {
		name string
		add  func(a *Assembler, i int)
	}{
		{"one time_ns", func(a *Assembler, i int) {
			o, c := floodPeer(i, event.PeerOpen, 1e9), floodPeer(i, event.PeerClose, 1e9)
			a.Add(&o)
			a.Add(&c)
		}},
		{"closed at 0", func(a *Assembler, i int) {
			o, c := floodPeer(i, event.PeerOpen, 1e9+uint64(i)*1e6), floodPeer(i, event.PeerClose, 0)
			a.Add(&o)
			a.Add(&c)
		}},
		{"socket reused", func(a *Assembler, i int) {
			o := floodPeer(i, event.PeerOpen, 1e9+uint64(i)*1e6)
			o.Socket = 1
			a.Add(&o)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a Assembler
			most := 0
			for i := range n {
				c.add(&a, i)
				most = max(most, len(a.conns))
			}
			if bound := 2 * (MaxOpenConns + MaxHeldClosed); most > bound {
				t.Errorf("held %d connections at once, want at most %d", most, bound)
			}
			rep := a.Report(Options{})
			opened := 0
			for _, l := range rep.Links {
				opened += l.Opened
			}
			if opened != n {
				t.Errorf("%d connections counted, want %d", opened, n)
			}
			if rep.FoldedEarly == 0 || rep.FoldedEarly > n {
				t.Errorf("%d folded early, want some of %d", rep.FoldedEarly, n)
			}
		})
	}
}

// TestLinkSeriesBudget (issue 25): MaxLinks links of 40,000 kept-alive
// connections each, every series exact before (2.56 M connections, four
// series each: the heap grew 86 MiB), keep MaxExactValues exact values
// together (20 MiB), the rest binned; every connection counted.
func TestLinkSeriesBudget(t *testing.T) {
	var s linkSet
	const conns = 40_000
	grew := testenv.HeapGrowth(func() any {
		for i := range MaxLinks {
			acc := s.get(Link{FromPID: uint32(i + 1)})
			for j := range conns {
				c := Conn{OpenNs: 1, CloseNs: 2, HandshakeNs: uint64(1000 + j), LifetimeNs: uint64(2000 + j), SRTTus: 80, MinRTTus: 70}
				acc.addConn(&c, 0, defaultPerRequestMax)
			}
		}
		return &s
	})
	t.Logf("the links hold %d MiB", grew>>20)
	if grew > 48<<20 {
		t.Errorf("the links hold %d MiB, want under 48 (MaxExactValues: %d MiB of values)", grew>>20, MaxExactValues*8>>20)
	}
	binned := 0
	for _, l := range s.all() {
		if l.st.Opened != conns || l.hs.Count() != conns {
			t.Errorf("link %v: %d opened, %d handshakes, want %d", l.st.Link, l.st.Opened, l.hs.Count(), conns)
		}
		if l.hs.Summary().Binned {
			binned++
		}
	}
	if binned == 0 || binned == MaxLinks {
		t.Errorf("%d of %d links binned, want some exact and the rest binned", binned, MaxLinks)
	}
}

// TestLinkPerRequestSeriesBounded (issue 25, round three): any local user
// can open and close connections to the peer port from MaxLinks loopback
// addresses (or processes), each a per-request connection whose sample
// its link keeps for etcd's prober model. Each link kept up to
// 2*MaxSeries samples (16 bytes each) before trimming to MaxSeries: 64
// links of 131,071 short connections held 129-160 MiB, twice that while a
// report cloned them. The links keep at most MaxSeriesSamples together,
// each link past its share trimmed, the dropped counted; a link of few
// samples (etcd's prober) keeps all of its.
func TestLinkPerRequestSeriesBounded(t *testing.T) {
	var s linkSet
	const conns = 2*MaxSeries - 1
	prober := Link{FromPID: 1}
	add := func(l Link, n int) {
		acc := s.get(l)
		for j := range n {
			c := Conn{OpenNs: uint64(j + 1), CloseStartNs: uint64(j + 2), CloseNs: uint64(j + 3), InUseNs: 1000, LifetimeNs: 2000}
			acc.addConn(&c, 0, defaultPerRequestMax)
		}
	}
	grew := testenv.HeapGrowth(func() any {
		add(prober, 1000)
		for i := range MaxLinks - 1 {
			add(Link{FromPID: uint32(i + 2)}, conns)
		}
		return &s
	})
	held, dropped := 0, 0
	for _, l := range s.all() {
		held += len(l.st.PerRequestSeries)
		dropped += l.st.PerRequestSeriesDropped
		if l.st.Closed != len(l.st.PerRequestSeries)+l.st.PerRequestSeriesDropped {
			t.Errorf("link %v: %d closed, %d samples held and %d dropped: want every one counted", l.st.Link, l.st.Closed, len(l.st.PerRequestSeries), l.st.PerRequestSeriesDropped)
		}
	}
	t.Logf("the links hold %d MiB: %d samples held, %d dropped", grew>>20, held, dropped)
	if grew > 24<<20 || held > MaxSeriesSamples {
		t.Errorf("the links hold %d MiB and %d samples, want under 24 MiB and at most %d", grew>>20, held, MaxSeriesSamples)
	}
	if p := s.byLink[prober]; p == nil || len(p.st.PerRequestSeries) != 1000 {
		t.Errorf("the prober's link lost samples to the flood: want its 1000 kept")
	}
}

// TestLinkProcessesBounded: a local user can open connections from as
// many processes of one name as it likes; a FromAnyPID link counts at
// most MaxProcesses of them, so MaxLinks such links of 100,000 processes
// each hold what MaxProcesses pids take. Measured: 3323 KiB in each of 3
// runs; the bound, 7 MiB, is twice the worst.
func TestLinkProcessesBounded(t *testing.T) {
	var s linkSet
	const procs = 100_000
	grew := testenv.HeapGrowth(func() any {
		for i := range MaxLinks {
			acc := s.get(Link{FromAnyPID: true, FromComm: "curl", From: netip.AddrFrom4([4]byte{127, 0, 1, byte(i)})})
			for j := range procs {
				c := Conn{OpenNs: 1, CloseNs: 2, HandshakeNs: 1000}
				acc.addConn(&c, uint32(j+1), defaultPerRequestMax)
			}
		}
		return &s
	})
	t.Logf("the links hold %d KiB", grew>>10)
	if grew > 7<<20 {
		t.Errorf("the links hold %d KiB, want under 7 MiB", grew>>10)
	}
	for _, l := range s.all() {
		if l.st.Opened != procs || l.st.Processes != MaxProcesses {
			t.Errorf("link %v: %d opened, %d processes; want %d and %d (MaxProcesses)", l.st.Link, l.st.Opened, l.st.Processes, procs, MaxProcesses)
		}
	}
}
