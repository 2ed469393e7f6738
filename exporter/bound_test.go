package exporter

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/event"
)

// scrape gathers m as /metrics text, and returns its size and the number
// of distinct values of label in it.
func scrape(t *testing.T, m *Metrics, label string) (bytes int, values map[string]bool) {
	t.Helper()
	b := scrapeText(t, m)
	values = map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, label+`="`); i >= 0 {
			v := line[i+len(label)+2:]
			values[v[:strings.IndexByte(v, '"')]] = true
		}
	}
	return len(b), values
}

// TestTenThousandCommsBounded is the attack on serve's default
// (every process): 10,000 distinct comms each doing one fsync. /metrics
// must stay bounded (it grew to 239 MB), everything past the bound counted
// under "other" and in etcdscope_series_overflow_total; a comm that stops
// expires after SeriesTTL and frees its place.
func TestTenThousandCommsBounded(t *testing.T) {
	m := NewMetrics()
	now := time.Unix(1_000_000, 0)
	m.timeNow = func() time.Time { return now }
	m.clock.tick(now)
	for i := 0; i < 10_000; i++ {
		rec := walRecord(1000, 1)
		rec.Comm = fmt.Sprintf("comm%05d", i)
		m.ObserveFsync(&rec)
	}
	size, comms := scrape(t, m, "comm")
	if len(comms) != MaxComms+1 || !comms[OtherLabel] {
		t.Errorf("%d comm values, want %d and %q", len(comms), MaxComms+1, OtherLabel)
	}
	if size > 4<<20 {
		t.Errorf("/metrics is %d bytes after 10,000 comms; want it bounded (< 4 MiB)", size)
	}
	t.Logf("/metrics after 10,000 comms: %d bytes, %d comm values", size, len(comms))
	var total uint64
	for _, s := range family(t, m, "etcdscope_fsync_duration_seconds").Metric {
		total += s.GetHistogram().GetSampleCount()
	}
	if total != 10_000 {
		t.Errorf("%d fsyncs counted, want all 10,000 (the excess under %q)", total, OtherLabel)
	}
	of := family(t, m, "etcdscope_series_overflow_total")
	if of == nil || of.Metric[0].GetCounter().GetValue() != 10_000-MaxComms {
		t.Errorf("overflow counter %v, want %d", of, 10_000-MaxComms)
	}

	// Only etcd goes on; the others expire after SeriesTTL.
	for step := 0; step < 3; step++ {
		now = now.Add(SeriesTTL/2 + time.Second)
		rec := walRecord(1000, 1)
		m.ObserveFsync(&rec)
		scrape(t, m, "comm")
	}
	_, comms = scrape(t, m, "comm")
	if len(comms) != 1 || !comms["etcd"] {
		t.Errorf("after %v only etcd fsyncs: comm values %v, want [etcd]", SeriesTTL, comms)
	}
	// A series observed between two scrapes never expires, however far
	// apart the scrapes are.
	now = now.Add(10 * SeriesTTL)
	rec := walRecord(1000, 1)
	m.ObserveFsync(&rec)
	if _, comms = scrape(t, m, "comm"); !comms["etcd"] {
		t.Errorf("etcd expired although observed since the last scrape")
	}
}

// TestPeersBounded: any local user can connect to the peer port from
// 16 million loopback addresses; the peer label stays bounded.
func TestPeersBounded(t *testing.T) {
	m := NewMetrics()
	for i := 0; i < 10_000; i++ {
		a := netip.AddrFrom4([4]byte{127, byte(i >> 16), byte(i >> 8), byte(i)})
		m.ObservePeer(event.Peer{Kind: event.PeerOpen, Direction: event.PeerPassive, Remote: netip.AddrPortFrom(a, 40000), SRTTus: 100})
	}
	_, ps := scrape(t, m, "peer")
	if len(ps) != MaxPeers+1 || !ps[OtherLabel] {
		t.Errorf("%d peer values, want %d with %q", len(ps), MaxPeers+1, OtherLabel)
	}
}

// TestMethodNotAllowed: the exporter serves GET and HEAD only.
func TestMethodNotAllowed(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(NewHandler(reg, &health{}))
	defer srv.Close()
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		for _, path := range []string{"/metrics", "/healthz", "/"} {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("x"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d (Allow %q), want 405", method, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
}

// TestIdleConnectionsDoNotLockOut: with MaxConns connections open that
// never send a request, a scraper still gets in (one idle connection is
// closed for it), and open connections never exceed MaxConns.
func TestIdleConnectionsDoNotLockOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, bl := newServer(NewHandler(prometheus.NewRegistry(), &health{}), ln)
	go srv.Serve(bl)
	defer srv.Close()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for i := 0; i < 2*MaxConns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	t0 := time.Now()
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("scrape behind %d idle connections: %v", 2*MaxConns, err)
	}
	resp.Body.Close()
	t.Logf("scrape behind %d idle connections: %v", 2*MaxConns, time.Since(t0))
	cll := bl.(*connLimiter)
	cll.mu.Lock()
	n := len(cll.conns)
	cll.mu.Unlock()
	if n > MaxConns {
		t.Errorf("%d connections open, cap %d", n, MaxConns)
	}
}

// TestOperatorsCommKeepsItsSeries is the hostile run's attack on serve
// (issue 25): 40 one-shot processes with comms of their own, and with
// --pod-labels 40 pods of their own, each doing one fsync before etcd's
// first; etcd (the kept comm) must still have its own comm series and its
// own pod's, and the rest fold into "other" as before. Without the keep,
// etcd's fsync went to comm="other" and pod_uid="other" (checked below).
func TestOperatorsCommKeepsItsSeries(t *testing.T) {
	const etcdPod = "0f2c4e6a-1111-2222-3333-444455556666"
	etcdCID := strings.Repeat("e", 64)
	for _, keep := range []bool{true, false} {
		root := t.TempDir()
		m := NewMetrics()
		if keep {
			m.KeepComms("etcd")
		}
		m.EnablePodLabels(NewPodResolver(root))
		for i := range 40 {
			uid := fmt.Sprintf("%08x-0000-0000-0000-%012x", i, i)
			fakeProc(t, root, 1000+i, "0::/kubepods/besteffort/pod"+uid+"/"+strings.Repeat("a", 64)+"\n")
			rec := walRecord(1000, 1)
			rec.Comm, rec.PID = fmt.Sprintf("oneshot%02d", i), uint32(1000+i)
			m.ObserveFsync(&rec)
		}
		fakeProc(t, root, 7, "0::/kubepods/burstable/pod"+etcdPod+"/"+etcdCID+"\n")
		rec := walRecord(1000, 1)
		rec.PID = 7
		m.ObserveFsync(&rec)
		var etcdSeries, otherComm int
		for _, s := range family(t, m, "etcdscope_fsync_duration_seconds").Metric {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["comm"] == "etcd" && l["pod_uid"] == etcdPod && l["container_id"] == etcdCID {
				etcdSeries++
			}
			if l["comm"] == OtherLabel {
				otherComm++
			}
		}
		switch {
		case keep && etcdSeries != 1:
			t.Errorf("kept: %d series with etcd's comm and pod, want 1", etcdSeries)
		case keep && otherComm == 0:
			t.Errorf("kept: the one-shot comms past the bound are not folded into %q", OtherLabel)
		case !keep && etcdSeries != 0:
			t.Errorf("without KeepComms etcd got its series: the test no longer shows the attack")
		}
	}
}

// scrapeText gathers m as /metrics text, through the exporter's handler.
func scrapeText(t *testing.T, m *Metrics) []byte {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	srv := httptest.NewServer(NewHandler(reg, &health{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCommitEntriesBounds: GET /commit/entries answers a bad since_index
// or limit with one line and 400, caps a reply at the limit asked (at most
// EntriesMaxLimit records) and says when it left records out.
func TestCommitEntriesBounds(t *testing.T) {
	log := commit.NewEntryLog(0)
	log.SetMember(0x28d1)
	for i := uint64(1); i <= 10; i++ {
		log.Add(&event.Commit{Kind: event.CommitSaveDone, Save: event.CommitSave{First: i, Last: i, Term: 2, StartNs: i, EndNs: i + 1}}, nil)
	}
	srv := httptest.NewServer(newHandler(prometheus.NewRegistry(), &health{}, log))
	defer srv.Close()
	for _, q := range []string{"since_index=x", "since_index=-1", "limit=0", fmt.Sprintf("limit=%d", EntriesMaxLimit+1), "limit=a"} {
		resp, err := http.Get(srv.URL + "/commit/entries?" + q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Count(strings.TrimSpace(string(b)), "\n") != 0 {
			t.Errorf("%s: %d %q, want 400 and one line", q, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(srv.URL + "/commit/entries?since_index=4&limit=3")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var w commit.EntryWindow
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		t.Fatal(err)
	}
	if w.V != commit.EntryWindowVersion || w.Member != 0x28d1 || len(w.Entries) != 3 || w.Entries[0].Index != 5 || !w.More {
		t.Errorf("window %+v: want v1, member 28d1, entries 5..7 and more", w)
	}
}
