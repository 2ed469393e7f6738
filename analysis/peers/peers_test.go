package peers

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
)

var (
	hostA  = netip.MustParseAddrPort("10.0.0.1:40000")
	hostB  = netip.MustParseAddrPort("10.0.0.2:2380")
	loop1  = netip.MustParseAddrPort("127.0.0.1:51000")
	loop2  = netip.MustParseAddrPort("127.0.0.2:2380")
	v6peer = netip.MustParseAddrPort("[fd00::2]:2380")
	v6me   = netip.MustParseAddrPort("[fd00::1]:41000")
)

const ms = uint64(time.Millisecond)

// probeConn is the events of one per-request connection as an etcd
// prober makes it: open, an RTT sample, FIN after inUse, CLOSE.
func probeConn(sk, t0 uint64, dir event.PeerDirection, local, remote netip.AddrPort, handshake, inUse uint64, srtt uint32) []event.Peer {
	t0 += uint64(time.Second) // CLOCK_MONOTONIC is never 0; 0 means "not seen"
	open := event.Peer{Kind: event.PeerOpen, TimeNs: t0, Socket: sk, Direction: dir, PID: 7, Comm: "etcd", Local: local, Remote: remote, SRTTus: srtt, MinRTTus: srtt}
	if dir == event.PeerActive {
		open.DurationNs = handshake
	} else {
		open.PID, open.Comm = 0, ""
	}
	ev := []event.Peer{open}
	ev = append(ev, event.Peer{Kind: event.PeerRTT, TimeNs: t0 + 1000, Socket: sk, Direction: dir, Local: local, Remote: remote, SRTTus: srtt, MinRTTus: srtt})
	ev = append(ev, event.Peer{Kind: event.PeerCloseStart, TimeNs: t0 + inUse, Socket: sk, Direction: dir, Local: local, Remote: remote, DurationNs: inUse, SRTTus: srtt, MinRTTus: srtt})
	ev = append(ev, event.Peer{Kind: event.PeerClose, TimeNs: t0 + inUse + 100_000, Socket: sk, Direction: dir, Local: local, Remote: remote, DurationNs: inUse + 50_000, SRTTus: srtt, MinRTTus: srtt, BytesAcked: 900})
	return ev
}

func TestAnalyze(t *testing.T) {
	type want struct {
		link                 Link
		opened, closed, kept int
		perMinute            float64
		hsCount, hsP50       int64
		perReqP50, srttCount int64
		srttP50, srttMax     int64
		synackCount, retrans int64
	}
	cases := []struct {
		name   string
		events func() []event.Peer
		window time.Duration
		want   []want
	}{{
		name: "per-request probes over IPv4, one every 4 s",
		events: func() []event.Peer {
			var ev []event.Peer
			for i := uint64(0); i < 15; i++ {
				ev = append(ev, probeConn(100+i, i*4000*ms, event.PeerActive, hostA, hostB, 50_000+i*1000, 3*ms, 40)...)
			}
			return ev
		},
		window: time.Minute,
		want: []want{{
			link:   Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: hostA.Addr(), To: hostB.Addr(), Peer: hostB.Addr()},
			opened: 15, closed: 15, perMinute: 15, hsCount: 15, hsP50: 57_000, perReqP50: int64(3 * ms),
		}},
	}, {
		name: "loopback: the accepting end is folded into the opener's link",
		events: func() []event.Peer {
			var ev []event.Peer
			for i := uint64(0); i < 4; i++ {
				local := netip.AddrPortFrom(loop1.Addr(), loop1.Port()+uint16(i))
				a := probeConn(200+i, i*4000*ms, event.PeerActive, local, loop2, 30_000, 2*ms, 25)
				p := probeConn(300+i, i*4000*ms+10_000, event.PeerPassive, loop2, local, 0, 2*ms, 20)
				ev = append(ev, a[0], p[0], a[1], p[1], a[2], p[2], a[3], p[3])
			}
			return ev
		},
		window: 16 * time.Second,
		want: []want{{
			link:   Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: loop1.Addr(), To: loop2.Addr(), Peer: loop2.Addr()},
			opened: 4, closed: 4, perMinute: 15, hsCount: 4, hsP50: 30_000, perReqP50: int64(2 * ms), synackCount: 4,
		}},
	}, {
		name: "kept-alive connections count once each, however many samples",
		events: func() []event.Peer {
			var ev []event.Peer
			// A busy stream: 100 samples at 1 ms; an idle one: 1 sample at 50 ms.
			for i := uint64(0); i < 100; i++ {
				ev = append(ev, event.Peer{Kind: event.PeerRTT, TimeNs: i * ms, Socket: 1, Direction: event.PeerPreexisting, Local: v6me, Remote: v6peer, SRTTus: 1000, MinRTTus: 900})
			}
			ev = append(ev, event.Peer{Kind: event.PeerRTT, TimeNs: 100 * ms, Socket: 2, Direction: event.PeerPreexisting, Local: netip.AddrPortFrom(v6me.Addr(), 41001), Remote: v6peer, SRTTus: 50_000, MinRTTus: 48_000})
			ev = append(ev, event.Peer{Kind: event.PeerRetransmit, TimeNs: 101 * ms, Socket: 2, Direction: event.PeerPreexisting, Local: netip.AddrPortFrom(v6me.Addr(), 41001), Remote: v6peer, SRTTus: 50_000, TotalRetrans: 1})
			return ev
		},
		want: []want{{
			link: Link{Direction: event.PeerActive, From: v6me.Addr(), To: v6peer.Addr(), Peer: v6peer.Addr()},
			kept: 2, srttCount: 2, srttP50: 1_000_000, srttMax: 50_000_000, retrans: 1,
		}},
	}, {
		name: "retransmits count segments; a recording without the count, one each",
		events: func() []event.Peer {
			ev := []event.Peer{{Kind: event.PeerRTT, TimeNs: ms, Socket: 3, Direction: event.PeerPreexisting, Local: v6me, Remote: v6peer, SRTTus: 1000, MinRTTus: 900}}
			// One GSO skb of 3 segments sent again, then an event from a
			// recording made before segments were read (Segments 0).
			ev = append(ev, event.Peer{Kind: event.PeerRetransmit, TimeNs: 2 * ms, Socket: 3, Direction: event.PeerPreexisting, Local: v6me, Remote: v6peer, SRTTus: 1000, TotalRetrans: 3, Segments: 3})
			return append(ev, event.Peer{Kind: event.PeerRetransmit, TimeNs: 3 * ms, Socket: 3, Direction: event.PeerPreexisting, Local: v6me, Remote: v6peer, SRTTus: 1000, TotalRetrans: 4})
		},
		want: []want{{
			link: Link{Direction: event.PeerActive, From: v6me.Addr(), To: v6peer.Addr(), Peer: v6peer.Addr()},
			kept: 1, srttCount: 1, srttP50: 1_000_000, srttMax: 1_000_000, retrans: 4,
		}},
	}, {
		// The new-user walk on a 3-member cluster: each member's Raft
		// streams, dialled before tracing began, were "(unknown)" rows of
		// their own beside "(active)" rows of its probes with no srtt
		// ("-/- (0)"), and the metric model read no kept-alive srtt.
		name: "streams opened before tracing join the link of their process's probes",
		events: func() []event.Peer {
			var ev []event.Peer
			for i := uint64(0); i < 15; i++ {
				ev = append(ev, probeConn(100+i, i*4000*ms, event.PeerActive, hostA, hostB, 50_000, 3*ms, 40)...)
			}
			for i := uint64(0); i < 2; i++ { // etcd's two streams to a peer
				local := netip.AddrPortFrom(hostA.Addr(), 41000+uint16(i))
				ev = append(ev, event.Peer{Kind: event.PeerRTT, TimeNs: uint64(time.Second) + i*ms, Socket: 1 + i, Direction: event.PeerPreexisting, Owner: 7, Comm: "etcd", Local: local, Remote: hostB, SRTTus: 200 + 100*uint32(i), MinRTTus: 90})
			}
			return ev
		},
		window: time.Minute,
		want: []want{{
			link:   Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: hostA.Addr(), To: hostB.Addr(), Peer: hostB.Addr()},
			opened: 15, closed: 15, kept: 2, perMinute: 15, hsCount: 15, hsP50: 50_000, perReqP50: int64(3 * ms),
			srttCount: 2, srttP50: 200_000, srttMax: 300_000,
		}},
	}, {
		name: "a socket address reused after CLOSE is a new connection",
		events: func() []event.Peer {
			ev := probeConn(9, 0, event.PeerActive, hostA, hostB, 40_000, ms, 30)
			return append(ev, probeConn(9, 10*ms, event.PeerActive, hostA, hostB, 60_000, ms, 30)...)
		},
		window: time.Minute,
		want: []want{{
			link:   Link{Direction: event.PeerActive, FromPID: 7, FromComm: "etcd", From: hostA.Addr(), To: hostB.Addr(), Peer: hostB.Addr()},
			opened: 2, closed: 2, perMinute: 2, hsCount: 2, hsP50: 40_000, perReqP50: int64(ms),
		}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Analyze(c.events(), Options{Window: c.window})
			if len(rep.Links) != len(c.want) {
				t.Fatalf("%d links, want %d: %+v", len(rep.Links), len(c.want), rep.Links)
			}
			for i, w := range c.want {
				g := rep.Links[i]
				if g.Link != w.link {
					t.Errorf("link %v, want %v", g.Link, w.link)
				}
				check := func(name string, got, want int64) {
					t.Helper()
					if got != want {
						t.Errorf("%s: %s = %d, want %d", g.Link, name, got, want)
					}
				}
				check("opened", int64(g.Opened), int64(w.opened))
				check("closed", int64(g.Closed), int64(w.closed))
				check("kept alive", int64(g.KeptAlive), int64(w.kept))
				check("handshake count", g.HandshakeRTT.Count, w.hsCount)
				check("handshake p50", g.HandshakeRTT.P50, w.hsP50)
				check("per-request p50", g.PerRequest.P50, w.perReqP50)
				check("srtt count", g.SRTT.Count, w.srttCount)
				check("srtt p50", g.SRTT.P50, w.srttP50)
				check("srtt max", g.SRTT.Max, w.srttMax)
				check("peer syn-ack count", g.PeerSynAckRTT.Count, w.synackCount)
				check("retransmits", int64(g.Retransmits), w.retrans)
				if w.perMinute != 0 && g.OpenedPerMinute != w.perMinute {
					t.Errorf("opened/min %v, want %v", g.OpenedPerMinute, w.perMinute)
				}
			}
		})
	}
}

// TestOwnerAttribution: connections that predate tracing get their pid
// from the socket's owner (Event.Owner); on loopback the accepting end is
// folded into the dialing end and the link names both processes.
func TestOwnerAttribution(t *testing.T) {
	client := netip.MustParseAddrPort("127.0.0.1:45000")
	server := netip.MustParseAddrPort("127.0.0.2:2380")
	evs := []event.Peer{
		{Kind: event.PeerRTT, TimeNs: 1e9, Socket: 1, Direction: event.PeerPreexisting, Owner: 100, Comm: "etcd", Local: client, Remote: server, SRTTus: 90, MinRTTus: 10},
		{Kind: event.PeerRTT, TimeNs: 1e9 + 10, Socket: 2, Direction: event.PeerPreexisting, Owner: 200, Comm: "etcd", Local: server, Remote: client, SRTTus: 70, MinRTTus: 12},
		// accepted from a remote host, owner known: To side named
		{Kind: event.PeerRTT, TimeNs: 1e9 + 20, Socket: 3, Direction: event.PeerPreexisting, Owner: 200, Comm: "etcd", Local: server, Remote: netip.MustParseAddrPort("10.0.0.9:51000"), SRTTus: 900},
	}
	rep := Analyze(evs, Options{Window: time.Second})
	if len(rep.Links) != 2 {
		t.Fatalf("links %+v", rep.Links)
	}
	got := map[string]bool{}
	for _, l := range rep.Links {
		got[l.Link.String()] = true
	}
	for _, want := range []string{"etcd[100] 127.0.0.1 → 127.0.0.2 (active)", "10.0.0.9 → [200] 127.0.0.2 (passive)"} {
		if !got[want] {
			t.Errorf("no link %q in %v", want, got)
		}
	}
}

// TestAssemblerStreams: an Assembler fed one event at a time, from a
// reused value as tracer.StreamPeers hands them, with a Report taken
// midway, ends with the report Analyze makes of the whole slice (the
// loopback case: mirrors folded, so Report must not fold in place).
func TestAssemblerStreams(t *testing.T) {
	var evs []event.Peer
	for i := uint64(0); i < 4; i++ {
		local := netip.AddrPortFrom(loop1.Addr(), loop1.Port()+uint16(i))
		a := probeConn(200+i, i*4000*ms, event.PeerActive, local, loop2, 30_000, 2*ms, 25)
		p := probeConn(300+i, i*4000*ms+10_000, event.PeerPassive, loop2, local, 0, 2*ms, 20)
		evs = append(evs, a[0], p[0], a[1], p[1], a[2], p[2], a[3], p[3])
	}
	opt := Options{Window: 16 * time.Second}
	want := Analyze(evs, opt)

	var asm Assembler
	var reused event.Peer
	for i := range evs {
		reused = evs[i]
		asm.Add(&reused)
		if i == len(evs)/2 {
			if mid := asm.Report(opt); mid.Events != i+1 {
				t.Fatalf("midway report counts %d events, want %d", mid.Events, i+1)
			}
		}
	}
	got := asm.Report(opt)
	if got.Events != want.Events || len(got.Links) != len(want.Links) || len(got.Links) != 1 {
		t.Fatalf("streamed: %d events, %d links; Analyze: %d events, %d links (want 1 link)", got.Events, len(got.Links), want.Events, len(want.Links))
	}
	g, w := got.Links[0], want.Links[0]
	if g.Link != w.Link || g.Opened != w.Opened || g.Closed != w.Closed || g.HandshakeRTT != w.HandshakeRTT || g.PerRequest != w.PerRequest || g.SRTT != w.SRTT {
		t.Errorf("streamed link %+v\nAnalyze's     %+v", g, w)
	}
}

// TestAssemblerBoundedChurn: 40,000 loopback per-request connections (both
// ends traced, 2,000 a second of event time, as make bench's churn) leave
// the Assembler holding only the connections of the last CompactAfter,
// and its report counts every one exactly as if none had been folded:
// one active link (the passive ends folded into it as mirrors), every
// handshake, SYN-ACK RTT, setup, time in use and lifetime; its own
// probe's connections (Exclude) left out.
func TestAssemblerBoundedChurn(t *testing.T) {
	const n = 40000
	own := netip.MustParseAddrPort("127.0.0.1:60000")
	var asm Assembler
	asm.Exclude = func(a netip.AddrPort) bool { return a == own }
	maxHeld := 0
	var hsSum, useSum int64
	for i := uint64(0); i < n; i++ {
		local := netip.AddrPortFrom(loop1.Addr(), uint16(1024+i%50000))
		if i == 7 {
			local = own
		}
		t0 := i * 500_000 // 2,000 connections a second
		hs := 20_000 + i%1000
		a := probeConn(2*i+1, t0, event.PeerActive, local, loop2, hs, 2*ms+i%7, 25)
		p := probeConn(2*i+2, t0+10_000, event.PeerPassive, loop2, local, 0, 2*ms, 20)
		for _, e := range []event.Peer{a[0], p[0], a[1], p[1], a[2], p[2], a[3], p[3]} {
			asm.Add(&e)
		}
		if i != 7 {
			hsSum += int64(hs)
			useSum += int64(2*ms + i%7)
		}
		maxHeld = max(maxHeld, len(asm.conns))
	}
	// CompactAfter of connections (4,000 ends a second) plus the batch
	// before a fold.
	if maxHeld > int(CompactAfter/time.Second)*4000+compactMin+8 {
		t.Errorf("the Assembler held up to %d connections", maxHeld)
	}
	rep := asm.Report(Options{})
	if len(rep.Links) != 1 {
		t.Fatalf("%d links, want the one active link: %+v", len(rep.Links), rep.Links)
	}
	l := rep.Links[0]
	if l.Link.Direction != event.PeerActive || l.Opened != n-1 || l.Closed != n-1 || l.HandshakeRTT.Count != n-1 ||
		l.HandshakeRTT.Sum != hsSum || l.PerRequest.Count != n-1 || l.PerRequest.Sum != useSum || l.PeerSynAckRTT.Count != n-1 ||
		l.Lifetime.Count != n-1 || len(l.PerRequestSeries)+l.PerRequestSeriesDropped != n-1 {
		t.Errorf("link %+v: want %d opened and closed, handshakes summing to %d, time in use to %d", l, n-1, hsSum, useSum)
	}
	t.Logf("held at most %d connections; now %d", maxHeld, len(asm.conns))
}

// TestLateOwner: an owner the tracer learned after a connection's events
// went out without one (event.PeerOwner) lands on that connection's link
// row (ToPID of an accepted connection), whether it comes while the
// connection is open or after its close but before it is folded; it is
// not counted as an event. One that comes after the connection was folded
// into its link, or names a reused socket address with another inode,
// attaches to nothing: the owner stays unknown (ToPID 0, never a guess)
// and is counted.
func TestLateOwner(t *testing.T) {
	remote := netip.MustParseAddrPort("10.0.0.9:51000")
	accepted := func(sk, ino, t0 uint64) []event.Peer {
		return []event.Peer{
			{Kind: event.PeerOpen, TimeNs: t0, Socket: sk, Direction: event.PeerPassive, Local: hostB, Remote: remote, SRTTus: 50},
			{Kind: event.PeerSetup, TimeNs: t0 + 10, Socket: sk, SockIno: ino, Direction: event.PeerPassive, Local: hostB, Remote: remote, DurationNs: 10},
			{Kind: event.PeerRTT, TimeNs: t0 + 20, Socket: sk, SockIno: ino, Direction: event.PeerPassive, Local: hostB, Remote: remote, SRTTus: 50},
			{Kind: event.PeerCloseStart, TimeNs: t0 + 30, Socket: sk, SockIno: ino, Direction: event.PeerPassive, Local: hostB, Remote: remote, DurationNs: 30},
			{Kind: event.PeerClose, TimeNs: t0 + 40, Socket: sk, SockIno: ino, Direction: event.PeerPassive, Local: hostB, Remote: remote, DurationNs: 40},
		}
	}
	owner := func(sk, ino, t uint64) event.Peer {
		return event.Peer{Kind: event.PeerOwner, TimeNs: t, Socket: sk, SockIno: ino, Direction: event.PeerPreexisting, Owner: 42, Comm: "etcd"}
	}
	t0 := uint64(time.Second)
	cases := []struct {
		name                   string
		events                 []event.Peer
		toPID                  uint32
		late, missed, nonOwner int
	}{{
		name:   "while open",
		events: slices.Insert(accepted(1, 55, t0), 3, owner(1, 55, t0+20)),
		toPID:  42, late: 1, nonOwner: 5,
	}, {
		name:   "after close, before the fold",
		events: append(accepted(1, 55, t0), owner(1, 55, t0+40)),
		toPID:  42, late: 1, nonOwner: 5,
	}, {
		name:   "socket address reused by another inode",
		events: append(accepted(1, 55, t0), owner(1, 56, t0+40)),
		toPID:  0, missed: 1, nonOwner: 5,
	}}
	// Folded: thousands of connections closed more than CompactAfter
	// later make the Assembler fold the first before its owner comes.
	var churn []event.Peer
	churn = append(churn, accepted(1, 55, t0)...)
	for i := range uint64(compactMin + 10) {
		churn = append(churn, accepted(1000+i, 0, t0+2*uint64(CompactAfter)+i*100)...)
	}
	churn = append(churn, owner(1, 55, churn[len(churn)-1].TimeNs))
	cases = append(cases, struct {
		name                   string
		events                 []event.Peer
		toPID                  uint32
		late, missed, nonOwner int
	}{name: "after the fold", events: churn, toPID: 0, missed: 1, nonOwner: len(churn) - 1})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a Assembler
			var ev event.Peer
			for i := range c.events {
				ev = c.events[i] // a reused value, as tracer.StreamPeers hands them
				a.Add(&ev)
			}
			rep := a.Report(Options{})
			if rep.LateOwners != c.late || rep.LateOwnersMissed != c.missed || rep.Events != c.nonOwner {
				t.Errorf("late owners %d, missed %d, events %d; want %d, %d, %d", rep.LateOwners, rep.LateOwnersMissed, rep.Events, c.late, c.missed, c.nonOwner)
			}
			var first *LinkStats
			for i := range rep.Links {
				if rep.Links[i].Link.ToPID == c.toPID {
					first = &rep.Links[i]
				}
				if p := rep.Links[i].Link.ToPID; p != 0 && p != 42 {
					t.Errorf("link %v: owner %d was never given", rep.Links[i].Link, p)
				}
			}
			if first == nil || first.Opened < 1 || first.Link.Direction != event.PeerPassive {
				t.Fatalf("no passive link with ToPID %d in %+v", c.toPID, rep.Links)
			}
			if c.toPID == 42 && (len(rep.Links) != 1 || first.Opened != 1 || first.Closed != 1 || first.Link.String() != "10.0.0.9 → [42] 10.0.0.2 (passive)") {
				t.Errorf("links %+v: want the one connection on 10.0.0.9 → [42] 10.0.0.2", rep.Links)
			}
		})
	}
}

// TestShortLivedClientsFold (the new-user walk: 19 curl rows): the
// connections of 19 short-lived curl processes to the peer port, each
// with its own pid, make one link per name and ends with every count
// kept and the 19 processes counted; etcd's links stay one per pid (a
// restarted member is a new row), a name with one process is named by
// its pid, and a loopback curl's accepting end folds into the curl link,
// not into a row of its own.
func TestShortLivedClientsFold(t *testing.T) {
	var ev []event.Peer
	for i := range uint64(19) {
		local := netip.AddrPortFrom(loop1.Addr(), loop1.Port()+uint16(i))
		a := probeConn(100+i, i*ms, event.PeerActive, local, loop2, 30_000, 2*ms, 25)
		p := probeConn(200+i, i*ms+10_000, event.PeerPassive, loop2, local, 0, 2*ms, 20)
		for j := range a {
			a[j].PID, a[j].Comm = uint32(1000+i), "curl"
		}
		ev = append(ev, a[0], p[0], a[1], p[1], a[2], p[2], a[3], p[3])
	}
	one := probeConn(400, 40*ms, event.PeerActive, hostA, v6peer, 50_000, 3*ms, 40) // one process of its name
	for j := range one {
		if one[j].PID != 0 {
			one[j].PID, one[j].Comm = 4242, "prober"
		}
	}
	ev = append(ev, one...)
	for i, pid := range []uint32{7, 8} { // one member, restarted
		e := probeConn(300+uint64(i), 30*ms+uint64(i)*ms, event.PeerActive, hostA, hostB, 50_000, 3*ms, 40)
		for j := range e {
			if e[j].PID != 0 {
				e[j].PID = pid
			}
		}
		ev = append(ev, e...)
	}
	// A stream from before tracing whose socket closed before its owner
	// was found: no process known.
	unowned := netip.MustParseAddrPort("10.0.0.1:45000")
	ev = append(ev, event.Peer{Kind: event.PeerRTT, TimeNs: 50 * ms, Socket: 900, Direction: event.PeerPreexisting, Local: unowned, Remote: hostB, SRTTus: 30, MinRTTus: 20},
		event.Peer{Kind: event.PeerClose, TimeNs: 51 * ms, Socket: 900, Direction: event.PeerPreexisting, Local: unowned, Remote: hostB})
	rep := Analyze(ev, Options{Window: time.Minute})
	var got []string
	for _, l := range rep.Links {
		got = append(got, l.Link.String())
		if l.Link.FromComm == "curl" && (l.Opened != 19 || l.Closed != 19 || l.Processes != 19 || l.PerRequest.Count != 19 ||
			l.HandshakeRTT.Count != 19 || l.PeerSynAckRTT.Count != 19 || l.BytesAcked != 19*900 || len(l.PerRequestSeries) != 19) {
			t.Errorf("curl link: %+v; want 19 connections of 19 processes, every count kept", l)
		}
		if l.Link.FromComm == "etcd" && (l.Opened != 1 || l.Processes != 0) {
			t.Errorf("etcd link %v: opened %d, processes %d; want 1 and 0 (its pid is in the link)", l.Link, l.Opened, l.Processes)
		}
	}
	// etcd's links first, then a process not known, then the others (the
	// new-user walk's table had curl[19 pids] above etcd's rows).
	want := []string{
		"etcd[7] 10.0.0.1 → 10.0.0.2 (active)",
		"etcd[8] 10.0.0.1 → 10.0.0.2 (active)",
		"10.0.0.1 → 10.0.0.2 (active)",
		"curl[*] 127.0.0.1 → 127.0.0.2 (active)",
		"prober[4242] 10.0.0.1 → fd00::2 (active)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
}

// TestEtcdComm: etcd's names keep a link per pid; its tools' and any
// other process's do not.
func TestEtcdComm(t *testing.T) {
	for comm, want := range map[string]bool{"etcd": true, "etcd35": true, "etcd-3.5.21": true, "etcd_v3": true,
		"etcdctl": false, "etcdutl": false, "etcdscope": false, "etcdscope.test": false, "curl": false, "": false, "myetcd": false} {
		if got := EtcdComm(comm); got != want {
			t.Errorf("EtcdComm(%q) = %v, want %v", comm, got, want)
		}
	}
}

// TestNoOwner: a link this host opened that names no process says why
// (LinkStats.NoOwner): its connections, opened before tracing began,
// closed before the look-up found their owner, or one is still open
// without one; a late owner names the process and the link has no
// reason; an accepted connection's From is the other host's, never a
// missing owner. The reason round-trips through the report's JSON.
func TestNoOwner(t *testing.T) {
	client := netip.MustParseAddrPort("127.0.0.1:51000")
	server := netip.MustParseAddrPort("127.0.0.2:2380")
	t0 := uint64(time.Second)
	stream := func(sk uint64, local, remote netip.AddrPort, closed bool) []event.Peer {
		ev := []event.Peer{{Kind: event.PeerRTT, TimeNs: t0, Socket: sk, SockIno: 70 + sk, Direction: event.PeerPreexisting, Local: local, Remote: remote, SRTTus: 90, MinRTTus: 10}}
		if closed {
			ev = append(ev, event.Peer{Kind: event.PeerClose, TimeNs: t0 + 10, Socket: sk, SockIno: 70 + sk, Direction: event.PeerPreexisting, Local: local, Remote: remote})
		}
		return ev
	}
	owner := event.Peer{Kind: event.PeerOwner, TimeNs: t0 + 20, Socket: 1, SockIno: 71, Direction: event.PeerPreexisting, Owner: 42, Comm: "etcd"}
	for _, c := range []struct {
		name    string
		events  []event.Peer
		dir     event.PeerDirection
		fromPID uint32
		want    NoOwner
	}{
		{"closed before its owner was found", stream(1, client, server, true), event.PeerActive, 0, NoOwnerClosed},
		{"open, owner not found", stream(1, client, server, false), event.PeerActive, 0, NoOwnerNotFound},
		{"one closed, one open", append(stream(1, client, server, true), stream(2, netip.AddrPortFrom(client.Addr(), 51001), server, false)...), event.PeerActive, 0, NoOwnerNotFound},
		{"owner found after the close", append(stream(1, client, server, true), owner), event.PeerActive, 42, OwnerKnown},
		{"accepted: From is the other host", stream(1, server, client, true), event.PeerPassive, 0, OwnerKnown},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := Analyze(c.events, Options{})
			if len(rep.Links) != 1 {
				t.Fatalf("%d links, want 1: %+v", len(rep.Links), rep.Links)
			}
			l := rep.Links[0]
			if l.Link.Direction != c.dir || l.Link.FromPID != c.fromPID || l.NoOwner != c.want {
				t.Errorf("link %v no_owner %d, want %v from pid %d, no_owner %d", l.Link, l.NoOwner, c.dir, c.fromPID, c.want)
			}
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var back LinkStats
			if err := json.Unmarshal(b, &back); err != nil || back.NoOwner != c.want {
				t.Errorf("JSON %s read back no_owner %d (%v), want %d", b, back.NoOwner, err, c.want)
			}
		})
	}
}
