package etcdmetric

import (
	"net/netip"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

func link(to string, handshake time.Duration) peers.LinkStats {
	a := netip.MustParseAddr(to)
	return peers.LinkStats{
		Link:         peers.Link{Direction: event.PeerActive, FromPID: 42, From: netip.MustParseAddr("10.0.0.1"), To: a, Peer: a},
		HandshakeRTT: stats.Summary{Count: 10, P50: int64(handshake)},
	}
}

func TestFindFarLeader(t *testing.T) {
	members := func(leader string) []Member {
		var ms []Member
		for i, ip := range []string{"10.0.0.1", "10.0.0.2", "10.1.0.3"} {
			ms = append(ms, Member{ID: uint64(0xa0 + i), Name: "m" + ip[len(ip)-1:], PeerIPs: []netip.Addr{netip.MustParseAddr(ip)}, Leader: ip == leader})
		}
		return ms
	}
	wan := []peers.LinkStats{link("10.0.0.2", 300*time.Microsecond), link("10.1.0.3", 50*time.Millisecond)}
	lan := []peers.LinkStats{link("10.0.0.2", 21*time.Microsecond), link("10.1.0.3", 48*time.Microsecond)}
	cases := []struct {
		name   string
		leader string
		links  []peers.LinkStats
		warn   bool
	}{
		{"far quorum site leads", "10.1.0.3", wan, true},
		{"near member leads", "10.0.0.2", wan, false},
		{"this member leads (no RTT to itself)", "10.0.0.1", wan, false},
		{"µs differences on one LAN are noise", "10.1.0.3", lan, false},
		{"one peer measured: nothing to compare", "10.1.0.3", wan[1:], false},
	}
	for _, c := range cases {
		f := FindFarLeader(members(c.leader), c.links)
		if (f != nil) != c.warn {
			t.Errorf("%s: far leader %+v, want one: %v", c.name, f, c.warn)
		}
		if c.warn && (f.Leader.Name != "m3" || f.RTT != 50*time.Millisecond || f.Next != 300*time.Microsecond) {
			t.Errorf("%s: far leader %+v, want m3 at 50ms, next 300µs", c.name, f)
		}
	}
}

// TestCompareScrapesMatch: To labels are matched to peers through the
// member list, and only the scraped member's links are used.
func TestCompareScrapesMatch(t *testing.T) {
	mk := func(to string, count, sum float64) Series {
		s := Series{Key: Key{To: to}, Count: count, Sum: sum, HasCount: true, HasSum: true}
		for i := 0; i < 16; i++ {
			s.Buckets = append(s.Buckets, Bucket{FirstBound * float64(uint(1)<<i), count})
		}
		return s
	}
	start := Scrape{Series: []Series{mk("b1", 10, 0.030)}}
	end := Scrape{Series: []Series{mk("b1", 14, 0.042), mk("c2", 4, 0.012)}}
	members := []Member{
		{ID: 0xb1, Name: "near", PeerIPs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}},
		{ID: 0xc2, Name: "far", PeerIPs: []netip.Addr{netip.MustParseAddr("10.1.0.3")}},
	}
	near := link("10.0.0.2", 300*time.Microsecond)
	near.PerRequest = stats.Summary{Count: 15, Sum: 15 * int64(5*time.Millisecond)}
	far := link("10.1.0.3", 50*time.Millisecond)
	other := link("10.1.0.3", time.Second)
	other.Link.FromPID = 7 // another process on this host: not the member
	now := time.Now()
	out, resets := CompareScrapes(start, end, Window{Start: now.Add(-time.Minute), End: now}, []peers.LinkStats{near, far, other}, 42, members, nil)
	if len(out) != 2 || len(resets) != 0 {
		t.Fatalf("%+v %v", out, resets)
	}
	if out[0].Member != "near" || out[0].Peer != netip.MustParseAddr("10.0.0.2") || out[0].Observations != 4 {
		t.Errorf("b1: %+v", out[0])
	}
	if out[0].Input.NewConnProbe != 5*time.Millisecond || out[0].Input.NewConnPerMinute != 15 {
		t.Errorf("b1 input %+v", out[0].Input)
	}
	if out[1].Member != "far" || out[1].Input.RTT != 50*time.Millisecond {
		t.Errorf("c2: %+v (the other process's 1 s link must not be used)", out[1])
	}
}

// TestSlowPeers: a peer is slow when a link this host opened to it has a
// connection setup (else per-request) p99 over the heartbeat interval;
// over the election timeout is said apart; links it accepted say nothing
// of it (their wait is this host's), and the slowest peer comes first.
func TestSlowPeers(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	link := func(dir event.PeerDirection, peer netip.Addr, setupP99, reqP99 time.Duration) peers.LinkStats {
		return peers.LinkStats{Link: peers.Link{Direction: dir, FromPID: 7, FromComm: "etcd", Peer: peer},
			Setup: stats.Summary{Count: 5, P99: int64(setupP99)}, PerRequest: stats.Summary{Count: 5, P99: int64(reqP99)}}
	}
	members := []Member{{Name: "m2", PeerIPs: []netip.Addr{b}}}
	got := SlowPeers([]peers.LinkStats{
		link(event.PeerActive, a, 2*time.Millisecond, 100*time.Millisecond), // at the heartbeat: not over it
		link(event.PeerActive, b, 300*time.Millisecond, 301*time.Millisecond),
		link(event.PeerActive, b, 50*time.Millisecond, 350*time.Millisecond), // request only: the larger p99
		link(event.PeerPassive, a, 9*time.Second, 9*time.Second),
		link(event.PeerActive, c, 7*time.Second, 7*time.Second),
	}, members, DefaultTimeouts)
	want := []SlowPeer{
		{Peer: c, Part: SlowSetup, P99: 7 * time.Second, OverElection: true},
		{Peer: b, Member: "m2", Part: SlowRequest, P99: 350 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.Peer != w.Peer || g.Member != w.Member || g.Part != w.Part || g.P99 != w.P99 || g.OverElection != w.OverElection || g.Timeouts != DefaultTimeouts {
			t.Errorf("%d: got %+v, want %+v", i, g, w)
		}
	}
	// The member's own heartbeat interval (its flags) moves the bound.
	if got := SlowPeers([]peers.LinkStats{link(event.PeerActive, b, 300*time.Millisecond, 0)}, members, Timeouts{Heartbeat: 500 * time.Millisecond, Election: 5 * time.Second, FromFlags: true}); len(got) != 0 {
		t.Errorf("300 ms under a 500 ms heartbeat: %+v", got)
	}
}
