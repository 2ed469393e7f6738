package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/commit"
	"github.com/etcdscope/etcdscope/analysis/etcdmetric"
)

// fakeMember serves a /metrics text that the test changes, or fails
// (503), or hangs until the request is abandoned.
type fakeMember struct {
	mu   sync.Mutex
	text string
	mode string // "", "fail", "hang"
	srv  *httptest.Server
}

func newFakeMember(t *testing.T, text string) *fakeMember {
	m := &fakeMember{text: text}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		text, mode := m.text, m.mode
		m.mu.Unlock()
		switch mode {
		case "fail":
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		case "hang":
			<-r.Context().Done()
		default:
			w.Write([]byte(text))
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeMember) set(text, mode string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.text, m.mode = text, mode
}

// TestModelFallsBackToDuringRunScrape: three members over HTTP, as
// RunCommit asks them. The end scrape misses follower m2 (503) and m3
// (it hangs past the end's bound; it failed during the run too): m2's
// numbers come from its latest scrape during the run, and say so (its
// window ends before the end scrape's time); m3 has neither and the
// model leaves its vote out, naming it. Before, the end scrape's miss
// lost m2's vote (or the model, for the leader: TestModelLeaderMissing).
func TestModelFallsBackToDuringRunScrape(t *testing.T) {
	const leader, m2, m3 = 1, 2, 3
	l := newFakeMember(t, metricsText(100, 0.2, "2", 4, 0.2))
	f2 := newFakeMember(t, metricsText(100, 0.3, "", 0, 0))
	f3 := newFakeMember(t, metricsText(100, 0.3, "", 0, 0))
	urls := []metricsURL{{leader, l.srv.URL + "/metrics"}, {m3, f3.srv.URL + "/metrics"}, {m2, f2.srv.URL + "/metrics"}}
	members := []etcdmetric.Member{{ID: leader, Leader: true}, {ID: m2}, {ID: m3}}
	res := &CommitResult{LocalID: leader, LeaderID: leader, Cluster: commit.ClusterState{Voters: 3, Names: commit.Names{leader: "m1", m2: "m2", m3: "m3"}}}

	start, errs := scrapeAll(context.Background(), urls, nil)
	if len(start) != 3 {
		t.Fatalf("start scrape: %d members, errors %v", len(start), errs)
	}
	// During the run: m2 fsyncs 40 times at 3 ms; m3 stops answering.
	l.set(metricsText(140, 0.28, "2", 6, 0.3), "")
	f2.set(metricsText(140, 0.42, "", 0, 0), "")
	f3.set("", "fail")
	var during duringScrapes
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	during.run(ctx, urls, 20*time.Millisecond, nil)
	cancel()
	// The run's last seconds, which the end scrape misses for m2: its
	// numbers must not be these.
	f2.set(metricsText(150, 0.62, "", 0, 0), "fail")
	f3.set("", "hang")
	time.Sleep(20 * time.Millisecond)
	endAt := time.Now()
	fctx, fcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	end, endErrs := scrapeAll(fctx, urls, nil)
	fcancel()
	if len(end) != 1 || len(endErrs) != 2 {
		t.Fatalf("end scrape: %d answered, errors %v; want the leader's alone", len(end), endErrs)
	}

	res.model(members, urls, start, end, during.latest, endErrs, endAt)
	if res.ModelErr != nil {
		t.Fatalf("model not computed: %v", res.ModelErr)
	}
	want := []struct {
		member string
		scrape commit.ScrapeUsed
	}{{"1", commit.ScrapeEnd}, {"2", commit.ScrapeDuring}, {"3", commit.ScrapeNone}}
	if len(res.ModelScrapes) != len(want) {
		t.Fatalf("model scrapes %+v", res.ModelScrapes)
	}
	for i, w := range want {
		u := res.ModelScrapes[i]
		if u.Member != w.member || u.Scrape != w.scrape {
			t.Errorf("member %s: scrape %q, want member %s %q", u.Member, u.Scrape, w.member, w.scrape)
		}
		if (u.EndErr != "") != (w.scrape != commit.ScrapeEnd) {
			t.Errorf("member %s: end error %q", u.Member, u.EndErr)
		}
	}
	if u := res.ModelScrapes[1]; u.ShortNs < int64(20*time.Millisecond) || u.WindowNs <= 0 || u.WindowNs > int64(200*time.Millisecond) {
		t.Errorf("m2 from during the run: %v short of the end, over %v; want >= 20ms short, within the 150 ms run", time.Duration(u.ShortNs), time.Duration(u.WindowNs))
	}
	if u := res.ModelScrapes[0]; u.ShortNs != 0 || u.WindowNs < int64(150*time.Millisecond) {
		t.Errorf("leader from the end: %v short, over %v; want 0 short, the whole run", time.Duration(u.ShortNs), time.Duration(u.WindowNs))
	}
	for _, f := range res.ModelIn.Followers {
		switch f.ID {
		case m2:
			if f.Down || f.Fsync.Ns != 3e6 {
				t.Errorf("m2: %+v; want up, its fsync 3 ms from its during-run scrape", f)
			}
		case m3:
			if !f.Down {
				t.Errorf("m3 answered no scrape but is not down: %+v", f)
			}
		}
	}
	if m := res.Model; !m.DeciderKnown || m.Decider != m2 {
		t.Errorf("deciding vote %x (known %v), want m2's", m.Decider, m.DeciderKnown)
	}
}

// TestModelLeaderMissing: the leader answered neither the end scrape nor
// any during the run: no model, and the reason names it (before: "no WAL
// fsync observed by the leader", as if it had not written).
func TestModelLeaderMissing(t *testing.T) {
	const leader, m2 = 1, 2
	members := []etcdmetric.Member{{ID: leader, Leader: true}, {ID: m2}}
	res := &CommitResult{LocalID: leader, LeaderID: leader, Cluster: commit.ClusterState{Voters: 2, Names: commit.Names{leader: "m1", m2: "m2"}}}
	urls := []metricsURL{{leader, "l"}, {m2, "f"}}
	t0 := time.Now()
	start := map[uint64]scrape{leader: {scrapeOf(t, 100, 0.2, "2", 4, 0.2), t0}, m2: {scrapeOf(t, 100, 0.3, "", 0, 0), t0}}
	end := map[uint64]scrape{m2: {scrapeOf(t, 140, 0.42, "", 0, 0), t0.Add(10 * time.Second)}}
	res.model(members, urls, start, end, nil, map[uint64]error{leader: context.DeadlineExceeded}, t0.Add(10*time.Second))
	if res.Model != nil || res.ModelErr == nil || !strings.Contains(res.ModelErr.Error(), "leader m1") {
		t.Fatalf("model %+v, error %v; want none, naming the leader m1", res.Model, res.ModelErr)
	}
	if u := res.ModelScrapes[0]; u.Scrape != commit.ScrapeNone || u.EndErr == "" {
		t.Errorf("leader's scrape %+v, want none with the end's error", u)
	}
	// Nobody at all: the end scrape's error, and that none answered during the run.
	res.model(members, urls, start, nil, nil, map[uint64]error{leader: context.DeadlineExceeded, m2: context.DeadlineExceeded}, t0)
	if res.ModelErr == nil || !strings.Contains(res.ModelErr.Error(), "none answered during it") {
		t.Errorf("no scrape at the end nor during: error %v", res.ModelErr)
	}
}

// TestDuringScrapesStopAtOnce: a scrape in flight when the run ends
// (SIGINT) is abandoned at once: RunCommit waits for the scraper before
// its finish, which must stay within 2 s of the signal.
func TestDuringScrapesStopAtOnce(t *testing.T) {
	m := newFakeMember(t, "")
	m.set("", "hang")
	var during duringScrapes
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		during.run(ctx, []metricsURL{{1, m.srv.URL + "/metrics"}}, 10*time.Millisecond, nil)
		close(done)
	}()
	time.Sleep(50 * time.Millisecond) // a scrape hangs
	t0 := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("the during-run scraper still runs 1 s after its run ended")
	}
	if d := time.Since(t0); d > 200*time.Millisecond {
		t.Errorf("the during-run scraper took %v to stop", d)
	}
	if len(during.latest) != 0 {
		t.Errorf("kept %d scrapes from a member that never answered", len(during.latest))
	}
}
