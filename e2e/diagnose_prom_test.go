package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/diagnose"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestDiagnosePrometheusExport checks the Prometheus reader on a real
// Prometheus's answer instead of a hand-made one: Debian's Prometheus
// scrapes a real etcd every second while 200 puts run; its query_range
// answer for etcd's WAL fsync and backend commit histograms over the
// window is what a user exports from their Prometheus. The oracle is etcd's
// own /metrics, scraped by the test right before and after the window
// (etcd is idle around it, checked): `etcdscope diagnose` must find the
// same fsync and commit counts, means and quantiles in the export as in
// the difference of the two scrapes.
func TestDiagnosePrometheusExport(t *testing.T) {
	prom := testenv.LookPath(t, "prometheus", "prometheus")
	c := etcdtest.Start(t, etcdtest.Options{})
	m := c.Members[0]
	metricsAddr := strings.TrimSuffix(strings.TrimPrefix(m.MetricsURL, "http://"), "/metrics")

	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: etcd\n    static_configs:\n      - targets: [%q]\n", metricsAddr)
	base, plog := startPrometheus(t, prom, cfg)
	get := func(u string) []byte {
		t.Helper()
		cl := http.Client{Timeout: 5 * time.Second}
		res, err := cl.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %s: %.300s", u, err, res.Status, b)
		}
		return b
	}
	// Up, and scraped a few times.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		cl := http.Client{Timeout: 2 * time.Second}
		res, err := cl.Get(base + "/api/v1/query?query=" + url.QueryEscape(`count_over_time(up{job="etcd"}[1m])`))
		if err == nil {
			var r struct {
				Data struct {
					Result []struct {
						Value [2]any `json:"value"`
					} `json:"result"`
				} `json:"data"`
			}
			json.NewDecoder(res.Body).Decode(&r)
			res.Body.Close()
			if len(r.Data.Result) == 1 {
				if n, _ := strconv.Atoi(fmt.Sprint(r.Data.Result[0].Value[1])); n >= 3 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not scrape etcd 3 times in 30 s; log:\n%s", plog())
		}
	}

	// etcd's own scrapes bracket the window; etcd must be idle around it
	// (no fsync between a scrape of ours and Prometheus's next one).
	walCount := func(b []byte) string {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "etcd_disk_wal_fsync_duration_seconds_count") {
				return l
			}
		}
		return ""
	}
	idleScrape := func(name string) string {
		t.Helper()
		a := get(m.MetricsURL)
		time.Sleep(2500 * time.Millisecond)
		b := get(m.MetricsURL)
		if walCount(a) != walCount(b) || walCount(a) == "" {
			t.Fatalf("etcd not idle around the window: %q then %q", walCount(a), walCount(b))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := idleScrape("before.prom")
	start := time.Now().Add(-500 * time.Millisecond) // Prometheus scraped since `before`: same values
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer pcancel()
	if err := c.Put(pctx, 200, 0, 256); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // Prometheus scrapes the final values
	end := time.Now()
	after := idleScrape("after.prom")

	q := url.Values{"query": {`{__name__=~"etcd_disk_wal_fsync_duration_seconds_.*|etcd_disk_backend_commit_duration_seconds_.*"}`},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1e3, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1e3, 'f', 3, 64)}, "step": {"1"}}
	export := filepath.Join(dir, "query_range.json")
	if err := os.WriteFile(export, get(base+"/api/v1/query_range?"+q.Encode()), 0o644); err != nil {
		t.Fatal(err)
	}

	diag := func(files ...string) diagnose.Report {
		t.Helper()
		out, err := exec.Command(etcdscope(t), append([]string{"diagnose", "--output", "json"}, files...)...).Output()
		if err != nil {
			t.Fatalf("etcdscope diagnose %v: %v\n%s", files, err, out)
		}
		var rep diagnose.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("diagnose %v: %v\n%s", files, err, out)
		}
		if len(rep.Members) != 1 {
			t.Fatalf("diagnose %v: %d member rows, want 1: %s", files, len(rep.Members), out)
		}
		return rep
	}
	fromProm := diag(export).Members[0]
	fromEtcd := diag(before, after).Members[0]
	show := func(h diagnose.HistStats) string {
		b, _ := json.Marshal(h)
		return string(b)
	}
	t.Logf("Prometheus export: WAL %s; backend %s", show(fromProm.WAL), show(fromProm.Backend))
	t.Logf("etcd's scrapes:    WAL %s; backend %s", show(fromEtcd.WAL), show(fromEtcd.Backend))
	if fromEtcd.WAL.Observations < 200 {
		t.Fatalf("etcd's own scrapes show %v WAL fsyncs for 200 puts", fromEtcd.WAL.Observations)
	}
	for name, pair := range map[string][2]diagnose.HistStats{"wal_fsync": {fromProm.WAL, fromEtcd.WAL}, "backend_commit": {fromProm.Backend, fromEtcd.Backend}} {
		p, e := pair[0], pair[1]
		if p.Observations != e.Observations || p.HasMean != e.HasMean || math.Abs(p.Mean-e.Mean) > 1e-9*e.Mean {
			t.Errorf("%s: export has %v observations, mean %v; etcd's scrapes %v, mean %v", name, p.Observations, p.Mean, e.Observations, e.Mean)
		}
		if show(diagnose.HistStats{P50: p.P50, P99: p.P99}) != show(diagnose.HistStats{P50: e.P50, P99: e.P99}) {
			t.Errorf("%s: quantiles differ: export %s, etcd's scrapes %s", name, show(p), show(e))
		}
	}
}
