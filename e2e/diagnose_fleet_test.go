package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// fleetMember is one fake etcd member: a recorded /metrics file served
// over HTTP. Phase 1 serves the file as recorded (the base); phase 2
// serves every bucket, _sum, _count and _total sample multiplied by 1+k,
// so that each counter's increase over the window is k times the
// recorded value. Three etcd_server lines the files lack are appended:
// leader changes (base 2, +leaderChanges in phase 2), heartbeat send
// failures (base 1, +hbFailures) and is_leader.
type fleetMember struct {
	file          string
	k             float64
	leaderChanges float64
	hbFailures    float64
	leader        int
	addr          string
}

// text is the member's /metrics in a phase (1 or 2).
func (m *fleetMember) text(t *testing.T, phase int) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "analysis", "diagnose", "testdata", m.file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		i := strings.LastIndexByte(l, ' ')
		name := l
		if j := strings.IndexAny(l, "{ "); j > 0 {
			name = l[:j]
		}
		if phase == 2 && !strings.HasPrefix(l, "#") && i > 0 && (strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_total")) {
			v, err := strconv.ParseFloat(l[i+1:], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", m.file, l, err)
			}
			l = l[:i+1] + strconv.FormatFloat(v*(1+m.k), 'g', -1, 64)
		}
		b.WriteString(l + "\n")
	}
	lc, hb := 2.0, 1.0
	if phase == 2 {
		lc, hb = lc+m.leaderChanges, hb+m.hbFailures
	}
	fmt.Fprintf(&b, "etcd_server_leader_changes_seen_total %g\netcd_server_heartbeat_send_failures_total %g\netcd_server_is_leader %d\n", lc, hb, m.leader)
	return []byte(b.String())
}

// TestDiagnosePrometheusFleet checks `diagnose --prometheus` on a real
// Prometheus (Debian's) scraping two fake clusters of three members each,
// every member a recorded /metrics file from analysis/diagnose/testdata
// served over HTTP:
//
//   - cluster "fast" (label cluster="fast", job "etcd"): three members
//     serving etcd-9544-wal-p99-ok-tail.prom with k = 1, 2, 3: WAL fsync
//     p99 rank 0.99 × 367535 = 363859.65 in (2, 4] ms, interpolated
//     2 + 2 × (363859.65 − 348832)/(366540 − 348832) = 3.697 ms, under
//     budget; mean 344.949228371/367535 = 0.939 ms; and 354 fsyncs over
//     128 ms (per k): disk_stalls, WARN. No leader change.
//   - cluster "slow" (job "etcd-slow", no cluster label): one member
//     serving k8s-34709-wal.prom (k = 1): p99 rank 914535.27 in (16, 32]
//     ms, 16 + 16 × (914535.27 − 790923)/(918706 − 790923) = 31.478 ms,
//     BAD; mean 6746.39565575/923773 = 7.303 ms; backend commit mean
//     1822.24665611/80755 = 22.565 ms; and two members serving the 9544
//     file (k = 1): the slow one is the slow member (31.5 > 2 × 3.7 ms).
//     Three leader changes seen on every member, five heartbeat send
//     failures on the slow one.
//
// Phase 1 (the recorded values) is scraped, --since is taken, phase 2 is
// served and scraped, --until is taken: every increase over the window is
// k times the recorded value, exactly (the query_range grid's first point
// sees phase 1, its last phase 2). The fleet must list the slow cluster
// first, then the fast one, each with its three instances and these
// numbers.
//
// Twice: on Debian's Prometheus (2.42), and on a current 3.x that `make
// prometheus` builds (make test-go does): SKIPPED, not absent, when it was
// not built, and a failure under ETCDSCOPE_REQUIRE_BPF=1.
func TestDiagnosePrometheusFleet(t *testing.T) {
	t.Run("debian", func(t *testing.T) {
		diagnosePrometheusFleet(t, testenv.LookPath(t, "prometheus", "prometheus"))
	})
	t.Run("built-3.x", func(t *testing.T) {
		bin := filepath.Join(testenv.RepoRoot(t), "bin", "prometheus")
		if _, err := os.Stat(bin); err != nil {
			if testenv.Required() {
				t.Fatal("ETCDSCOPE_REQUIRE_BPF=1 but no Prometheus 3.x at bin/prometheus: run make prometheus (make test-go builds it)")
			}
			t.Skip("SKIPPED: no Prometheus 3.x at bin/prometheus (make prometheus): checked on Debian's 2.42 only")
		}
		diagnosePrometheusFleet(t, bin)
	})
}

func diagnosePrometheusFleet(t *testing.T, prom string) {
	clusters := []struct {
		job, cluster string
		members      []*fleetMember
	}{
		{"etcd", "fast", []*fleetMember{
			{file: "etcd-9544-wal-p99-ok-tail.prom", k: 1, leader: 1},
			{file: "etcd-9544-wal-p99-ok-tail.prom", k: 2},
			{file: "etcd-9544-wal-p99-ok-tail.prom", k: 3},
		}},
		{"etcd-slow", "", []*fleetMember{
			{file: "k8s-34709-wal.prom", k: 1, leaderChanges: 3, hbFailures: 5, leader: 1},
			{file: "etcd-9544-wal-p99-ok-tail.prom", k: 1, leaderChanges: 3},
			{file: "etcd-9544-wal-p99-ok-tail.prom", k: 1, leaderChanges: 3},
		}},
	}
	var phase atomic.Int32
	phase.Store(1)
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\nscrape_configs:\n")
	for _, c := range clusters {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n", c.job)
		for _, m := range c.members {
			texts := [][]byte{nil, m.text(t, 1), m.text(t, 2)}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			m.addr = ln.Addr().String()
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4")
				w.Write(texts[phase.Load()])
			}), ReadHeaderTimeout: 5 * time.Second}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			fmt.Fprintf(&cfg, "      - targets: [%q]\n", m.addr)
			if c.cluster != "" {
				fmt.Fprintf(&cfg, "        labels: {cluster: %q}\n", c.cluster)
			}
		}
	}
	base, plog := startPrometheus(t, prom, cfg.String())

	// waitFor polls an instant query until its one sample is at least want.
	waitFor := func(q string, want float64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if up, err := http.Get(base + "/-/ready"); err == nil {
				up.Body.Close()
				if up.StatusCode == http.StatusOK {
					if v, ok := promQuery(t, base, q); ok && v >= want {
						return
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus: %s did not reach %v in 30 s; log:\n%s", q, want, plog())
			}
		}
	}
	// Every target scraped twice in phase 1.
	waitFor(`count(count_over_time(up[1m]) >= 2)`, 6)
	since := time.Now().UTC()
	time.Sleep(time.Second) // a scrape started before since has finished, even on a loaded machine
	phase.Store(2)
	// Every target scraped in phase 2: its +Inf bucket changed.
	waitFor(`count(changes(etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"}[1m]) >= 1)`, 6)
	until := time.Now().UTC()

	fleet := func(extra ...string) (diagnose.Fleet, string) {
		t.Helper()
		args := append([]string{"diagnose", "--prometheus", base, "--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano)}, extra...)
		out, err := exec.Command(etcdscope(t), args...).Output()
		if err != nil {
			t.Fatalf("etcdscope %v: %v\n%s", args, err, out)
		}
		var fl diagnose.Fleet
		if slices := extra; len(slices) > 0 && slices[len(slices)-1] == "json" {
			if err := json.Unmarshal(out, &fl); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		}
		return fl, string(out)
	}
	fl, js := fleet("--output", "json")
	t.Logf("fleet: %d clusters; queries %+v", len(fl.Clusters), fl.Queries)
	if len(fl.Clusters) != 2 {
		t.Fatalf("%d clusters, want 2:\n%s", len(fl.Clusters), js)
	}
	slow, fast := fl.Clusters[0], fl.Clusters[1]
	if slow.Name != `job="etcd-slow"` || slow.Severity != diagnose.Bad || fast.Name != `cluster="fast",job="etcd"` || fast.Severity != diagnose.Warn {
		t.Fatalf("clusters, worst first: %s %s, %s %s; want job=\"etcd-slow\" bad, then cluster=\"fast\",job=\"etcd\" warn", slow.Name, slow.Severity, fast.Name, fast.Severity)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want)+1e-12 }
	const (
		okN, okSum     = 367535.0, 344.94922837100324
		okP99          = 0.002 + 0.002*(0.99*okN-348832)/(366540-348832)
		slowN, slowSum = 923773.0, 6746.395655750014
		slowP99        = 0.016 + 0.016*(0.99*slowN-790923)/(918706-790923)
	)
	for ci, c := range clusters {
		got := fl.Clusters[1-ci]
		if len(got.Report.Members) != 3 {
			t.Fatalf("%s: %d members, want 3: %+v", got.Name, len(got.Report.Members), got.Report.Members)
		}
		for _, m := range c.members {
			var row *diagnose.MemberRow
			for i := range got.Report.Members {
				if got.Report.Members[i].Member == m.addr {
					row = &got.Report.Members[i]
				}
			}
			if row == nil {
				t.Errorf("%s: no member %s in %+v", got.Name, m.addr, got.Report.Members)
				continue
			}
			n, sum, p99 := okN, okSum, okP99
			if m.file == "k8s-34709-wal.prom" {
				n, sum, p99 = slowN, slowSum, slowP99
				if b := row.Backend; !near(b.Observations, 80755) || !near(b.Mean, 1822.2466561129984/80755) {
					t.Errorf("%s backend commit: n %v mean %v; want 80755, %v", m.addr, b.Observations, b.Mean, 1822.2466561129984/80755)
				}
			}
			w := row.WAL
			if !near(w.Observations, m.k*n) || !near(w.Mean, sum/n) || w.P99 == nil || !near(w.P99.Value, p99) || row.Leader != m.leader {
				t.Errorf("%s %s: WAL n %v mean %v p99 %+v leader %d; want n %v, mean %v, p99 %v, leader %d", got.Name, m.addr, w.Observations, w.Mean, w.P99, row.Leader, m.k*n, sum/n, p99, m.leader)
			}
		}
		// The counters: leader changes (the most any member saw) and
		// heartbeat send failures, each member's increase.
		for _, f := range got.Report.Findings {
			if f.Counter == nil {
				continue
			}
			want := map[string]float64{}
			for _, m := range c.members {
				switch f.Counter.Counter {
				case diagnose.CounterLeaderChanges:
					want[m.addr] = m.leaderChanges
				case diagnose.CounterHeartbeatFailures:
					want[m.addr] = m.hbFailures
				}
			}
			for _, mc := range f.Counter.Members {
				if mc.Increase != want[mc.Member] {
					t.Errorf("%s %s: %s +%v, want +%v", got.Name, f.Counter.Counter, mc.Member, mc.Increase, want[mc.Member])
				}
			}
			if len(f.Counter.Members) != 3 {
				t.Errorf("%s %s: %d members", got.Name, f.Counter.Counter, len(f.Counter.Members))
			}
		}
	}
	topics := func(c diagnose.Cluster) map[string]diagnose.Finding {
		m := map[string]diagnose.Finding{}
		for _, f := range c.Report.Findings {
			m[f.Topic+" "+f.Subject] = f
		}
		return m
	}
	st, ft := topics(slow), topics(fast)
	if f := st["slow_member cluster"]; f.Severity != diagnose.Bad || !strings.Contains(f.Summary, clusters[1].members[0].addr+" is the slow member") {
		t.Errorf("slow cluster's slow_member: %s %q", f.Severity, f.Summary)
	}
	if f := st["leader cluster"]; f.Severity != diagnose.Warn || !strings.HasPrefix(f.Summary, "3 leader changes") {
		t.Errorf("slow cluster's leader finding: %s %q", f.Severity, f.Summary)
	}
	if f := st["heartbeat cluster"]; f.Severity != diagnose.Warn || !strings.HasPrefix(f.Summary, "5 heartbeat sends failed") {
		t.Errorf("slow cluster's heartbeat finding: %s %q", f.Severity, f.Summary)
	}
	if f := ft["leader cluster"]; f.Severity != diagnose.OK {
		t.Errorf("fast cluster's leader finding: %s %q", f.Severity, f.Summary)
	}
	if f := ft["disk_stalls "+clusters[0].members[2].addr]; f.Stalls == nil || f.Stalls.OverHeartbeat.Count != 3*(367535-367181) {
		t.Errorf("fast cluster, k=3 member: disk stalls %+v, want %d over 128 ms", f.Stalls, 3*(367535-367181))
	}

	// The table: both clusters, the slow one first; --max-clusters 1
	// names what it cut.
	_, table := fleet()
	if i, j := strings.Index(table, `=== cluster job="etcd-slow": BAD`), strings.Index(table, `=== cluster cluster="fast",job="etcd": WARN`); i < 0 || j < i {
		t.Errorf("table: the slow cluster's section not before the fast one's:\n%s", table)
	}
	// --match narrows the series (one cluster); one Prometheus cannot
	// parse is its refusal, exit 2, and so is one that matches nothing.
	if one, js := fleet("--match", `{job="etcd-slow"}`, "--output", "json"); len(one.Clusters) != 1 || one.Clusters[0].Name != slow.Name {
		t.Errorf("--match '{job=\"etcd-slow\"}': want the slow cluster alone:\n%s", js)
	}
	bad := exec.Command(etcdscope(t), "diagnose", "--prometheus", base, "--match", `{job=~"("}`)
	if out, err := bad.CombinedOutput(); bad.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "Prometheus refused the query (bad_data: ") {
		t.Errorf("--match with a bad regexp: %v: %s", err, out)
	}
	none := exec.Command(etcdscope(t), "diagnose", "--prometheus", base, "--match", `{job="nosuch"}`)
	if out, err := none.CombinedOutput(); none.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "holds no etcd series matching") {
		t.Errorf("--match of no series: %v: %s", err, out)
	}
	cut, _ := fleet("--max-clusters", "1", "--output", "json")
	if len(cut.Clusters) != 1 || cut.Cut == nil || cut.Cut.Clusters != 1 || cut.Cut.Names[0] != fast.Name {
		t.Errorf("--max-clusters 1: %d clusters, cut %+v", len(cut.Clusters), cut.Cut)
	}
}

// TestDiagnosePrometheusShortHistory: `diagnose --prometheus` on a real
// Prometheus (bin/prometheus, the 3.x `make prometheus` builds) that has
// scraped a real etcd for a few seconds only, as in the README walk
// (35 s of 7 s scrapes: the old grid of six points 50 s apart put one in
// the history and read nothing, "widen the window"). --last 5m uses the
// samples held: a step of at most the scrape interval the probe shows,
// and the WAL fsyncs of the puts between the scrapes. A window so long
// that its bounded grid passes over the history names the history and
// --last, not "widen" nor --since.
func TestDiagnosePrometheusShortHistory(t *testing.T) {
	prom := filepath.Join(testenv.RepoRoot(t), "bin", "prometheus")
	if _, err := os.Stat(prom); err != nil {
		testenv.Missing(t, "no Prometheus 3.x at bin/prometheus (make prometheus)")
	}
	c := etcdtest.Start(t, etcdtest.Options{})
	metricsAddr := strings.TrimSuffix(strings.TrimPrefix(c.Members[0].MetricsURL, "http://"), "/metrics")
	base, plog := startPrometheus(t, prom, fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: etcd\n    static_configs:\n      - targets: [%q]\n", metricsAddr))
	// Puts until Prometheus holds six scrapes: WAL fsyncs between them.
	held := func() float64 {
		if r, err := http.Get(base + "/-/ready"); err != nil || r.Body.Close() != nil || r.StatusCode != http.StatusOK {
			return 0
		}
		v, _ := promQuery(t, base, "count_over_time(etcd_server_is_leader[5m])")
		return v
	}
	for deadline := time.Now().Add(60 * time.Second); held() < 6; {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus held %v samples after 60 s; log:\n%s", held(), plog())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Put(ctx, 20, 100, 64)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	diagnose := func(last string) string {
		t.Helper()
		out, err := exec.Command(etcdscope(t), "diagnose", "--prometheus", base, "--last", last).CombinedOutput()
		if err != nil {
			t.Fatalf("diagnose --last %s: %v\n%s", last, err, out)
		}
		return string(out)
	}
	if s := diagnose("5m"); !strings.Contains(s, "1 member") || strings.Contains(s, "fewer than two samples") ||
		!strings.Contains(s, "] wal_fsync ") || strings.Contains(s, "WAL fsync: no observations") || !strings.Contains(s, "between scrapes") {
		t.Errorf("--last 5m over %v samples:\n%s", held(), s)
	}
	if s := diagnose("720h"); !strings.Contains(s, "Prometheus holds ") || !strings.Contains(s, "of these series: use --last ") ||
		strings.Contains(s, "widen") || strings.Contains(s, "--since") {
		t.Errorf("--last 720h:\n%s", s)
	}
}
